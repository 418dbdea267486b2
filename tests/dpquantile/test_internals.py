"""The exact integer building blocks: word stream, uniform integers, Bernoulli trials, tables."""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

import dpquantile.samplers as samplers_module
from dpquantile import ExactDiscreteGaussian, ExactDiscreteLaplace, FastDiscreteGaussian
from dpquantile._bernoulli import (
    LargeRatio,
    SmallRatio,
    bernoulli_exp,
    bernoulli_exp_minus_one,
    geometric_exp_minus_one,
)
from dpquantile._fast_sampler import _THRESHOLD_BITS, _alias_table, _block_variance
from dpquantile._words import WordStream, uniform_below
from secagg.randomness import KeystreamRandom

Z_LIMIT = float(stats.norm.isf(1e-7))  # per-check two-sided α = 2e-7 (family of < 5 checks)


class ScriptedSource:
    """A RandomSource that replays given 64-bit words (little-endian), then fails loudly."""

    def __init__(self, words: list[int]) -> None:
        self._bytes = b"".join(w.to_bytes(8, "little") for w in words)
        self._position = 0

    def fill(self, out: NDArray[np.generic] | bytearray | memoryview) -> None:
        view = memoryview(out).cast("B")  # type: ignore[arg-type]
        end = self._position + len(view)
        if end > len(self._bytes):
            raise AssertionError("script exhausted")
        view[:] = self._bytes[self._position : end]
        self._position = end

    def random_bytes(self, n: int) -> bytes:
        buffer = bytearray(n)
        self.fill(buffer)
        return bytes(buffer)


def _stream(words: list[int]) -> WordStream:
    return WordStream(ScriptedSource(words), expected_words=1)


def test_word_stream_is_the_little_endian_reading_of_the_byte_stream() -> None:
    raw = KeystreamRandom(seed=5).random_bytes(8 * 1000)
    expected = np.frombuffer(raw, dtype="<u8").astype(np.uint64)
    words = WordStream(KeystreamRandom(seed=5), expected_words=3)
    pieces = [words.take(n) for n in (1, 2, 100, 0, 397, 500)]
    np.testing.assert_array_equal(np.concatenate(pieces), expected)


def test_uniform_below_rejects_the_incomplete_top_range() -> None:
    top = (1 << 64) - 1  # 2**64 mod 3 == 1, so the single word 2**64 − 1 is rejected
    # Slot 0 draws top (rejected), slot 1 draws 7; slot 0 redraws top, top, then 11.
    draws = uniform_below(_stream([top, 7, top, top, 11]), 3, 2)
    assert draws.tolist() == [11 % 3, 7 % 3]


def test_uniform_below_masks_powers_of_two() -> None:
    assert uniform_below(_stream([0xFFFF_FFFF_FFFF_FFF5]), 16, 1).tolist() == [5]
    assert uniform_below(_stream([123]), 1 << 64, 1).tolist() == [123]
    with pytest.raises(ValueError):
        uniform_below(_stream([]), 0, 1)


def test_uniform_below_is_uniform() -> None:
    draws = uniform_below(WordStream(KeystreamRandom(seed=1)), 7, 70_000)
    counts = np.bincount(draws.astype(np.int64), minlength=7)
    assert stats.chisquare(counts).pvalue > 1e-7


def test_large_ratio_resolves_ties_digit_by_digit() -> None:
    denominator = 3 << 70
    numerator = np.array([1 << 70], dtype=object)  # p = 1/3 = 0.5555...(base 2**64 digits)
    first_digit = (1 << 64) // 3
    index = np.array([0], dtype=np.intp)
    ratio = LargeRatio(numerator, denominator)
    # Tie on the first digit, then a smaller second word: V < p.
    assert ratio.bernoulli(_stream([first_digit, first_digit - 1]), index).tolist() == [True]
    # Tie, then a larger word: V > p.
    assert ratio.bernoulli(_stream([first_digit, first_digit + 1]), index).tolist() == [False]
    # Two ties, then smaller.
    assert ratio.bernoulli(_stream([first_digit] * 3 + [0]), index).tolist() == [True]
    assert ratio.bernoulli(_stream([first_digit - 5]), index).tolist() == [True]


def test_large_ratio_with_a_terminating_expansion() -> None:
    ratio = LargeRatio(np.array([1 << 69], dtype=object), 1 << 70)  # p = 1/2 exactly
    index = np.array([0], dtype=np.intp)
    assert ratio.bernoulli(_stream([1 << 63, 0]), index).tolist() == [False]  # V ≥ 1/2
    assert ratio.bernoulli(_stream([(1 << 63) - 1]), index).tolist() == [True]


@pytest.mark.parametrize(
    "whole, numerator, denominator",
    [(0, 0, 7), (0, 3, 7), (0, 7, 7), (1, 1, 3), (2, 5, 11), (0, 10**30, 3 * 10**30)],
)
def test_bernoulli_exp_has_the_right_frequency(
    whole: int, numerator: int, denominator: int
) -> None:
    n = 100_000
    words = WordStream(KeystreamRandom(seed=whole * 1000 + numerator % 997))
    fraction: SmallRatio | LargeRatio
    if denominator < 1 << 63:
        fraction = SmallRatio(np.full(n, numerator, dtype=np.uint64), denominator)
    else:
        fraction = LargeRatio(np.full(n, numerator, dtype=object), denominator)
    hits = bernoulli_exp(words, np.full(n, whole, dtype=np.int64), fraction)
    p = math.exp(-(whole + numerator / denominator))
    z = (hits.sum() - n * p) / math.sqrt(n * p * (1 - p)) if 0 < p < 1 else 0.0
    assert abs(z) < Z_LIMIT
    if p == 1.0:
        assert hits.all()


