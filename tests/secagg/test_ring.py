"""Ring arithmetic, bit-packing and quantisation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from secagg import HeadroomError, KeystreamRandom, Quantizer, Ring, check_headroom, required_bits

bits_strategy = st.integers(min_value=1, max_value=64)


@st.composite
def ring_vectors(draw: st.DrawFn) -> tuple[Ring, np.ndarray]:
    ring = Ring(draw(bits_strategy))
    size = draw(st.integers(min_value=0, max_value=300))
    values = draw(st.lists(st.integers(0, ring.modulus - 1), min_size=size, max_size=size))
    return ring, np.array(values, dtype=np.uint64).astype(ring.dtype)


@given(ring_vectors())
def test_pack_roundtrip_and_size(case: tuple[Ring, np.ndarray]) -> None:
    ring, vector = case
    data = ring.pack(vector)
    assert len(data) == math.ceil(vector.size * ring.bits / 8)
    back = ring.unpack(data, vector.size)
    assert back.dtype == ring.dtype
    assert np.array_equal(back, vector)


@given(ring_vectors())
def test_pack_matches_bit_by_bit_reference(case: tuple[Ring, np.ndarray]) -> None:
    # Independent reference: value i occupies bits [i·b, (i+1)·b) of one little-endian integer.
    ring, vector = case
    total = 0
    for i, value in enumerate(vector.tolist()):
        total |= int(value) << (i * ring.bits)
    expected = total.to_bytes(math.ceil(vector.size * ring.bits / 8), "little")
    assert ring.pack(vector) == expected


@pytest.mark.parametrize("bits", [3, 7, 12, 31, 33, 63])
def test_unpack_rejects_padding_bits_and_lengths(bits: int) -> None:
    ring = Ring(bits)
    vector = np.arange(5, dtype=ring.dtype)
    data = bytearray(ring.pack(vector))
    if (5 * bits) % 8:
        data[-1] |= 0x80  # a bit past the last entry
        with pytest.raises(ValueError, match="padding"):
            ring.unpack(bytes(data), 5)
    with pytest.raises(ValueError, match="bytes"):
        ring.unpack(ring.pack(vector)[:-1], 5)
    with pytest.raises(ValueError, match="bytes"):
        ring.unpack(ring.pack(vector) + b"\x00", 5)


@given(bits_strategy, st.lists(st.integers(), max_size=50))
def test_reduce_and_centered_roundtrip(bits: int, raw: list[int]) -> None:
    ring = Ring(bits)
    half = ring.modulus >> 1
    values = [(v % ring.modulus) - half for v in raw]  # centred representatives
    residues = ring.reduce(np.array(values, dtype=object))
    assert [int(r) for r in residues] == [v % ring.modulus for v in values]
    assert ring.centered(residues).tolist() == values


def test_reduce_rejects_out_of_range_and_floats() -> None:
    ring = Ring(8)
    with pytest.raises(ValueError, match=r"\[-128, 256\)"):
        ring.reduce([256])
    with pytest.raises(ValueError, match=r"\[-128, 256\)"):
        ring.reduce([-129])
    with pytest.raises(TypeError, match="Quantizer"):
        ring.reduce([0.5])
    with pytest.raises(ValueError, match="1-D"):
        ring.reduce([[1, 2]])


@pytest.mark.parametrize("bits", [0, 65, -1])
def test_ring_bits_out_of_range(bits: int) -> None:
    with pytest.raises(ValueError, match=r"\[1, 64\]"):
        Ring(bits)
    with pytest.raises(TypeError):
        Ring(True)


def test_required_bits_is_tight() -> None:
    for n, q, noise in [(1, 1, 0), (100, 1000, 0), (7, 3, 11), (10**4, 2**20, 5000)]:
        b = required_bits(n, q, noise)
        check_headroom(n, q, b)  # fits
        if noise == 0 and b > 1:
            with pytest.raises(HeadroomError):
                check_headroom(n, q, b - 1)
        assert n * q + noise <= 2 ** (b - 1) - 1 < 2 * (n * q + noise) + 1


def test_headroom_error_names_the_smallest_sufficient_bits() -> None:
    with pytest.raises(HeadroomError, match="use at least 22 bits") as info:
        check_headroom(num_clients=2000, max_abs=1000, bits=16)
    assert info.value.required_bits == 22


def test_quantizer_clips_and_bounds() -> None:
    quantizer = Quantizer(clip=2.0, scale=10.0)
    q = quantizer.quantize(np.array([-100.0, 100.0, 1.95, -1.95]), rng=0)
    assert q[0] == -20 and q[1] == 20
    assert np.abs(q).max() <= quantizer.max_abs


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_quantizer_rejects_non_finite(bad: float) -> None:
    with pytest.raises(ValueError, match=r"non-finite value .* at index 2"):
        Quantizer(clip=1.0, scale=10.0).quantize(np.array([0.0, 1.0, bad]), rng=0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"clip": 0.0, "scale": 1.0}, "positive"),
        ({"clip": 1.0, "scale": -2.0}, "positive"),
        ({"clip": float("nan"), "scale": 1.0}, "finite"),
        ({"clip": 2.0**40, "scale": 2.0**20}, "2\\^52"),
    ],
)
def test_quantizer_parameter_errors(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Quantizer(**kwargs)


def test_stochastic_rounding_is_unbiased() -> None:
    # Each value y = k + f rounds up with probability f. With N = 200 000 draws of f = 0.3 the
    # count of round-ups is Binomial(N, 0.3); a two-sided binomial test at α = 1e-6 fails only on
    # a real bias (a bias of 0.01 would give z ≈ 9.8).
    n = 200_000
    q = Quantizer(clip=10.0, scale=1.0).quantize(np.full(n, 2.3), rng=KeystreamRandom(seed=1))
    assert set(np.unique(q).tolist()) <= {2, 3}
    ups = int((q == 3).sum())
    assert stats.binomtest(ups, n, 0.3).pvalue > 1e-6
    negative = Quantizer(clip=10.0, scale=1.0).quantize(np.full(n, -2.3), rng=7)
    assert set(np.unique(negative).tolist()) <= {-3, -2}
    assert stats.binomtest(int((negative == -2).sum()), n, 0.7).pvalue > 1e-6


@settings(max_examples=30)
@given(
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=40),
    st.integers(2, 40),
)
def test_to_ring_decodes_to_quantize(values: list[float], bits: int) -> None:
    ring = Ring(bits)
    quantizer = Quantizer(clip=5.0, scale=(2 ** (bits - 1) - 1) / 5.0)
    x = np.array(values)
    direct = quantizer.quantize(x, rng=KeystreamRandom(seed=3))
    encoded = quantizer.to_ring(x, ring, rng=KeystreamRandom(seed=3))
    assert ring.centered(encoded).tolist() == direct.tolist()
    assert np.all(np.abs(quantizer.dequantize(direct) - np.clip(x, -5, 5)) <= 1 / quantizer.scale)


def test_for_ring_gives_the_finest_safe_quantizer() -> None:
    quantizer = Quantizer.for_ring(clip=0.5, bits=20, num_clients=50, noise_bound=1000)
    check_headroom(50, quantizer.max_abs, 20, noise_bound=1000)
    finer = Quantizer(clip=0.5, scale=quantizer.scale + 1)
    with pytest.raises(HeadroomError):
        check_headroom(50, finer.max_abs, 20, noise_bound=1000)
    with pytest.raises(HeadroomError, match="at least"):
        Quantizer.for_ring(clip=1.0, bits=8, num_clients=1000)


@pytest.mark.parametrize(
    ("bits", "size"), [(7, 9362), (7, 9370), (13, 5040), (13, 5100), (63, 1100)]
)
def test_both_packers_around_the_size_switch(bits: int, size: int) -> None:
    # Vectors of ≤ 2^16 bits use the bit-matrix packer, longer ones the 64-column packer.
    ring = Ring(bits)
    values = np.random.default_rng(size).integers(0, 2**bits, size=size, dtype=np.uint64)
    vector = values.astype(ring.dtype)
    total = 0
    for i, value in enumerate(values.tolist()):
        total |= int(value) << (i * bits)
    data = ring.pack(vector)
    assert data == total.to_bytes(math.ceil(size * bits / 8), "little")
    assert np.array_equal(ring.unpack(data, size), vector)


def test_python_ints_up_to_2_64_work_at_64_bits() -> None:
    # A Python list holding ints ≥ 2^63 is float64 to numpy; the ring reads it exactly.
    ring = Ring(64)
    assert ring.reduce([2**64 - 1, 3, 2**63]).tolist() == [2**64 - 1, 3, 2**63]
    assert ring.reduce([-5, 2**63]).tolist() == [2**64 - 5, 2**63]
    with pytest.raises(ValueError, match="accepts integers"):
        ring.reduce([2**64, 1])
    with pytest.raises(TypeError, match="integers"):
        ring.reduce([1.5, 2**64])


def test_headroom_error_says_when_no_ring_fits() -> None:
    with pytest.raises(HeadroomError, match="no ring of at most 64 bits") as info:
        check_headroom(num_clients=10**6, max_abs=2**60, bits=64)
    assert info.value.required_bits == 81 and "fewer clients" in str(info.value)
