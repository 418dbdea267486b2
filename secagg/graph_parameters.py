"""SecAgg+ graph parameters: the degree k of the random Harary graph and the Shamir threshold t.

The graph (Bell, Bonawitz, Gascón, Lepoint, Raykova, CCS 2020, "SecAgg+"): the clients are placed
on a ring in a uniformly random order; with k even, each is joined to the k/2 clients on each side
(the random Harary graph H(n, k)); with k ≥ n − 1 the graph is complete. Each client Shamir-shares
its self-mask seed and its mask private key t-of-k among its k neighbours (not itself).

Dropped and corrupt clients are uniformly random sets of ``count_from_rate(n, rate)`` clients,
independent of the ring order. Three bad events are bounded, each with exact hypergeometric tails
(Python integers throughout) and a union bound, derived in ``graph_parameters.md`` beside this file:

- recovery failure (correctness): some client has fewer than t surviving neighbours;
- secrecy failure (security): some honest client has t or more corrupt neighbours;
- disconnection (security): the subgraph of honest surviving clients is disconnected.

:func:`secagg_plus_parameters` returns the smallest even k < n − 1 (and the smallest valid t,
2 rather than 1 when both are valid) for which the recovery bound is at most ``2**failure_log2``
and the two security bounds sum to at most ``2**-security_bits``; otherwise the complete graph,
whose events are deterministic.

Run ``python3 -m secagg.graph_parameters`` for a table of parameters.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from secagg.validation import check_int, check_real

__all__ = [
    "SecAggPlusParameters",
    "count_from_rate",
    "hoeffding_degree",
    "log2_disconnection",
    "log2_hypergeometric_tail",
    "log2_recovery_failure",
    "log2_secrecy_failure",
    "main",
    "parameter_table",
    "secagg_plus_parameters",
]

# Slack (in bits) of the floating-point pre-screen over candidate degrees; its measured log-space
# error is 6e-9 bits at n = 10^6 and 2e-5 at 10^9, so no degree the exact check accepts is skipped.
_SCREEN_SLACK_BITS = 0.01
_LN2 = math.log(2.0)


# --------------------------------------------------------------------------- argument checks


def _check_rate(name: str, value: object) -> float:
    rate = check_real(name, value)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"{name} must lie in [0, 1); got {rate}")
    return rate


def _check_degree(num_clients: int, degree: object) -> int:
    """Return the effective degree: ``degree`` itself, or n − 1 when ``degree >= n - 1``."""
    k = check_int("degree", degree, minimum=1)
    if k >= num_clients - 1:
        return num_clients - 1
    if k % 2:
        raise ValueError(
            f"degree must be even when below num_clients - 1 = {num_clients - 1} "
            f"(a Harary graph joins k/2 clients on each side); got {k}"
        )
    return k


def _check_threshold(threshold: object, degree: int) -> int:
    t = check_int("threshold", threshold, minimum=1)
    if t > degree:
        raise ValueError(f"threshold must lie in [1, degree = {degree}]; got {t}")
    return t


def count_from_rate(num_clients: int, rate: float) -> int:
    """Number of clients a rate stands for: ``n·rate`` rounded to the nearest integer, ties up.

    The rate is read as the decimal it prints as (``0.15`` is exactly 3/20), so ``n·rate`` that
    is a half-integer on paper rounds up — the conservative direction for every bound here.

    Parameters
    ----------
    num_clients
        Number of clients n ≥ 2.
    rate
        Dropout or corruption rate in [0, 1).

    Returns
    -------
    int
        ``floor(n·rate + 1/2)``.

    Examples
    --------
    >>> count_from_rate(1000, 0.05)
    50
    >>> count_from_rate(10, 0.15), count_from_rate(10, 0.05)
    (2, 1)
    """
    n = check_int("num_clients", num_clients, minimum=2)
    exact_rate = Fraction(repr(_check_rate("rate", rate)))
    return math.floor(n * exact_rate + Fraction(1, 2))


# --------------------------------------------------------------------------- exact arithmetic


def _log2_ratio(numerator: int, denominator: int) -> float:
    """log2(numerator / denominator) for non-negative big integers, rounded upwards."""
    if numerator == 0:
        return -math.inf
    # Keep 53 leading bits of each (exact as doubles); round the numerator up, the denominator
    # down. Each log2 is within an ulp of |·| ≤ 53 and the two sums round by half an ulp each:
    # stepping up by four ulps of max(64, |value|) covers all of it.
    num_shift = max(0, numerator.bit_length() - 53)
    den_shift = max(0, denominator.bit_length() - 53)
    num_top = (numerator >> num_shift) + (1 if num_shift else 0)
    den_top = denominator >> den_shift
    value = math.log2(num_top) - math.log2(den_top) + (num_shift - den_shift)
    return value + 4.0 * math.ulp(max(64.0, abs(value)))


def _hypergeometric_tail_numerators(population: int, successes: int, draws: int) -> list[int]:
    """``tails[x] = C(N, m)·P[X ≥ x]`` for X ~ Hypergeometric(N, K, m), x = 0 .. m + 1.

    Each pmf numerator C(K, x)·C(N − K, m − x) follows from the previous one by an exact integer
    division (the quotient is again a product of binomials), so the cost is O(m) big-int steps.
    """
    low = max(0, draws - (population - successes))
    high = min(successes, draws)
    tails = [0] * (draws + 2)
    if low > high:  # empty support: impossible for valid arguments
        return tails
    term = math.comb(successes, low) * math.comb(population - successes, draws - low)
    terms = [term]
    for x in range(low, high):
        term = term * (successes - x) * (draws - x)
        term //= (x + 1) * (population - successes - draws + x + 1)
        terms.append(term)
    running = 0
    for x in range(high, low - 1, -1):
        running += terms[x - low]
        tails[x] = running
    for x in range(low - 1, -1, -1):
        tails[x] = running
    return tails


def _at_most(numerator: int, denominator: int, log2_target: float) -> bool:
    """Whether numerator / denominator ≤ 2**log2_target, exactly when the target is an integer."""
    if numerator == 0:
        return True
    if log2_target.is_integer():
        exponent = int(log2_target)
        if exponent >= 0:
            return numerator <= denominator << exponent
        return numerator << -exponent <= denominator
    return _log2_ratio(numerator, denominator) <= log2_target


def log2_hypergeometric_tail(population: int, successes: int, draws: int, at_least: int) -> float:
    """log2 of P[X ≥ at_least] for X ~ Hypergeometric(population, successes, draws), exact to ulps.

    Computed with Python integers (ratio of binomial sums), so it stays exact far into the tail
    where floating-point survival functions underflow or lose digits.

    Parameters
    ----------
    population
        Population size N ≥ 1.
    successes
        Number of marked items K, 0 ≤ K ≤ N.
    draws
        Sample size m, 0 ≤ m ≤ N (drawn without replacement).
    at_least
        The tail starts here; any integer (≤ 0 gives 0.0, above ``min(K, m)`` gives ``-inf``).

    Returns
    -------
    float
        log2 P[X ≥ at_least], rounded upwards (by a few ulps); ``-inf`` for probability zero.

    Examples
    --------
    >>> exact = math.log2(10 / 45)
    >>> exact <= log2_hypergeometric_tail(10, 5, 2, 2) < exact + 1e-12
    True
    >>> round(log2_hypergeometric_tail(1000, 50, 30, 10), 3)
    -20.789
    """
    n = check_int("population", population, minimum=1)
    k_succ = check_int("successes", successes, minimum=0)
    m = check_int("draws", draws, minimum=0)
    if isinstance(at_least, bool) or not isinstance(at_least, int | np.integer):
        raise TypeError(f"at_least must be an int; got {type(at_least).__name__}")
    if k_succ > n or m > n:
        raise ValueError(
            f"need successes <= population and draws <= population; got N={n}, K={k_succ}, m={m}"
        )
    x = int(at_least)
    if x <= 0:
        return 0.0
    if x > min(k_succ, m):
        return -math.inf
    tails = _hypergeometric_tail_numerators(n, k_succ, m)
    return _log2_ratio(tails[x], math.comb(n, m))


# --------------------------------------------------------------------------- the three bounds


def _recovery_bound(n: int, k: int, t: int, dropped: int) -> tuple[int, int]:
    # Bell et al. 2020 event E3: n·HypTail(n−1, d, k; k−t+1), exact (graph_parameters.md §2).
    tails = _hypergeometric_tail_numerators(n - 1, dropped, k)
    return n * tails[k - t + 1], math.comb(n - 1, k)


def _secrecy_bound(n: int, k: int, t: int, corrupt: int) -> tuple[int, int]:
    # Bell et al. 2020 event E1: n·HypTail(n−1, c, k; t), exact (graph_parameters.md §3).
    tails = _hypergeometric_tail_numerators(n - 1, corrupt, k)
    return n * tails[t], math.comb(n - 1, k)


def _disconnection_bound(n: int, k: int, bad: int) -> tuple[int, int]:
    # Bell et al. 2020 event E2: n(n−k−1)/2·C(b,k)/C(n,k), two-gap lemma (graph_parameters.md §4).
    if k >= n - 1:
        return 0, 1
    pairs = n * (n - k - 1) // 2
    two_runs = (pairs * math.comb(bad, k), math.comb(n, k))
    # One long gap is necessary too, so n·C(b, k/2)/C(n, k/2) is also valid; keep the smaller.
    one_run = (n * math.comb(bad, k // 2), math.comb(n, k // 2))
    if two_runs[0] * one_run[1] <= one_run[0] * two_runs[1]:
        return two_runs
    return one_run


def _capped_log2(bound: tuple[int, int]) -> float:
    return min(0.0, _log2_ratio(*bound))


def log2_recovery_failure(
    num_clients: int, degree: int, threshold: int, dropout_rate: float
) -> float:
    """log2 of an upper bound on P[the server cannot reconstruct some secret it needs].

    The server needs ``threshold`` shares from surviving neighbours of every survivor (its
    self-mask seed) and of every dropped client with a surviving neighbour (its recovery key). A
    client's dropped neighbours are at most Hypergeometric(n − 1, d, k) (one fewer for a dropped
    client), so with a union bound over the n clients

        P_fail ≤ min(1, n · P[Hypergeometric(n − 1, d, k) ≥ k − t + 1]),

    with d = count_from_rate(n, δ).

    Source: condition "enough surviving neighbours" of Bell et al. 2020 (SecAgg+), tail exact;
    derivation in graph_parameters.md §2.

    Parameters
    ----------
    num_clients
        n ≥ 2.
    degree
        k: even and < n − 1 (Harary graph), or ≥ n − 1 (complete graph, degree n − 1).
    threshold
        Shamir threshold t in [1, k].
    dropout_rate
        δ in [0, 1).

    Returns
    -------
    float
        log2 of the bound (≤ 0; ``-inf`` when failure is impossible).

    Examples
    --------
    >>> log2_recovery_failure(100, 99, 94, 0.05)   # complete graph: 94 survivors always remain
    -inf
    >>> log2_recovery_failure(1000, 30, 17, 0.05) < -20
    True
    """
    n = check_int("num_clients", num_clients, minimum=2)
    k = _check_degree(n, degree)
    t = _check_threshold(threshold, k)
    dropped = count_from_rate(n, _check_rate("dropout_rate", dropout_rate))
    return _capped_log2(_recovery_bound(n, k, t, dropped))


def log2_secrecy_failure(
    num_clients: int, degree: int, threshold: int, corruption_rate: float
) -> float:
    """log2 of an upper bound on P[some honest client has ≥ t corrupt neighbours].

    With t corrupt neighbours the server and the corrupt clients hold t shares of both of that
    client's secrets and unmask its input. An honest client's corrupt neighbours are exactly
    Hypergeometric(n − 1, c, k), so with a union bound over the (at most n) honest clients

        P_secrecy ≤ min(1, n · P[Hypergeometric(n − 1, c, k) ≥ t]),   c = count_from_rate(n, γ).

    Source: condition "fewer than t corrupt neighbours" of Bell et al. 2020 (SecAgg+), tail
    exact; derivation in graph_parameters.md §3.

    Parameters
    ----------
    num_clients
        n ≥ 2.
    degree
        k: even and < n − 1 (Harary graph), or ≥ n − 1 (complete graph, degree n − 1).
    threshold
        Shamir threshold t in [1, k].
    corruption_rate
        γ in [0, 1).

    Returns
    -------
    float
        log2 of the bound (≤ 0; ``-inf`` when the event is impossible).

    Examples
    --------
    >>> log2_secrecy_failure(100, 99, 6, 0.05)   # complete graph, 5 corrupt clients, t = 6
    -inf
    >>> -log2_secrecy_failure(1000, 30, 17, 0.05) > 40
    True
    """
    n = check_int("num_clients", num_clients, minimum=2)
    k = _check_degree(n, degree)
    t = _check_threshold(threshold, k)
    corrupt = count_from_rate(n, _check_rate("corruption_rate", corruption_rate))
    return _capped_log2(_secrecy_bound(n, k, t, corrupt))


def log2_disconnection(
    num_clients: int, degree: int, dropout_rate: float, corruption_rate: float
) -> float:
    """log2 of an upper bound on P[the honest surviving clients' subgraph is disconnected].

    In H(n, k) two clients are adjacent iff their ring distance is ≤ k/2, so the honest survivors
    are disconnected iff at least two of the gaps between ring-consecutive honest survivors hold
    ≥ k/2 bad (corrupt or dropped) clients. Bad clients number at most b = c + d and, given
    their number, sit at uniformly random ring positions, so with a union bound over the
    n(n − k − 1)/2 pairs of disjoint windows of k/2

        P_disc ≤ n(n − k − 1)/2 · C(b, k)/C(n, k).

    The weaker one-window bound n · C(b, k/2)/C(n, k/2) (one gap is necessary too) is also valid;
    the smaller of the two is returned. The complete graph is never disconnected.

    Source: connectivity condition of Bell et al. 2020 (SecAgg+); the two-gap union bound is the
    one Google's fcp/secagg graph_parameter_finder uses; derivation in graph_parameters.md §4.

    Parameters
    ----------
    num_clients
        n ≥ 2.
    degree
        k: even and < n − 1 (Harary graph), or ≥ n − 1 (complete graph, degree n − 1).
    dropout_rate
        δ in [0, 1).
    corruption_rate
        γ in [0, 1).

    Returns
    -------
    float
        log2 of the bound (≤ 0; ``-inf`` when disconnection is impossible).

    Examples
    --------
    >>> log2_disconnection(1000, 30, 0.05, 0.05) < -41
    True
    >>> log2_disconnection(10, 9, 0.3, 0.3)
    -inf
    """
    n = check_int("num_clients", num_clients, minimum=2)
    k = _check_degree(n, degree)
    dropped = count_from_rate(n, _check_rate("dropout_rate", dropout_rate))
    corrupt = count_from_rate(n, _check_rate("corruption_rate", corruption_rate))
    return _capped_log2(_disconnection_bound(n, k, min(n, dropped + corrupt)))


# --------------------------------------------------------------------------- parameter search


@dataclass(frozen=True, slots=True)
class SecAggPlusParameters:
    """SecAgg+ graph parameters and the bounds they achieve.

    Attributes
    ----------
    num_clients
        n, the clients that advertised keys.
    degree
        k, the number of neighbours of each client (n − 1 for the complete graph).
    threshold
        t, the Shamir threshold: shares are t-of-k among the neighbours.
    dropout_rate, corruption_rate
        The assumed rates δ and γ.
    num_dropped, num_corrupt
        d and c, the counts the rates stand for (:func:`count_from_rate`).
    log2_failure
        log2 of the recovery-failure (correctness) bound; ``-inf`` if failure is impossible.
    security_bits_secrecy
        −log2 of the bound on some honest client having ≥ t corrupt neighbours.
    security_bits_connectivity
        −log2 of the bound on the honest surviving clients' subgraph being disconnected.
    security_bits
        −log2 of the sum of the two security bounds (``inf`` if both events are impossible).
    complete_graph
        Whether no Harary graph with k < n − 1 met the targets and the complete graph is used.
    min_threshold, max_threshold
        Every t in this range meets the targets at this k. ``threshold`` is ``min_threshold``
        (fewest shares to combine), raised to 2 when the range allows it.

    Examples
    --------
    >>> p = secagg_plus_parameters(1000, dropout_rate=0.05, corruption_rate=0.05)
    >>> p.degree, p.threshold, p.complete_graph
    (30, 17, False)
    """

    num_clients: int
    degree: int
    threshold: int
    dropout_rate: float
    corruption_rate: float
    num_dropped: int
    num_corrupt: int
    log2_failure: float
    security_bits_secrecy: float
    security_bits_connectivity: float
    security_bits: float
    complete_graph: bool
    min_threshold: int
    max_threshold: int

    def __post_init__(self) -> None:
        n = check_int("num_clients", self.num_clients, minimum=2)
        k = check_int("degree", self.degree, minimum=1)
        if k > n - 1 or (k < n - 1 and k % 2):
            raise ValueError(f"degree must be even and < n - 1, or n - 1 = {n - 1}; got {k}")
        if self.complete_graph != (k == n - 1):
            raise ValueError("complete_graph must be True exactly when degree == num_clients - 1")
        lo = check_int("min_threshold", self.min_threshold, minimum=1)
        t = check_int("threshold", self.threshold, minimum=1)
        hi = check_int("max_threshold", self.max_threshold, minimum=1)
        if not lo <= t <= hi <= k:
            raise ValueError(
                "need 1 <= min_threshold <= threshold <= max_threshold <= degree; "
                f"got {lo}, {t}, {hi}, {k}"
            )
        _check_rate("dropout_rate", self.dropout_rate)
        _check_rate("corruption_rate", self.corruption_rate)
        check_int("num_dropped", self.num_dropped, minimum=0)
        check_int("num_corrupt", self.num_corrupt, minimum=0)


def _threshold_window(
    n: int, k: int, dropped: int, corrupt: int, *, failure_log2: float, security_bits: float
) -> tuple[int, int] | None:
    """Exact check of degree k: the range [t_lo, t_hi] of thresholds meeting both targets."""
    disc_num, disc_den = _disconnection_bound(n, k, min(n, dropped + corrupt))
    if not _at_most(disc_num, disc_den, -security_bits):
        return None
    den = math.comb(n - 1, k)
    corrupt_tails = _hypergeometric_tail_numerators(n - 1, corrupt, k)
    dropped_tails = _hypergeometric_tail_numerators(n - 1, dropped, k)
    t_lo = None
    for t in range(1, k + 1):  # secrecy bound falls as t grows
        # secrecy + disconnection = (n·tail·disc_den + disc_num·den) / (den·disc_den)
        total = n * corrupt_tails[t] * disc_den + disc_num * den
        if _at_most(total, den * disc_den, -security_bits):
            t_lo = t
            break
    if t_lo is None:
        return None
    t_hi = None
    for t in range(k, 0, -1):  # recovery bound falls as t shrinks
        if _at_most(n * dropped_tails[k - t + 1], den, failure_log2):
            t_hi = t
            break
    if t_hi is None or t_hi < t_lo:
        return None
    return t_lo, t_hi


def _log_tails(population: int, successes: int, draws: int) -> NDArray[np.float64]:
    """Natural log of P[X ≥ x], x = 0 .. draws + 1, in floating point (pre-screen only)."""
    from scipy.special import gammaln  # noqa: PLC0415 - lazy: keeps a ClientApp's start-up short

    low = max(0, draws - (population - successes))
    high = min(successes, draws)
    x = np.arange(low, high + 1, dtype=np.float64)
    log_pmf = (
        gammaln(successes + 1)
        - gammaln(x + 1)
        - gammaln(successes - x + 1)
        + gammaln(population - successes + 1)
        - gammaln(draws - x + 1)
        - gammaln(population - successes - draws + x + 1)
        - gammaln(population + 1)
        + gammaln(draws + 1)
        + gammaln(population - draws + 1)
    )
    out = np.full(draws + 2, -np.inf)
    out[low : high + 1] = np.logaddexp.accumulate(log_pmf[::-1])[::-1]
    out[:low] = out[low]
    return out


def _screen_passes(
    n: int, k: int, dropped: int, corrupt: int, *, failure_log2: float, security_bits: float
) -> bool:
    """Floating-point version of :func:`_threshold_window` with a little slack; never stricter."""
    bad = min(n, dropped + corrupt)
    if bad < k:
        disc = -math.inf
    else:
        lg = math.lgamma
        log_choose_ratio = lg(bad + 1) - lg(bad - k + 1) - lg(n + 1) + lg(n - k + 1)
        disc_two = (math.log(n) + math.log(n - k - 1) - _LN2 + log_choose_ratio) / _LN2
        half = k // 2
        log_half_ratio = lg(bad + 1) - lg(bad - half + 1) - lg(n + 1) + lg(n - half + 1)
        disc_one = (math.log(n) + log_half_ratio) / _LN2
        disc = min(disc_two, disc_one)
    # gammaln(n) ≈ n ln n carries an absolute error of a few ulps; widen the slack accordingly.
    slack = _SCREEN_SLACK_BITS + 64 * n * math.log(n) * sys.float_info.epsilon
    if disc > -security_bits + slack:
        return False
    secrecy = math.log2(n) + _log_tails(n - 1, corrupt, k)[1 : k + 1] / _LN2  # t = 1 .. k
    total = np.logaddexp2(secrecy, disc)
    recovery = math.log2(n) + _log_tails(n - 1, dropped, k)[k:0:-1] / _LN2  # t = 1 .. k
    ok = (total <= -security_bits + slack) & (recovery <= failure_log2 + slack)
    return bool(ok.any())


def _preferred_threshold(t_lo: int, t_hi: int) -> int:
    # Smallest valid t (cheapest reconstruction, as Google's finder picks), but never 1 when 2 is
    # also valid: a 1-of-k "sharing" hands each neighbour the secret itself.
    return max(t_lo, 2) if max(t_lo, 2) <= t_hi else t_lo


def _complete_graph_parameters(
    n: int, dropout_rate: float, corruption_rate: float, dropped: int, corrupt: int
) -> SecAggPlusParameters:
    k = n - 1
    t_lo = corrupt + 1  # an honest client's neighbours include all c corrupt clients
    t_hi = n - 1 - dropped  # a survivor has exactly n − 1 − d surviving neighbours
    if t_lo > k:
        raise ValueError(
            f"security target cannot be met even by the complete graph: with {corrupt} of {n} "
            f"clients corrupt, t must exceed {corrupt} but can be at most n - 1 = {k}; "
            "lower corruption_rate or add clients"
        )
    if t_lo > t_hi:
        raise ValueError(
            "correctness target cannot be met even by the complete graph: security needs "
            f"t >= {t_lo} (one more than the {corrupt} corrupt clients) but recovery needs "
            f"t <= {t_hi} (the surviving neighbours of a survivor when {dropped} of {n} drop); "
            f"this needs corrupt + dropped <= n - 2 = {n - 2}, got {corrupt + dropped}; "
            "lower dropout_rate or corruption_rate, or add clients"
        )
    return SecAggPlusParameters(
        num_clients=n,
        degree=k,
        threshold=_preferred_threshold(t_lo, t_hi),
        dropout_rate=dropout_rate,
        corruption_rate=corruption_rate,
        num_dropped=dropped,
        num_corrupt=corrupt,
        log2_failure=-math.inf,
        security_bits_secrecy=math.inf,
        security_bits_connectivity=math.inf,
        security_bits=math.inf,
        complete_graph=True,
        min_threshold=t_lo,
        max_threshold=t_hi,
    )


def secagg_plus_parameters(
    num_clients: int,
    *,
    dropout_rate: float = 0.1,
    corruption_rate: float = 0.05,
    failure_log2: float = -20,
    security_bits: float = 40,
) -> SecAggPlusParameters:
    """Choose the SecAgg+ degree k and Shamir threshold t for n clients.

    Returns the smallest even k < n − 1, with the smallest t (but 2 rather than 1 when both are
    valid), such that

    - :func:`log2_recovery_failure` ≤ ``failure_log2`` (correctness), and
    - 2**:func:`log2_secrecy_failure` + 2**:func:`log2_disconnection` ≤ 2**-``security_bits``;

    the comparisons are exact (integer arithmetic) for integer targets. If no such k exists, the
    complete graph k = n − 1, where every event is deterministic: t must exceed the c corrupt
    clients and be at most the n − 1 − d surviving neighbours. Dropouts and corruptions are
    uniformly random sets of :func:`count_from_rate` clients, independent of the graph (the
    semi-honest model).

    Parameters
    ----------
    num_clients
        n ≥ 2, the clients that advertised keys.
    dropout_rate
        δ in [0, 1), the expected fraction of clients that drop before unmasking.
    corruption_rate
        γ in [0, 1), the fraction of clients colluding with the server.
    failure_log2
        Target log2 of the correctness failure probability, in [-200, 0).
    security_bits
        Target statistical security in bits, in (0, 200].

    Returns
    -------
    SecAggPlusParameters
        The degree, threshold, the valid threshold range and the bounds achieved.

    Raises
    ------
    TypeError
        If an argument has the wrong type.
    ValueError
        If an argument is out of range, or even the complete graph misses a target (the message
        says which and what would be needed).

    Examples
    --------
    >>> p = secagg_plus_parameters(10_000, dropout_rate=0.1, corruption_rate=0.05)
    >>> p.degree, p.threshold
    (42, 21)
    >>> p.log2_failure <= -20 and p.security_bits >= 40
    True
    >>> q = secagg_plus_parameters(5, dropout_rate=0.2, corruption_rate=0.2)
    >>> q.complete_graph, q.degree, q.threshold
    (True, 4, 2)
    """
    n = check_int("num_clients", num_clients, minimum=2)
    delta = _check_rate("dropout_rate", dropout_rate)
    gamma = _check_rate("corruption_rate", corruption_rate)
    failure_target = check_real("failure_log2", failure_log2)
    if not -200.0 <= failure_target < 0.0:
        raise ValueError(
            f"failure_log2 must lie in [-200, 0) (e.g. -20 for 2**-20); got {failure_target}"
        )
    security_target = check_real("security_bits", security_bits)
    if not 0.0 < security_target <= 200.0:
        raise ValueError(f"security_bits must lie in (0, 200] (e.g. 40); got {security_target}")
    dropped = count_from_rate(n, delta)
    corrupt = count_from_rate(n, gamma)

    for k in range(2, n - 1, 2):
        targets = {"failure_log2": failure_target, "security_bits": security_target}
        if not _screen_passes(n, k, dropped, corrupt, **targets):
            continue
        window = _threshold_window(n, k, dropped, corrupt, **targets)
        if window is None:
            continue
        t_lo, t_hi = window
        t = _preferred_threshold(t_lo, t_hi)
        recovery = _capped_log2(_recovery_bound(n, k, t, dropped))
        secrecy = _capped_log2(_secrecy_bound(n, k, t, corrupt))
        disconnection = _capped_log2(_disconnection_bound(n, k, min(n, dropped + corrupt)))
        combined = float(np.logaddexp2(secrecy, disconnection))
        return SecAggPlusParameters(
            num_clients=n,
            degree=k,
            threshold=t,
            dropout_rate=delta,
            corruption_rate=gamma,
            num_dropped=dropped,
            num_corrupt=corrupt,
            log2_failure=recovery,
            security_bits_secrecy=-secrecy,
            security_bits_connectivity=-disconnection,
            security_bits=-combined,
            complete_graph=False,
            min_threshold=t_lo,
            max_threshold=t_hi,
        )
    return _complete_graph_parameters(n, delta, gamma, dropped, corrupt)


# --------------------------------------------------------------------------- comparison


def hoeffding_degree(
    num_clients: int,
    *,
    dropout_rate: float = 0.1,
    corruption_rate: float = 0.05,
    failure_log2: float = -20,
    security_bits: float = 40,
) -> int | None:
    """The smallest even k < n − 1 that Hoeffding-style tail bounds would certify, for comparison.

    The asymptotic analysis of Bell et al. 2020 (k = O(log n + σ)) rests on exponential tail
    bounds rather than exact tails. This replaces each exact tail of
    :func:`secagg_plus_parameters` by its closed-form bound — Hoeffding 1963 (valid for sampling
    without replacement): P[X ≥ (p + ε)k] ≤ exp(−2ε²k); and C(b, k)/C(n, k) ≤ (b/n)^k — with
    the same union bounds and targets, so the gap to the exact degree is what exact tails save.

    Parameters
    ----------
    num_clients, dropout_rate, corruption_rate, failure_log2, security_bits
        As for :func:`secagg_plus_parameters` (not range-checked beyond the rates).

    Returns
    -------
    int or None
        The degree, or ``None`` if no k < n − 1 qualifies.

    Examples
    --------
    >>> hoeffding_degree(10_000, dropout_rate=0.1, corruption_rate=0.05)
    82
    """
    n = check_int("num_clients", num_clients, minimum=2)
    dropped = count_from_rate(n, _check_rate("dropout_rate", dropout_rate))
    corrupt = count_from_rate(n, _check_rate("corruption_rate", corruption_rate))
    failure_target = check_real("failure_log2", failure_log2)
    security_target = check_real("security_bits", security_bits)
    p_corrupt = corrupt / (n - 1)
    p_dropped = dropped / (n - 1)
    bad_fraction = min(n, dropped + corrupt) / n
    log2n = math.log2(n)
    for k in range(2, n - 1, 2):
        # n(n − k − 1)/2 · C(b, k)/C(n, k) ≤ n²/2 · (b/n)^k
        disc = -math.inf if bad_fraction == 0 else 2 * log2n - 1 + k * math.log2(bad_fraction)
        if disc > -security_target:
            continue
        for t in range(1, k + 1):
            eps_secrecy = t / k - p_corrupt
            if eps_secrecy <= 0:
                continue
            secrecy = log2n - 2 * eps_secrecy**2 * k / _LN2
            if float(np.logaddexp2(secrecy, disc)) > -security_target:
                continue
            eps_recovery = (k - t + 1) / k - p_dropped
            if eps_recovery > 0 and log2n - 2 * eps_recovery**2 * k / _LN2 <= failure_target:
                return k
            break  # larger t only worsens recovery
    return None


def _format_bits(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.1f}"


def parameter_table(
    num_clients: tuple[int, ...] = (100, 1_000, 10_000, 100_000),
    dropout_rates: tuple[float, ...] = (0.05, 0.1, 0.3),
    corruption_rates: tuple[float, ...] = (0.05, 0.2),
    *,
    failure_log2: float = -20,
    security_bits: float = 40,
) -> str:
    """A plain-text table of :func:`secagg_plus_parameters` over a grid of settings.

    Columns: n, δ, γ, the chosen k and t, the valid t range, −log2 of the correctness bound,
    the secrecy / connectivity / combined security bits, whether the complete graph was used,
    and the degree :func:`hoeffding_degree` would need.

    Parameters
    ----------
    num_clients, dropout_rates, corruption_rates
        The grid.
    failure_log2, security_bits
        Targets, as for :func:`secagg_plus_parameters`.

    Returns
    -------
    str
        The table, one line per setting, with a header.

    Examples
    --------
    >>> table = parameter_table((1000,), (0.05,), (0.05,))
    >>> table.splitlines()[1].split()
    ['1000', '0.05', '0.05', '30', '17', '17-18', '27.0', '41.5', '87.1', '41.5', 'no', '68']
    """
    header = (
        f"{'n':>8}  {'drop':>4}  {'corr':>4}  {'k':>4}  {'t':>4}  {'t range':>9}  "
        f"{'-log2 fail':>10}  {'sec:secrecy':>11}  {'sec:conn':>8}  {'sec:all':>7}  "
        f"{'complete':>8}  {'hoeffding k':>11}"
    )
    lines = [header]
    for n in num_clients:
        for gamma in corruption_rates:
            for delta in dropout_rates:
                p = secagg_plus_parameters(
                    n,
                    dropout_rate=delta,
                    corruption_rate=gamma,
                    failure_log2=failure_log2,
                    security_bits=security_bits,
                )
                hk = hoeffding_degree(
                    n,
                    dropout_rate=delta,
                    corruption_rate=gamma,
                    failure_log2=failure_log2,
                    security_bits=security_bits,
                )
                t_range = f"{p.min_threshold}-{p.max_threshold}"
                lines.append(
                    f"{n:>8}  {delta:>4.2f}  {gamma:>4.2f}  {p.degree:>4}  {p.threshold:>4}  "
                    f"{t_range:>9}  {_format_bits(-p.log2_failure):>10}  "
                    f"{_format_bits(p.security_bits_secrecy):>11}  "
                    f"{_format_bits(p.security_bits_connectivity):>8}  "
                    f"{_format_bits(p.security_bits):>7}  "
                    f"{'yes' if p.complete_graph else 'no':>8}  "
                    f"{'-' if hk is None else hk:>11}"
                )
    return "\n".join(lines)


def main() -> None:
    """Print the default :func:`parameter_table` (``python3 -m secagg.graph_parameters``).

    Examples
    --------
    >>> callable(main)
    True
    """
    print(
        "SecAgg+ parameters: correctness failure <= 2^-20, >= 40 bits of statistical security\n"
        "(exact hypergeometric tails, union bounds; see secagg/graph_parameters.md)\n"
    )
    print(parameter_table())


if __name__ == "__main__":
    main()