def test_exp_minus_one_and_geometric() -> None:
    words = WordStream(KeystreamRandom(seed=3))
    n = 100_000
    p = math.exp(-1)
    hits = bernoulli_exp_minus_one(words, n).sum()
    assert abs((hits - n * p) / math.sqrt(n * p * (1 - p))) < Z_LIMIT
    geometric = geometric_exp_minus_one(words, n)
    # P[V >= v] = e^{-v}: mean e^{-1}/(1 - e^{-1}).
    mean = p / (1 - p)
    sd = math.sqrt(p) / (1 - p)
    assert abs((geometric.mean() - mean) / (sd / math.sqrt(n))) < Z_LIMIT


def test_exact_sampler_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """The int64 fast path and the Python-integer path compute the same acceptance decisions."""
    expected = ExactDiscreteGaussian(7.0).sample(3000, rng=KeystreamRandom(seed=8))
    monkeypatch.setattr(samplers_module, "_SMALL_PRODUCT", 0)
    forced = ExactDiscreteGaussian(7.0).sample(3000, rng=KeystreamRandom(seed=8))
    np.testing.assert_array_equal(expected, forced)


@pytest.mark.parametrize("sigma", [0.3, 2.0, 63.9, 64.0, 1000.0, 1234.567])
def test_alias_tables_realise_their_weights_exactly(sigma: float) -> None:
    sampler = FastDiscreteGaussian(sigma)
    table = sampler._direct if sampler._direct is not None else sampler._block.table  # type: ignore[union-attr]
    assert table is not None
    columns = 1 << table.index_bits
    column_mass = 1 << _THRESHOLD_BITS
    realised = [0] * columns
    for j in range(columns):
        tau = table.thresholds[j]
        alias = int(table.alias[j])
        if alias == j:
            realised[j] += column_mass
        else:
            realised[j] += tau
            realised[alias] += column_mass - tau
    assert realised == list(table.weights)
    assert sum(table.weights) == columns * column_mass
    assert all((tau >> (_THRESHOLD_BITS - 32)) == int(top)
               for tau, top in zip(table.thresholds, table.threshold_top, strict=True))


def test_alias_tie_reads_the_remaining_bits() -> None:
    sampler = FastDiscreteGaussian(2.0)
    table = sampler._direct
    assert table is not None
    column = next(j for j in range(1 << table.index_bits) if int(table.alias[j]) != j
                  and table.thresholds[j] > 0)
    tau = table.thresholds[column]
    top = np.array([tau >> (_THRESHOLD_BITS - 32)], dtype=np.uint32)
    rest = tau & ((1 << (_THRESHOLD_BITS - 32)) - 1)
    for below in (True, False):
        bits = rest - 1 if below else rest  # U = τ - 1 keeps the column; U = τ takes the alias
        script = [(bits << 32 >> 128) & (2**64 - 1), (bits << 32 >> 64) & (2**64 - 1),
                  (bits << 32) & (2**64 - 1)]
        chosen = table.resolve(_stream(script), np.array([column], dtype=np.intp), top)
        assert int(chosen[0]) == (column if below else int(table.alias[column]))


def test_block_variance_rounds_up_within_two_to_the_minus_52() -> None:
    for value in (Fraction(64) ** 2, Fraction(1234.567) ** 2, Fraction(2**25) ** 2,
                  Fraction(99999.123) ** 2):
        a, b = _block_variance(value)
        assert 2 * a < 2**56
        assert value <= Fraction(a, b) <= value * (1 + Fraction(1, 2**52))


@pytest.mark.parametrize(
    "inv_two_var, symmetric",
    [(1 / (2 * Fraction(0.7) ** 2), True), (1 / (2 * Fraction(3.7) ** 2), True),
     (1 / (2 * Fraction(63.9) ** 2), True), (Fraction(1, 2 * 48**2), False),
     (Fraction(2**22) / (2 * Fraction(1234.567) ** 2), False)],
)
def test_table_weights_are_within_one_unit_of_the_exact_law(
    inv_two_var: Fraction, symmetric: bool
) -> None:
    """Recompute p_S·T at 120 digits: every stored weight is within 1 of it (proof note §2)."""
    table, cutoff = _alias_table(inv_two_var, symmetric)
    xs = range(-cutoff, cutoff + 1) if symmetric else range(cutoff + 1)
    context = decimal.Context(prec=120)
    values = [context.exp(context.minus(context.divide(
        context.multiply(decimal.Decimal(inv_two_var.numerator), decimal.Decimal(x * x)),
        decimal.Decimal(inv_two_var.denominator)))) for x in xs]
    mass = decimal.Decimal(0)
    for value in values:
        mass = context.add(mass, value)
    total = decimal.Decimal((1 << table.index_bits) << _THRESHOLD_BITS)
    for weight, value in zip(table.weights, values, strict=False):
        exact = context.divide(context.multiply(value, total), mass)
        assert abs(context.subtract(decimal.Decimal(weight), exact)) < 1


@pytest.mark.parametrize("tiny", [1e-200, 5e-324, Fraction(1, 10**400)])
def test_tiny_scales_give_zeros_and_terminate(tiny: float | Fraction) -> None:
    stream = KeystreamRandom(seed=1)
    if isinstance(tiny, Fraction):
        samplers = [ExactDiscreteGaussian.from_variance(tiny), FastDiscreteGaussian(tiny),
                    ExactDiscreteLaplace(tiny)]
    else:
        samplers = [ExactDiscreteGaussian(tiny), FastDiscreteGaussian(tiny),
                    ExactDiscreteLaplace(tiny)]
    for sampler in samplers:
        assert not sampler.sample(200, rng=stream).any()
        assert sampler.tv_bound < 1e-57
