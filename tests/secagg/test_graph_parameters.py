"""Tests of the SecAgg+ parameter helper (secagg/graph_parameters.py).

The bounds are checked against the truth: exhaustive enumeration of every dropout / corruption /
bad set on small rings, and a seeded Monte Carlo with explicit binomial error rates. The search
is checked for minimality, monotonicity (Hypothesis) and against Google's published values.
"""

from __future__ import annotations

import decimal
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import FrozenInstanceError
from functools import cache
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from secagg.graph_parameters import (
    SecAggPlusParameters,
    _log2_ratio,
    count_from_rate,
    hoeffding_degree,
    log2_disconnection,
    log2_hypergeometric_tail,
    log2_recovery_failure,
    log2_secrecy_failure,
    main,
    parameter_table,
    secagg_plus_parameters,
)

# Float re-computation of the module's exact integer comparisons may differ by rounding only.
LOG2_TOL = 1e-9


# --------------------------------------------------------------------------- brute force


def neighbour_masks(n: int, k: int) -> list[int]:
    """Bitmask of each ring position's neighbours in H(n, k) (complete when k >= n - 1)."""
    full = (1 << n) - 1
    if k >= n - 1:
        return [full & ~(1 << u) for u in range(n)]
    masks = []
    for u in range(n):
        mask = 0
        for j in range(1, k // 2 + 1):
            mask |= (1 << ((u + j) % n)) | (1 << ((u - j) % n))
        masks.append(mask)
    return masks


def subsets(n: int, size: int) -> Iterator[int]:
    for combo in combinations(range(n), size):
        yield sum(1 << i for i in combo)


def is_connected(members: int, masks: list[int]) -> bool:
    """Whether the subgraph induced on the bitmask ``members`` is connected (BFS on bitmasks)."""
    if members & (members - 1) == 0:  # zero or one vertex
        return True
    reached = members & -members
    while True:
        grown = reached
        bits = reached
        while bits:
            low = bits & -bits
            grown |= masks[low.bit_length() - 1] & members
            bits ^= low
        if grown == reached:
            return reached == members
        reached = grown


@cache
def recovery_minima(n: int, k: int, dropped: int) -> Counter[int]:
    """Distribution over dropout sets of the fewest surviving neighbours of a needed client.

    Needed: every survivor (self-mask seed) and every dropped client with a surviving neighbour
    (mask key). ``k + 1`` when nothing is needed.
    """
    masks = neighbour_masks(n, k)
    full = (1 << n) - 1
    result: Counter[int] = Counter()
    for drop in subsets(n, dropped):
        alive = full & ~drop
        fewest = k + 1
        for u in range(n):
            surviving = (masks[u] & alive).bit_count()
            if (alive >> u) & 1 or surviving > 0:
                fewest = min(fewest, surviving)
        result[fewest] += 1
    return result


@cache
def secrecy_maxima(n: int, k: int, corrupt: int) -> Counter[int]:
    """Distribution over corrupt sets of the most corrupt neighbours of an honest client."""
    masks = neighbour_masks(n, k)
    result: Counter[int] = Counter()
    for bad in subsets(n, corrupt):
        most = max(
            ((masks[u] & bad).bit_count() for u in range(n) if not (bad >> u) & 1), default=0
        )
        result[most] += 1
    return result


@cache
def disconnected_count(n: int, k: int, bad: int) -> int:
    """Number of bad sets of this size leaving the honest survivors' subgraph disconnected."""
    masks = neighbour_masks(n, k)
    full = (1 << n) - 1
    return sum(not is_connected(full & ~b, masks) for b in subsets(n, bad))


def true_recovery_failure(n: int, k: int, t: int, dropped: int) -> float:
    counts = recovery_minima(n, k, dropped)
    return sum(v for m, v in counts.items() if m < t) / math.comb(n, dropped)


def true_secrecy_failure(n: int, k: int, t: int, corrupt: int) -> float:
    counts = secrecy_maxima(n, k, corrupt)
    return sum(v for m, v in counts.items() if m >= t) / math.comb(n, corrupt)


def true_disconnection(n: int, k: int, bad: int) -> float:
    return disconnected_count(n, k, bad) / math.comb(n, bad)


def degrees(n: int) -> list[int]:
    return [*range(2, n - 1, 2), n - 1]


def rate(count: int, n: int) -> float:
    value = count / n
    assert count_from_rate(n, value) == count
    return value


SMALL_N = (5, 8, 10, 13)


# --------------------------------------------------------------------------- exact small cases


@pytest.mark.parametrize("n", SMALL_N)
def test_recovery_bound_dominates_exhaustive_enumeration(n: int) -> None:
    nontrivial = 0  # comparisons where the bound is below 1, so could be violated
    for k in degrees(n):
        for dropped in range(n):
            for t in range(1, k + 1):
                truth = true_recovery_failure(n, k, t, dropped)
                bound = log2_recovery_failure(n, k, t, rate(dropped, n))
                if truth > 0:
                    assert math.log2(truth) <= bound + LOG2_TOL, (n, k, t, dropped)
                    nontrivial += bound < 0
    assert nontrivial >= 1


@pytest.mark.parametrize("n", SMALL_N)
def test_secrecy_bound_dominates_exhaustive_enumeration(n: int) -> None:
    nontrivial = 0  # comparisons where the bound is below 1, so could be violated
    for k in degrees(n):
        for corrupt in range(n):
            for t in range(1, k + 1):
                truth = true_secrecy_failure(n, k, t, corrupt)
                bound = log2_secrecy_failure(n, k, t, rate(corrupt, n))
                if truth > 0:
                    assert math.log2(truth) <= bound + LOG2_TOL, (n, k, t, corrupt)
                    nontrivial += bound < 0
    assert nontrivial >= 1


@pytest.mark.parametrize("n", SMALL_N)
def test_disconnection_bound_dominates_exhaustive_enumeration(n: int) -> None:
    nontrivial = 0  # comparisons where the bound is below 1, so could be violated
    for k in degrees(n):
        for corrupt in range(n):
            for dropped in range(n - corrupt):
                # Worst case of the model: corrupt and dropped disjoint, c + d bad clients.
                truth = true_disconnection(n, k, corrupt + dropped)
                bound = log2_disconnection(n, k, rate(dropped, n), rate(corrupt, n))
                if truth > 0:
                    assert math.log2(truth) <= bound + LOG2_TOL, (n, k, corrupt, dropped)
                    nontrivial += bound < 0
    assert nontrivial >= 1


@pytest.mark.parametrize("n", [6, 9, 10, 11, 12])
def test_ring_disconnects_exactly_when_two_gaps_reach_half_the_degree(n: int) -> None:
    # The lemma behind log2_disconnection (graph_parameters.md §4), checked on every subset.
    for k in range(2, n - 1, 2):
        masks = neighbour_masks(n, k)
        for members in range(1 << n):
            positions = [i for i in range(n) if (members >> i) & 1]
            gaps = [
                (positions[(j + 1) % len(positions)] - positions[j] - 1) % n
                for j in range(len(positions))
            ]
            if len(positions) == 1:
                gaps = [n - 1]
            long_gaps = sum(g >= k // 2 for g in gaps)
            assert is_connected(members, masks) == (long_gaps < 2), (n, k, positions)


@pytest.mark.parametrize("n", SMALL_N)
def test_per_client_counts_are_exactly_hypergeometric(n: int) -> None:
    # The model behind both tails: a client's neighbourhood is a uniform k-subset of the others.
    for k in degrees(n):
        masks = neighbour_masks(n, k)
        for marked in range(n):
            for at_least in range(1, k + 1):
                hits = 0
                total = 0
                for chosen in subsets(n, marked):
                    if chosen & 1:  # condition on client 0 unmarked (honest / surviving)
                        continue
                    total += 1
                    hits += (masks[0] & chosen).bit_count() >= at_least
                exact = log2_hypergeometric_tail(n - 1, marked, k, at_least)
                if hits == 0:
                    assert exact == -math.inf
                else:
                    assert exact == pytest.approx(math.log2(hits / total), abs=1e-12)


@pytest.mark.parametrize(
    ("n", "failure_log2", "security_bits"),
    [(10, -2, 3), (11, -3, 2), (12, -1, 1)],
)
@pytest.mark.parametrize(("dropout", "corruption"), [(0.1, 0.1), (0.2, 0.1), (0.1, 0.2)])
def test_chosen_parameters_meet_targets_by_exhaustive_enumeration(
    n: int, failure_log2: float, security_bits: float, dropout: float, corruption: float
) -> None:
    p = secagg_plus_parameters(
        n,
        dropout_rate=dropout,
        corruption_rate=corruption,
        failure_log2=failure_log2,
        security_bits=security_bits,
    )
    c, d = p.num_corrupt, p.num_dropped
    assert true_recovery_failure(n, p.degree, p.threshold, d) <= 2.0**failure_log2
    insecure = true_secrecy_failure(n, p.degree, p.threshold, c) + true_disconnection(
        n, p.degree, min(n, c + d)
    )
    assert insecure <= 2.0**-security_bits


# --------------------------------------------------------------------------- Monte Carlo


def test_bounds_dominate_monte_carlo_frequencies() -> None:
    """Seeded simulation of the model; each check fails by chance with probability ≤ 1e-6.

    Ring positions are exchangeable under the uniform ring order, so corrupt and dropped sets are
    drawn as independent uniform subsets of ring positions. For each event the observed count is
    compared with Binomial(trials, bound): if the bound is valid the upper-tail p-value is
    ≥ 1e-6 except with probability ≤ 1e-6 (family-wise ≤ 3e-6).
    """
    rng = np.random.default_rng(20_240_611)
    n, k, trials = 40, 6, 20_000
    corrupt, dropped = 6, 6
    t_secrecy, t_recovery = 4, 3
    is_corrupt = np.argsort(rng.random((trials, n)), axis=1) < corrupt
    is_dropped = np.argsort(rng.random((trials, n)), axis=1) < dropped
    offsets = [j for j in range(1, k // 2 + 1)] + [-j for j in range(1, k // 2 + 1)]
    corrupt_nbrs = sum(np.roll(is_corrupt, j, axis=1).astype(int) for j in offsets)
    surviving_nbrs = sum(np.roll(~is_dropped, j, axis=1).astype(int) for j in offsets)

    secrecy_fail = np.any(~is_corrupt & (corrupt_nbrs >= t_secrecy), axis=1)
    needed = ~is_dropped | (surviving_nbrs > 0)
    recovery_fail = np.any(needed & (surviving_nbrs < t_recovery), axis=1)
    honest_alive = ~is_corrupt & ~is_dropped
    disconnected = np.zeros(trials, dtype=bool)
    for i in range(trials):
        pos = np.flatnonzero(honest_alive[i])
        if len(pos) > 1:
            gaps = np.diff(np.append(pos, pos[0] + n)) - 1
            disconnected[i] = np.count_nonzero(gaps >= k // 2) >= 2

    bounds = {
        "secrecy": log2_secrecy_failure(n, k, t_secrecy, rate(corrupt, n)),
        "recovery": log2_recovery_failure(n, k, t_recovery, rate(dropped, n)),
        "disconnection": log2_disconnection(n, k, rate(dropped, n), rate(corrupt, n)),
    }
    observed = {
        "secrecy": int(secrecy_fail.sum()),
        "recovery": int(recovery_fail.sum()),
        "disconnection": int(disconnected.sum()),
    }
    for name, log2_bound in bounds.items():
        assert -8 < log2_bound < 0, name  # a bound of 1 would make the check vacuous
        assert observed[name] > 0, name
        p_value = stats.binom.sf(observed[name] - 1, trials, 2.0**log2_bound)
        assert p_value >= 1e-6, (name, observed[name], trials * 2.0**log2_bound)


def test_monte_carlo_marginal_matches_exact_hypergeometric_tail() -> None:
    """Two-sided binomial test at α = 1e-6 of one client's corrupt-neighbour tail."""
    rng = np.random.default_rng(7)
    n, k, corrupt, at_least, trials = 50, 8, 10, 3, 40_000
    others = np.argsort(rng.random((trials, n - 1)), axis=1) < corrupt
    hits = int(np.count_nonzero(others[:, :k].sum(axis=1) >= at_least))
    p = 2.0 ** log2_hypergeometric_tail(n - 1, corrupt, k, at_least)
    assert stats.binomtest(hits, trials, p).pvalue >= 1e-6


# --------------------------------------------------------------------------- exact arithmetic


@pytest.mark.parametrize(
    ("population", "successes", "draws"),
    [(999, 50, 30), (9_999, 1_000, 42), (99_999, 5_000, 36), (200, 90, 92), (1_000, 0, 10)],
)
def test_hypergeometric_tail_matches_scipy(population: int, successes: int, draws: int) -> None:
    dist = stats.hypergeom(population, successes, draws)
    for at_least in range(1, draws + 1):
        exact = log2_hypergeometric_tail(population, successes, draws, at_least)
        reference = dist.logsf(at_least - 1) / math.log(2)
        if not np.isfinite(reference) or reference < -900:
            continue
        assert exact == pytest.approx(reference, rel=1e-7, abs=1e-9)


def test_hypergeometric_tail_is_exact_far_in_the_tail() -> None:
    # P[X >= 30] for N = 10^5, K = 30, m = 30 is 1/C(10^5, 30): far below float range of sf.
    expected = -math.log2(math.comb(100_000, 30))
    assert log2_hypergeometric_tail(100_000, 30, 30, 30) == pytest.approx(expected, abs=1e-9)
    assert log2_hypergeometric_tail(10, 3, 4, 0) == 0.0
    assert log2_hypergeometric_tail(10, 3, 4, 4) == -math.inf


_DECIMAL_LOG2 = decimal.Context(prec=60)


def _exact_log2(numerator: int, denominator: int) -> decimal.Decimal:
    """log2(numerator / denominator) to 60 significant digits (stdlib decimal, independent)."""
    ctx = _DECIMAL_LOG2
    ratio = ctx.divide(decimal.Decimal(numerator), decimal.Decimal(denominator))
    return ctx.divide(ctx.ln(ratio), ctx.ln(decimal.Decimal(2)))


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=1, max_value=2**400),
    st.integers(min_value=1, max_value=2**400),
)
def test_log2_ratio_is_rounded_upwards_and_tight(numerator: int, denominator: int) -> None:
    bound = _log2_ratio(numerator, denominator)
    truth = _exact_log2(numerator, denominator)
    # An upper bound (the picker's decisions are conservative), and within 1e-12 of the truth.
    assert decimal.Decimal(bound) >= truth
    assert decimal.Decimal(bound) - truth <= decimal.Decimal("1e-12") * max(1, abs(truth))


@pytest.mark.parametrize(
    ("numerator", "denominator"),
    [(2**64 - 1, 1), (2**64 + 1, 2**64), (3**200, 2**317), (1, 3**300), (2**53 + 1, 2**53)],
)
def test_log2_ratio_upper_bounds_near_rounding_midpoints(numerator: int, denominator: int) -> None:
    # Integers a double cannot hold: rounding them first would give log2 ≈ 0 or one ulp low.
    assert decimal.Decimal(_log2_ratio(numerator, denominator)) >= _exact_log2(
        numerator, denominator
    )


def test_count_from_rate_rounds_half_up_on_the_printed_decimal() -> None:
    assert count_from_rate(10, 0.15) == 2
    assert count_from_rate(10, 0.05) == 1
    assert count_from_rate(10, 0.04) == 0
    assert count_from_rate(1_000, 0.1) == 100
    assert count_from_rate(3, 0.5) == 2
    assert count_from_rate(7, 0.0) == 0


# --------------------------------------------------------------------------- known answers


@pytest.mark.parametrize(
    ("n", "expected"),
    [(100, (12, 6)), (1_000, (30, 17)), (10_000, (34, 20)), (100_000, (36, 21))],
)
def test_matches_googles_published_values_at_five_percent(
    n: int, expected: tuple[int, int]
) -> None:
    # fcp/secagg/server/graph_parameter_finder_test.cc, CURIOUS_SERVER, 5 % / 5 %.
    p = secagg_plus_parameters(n, dropout_rate=0.05, corruption_rate=0.05)
    assert (p.degree, p.threshold) == expected


@pytest.mark.parametrize(
    ("n", "dropout", "corruption", "expected"),
    [
        (1_000, 0.1, 0.05, (36, 18)),
        (10_000, 0.3, 0.05, (80, 28)),
        (100_000, 0.1, 0.2, (86, 54)),
        (100, 0.3, 0.2, (48, 21)),
    ],
)
def test_regression_table_values(
    n: int, dropout: float, corruption: float, expected: tuple[int, int]
) -> None:
    p = secagg_plus_parameters(n, dropout_rate=dropout, corruption_rate=corruption)
    assert (p.degree, p.threshold) == expected


@pytest.mark.parametrize(
    ("n", "corruption", "security_bits", "failure_log2", "expected"),
    [(400, 0.23, 33, -29, (22, 22)), (100, 0.2, 8, -13, (8, 8))],
)
def test_security_budget_is_shared_between_secrecy_and_connectivity(
    n: int, corruption: float, security_bits: int, failure_log2: int, expected: tuple[int, int]
) -> None:
    # Both security bounds sit near the target here, so only their sum decides t.
    p = secagg_plus_parameters(
        n,
        dropout_rate=0.0,
        corruption_rate=corruption,
        security_bits=security_bits,
        failure_log2=failure_log2,
    )
    assert (p.degree, p.threshold) == expected
    assert (
        security_bits
        <= p.security_bits
        < min(p.security_bits_secrecy, p.security_bits_connectivity)
    )
    both = np.logaddexp2(-p.security_bits_secrecy, -p.security_bits_connectivity)
    assert -both == pytest.approx(p.security_bits, abs=1e-12)


def test_complete_graph_fallback_is_deterministic() -> None:
    p = secagg_plus_parameters(5, dropout_rate=0.2, corruption_rate=0.2)
    assert p.complete_graph and p.degree == 4
    assert (p.min_threshold, p.threshold, p.max_threshold) == (2, 2, 3)
    assert p.log2_failure == -math.inf and p.security_bits == math.inf
    # Bound functions agree: the complete graph's events are certain or impossible.
    assert log2_recovery_failure(5, 4, 3, 0.2) == -math.inf
    assert log2_recovery_failure(5, 4, 4, 0.2) == 0.0
    assert log2_secrecy_failure(5, 4, 1, 0.2) == 0.0
    assert log2_disconnection(5, 10, 0.4, 0.4) == -math.inf


def test_threshold_two_preferred_over_one() -> None:
    p = secagg_plus_parameters(1_000, dropout_rate=0.3, corruption_rate=0.0)
    assert p.min_threshold == 1 and p.threshold == 2
    q = secagg_plus_parameters(2, dropout_rate=0.0, corruption_rate=0.0)
    assert (q.degree, q.threshold, q.complete_graph) == (1, 1, True)


def test_infeasible_settings_say_what_fails() -> None:
    with pytest.raises(ValueError, match=r"correctness target.*corrupt \+ dropped <= n - 2"):
        secagg_plus_parameters(4, dropout_rate=0.5, corruption_rate=0.25)
    with pytest.raises(ValueError, match="security target"):
        secagg_plus_parameters(10, dropout_rate=0.0, corruption_rate=0.9)


def test_table_and_main(capsys: pytest.CaptureFixture[str]) -> None:
    table = parameter_table((1_000,), (0.05, 0.3), (0.05,))
    rows = [line.split() for line in table.splitlines()[1:]]
    assert [row[3:5] for row in rows] == [["30", "17"], ["66", "23"]]
    main()
    out = capsys.readouterr().out
    assert "100000" in out and "hoeffding k" in out
    assert len(out.strip().splitlines()) == 3 + 1 + 4 * 3 * 2


def test_hoeffding_degree_never_below_exact_degree() -> None:
    for n in (1_000, 10_000):
        for dropout in (0.05, 0.3):
            exact = secagg_plus_parameters(n, dropout_rate=dropout, corruption_rate=0.05)
            loose = hoeffding_degree(n, dropout_rate=dropout, corruption_rate=0.05)
            assert loose is not None and loose >= exact.degree


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("bad", [True, 10.0, "10", None])
def test_num_clients_type(bad: object) -> None:
    with pytest.raises(TypeError, match="num_clients must be an int"):
        secagg_plus_parameters(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 0, 1])
def test_num_clients_value(bad: int) -> None:
    with pytest.raises(ValueError, match="num_clients must be an integer >= 2"):
        secagg_plus_parameters(bad)


@pytest.mark.parametrize("name", ["dropout_rate", "corruption_rate"])
@pytest.mark.parametrize("bad", [-0.01, 1.0, 1.5, math.nan, math.inf])
def test_rate_values(name: str, bad: float) -> None:
    with pytest.raises(ValueError, match=name):
        secagg_plus_parameters(100, **{name: bad})


@pytest.mark.parametrize("name", ["dropout_rate", "corruption_rate", "failure_log2"])
def test_real_argument_types(name: str) -> None:
    with pytest.raises(TypeError, match=f"{name} must be a real number"):
        secagg_plus_parameters(100, **{name: "0.1"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=name):
        secagg_plus_parameters(100, **{name: True})


@pytest.mark.parametrize("bad", [0, 0.0, 1, -201, math.nan, -math.inf])
def test_failure_target_values(bad: float) -> None:
    with pytest.raises(ValueError, match="failure_log2"):
        secagg_plus_parameters(100, failure_log2=bad)


@pytest.mark.parametrize("bad", [0, -1, 201, math.inf])
def test_security_target_values(bad: float) -> None:
    with pytest.raises(ValueError, match="security_bits"):
        secagg_plus_parameters(100, security_bits=bad)


def test_bound_function_arguments() -> None:
    with pytest.raises(ValueError, match="degree must be even"):
        log2_recovery_failure(100, 7, 3, 0.1)
    with pytest.raises(ValueError, match="degree must be an integer >= 1"):
        log2_secrecy_failure(100, 0, 1, 0.1)
    with pytest.raises(ValueError, match=r"threshold must lie in \[1, degree = 8\]"):
        log2_recovery_failure(100, 8, 9, 0.1)
    with pytest.raises(ValueError, match="threshold must be an integer >= 1"):
        log2_secrecy_failure(100, 8, 0, 0.1)
    with pytest.raises(TypeError, match="degree must be an int"):
        log2_disconnection(100, 8.0, 0.1, 0.1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="draws <= population"):
        log2_hypergeometric_tail(10, 3, 11, 1)
    with pytest.raises(TypeError, match="at_least must be an int"):
        log2_hypergeometric_tail(10, 3, 4, 1.0)  # type: ignore[arg-type]
    # Degrees at or above n - 1 mean the complete graph.
    assert log2_secrecy_failure(10, 50, 3, 0.2) == log2_secrecy_failure(10, 9, 3, 0.2)


def test_dataclass_validates_on_construction() -> None:
    good = secagg_plus_parameters(1_000, dropout_rate=0.05, corruption_rate=0.05)
    fields = {name: getattr(good, name) for name in SecAggPlusParameters.__dataclass_fields__}
    SecAggPlusParameters(**fields)
    with pytest.raises(ValueError, match="degree must be even"):
        SecAggPlusParameters(**{**fields, "degree": 31})
    with pytest.raises(ValueError, match="min_threshold <= threshold"):
        SecAggPlusParameters(**{**fields, "threshold": 40})
    with pytest.raises(ValueError, match="complete_graph"):
        SecAggPlusParameters(**{**fields, "complete_graph": True})
    with pytest.raises(FrozenInstanceError):
        good.degree = 4  # type: ignore[misc]


# --------------------------------------------------------------------------- properties


def degree_or_infinity(n: int, **kwargs: float) -> float:
    try:
        return secagg_plus_parameters(n, **kwargs).degree
    except ValueError:
        return math.inf


percent = st.integers(min_value=0, max_value=45).map(lambda x: x / 100)
small_percent = st.integers(min_value=0, max_value=30).map(lambda x: x / 100)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 1_500), percent, percent, percent)
def test_more_dropout_never_lowers_the_degree(n: int, a: float, b: float, gamma: float) -> None:
    low, high = sorted((a, b))
    assert degree_or_infinity(n, dropout_rate=low, corruption_rate=gamma) <= degree_or_infinity(
        n, dropout_rate=high, corruption_rate=gamma
    )


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 1_500), percent, percent, percent)
def test_more_corruption_never_lowers_the_degree(n: int, a: float, b: float, delta: float) -> None:
    low, high = sorted((a, b))
    assert degree_or_infinity(n, dropout_rate=delta, corruption_rate=low) <= degree_or_infinity(
        n, dropout_rate=delta, corruption_rate=high
    )


