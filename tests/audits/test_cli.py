"""The secagg-dp-audit command line: table, JSON, Markdown, plots, exit status."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from audits import AuditResult, Verdict
from audits.cli import main
from audits.report import write_plots


def test_selected_audits_write_every_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["--only", "4,8", "--out", str(tmp_path), "--seed", "2"])
    assert status == 0
    out = capsys.readouterr().out
    assert "4 accountant" in out and "PASS" in out and "τ" in out
    payload = json.loads((tmp_path / "audit.json").read_text())
    assert payload["meta"]["seed"] == 2
    assert [r["name"] for r in payload["results"]] == ["accountant", "shamir-masks-graph"]
    assert "| 4 accountant |" in (tmp_path / "audit.md").read_text()


def test_plots_are_written_with_matplotlib(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib (extra 'plot')")
    support = list(range(-3, 4))
    pmf = AuditResult(
        1, "sampler-fit", "ours", "s", 0.5, "t", 1, Verdict.PASS, 1e-6,
        details={"plot_pmf": {"sampler": "exact", "sigma": 1.0, "support": support,
                              "empirical": [0.0, 0.05, 0.25, 0.4, 0.25, 0.05, 0.0],
                              "exact": [0.004, 0.054, 0.242, 0.399, 0.242, 0.054, 0.004]}},
    )  # fmt: skip
    mechanism = {
        "mechanism": "noisy secure sum", "test_releases_per_neighbour": 100,
        "trade_off_points": {"fpr": [0.0, 0.01, 0.1, 0.5], "fnr": [0.5, 0.2, 0.05, 0.0]},
        "fit_mu_hat": 2.0, "fit_mu_lower": 1.5, "mu_claimed_equivalent": 2.5,
    }  # fmt: skip
    bound = AuditResult(
        5, "epsilon-lower-bound", "ours", "s", 1.0, "t", 1, Verdict.PASS, 1e-6,
        details={"mechanisms": [mechanism]},
    )  # fmt: skip
    written = write_plots([pmf, bound], tmp_path)
    assert sorted(Path(p).name for p in written) == ["sampler_pmf.png", "trade_off.png"]
    assert all(Path(p).stat().st_size > 1000 for p in written)


def test_false_alarm_run_counts_failures_per_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--false-alarms", "2", "--only", "4", "--seed", "5", "--out", str(tmp_path)]) == 0
    assert "false alarms: 0 in 2 seeds" in capsys.readouterr().out
    payload = json.loads((tmp_path / "false_alarms.json").read_text())
    assert payload["seeds"] == [5, 6] and payload["verdicts"]["6"] == {"accountant": "pass"}


def test_without_matplotlib_the_run_says_so_and_writes_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert main(["--only", "4", "--out", str(tmp_path)]) == 0
    assert "matplotlib is not installed" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.json", "audit.md"]


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--matrix"]) == 2
    assert main(["--self-check", "--target", "flower"]) == 2
    assert main(["--false-alarms", "2", "--target", "flower"]) == 2
    with pytest.raises(SystemExit):
        main(["--tier", "medium"])


def test_flower_target_fails_audit_8(tmp_path: Path) -> None:
    pytest.importorskip("flwr", reason="the Flower adapter needs flwr==1.42.0 (extra 'bench')")
    assert main(["--target", "flower", "--only", "8,4", "--out", str(tmp_path)]) == 1
    results = json.loads((tmp_path / "audit.json").read_text())["results"]
    assert [r["verdict"] for r in results] == ["fail", "n/a"]
    assert any("never [3]" in f for f in results[0]["findings"])
