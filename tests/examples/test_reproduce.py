"""The one reproduction command (examples/reproduce.py) in smoke mode: splits, verdicts, files."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reproduce", ROOT / "examples" / "reproduce.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["reproduce"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reproduce() -> ModuleType:
    return _script()


def test_tune_and_report_splits_are_disjoint(reproduce: ModuleType) -> None:
    mode = reproduce.MODES["budget"]
    grid = reproduce.candidates(mode, reproduce.PAPERS)
    tune = reproduce.tune_jobs(grid, mode)
    chosen = {key: (options[0][0], options[0][1]) for key, options in grid.items()}
    report = reproduce.report_jobs(mode, reproduce.PAPERS, chosen)
    tune_seeds = {job.seed for job in tune} | {job.config.seed for job in tune}
    report_seeds = {job.seed for job in report} | {job.config.seed for job in report}
    assert tune_seeds.isdisjoint(report_seeds)
    assert len({job.seed for job in report}) >= 10  # the issue's ≥ 10 seeds
    private = [job for job in report if getattr(job.config, "epsilon", None) is not None]
    assert private and len({job.draw for job in private}) >= 3  # ≥ 3 noise draws under DP
    noise = {(job.seed, job.draw): job.config.noise_seed for job in private}
    assert len(set(noise.values())) == len(noise)  # every draw has its own noise seed


def test_choose_takes_the_lowest_tune_objective(reproduce: ModuleType) -> None:
    mode = reproduce.MODES["smoke"]
    grid = reproduce.candidates(mode, ["deltafl"])
    key = next(iter(grid))
    options = grid[key]
    fake = [
        reproduce.Outcome(
            reproduce.Job(*key, "tune", "tune", 1000 + k, 0, config, label),
            {"mean": 0.5 + 0.1 * i, "p90": 0.9 - 0.1 * i},
        )
        for i, (label, config, _) in enumerate(options)
        for k in range(2)
    ]
    chosen, scores = reproduce.choose({key: options}, fake)
    metric = options[0][2]
    expected = options[0][0] if metric == "mean" else options[-1][0]
    assert chosen[key][0] == expected
    assert set(scores["|".join(key)]) == {label for label, _, _ in options}


def test_smoke_run_writes_results_with_verdicts(
    reproduce: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = reproduce.main(
        [
            "--mode",
            "smoke",
            "--only",
            "deltafl,rfa",
            "--jobs",
            "1",
            "--out",
            str(tmp_path),
            "--runs",
            str(tmp_path / "runs.pkl"),
        ]
    )
    assert code == 0
    text = (tmp_path / "RESULTS.md").read_text()
    assert "**Smoke run: not the result.**" in text
    raw = json.loads((tmp_path / "figures" / "results.json").read_text())
    assert raw["goals"], "no verdicts"
    for goal in raw["goals"]:
        assert goal["verdict"] in ("met", "not met", "not established")
        assert f"**{goal['verdict']}**" in text
    # 2 report seeds cannot decide a noisy goal; a single identical-run goal can be "not met".
    assert any(goal["verdict"] == "not established" for goal in raw["goals"])
    splits = {run["split"] for run in raw["runs"]}
    assert splits == {"tune", "report", "check"}
    assert "max abs parameter difference" in text
    # Re-rendering a saved run gives the same file (no training).
    again = tmp_path / "again"
    reproduce.main(
        [
            "--mode",
            "smoke",
            "--only",
            "deltafl,rfa",
            "--out",
            str(again),
            "--runs",
            str(tmp_path / "runs.pkl"),
            "--render-only",
        ]
    )
    assert (again / "RESULTS.md").read_text().splitlines()[4:] == text.splitlines()[4:]
    # A run with another paper added reuses every stored run and trains only the new ones.
    capsys.readouterr()
    reproduce.main(
        [
            "--mode",
            "smoke",
            "--only",
            "deltafl,rfa,ffgb",
            "--jobs",
            "1",
            "--out",
            str(again),
            "--runs",
            str(tmp_path / "runs.pkl"),
        ]
    )
    printed = capsys.readouterr().out
    assert "runs reused" in printed
    assert "[tune" in printed and "ffgb" in printed
    assert "## 4. FFGB" in (again / "RESULTS.md").read_text()


def test_bad_arguments_are_refused(reproduce: ModuleType) -> None:
    with pytest.raises(SystemExit):
        reproduce.main(["--only", "nonsense"])
    with pytest.raises(SystemExit):
        reproduce.main(["--mode", "smoke"])  # a smoke run must not overwrite RESULTS.md
    with pytest.raises(SystemExit):
        reproduce.main(["--jobs", "0"])
    with pytest.raises(SystemExit):
        reproduce.main(["--render-only"])  # nothing to render from