@settings(max_examples=30, deadline=None)
@given(
    st.integers(2, 1_500),
    small_percent,
    small_percent,
    st.integers(5, 60),
    st.integers(5, 60),
    st.integers(5, 80),
    st.integers(5, 80),
)
def test_stricter_targets_never_lower_the_degree(
    n: int, delta: float, gamma: float, f1: int, f2: int, s1: int, s2: int
) -> None:
    loose = degree_or_infinity(
        n,
        dropout_rate=delta,
        corruption_rate=gamma,
        failure_log2=-min(f1, f2),
        security_bits=min(s1, s2),
    )
    strict = degree_or_infinity(
        n,
        dropout_rate=delta,
        corruption_rate=gamma,
        failure_log2=-max(f1, f2),
        security_bits=max(s1, s2),
    )
    assert loose <= strict


def meets_targets(
    n: int, k: int, t: int, delta: float, gamma: float, failure_log2: float, security_bits: float
) -> bool:
    """Float re-check with the public bound functions (tolerant of last-bit rounding)."""
    recovery = log2_recovery_failure(n, k, t, delta)
    insecure = float(
        np.logaddexp2(log2_secrecy_failure(n, k, t, gamma), log2_disconnection(n, k, delta, gamma))
    )
    return recovery <= failure_log2 + LOG2_TOL and insecure <= -security_bits + LOG2_TOL


