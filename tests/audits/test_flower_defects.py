"""The REFERENCES §1 defect table reads the audits' own records (no Flower needed)."""

from __future__ import annotations

from audits import AuditResult, Verdict
from audits.flower import known_defects


def _result(number: int, findings: tuple[str, ...], details: dict[str, object]) -> AuditResult:
    return AuditResult(number, "x", "flower", "s", 0.0, "t", 1, Verdict.FAIL, 0.0,
                       findings=findings, details=details)  # fmt: skip


def test_each_defect_is_confirmed_or_refuted_by_its_audit() -> None:
    eight = _result(
        8,
        ("mask not uniform on Z_4: χ² p = 0 (never [3])", "3 pairs of distinct seeds (two bytes "
         "flipped) expand to the same mask"),
        {},
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
