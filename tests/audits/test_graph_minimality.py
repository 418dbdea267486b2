"""Audit 8's check that a SecAgg+ picker claiming the smallest even degree really chose it."""

from __future__ import annotations

from audits.ours import OurTarget
from audits.protocol_audits import _count, _graph_checks


class _Padded:
    """Our picker, but two degrees more conservative than it needs (efficiency, not security)."""

    failure_log2 = -20.0
    security_bits = 40.0

    def __init__(self, claims: bool) -> None:
        self.claims_smallest_degree = claims
        self._real = OurTarget().graph_parameters()

    def parameters(self, n: int, dropout: float, corruption: float) -> tuple[int, int]:
        k, t = self._real.parameters(n, dropout, corruption)
        if corruption >= 0.5:  # there t + 1 at k + 2 can miss the security target: left alone
            return k, t
        return (k + 2, t + 1) if k + 2 < n - 1 else (k, t)


def test_ours_is_minimal_and_a_padded_degree_is_caught_only_when_minimality_is_claimed() -> None:
    _, findings, rows = _graph_checks(OurTarget().graph_parameters(), "fast")
    assert not findings
    assert all(r.get("smaller_degree_feasible_t", None) is None for r in rows)
    _, padded, _ = _graph_checks(_Padded(claims=True), "fast")
    assert padded and all("not the smallest even degree" in f for f in padded)
    _, unclaimed, _ = _graph_checks(_Padded(claims=False), "fast")
    assert not unclaimed  # a larger degree is still secure: only a false claim is a finding


class _Threshold:
    """Our picker's degree with a threshold rule of our choosing."""

    failure_log2 = -20.0
    security_bits = 40.0
    claims_smallest_threshold = True

    def __init__(self, rule: str) -> None:
        self.rule = rule

    def parameters(self, n: int, dropout: float, corruption: float) -> tuple[int, int]:
        from secagg.graph_parameters import secagg_plus_parameters  # noqa: PLC0415

        chosen = secagg_plus_parameters(n, dropout_rate=dropout, corruption_rate=corruption)
        low, high = chosen.min_threshold, chosen.max_threshold
        t = {
            "claimed": chosen.threshold,
            "smallest": low,  # 1 although 2 is valid: each neighbour holds the secret
            "one more": min(low + 1, high),  # valid, secure, but not the claimed rule
        }[self.rule]
        return chosen.degree, t


def test_the_threshold_is_recomputed_when_the_smallest_is_claimed() -> None:
    assert not _graph_checks(_Threshold("claimed"), "fast")[1]
    for rule in ("smallest", "one more"):
        findings = _graph_checks(_Threshold(rule), "fast")[1]
        assert findings and all("not the claimed threshold" in f for f in findings), rule
    # Without the claim, a valid threshold is no finding.
    unclaimed = _Threshold("one more")
    unclaimed.claims_smallest_threshold = False
    assert not _graph_checks(unclaimed, "fast")[1]


def test_the_fast_grid_reaches_both_graphs_thresholds_one_and_two_and_non_integer_counts() -> None:
    _, _, rows = _graph_checks(OurTarget().graph_parameters(), "fast")
    served = [r for r in rows if not r.get("refused")]
    assert {r["graph"] for r in served} == {"complete", "harary"}
    # A complete graph of odd degree (n = 4), and a cell no graph can serve (n = 3, refused).
    assert any(r["graph"] == "complete" and r["k"] % 2 for r in served)
    refused = [(r["n"], r["dropout"], r["corruption"]) for r in rows if r.get("refused")]
    assert refused[:3] == [(3, 0.3, 0.2), (3, 0.1, 0.5), (3, 0.0, 0.7)]
    assert len(refused) == 10 and not any(r.get("raised") for r in rows)
    # Cells near the top of [0, 1) are served where some graph can be: their hypergeometric
    # supports start far above 0 (k − (n − 1 − c) ≥ 3 draws must be corrupt).
    heavy = [r for r in served if r["corruption"] >= 0.7]
    assert heavy and any(
        r["k"] - (r["n"] - 1 - _count(r["n"], r["corruption"])) >= 3 for r in heavy
    )
    assert {1, 2} <= {r["t"] for r in served}
    assert any((r["n"] * r["dropout"]) % 1 for r in served)


