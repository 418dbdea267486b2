"""Audit 8's check that a SecAgg+ picker claiming the smallest even degree really chose it."""

from __future__ import annotations

from audits.ours import OurTarget
from audits.protocol_audits import _graph_checks


class _Padded:
    """Our picker, but two degrees more conservative than it needs (efficiency, not security)."""

    failure_log2 = -20.0
    security_bits = 40.0

    def __init__(self, claims: bool) -> None:
        self.claims_smallest_degree = claims
        self._real = OurTarget().graph_parameters()

    def parameters(self, n: int, dropout: float, corruption: float) -> tuple[int, int]:
        k, t = self._real.parameters(n, dropout, corruption)
        return (k + 2, t + 1) if k + 2 < n - 1 else (k, t)


def test_ours_is_minimal_and_a_padded_degree_is_caught_only_when_minimality_is_claimed() -> None:
    _, findings, rows = _graph_checks(OurTarget().graph_parameters(), "fast")
    assert not findings
    assert all(r.get("smaller_degree_feasible_t", None) is None for r in rows)
    _, padded, _ = _graph_checks(_Padded(claims=True), "fast")
    assert padded and all("not the smallest even degree" in f for f in padded)
    _, unclaimed, _ = _graph_checks(_Padded(claims=False), "fast")
    assert not unclaimed  # a larger degree is still secure: only a false claim is a finding