def clearly_fails(
    n: int, k: int, t: int, delta: float, gamma: float, failure_log2: float, security_bits: float
) -> bool:
    recovery = log2_recovery_failure(n, k, t, delta)
    insecure = float(
        np.logaddexp2(log2_secrecy_failure(n, k, t, gamma), log2_disconnection(n, k, delta, gamma))
    )
    return recovery > failure_log2 - LOG2_TOL or insecure > -security_bits - LOG2_TOL


def some_threshold_nearly_works(
    n: int, k: int, delta: float, gamma: float, failure_log2: float, security_bits: float
) -> bool:
    """Whether some t meets both targets at degree k, up to LOG2_TOL (lenient).

    The secrecy bound falls and the recovery bound rises with t, so it suffices to compare the
    smallest secure t with the largest correct t, each found by bisection.
    """
    disconnection = log2_disconnection(n, k, delta, gamma)

    def secure(t: int) -> bool:
        secrecy = log2_secrecy_failure(n, k, t, gamma)
        return float(np.logaddexp2(secrecy, disconnection)) <= -security_bits + LOG2_TOL

    def correct(t: int) -> bool:
        return log2_recovery_failure(n, k, t, delta) <= failure_log2 + LOG2_TOL

    if not secure(k) or not correct(1):
        return False
    lo, hi = 1, k  # smallest secure t in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if secure(mid) else (mid + 1, hi)
    return correct(lo)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 400), small_percent, small_percent, st.integers(2, 30), st.integers(2, 50))