class _Misreports:
    """Our picker's choice, reporting its bounds with one of them off."""

    failure_log2 = -20.0
    security_bits = 40.0

    def __init__(self, which: int, by: float) -> None:
        self._real = OurTarget().graph_parameters()
        self.which, self.by = which, by

    def parameters(self, n: int, dropout: float, corruption: float) -> tuple[int, int]:
        k, t = self._real.parameters(n, dropout, corruption)
        return k, t

    def reported_bounds(self, n: int, dropout: float, corruption: float) -> tuple[float, float]:
        bounds = list(self._real.reported_bounds(n, dropout, corruption))  # type: ignore[attr-defined]
        if bounds[self.which] > -1000:
            bounds[self.which] += self.by
        return bounds[0], bounds[1]


def test_reported_bounds_are_the_exact_ones_and_a_misreport_is_caught() -> None:
    assert not _graph_checks(OurTarget().graph_parameters(), "fast")[1]
    for which, name in ((0, "log2 recovery failure"), (1, "security bits")):
        findings = _graph_checks(_Misreports(which, 0.01), "fast")[1]
        assert findings and all(f"reported {name}" in f for f in findings), (name, findings[:2])
    assert not _graph_checks(_Misreports(1, 1e-9), "fast")[1]  # within the rounding tolerance


class _AlwaysComplete:
    """The complete graph for every n, with a valid threshold: secure, n² cost."""

    failure_log2 = -20.0
    security_bits = 40.0
    claims_smallest_degree = True

    def parameters(self, n: int, dropout: float, corruption: float) -> tuple[int, int]:
        from audits.protocol_audits import _count  # noqa: PLC0415

        t = _count(n, corruption) + 1
        if t > n - 1 - _count(n, dropout):
            raise ValueError("no graph meets both targets")
        return n - 1, t


class _RefusesOddDegrees:
    """Our picker, but refusing a complete graph of odd degree (n even) as malformed."""

    failure_log2 = -20.0
    security_bits = 40.0

    def parameters(self, n: int, dropout: float, corruption: float) -> tuple[int, int]:
        k, t = OurTarget().graph_parameters().parameters(n, dropout, corruption)
        if k % 2:
            raise ValueError(f"degree must be even; got {k}")
        return k, t


def test_a_picker_refusing_a_cell_the_complete_graph_serves_is_caught() -> None:
    findings = _graph_checks(_RefusesOddDegrees(), "fast")[1]
    assert findings == [
        "n=4, δ=0.3, γ=0.2: refused, but the complete graph with t=2 meets both targets "
        "(degree must be even; got 3)",
        "n=4, δ=0.1, γ=0.5: refused, but the complete graph with t=3 meets both targets "
        "(degree must be even; got 3)",
        "n=6, δ=0.1, γ=0.5: refused, but the complete graph with t=4 meets both targets "
        "(degree must be even; got 5)",
        "n=6, δ=0.0, γ=0.7: refused, but the complete graph with t=5 meets both targets "
        "(degree must be even; got 5)",
        "n=8, δ=0.0, γ=0.7: refused, but the complete graph with t=7 meets both targets "
        "(degree must be even; got 7)",
        "n=8, δ=0.02, γ=0.75: refused, but the complete graph with t=7 meets both targets "
        "(degree must be even; got 7)",
        "n=10, δ=0.02, γ=0.75: refused, but the complete graph with t=9 meets both targets "
        "(degree must be even; got 9)",
    ]


def test_a_complete_graph_where_a_sparse_degree_suffices_breaks_the_minimality_claim() -> None:
    findings = _graph_checks(_AlwaysComplete(), "fast")[1]
    assert findings and all("the complete graph, but k=" in f for f in findings)
    # Ours picks the complete graph on the grid only where no sparse degree meets both bounds.
    _, ours, rows = _graph_checks(OurTarget().graph_parameters(), "fast")
    assert not ours and any(r["graph"] == "complete" for r in rows)


