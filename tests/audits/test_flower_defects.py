"""The REFERENCES §1 defect table reads the audits' own records (no Flower needed)."""

from __future__ import annotations

from audits import AuditResult, OurTarget, Verdict, run_audits
from audits.flower import known_defects
from audits.targets import SansIOSecureSum, SecureSumUnderTest


def _result(number: int, findings: tuple[str, ...], details: dict[str, object]) -> AuditResult:
    return AuditResult(number, "x", "flower", "s", 0.0, "t", 1, Verdict.FAIL, 0.0,
                       findings=findings, details=details)  # fmt: skip


def test_each_defect_is_confirmed_or_refuted_by_its_audit() -> None:
    eight = _result(
        8,
        ("mask not uniform on Z_4: χ² p = 0 (never [3])", "3 pairs of distinct seeds (two bytes "
         "flipped) expand to the same mask"),
        {"masks": {"chi2_p": {"M=2^2#0": 0.0}, "seed_collisions": 3},
         "masked_inputs": {"masked_input_chi2_p": {"M=2^2 client 0": 0.4}}},
    )  # fmt: skip
    seven = _result(
        7,
        (),
        {
            "answers_both_shares": False,
            "dropout_rounds": {
                "keys": "the round stopped",
                "shares": "completed, exact",
                "masked": "completed, exact",
                "unmask": "completed, exact",
            },
            "overflow_probe": {"refused": True, "max_abs_error": 0.0, "note": ""},
        },
    )
    status = {row["defect"]: row["status"] for row in known_defects([eight, seven])}
    assert status["32-bit PRG seeds: distinct keys collide"] == "confirmed"
    assert status["masks never equal M − 1 (not uniform)"] == "confirmed"
    assert status["masked inputs the server receives are not uniform on Z_M"] == "refuted"
    assert status["no disjointness check: a client answers both shares of one neighbour"] == (
        "refuted"
    )
    assert status["a client dropping during setup or share_keys halts the round"] == "confirmed"
    assert status["no n·Q < M check: the sum wraps silently"] == "refuted"
    assert "not run" in {row["status"] for row in known_defects([eight, seven])}  # audit 5


def _crashed(number: int) -> AuditResult:
    # What audits.suite records for an audit that raised: a FAIL with only the exception.
    return _result(number, ("raised RuntimeError: boom",), {"exception": "RuntimeError: boom"})


def test_a_crashed_audit_is_inconclusive_never_a_refutation() -> None:
    rows = known_defects([_crashed(8), _crashed(7), _crashed(5), _crashed(10)])
    assert {row["status"] for row in rows} == {"inconclusive"}
    assert all("RuntimeError: boom" in row["evidence"] for row in rows)


def test_missing_evidence_is_inconclusive() -> None:
    seven = _result(7, (), {"answers_both_shares": False, "dropout_rounds": {"keys": "x"}})
    status = {row["defect"]: row["status"] for row in known_defects([_result(8, (), {}), seven])}
    assert status["no disjointness check: a client answers both shares of one neighbour"] == (
        "refuted"
    )
    assert status["a client dropping during setup or share_keys halts the round"] == (
        "inconclusive"
    )
    assert status["no n·Q < M check: the sum wraps silently"] == "inconclusive"
    assert status["masks never equal M − 1 (not uniform)"] == "inconclusive"


def test_a_run_through_the_suite_that_crashes_is_inconclusive() -> None:
    class Broken(OurTarget):
        name = "broken"

        def secure_sum(self) -> SecureSumUnderTest | None:
            raise RuntimeError("boom")

        def sans_io(self) -> SansIOSecureSum | None:
            raise RuntimeError("boom")

    [seven] = run_audits(Broken(), only=[7])
    assert seven.verdict is Verdict.FAIL
    rows = [row for row in known_defects([seven]) if row["audit"] == "7"]
    assert len(rows) == 3 and {row["status"] for row in rows} == {"inconclusive"}