def test_chosen_parameters_meet_targets_and_are_minimal(
    n: int, delta: float, gamma: float, failure_bits: int, security_bits: int
) -> None:
    targets = {"failure_log2": -float(failure_bits), "security_bits": float(security_bits)}
    try:
        p = secagg_plus_parameters(n, dropout_rate=delta, corruption_rate=gamma, **targets)
    except ValueError:
        c, d = count_from_rate(n, gamma), count_from_rate(n, delta)
        assert c + d > n - 2  # only the complete graph's own limit makes a setting infeasible
        return
    k = p.degree
    assert p.min_threshold <= p.threshold <= p.max_threshold <= k
    for t in (p.min_threshold, p.threshold, p.max_threshold):
        assert meets_targets(n, k, t, delta, gamma, **targets)
    # The threshold range is maximal at this degree.
    if p.min_threshold > 1:
        assert clearly_fails(n, k, p.min_threshold - 1, delta, gamma, **targets)
    if p.max_threshold < k:
        assert clearly_fails(n, k, p.max_threshold + 1, delta, gamma, **targets)
    # The degree is minimal: no smaller even degree admits any threshold.
    for k_small in range(2, min(k, n - 1), 2):
        assert not some_threshold_nearly_works(n, k_small, delta, gamma, **targets), k_small
    assert p.log2_failure <= targets["failure_log2"] + LOG2_TOL
    assert p.security_bits >= security_bits - LOG2_TOL
    assert p.security_bits <= min(p.security_bits_secrecy, p.security_bits_connectivity)
