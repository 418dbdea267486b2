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
            "deltafl,rfa,fedplus",  # no optional dataset needed
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
    assert "[tune" in printed and "fedplus" in printed
    assert "## 3. Fed+" in (again / "RESULTS.md").read_text()


def test_bad_arguments_are_refused(reproduce: ModuleType) -> None:
    with pytest.raises(SystemExit):
        reproduce.main(["--only", "nonsense"])
    with pytest.raises(SystemExit):
        reproduce.main(["--mode", "smoke"])  # a smoke run must not overwrite RESULTS.md
    with pytest.raises(SystemExit):
        reproduce.main(["--jobs", "0"])
    with pytest.raises(SystemExit):
        reproduce.main(["--render-only"])  # nothing to render from


@pytest.mark.parametrize("mode_name", ["budget", "full"])
def test_every_section_renders_the_whole_grid(
    reproduce: ModuleType, mode_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget and full grids (planned, not trained) render every table from stand-in runs.

    A full run takes hours: this is what catches a table that cannot be written before it does.
    The stand-in metrics are seeded noise; only the rendering is under test.
    """
    import numpy as np  # noqa: PLC0415

    monkeypatch.setattr(reproduce, "available", lambda name: True)
    mode = reproduce.MODES[mode_name]
    grid = reproduce.candidates(mode, reproduce.PAPERS)
    rng = np.random.default_rng(7)

    def fake(job: object) -> object:
        metrics = {
            key: float(rng.uniform(0.05, 0.95))
            for key in (
                "mean",
                "p90",
                "accuracy",
                "error",
                "honest_error",
                "global_error",
                "honest_global_error",
                "megabytes",
                "seconds",
                "empty_tail_rounds",
                "corrupted_majority_rounds",
                "epsilon",
            )
        }
        curve = [(r, float(rng.uniform()), 100 * r) for r in range(1, 4)]
        return reproduce.Outcome(
            job, metrics, curve=curve, errors=[0.1, 0.5], parameters=[0.0, 1.0]
        )

    tune = [fake(job) for job in reproduce.tune_jobs(grid, mode)]
    chosen, scores = reproduce.choose(grid, tune)
    later = [
        *reproduce.report_jobs(mode, reproduce.PAPERS, chosen),
        *reproduce.check_jobs(mode, reproduce.PAPERS, chosen),
    ]
    outcomes = [fake(job) for job in later]
    index = reproduce.Index(o for o in outcomes if o.job.split == "report")
    goals: list[object] = []
    lines = [
        *reproduce.section_deltafl(index, tune, chosen, mode, goals),
        *reproduce.section_rfa(index, mode, goals),
        *reproduce.section_fedplus(index, mode, goals),
        *reproduce.section_ffgb(index, mode, goals),
        *reproduce.section_checks([o for o in outcomes if o.job.split == "check"]),
        *reproduce.section_tuning(grid, scores, chosen),
    ]
    text = "\n".join(lines)
    for heading in ("## 1. Δ-FL", "## 2. RFA", "## 3. Fed+", "## 4. FFGB", "## Spot checks"):
        assert heading in text
    assert len(goals) >= 40
    if mode.wide:  # the full grid's extra cells are in the tables
        assert "Gaussian 10 %" in text and "ε=15" in text and "mnist-robust-50" in text
    assert {job.seed for job in later if job.split == "report"} == set(range(mode.report_seeds))
    written = reproduce.figures(index, mode, reproduce.PAPERS, tmp_path)
    if written:  # matplotlib installed (extra 'plot')
        assert len(written) == 6  # three Δ-FL datasets, RFA, Fed+, FFGB
        assert all((tmp_path / name).stat().st_size > 0 for name in written)
