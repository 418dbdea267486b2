"""The audits against Intel OpenFL 1.9's secure aggregation, run on OpenFL's own code."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip(
    "openfl.utilities.secagg",
    reason='the OpenFL target needs openfl==1.9: pip install -e ".[openfl]" && '
    'pip install --no-deps "openfl==1.9"',
)

from audits.attacks import audit_attacks
from audits.cli import main
from audits.openfl import OpenFLRound, OpenFLTarget, known_defects, load_openfl
from audits.protocol_audits import audit_shamir_masks_graph
from audits.records import Verdict


@pytest.fixture(scope="module")
def openfl() -> OpenFLTarget:
    return OpenFLTarget()


def test_the_driver_runs_openfls_protocol_correctly_with_equal_weights() -> None:
    # The glue is faithful: OpenFL's own aggregation returns the true mean of every round.
    f = load_openfl()
    for seed in range(3):
        round_ = OpenFLRound(f, 4, seed=seed)
        assert not np.allclose(round_.masked, round_.updates, atol=1e-3)  # something is masked
        np.testing.assert_allclose(round_.aggregate(), round_.expected(), atol=1e-12)


def test_an_aggregator_following_the_protocol_unmasks_every_collaborator(
    openfl: OpenFLTarget,
) -> None:
    result = audit_attacks(openfl)
    assert result.verdict is Verdict.FAIL
    assert result.details["control"] is True  # a collaborator's own masks unmask it, no other's
    (outcome,) = result.details["outcomes"]
    assert outcome["attack"] == "honest-aggregator-reads-its-store"
    assert list(outcome["exposed"]) == [0, 1, 2, 3] and outcome["claimed_resistant"]


def test_a_store_without_the_secrets_unmasks_no_one() -> None:
    # The reconstruction is not vacuous: without the seeds and pairwise keys it recovers nothing.
    f = load_openfl()
    round_ = OpenFLRound(f, 3, seed=4)
    stripped = type(round_.aggregator_store)()
    stripped.cache_tensor(
        {
            k: v
            for k, v in round_.aggregator_store.tensors.items()
            if k[0] not in ("private_seeds", "agreed_keys")
        }
    )
    assert all(round_.unmask_from(stripped, i) is None for i in range(3))


def test_the_scalar_mask_and_the_weighted_average_defects(openfl: OpenFLTarget) -> None:
    leaks = openfl.leaks(seed=2)
    assert leaks["one_scalar_mask"] and leaks["coordinate_differences_error"] < 1e-9
    assert leaks["average_error_equal_weights"] < 1e-9
    assert leaks["average_error_unequal_weights"] > 1e-3
    assert leaks["average_error_one_dropout"] > 1e-3  # and nothing is raised
    rows = known_defects([audit_attacks(openfl)], leaks)
    assert [row["status"] for row in rows] == ["confirmed"] * 4


def test_audit_8_checks_openfls_shamir(openfl: OpenFLTarget) -> None:
    result = audit_shamir_masks_graph(openfl)
    assert result.verdict is Verdict.PASS  # any t of its shares reconstruct, t − 1 do not
    assert "masks" not in result.details  # no mask vector on Z_M to test


def test_the_cli_reports_the_openfl_defects(tmp_path: Path) -> None:
    code = main(["--target", "openfl", "--only", "8,10", "--no-plots", "--out", str(tmp_path)])
    assert code == 1  # audit 10 fails: the attack succeeds where secure aggregation claims not
    report = json.loads((tmp_path / "audit.json").read_text())
    assert [row["status"] for row in report["meta"]["defects"]] == ["confirmed"] * 4
