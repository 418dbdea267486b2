"""The generated-mutant sweep: its bookkeeping, and one real mutant end to end (slow tier)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audits.mutation_sweep import (
    Mutation,
    _statement_line,
    clopper_pearson,
    draw_sample,
    generate_mutations,
    run_sweep,
)

ROOT = Path(__file__).resolve().parents[2]
needs_cosmic_ray = pytest.mark.skipif(
    shutil.which("cosmic-ray") is None, reason="cosmic-ray is not installed (extra 'mutation')"
)


def test_a_continuation_line_belongs_to_the_statement_coverage_reports() -> None:
    source = "def f(\n    a=1,\n    b=2,\n):\n    x = (a +\n         b)\n    return x\n"
    assert _statement_line(source, 3) == 1  # a default argument: evaluated with the def
    assert _statement_line(source, 6) == 5  # the second line of an assignment
    assert _statement_line(source, 7) == 7


def test_the_interval_covers_the_rate_and_narrows_with_more_trials() -> None:
    low, high = clopper_pearson(90, 100)
    assert low < 0.9 < high
    wide = clopper_pearson(9, 10)
    assert wide[0] < low and high < wide[1]
    assert clopper_pearson(10, 10)[1] == 1.0 and clopper_pearson(0, 10)[0] == 0.0


@needs_cosmic_ray
def test_cosmic_ray_generates_mutations_of_the_named_module_only() -> None:
    mutations = generate_mutations(ROOT, ("secagg/ring.py",))
    assert mutations and {m.module for m in mutations} == {"secagg/ring.py"}
    assert all(m.line >= 1 and m.operator.startswith("core/") for m in mutations)


@needs_cosmic_ray
@pytest.mark.slow
def test_a_small_sweep_decides_every_mutant_and_leaves_the_tree_alone() -> None:
    before = (ROOT / "secagg" / "shamir.py").read_bytes()
    summary = run_sweep(ROOT, sample=3, seed=2, modules=("secagg/shamir.py",), progress=False)
    assert (ROOT / "secagg" / "shamir.py").read_bytes() == before
    counts = summary["counts"]
    assert sum(counts.values()) == summary["sample"] == 3
    statuses = {"killed", "raised", "survived", "crashed", "not reached", "no change"}
    assert {run["status"] for run in summary["runs"]} <= statuses


@needs_cosmic_ray
def test_a_rerun_refuses_mutations_the_source_no_longer_generates() -> None:
    from audits.mutation_sweep import Mutation  # noqa: PLC0415

    gone = Mutation("secagg/ring.py", "core/NumberReplacer", 10_000, 1, "nowhere")
    with pytest.raises(ValueError, match="no longer generated"):
        run_sweep(ROOT, sample=1, modules=("secagg/ring.py",), progress=False, only=[gone])


def test_skipping_leaves_the_rest_of_the_same_seeded_sample() -> None:
    pool = [Mutation("m.py", "op", k, k, "f") for k in range(200)]
    whole = draw_sample(pool, 50, seed=3)
    assert draw_sample(pool, 50, seed=3, skip=20) == whole[20:]
    assert draw_sample(pool, 50, seed=3, skip=50) == []
    assert len(set(whole)) == 50 and whole != draw_sample(pool, 50, seed=4)
    with pytest.raises(ValueError, match="skip"):
        draw_sample(pool, 5, seed=0, skip=-1)
