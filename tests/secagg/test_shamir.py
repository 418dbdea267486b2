"""Shamir sharing: known answers, round trips, threshold, exhaustive perfect secrecy."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from secagg import KeystreamRandom, shamir


def test_committed_shares(known_answers: dict[str, Any]) -> None:
    for case in known_answers["shamir"]:
        source = KeystreamRandom(seed=case["stream_seed"], label=case["stream_label"].encode())
        secret = bytes.fromhex(case["secret"])
        shares = shamir.share(
            shamir.split_secret(secret), case["points"], case["threshold"], source
        )
        assert shares.tolist() == case["shares"]


@settings(max_examples=40)
@given(
    st.binary(min_size=1, max_size=48),
    st.integers(2, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))),
    st.integers(0, 2**32),
)
def test_any_t_shares_reconstruct(secret: bytes, n_t: tuple[int, int], seed: int) -> None:
    n, t = n_t
    points = list(range(3, 3 + n))
    shares = shamir.share(shamir.split_secret(secret), points, t, KeystreamRandom(seed=seed))
    rng = np.random.default_rng(seed)
    chosen = sorted(rng.choice(n, size=t, replace=False).tolist())
    recovered = shamir.reconstruct([points[i] for i in chosen], shares[chosen])
    assert shamir.join_secret(recovered, len(secret)) == secret


def test_fewer_than_t_shares_give_the_wrong_secret() -> None:
    secret = bytes(range(32))
    shares = shamir.share(shamir.split_secret(secret), [1, 2, 3, 4, 5], 4, KeystreamRandom(seed=1))
    guess = shamir.reconstruct([1, 2, 3], shares[:3])
    assert not np.array_equal(guess, shamir.split_secret(secret))


@pytest.mark.parametrize(
    ("prime", "t", "points"), [(5, 2, (1, 2, 3)), (5, 3, (1, 2, 4)), (7, 3, (2, 3, 5, 6))]
)
def test_perfect_secrecy_exhaustive(prime: int, t: int, points: tuple[int, ...]) -> None:
    # For every set of t − 1 holders, the joint distribution of their shares over all p^(t−1)
    # polynomials is the same (uniform) for every secret: fewer than t shares reveal nothing.
    for holders in itertools.combinations(range(len(points)), t - 1):
        distributions = []
        for secret in range(prime):
            seen: Counter[tuple[int, ...]] = Counter()
            for coefficients in itertools.product(range(prime), repeat=t - 1):
                shares = shamir.evaluate_shares(
                    [secret], points, np.array(coefficients).reshape(t - 1, 1), prime
                )
                seen[tuple(int(shares[h, 0]) for h in holders)] += 1
            distributions.append(seen)
        assert all(d == distributions[0] for d in distributions)
        assert len(distributions[0]) == prime ** (t - 1)  # uniform over all share tuples
        assert set(distributions[0].values()) == {1}


def test_coefficients_uniform_on_tiny_field() -> None:
    # The rejection sampler is exactly uniform; χ² over Z_7 at α = 1e-6.
    values = shamir._uniform_field_elements(KeystreamRandom(seed=5), 140_000, 7)
    assert values.min() >= 0 and values.max() < 7
    assert stats.chisquare(np.bincount(values, minlength=7)).pvalue > 1e-6


def test_lagrange_cache_and_validation() -> None:
    shamir.lagrange_coefficients.cache_clear()
    shamir.lagrange_coefficients((1, 2, 3))
    shamir.lagrange_coefficients((1, 2, 3))
    assert shamir.lagrange_coefficients.cache_info().hits == 1
    with pytest.raises(ValueError, match="distinct"):
        shamir.reconstruct([1, 1], [[1], [2]])
    with pytest.raises(ValueError, match="prime"):
        shamir.share([1], [1, 2], 2, KeystreamRandom(seed=0), prime=8)
    with pytest.raises(ValueError, match="threshold"):
        shamir.share([1], [1, 2], 3, KeystreamRandom(seed=0))
    with pytest.raises(ValueError, match="points"):
        shamir.share([1], [0, 2], 2, KeystreamRandom(seed=0))
    with pytest.raises(ValueError, match="inconsistent"):
        shamir.join_secret([2**30 - 1] * 9, 32)


def test_every_prime_is_accepted_as_a_field_and_no_composite() -> None:
    """The field check against a sieve (every n < 20 000) and the Miller–Rabin range's edges:
    17 — a Miller–Rabin base — was once refused (its base was ≡ 0 mod n)."""
    from secagg.shamir import _check_prime, _is_prime  # noqa: PLC0415

    limit = 20_000
    composite = np.zeros(limit, dtype=bool)
    composite[:2] = True
    for p in range(2, int(limit**0.5) + 1):
        if not composite[p]:
            composite[p * p :: p] = True
    wrong = [n for n in range(3, limit) if _is_prime(n) == bool(composite[n])]
    assert wrong == []
    assert _check_prime(17) == 17 and _check_prime(2**31 - 1) == 2**31 - 1
    # Strong pseudoprimes to small bases and Carmichael numbers are composite.
    for n in (561, 1105, 2047, 3215031751, 2152302898747, 3474749660383, 2**31 - 3):
        assert not _is_prime(n), n