def test_a_picker_that_ignores_its_targets_is_caught_at_the_other_targets() -> None:
    from audits.protocol_audits import _OTHER_TARGETS  # noqa: PLC0415

    ours = OurTarget().graph_parameters()

    class Deaf:
        """Claims the targets it is given, picks for the default ones."""

        def __init__(self, failure_log2: float, security_bits: float) -> None:
            self.failure_log2, self.security_bits = failure_log2, security_bits

        def parameters(self, n: int, dropout: float, corruption: float) -> tuple[int, int]:
            return ours.parameters(n, dropout, corruption)

    assert not _graph_checks(ours.at_targets(-40.0, 80.0), "fast")[1]  # type: ignore[attr-defined]
    assert (-40.0, 80.0) in _OTHER_TARGETS
    findings = _graph_checks(Deaf(-40.0, 80.0), "fast")[1]
    assert findings and all("security" in f or "recovery" in f for f in findings)


class _CrashesWhenHeavy(_Padded):
    """Our picker, but indexing past its tail table where supports start far above 0 (the
    seed-6 survivor `range(high, low >> 1, -1)` raised IndexError at γ ≥ 0.7)."""

    def parameters(self, n: int, dropout: float, corruption: float) -> tuple[int, int]:
        if corruption >= 0.7 and n >= 20:
            raise IndexError("list index out of range")
        return self._real.parameters(n, dropout, corruption)


def test_a_picker_that_crashes_instead_of_refusing_is_a_finding() -> None:
    _, findings, rows = _graph_checks(_CrashesWhenHeavy(claims=False), "fast")
    assert findings and all("raised IndexError" in f and "ValueError" in f for f in findings)
    assert all(r["corruption"] >= 0.7 for r in rows if r.get("raised"))


def test_near_total_corruption_is_checked_at_loose_targets() -> None:
    """The edge cell n = 1000, γ = 0.997 (two honest neighbours at most): a picker one degree
    step too large there, claiming the smallest, is caught at 1 bit — the seed-6 survivor
    whose pre-screen misweighted two-point supports chose k = 990 for 980."""
    from audits.protocol_audits import _EDGE_CELLS  # noqa: PLC0415

    assert (1000, 0.0, 0.997) in _EDGE_CELLS
    loose = OurTarget().graph_parameters().at_targets(-1.0, 1.0)  # type: ignore[attr-defined]

    class PaddedWhenNearlyAllCorrupt:
        failure_log2, security_bits = -1.0, 1.0
        claims_smallest_degree = True

        def parameters(self, n: int, dropout: float, corruption: float) -> tuple[int, int]:
            k, t = loose.parameters(n, dropout, corruption)
            return (k + 2, t + 2) if corruption > 0.99 and k + 2 < n - 1 else (k, t)

    _, ours, rows = _graph_checks(loose, "fast")
    assert not ours
    edge = [r for r in rows if (r["n"], r["corruption"]) == (1000, 0.997)]
    assert edge and edge[0]["k"] == 980
    findings = _graph_checks(PaddedWhenNearlyAllCorrupt(), "fast")[1]
    assert findings == [
        "n=1000, δ=0.0, γ=0.997: k=982 is not the smallest even degree (k=980, t=980 meets "
        "both bounds)"
    ]


def test_bounds_below_the_smallest_float_do_not_crash_the_audit() -> None:
    """A recovery failure below 2^-1074 (k = 600, t = 101 at n = 5000, 500 dropped: all but
    100 neighbours must be dropped) is logged exactly, not as log2(0.0) — the audit raised
    `math domain error` on such a choice and reported its own crash instead of the picker."""
    ours = OurTarget().graph_parameters()

    class Extreme:
        failure_log2, security_bits = -20.0, 40.0

        def parameters(self, n: int, dropout: float, corruption: float) -> tuple[int, int]:
            if (n, dropout, corruption) == (5000, 0.1, 0.05):
                return 600, 101
            return ours.parameters(n, dropout, corruption)

    _, findings, rows = _graph_checks(Extreme(), "fast")
    assert not findings
    (row,) = [r for r in rows if (r["n"], r["dropout"], r["corruption"]) == (5000, 0.1, 0.05)]
    assert -1e5 < row["log2_recovery"] < -1074 and row["log2_security"] < -40
