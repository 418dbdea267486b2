"""The ring Z_M with M = 2^b, bit-packing of ring vectors, and float quantisation into the ring.

Ring elements are stored as ``uint32`` when b ≤ 32 (the fast path) and ``uint64`` otherwise;
arithmetic wraps modulo 2^32 or 2^64 natively and a final ``& (M − 1)`` reduces modulo M.

Quantisation maps a float vector to integers by clipping to ``[-clip, clip]``, scaling by ``scale``
and unbiased stochastic rounding (``floor(y + u)``, u uniform on a 2^-32 grid, so
E[q] = y up to 2^-32 grid units). A sum of n quantised vectors is decoded from its centred
representative in [-M/2, M/2); :func:`check_headroom` refuses parameters under which that sum
could wrap, and names the smallest sufficient b.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from secagg.randomness import KeystreamRandom, RandomSource

__all__ = [
    "HeadroomError",
    "Quantizer",
    "Ring",
    "check_headroom",
    "required_bits",
]

RingArray = NDArray[np.uint32] | NDArray[np.uint64]

# Largest |x·scale| for which float64 still resolves the 2^-32 rounding grid well enough.
_MAX_SCALED = float(2**52)
_ROUNDING_CHUNK = 1 << 15  # elements per chunk: the float scratch stays in L2
_SMALL_PACK_BITS = 1 << 16  # vectors of at most this many bits use the bit-matrix packer


class HeadroomError(ValueError):
    """The configured modulus is too small: a sum could wrap modulo M.

    ``required_bits`` holds the smallest sufficient number of bits.
    """

    def __init__(self, message: str, *, required_bits: int) -> None:
        super().__init__(message)
        self.required_bits = required_bits


def _check_bits(bits: object) -> int:
    if isinstance(bits, bool) or not isinstance(bits, int | np.integer):
        raise TypeError(f"modulus bits must be an int in [1, 64]; got {type(bits).__name__}")
    if not 1 <= int(bits) <= 64:
        raise ValueError(f"modulus bits must lie in [1, 64]; got {bits}")
    return int(bits)


@dataclass(frozen=True, slots=True)
class Ring:
    """The ring Z_M with M = 2^bits.

    Parameters
    ----------
    bits
        ⌈log₂ M⌉, between 1 and 64.

    Examples
    --------
    >>> ring = Ring(8)
    >>> ring.modulus, ring.dtype
    (256, dtype('uint32'))
    >>> ring.reduce([-1, 255, 3]).tolist()
    [255, 255, 3]
    >>> ring.centered(ring.reduce([-1, 127, -128])).tolist()
    [-1, 127, -128]
    """

    bits: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "bits", _check_bits(self.bits))

    @property
    def modulus(self) -> int:
        """M = 2^bits."""
        return 1 << self.bits

    @property
    def dtype(self) -> np.dtype[np.uint32] | np.dtype[np.uint64]:
        """Storage dtype: ``uint32`` for bits ≤ 32, else ``uint64``."""
        return np.dtype(np.uint32) if self.bits <= 32 else np.dtype(np.uint64)

    @property
    def word_mask(self) -> int:
        """M − 1, the mask that reduces a stored word modulo M."""
        return self.modulus - 1

    @property
    def full_word(self) -> bool:
        """Whether M equals the storage word's range (no masking needed after wrapping)."""
        return self.bits in (32, 64)

    def zeros(self, dimension: int) -> RingArray:
        """A zero vector of the ring.

        Examples
        --------
        >>> Ring(12).zeros(3).tolist()
        [0, 0, 0]
        """
        return np.zeros(_check_dimension(dimension), dtype=self.dtype)

    def normalize(self, out: RingArray) -> RingArray:
        """Reduce a wrapped accumulator modulo M in place and return it.

        Examples
        --------
        >>> ring = Ring(4)
        >>> acc = np.array([17, 31], dtype=np.uint32)
        >>> ring.normalize(acc).tolist()
        [1, 15]
        """
        if not self.full_word:
            np.bitwise_and(out, out.dtype.type(self.word_mask), out=out)
        return out

    def check(self, values: ArrayLike) -> NDArray[np.integer]:
        """Validate a vector of ring inputs without copying it: integers in [-M/2, M), 1-D.

        Raises
        ------
        TypeError
            If ``values`` is not an integer array (quantise floats with :class:`Quantizer`).
        ValueError
            If a value lies outside [-M/2, M) or the array is not 1-D.

        Examples
        --------
        >>> Ring(3).check([1.5])
        Traceback (most recent call last):
        ...
        TypeError: ring elements must be integers, got dtype float64; quantise floats with \
secagg.Quantizer first
        """
        try:
            arr = np.asarray(values)
        except OverflowError:  # a list with an int beyond 64 bits
            arr = np.asarray(values, dtype=object)
        if arr.dtype.kind not in "iu":
            if arr.size == 0:
                arr = np.asarray(values, dtype=np.int64)
            elif arr.dtype == object or (
                arr.dtype.kind == "f" and not isinstance(values, np.ndarray)
            ):
                # A Python list with ints ≥ 2^63 (valid at b = 64) becomes float64 in numpy:
                # read the list again exactly, as Python ints.
                arr = _exact_integers(values)
            else:
                raise TypeError(
                    f"ring elements must be integers, got dtype {arr.dtype}; "
                    "quantise floats with secagg.Quantizer first"
                )
        if arr.ndim != 1:
            raise ValueError(f"expected a 1-D vector, got shape {arr.shape}")
        if arr.size and not self._holds_every_value_of(arr.dtype):
            low, high = int(arr.min()), int(arr.max())
            if low < -(self.modulus >> 1) or high >= self.modulus:
                raise ValueError(
                    f"ring Z_2^{self.bits} accepts integers in [{-(self.modulus >> 1)}, "
                    f"{self.modulus}); got values in [{low}, {high}]"
                )
            if arr.dtype == object:  # in range: as residues modulo 2^64 (two's complement)
                arr = np.array([int(v) % (1 << 64) for v in arr], dtype=np.uint64)
        return arr

    def _holds_every_value_of(self, dtype: np.dtype[Any]) -> bool:
        """Whether every value of an integer dtype lies in [-M/2, M): no range check needed."""
        if dtype.kind not in "iu":
            return False
        info = np.iinfo(dtype)
        return int(info.min) >= -(self.modulus >> 1) and int(info.max) < self.modulus

    def reduce(self, values: ArrayLike) -> RingArray:
        """Map integers in [-M/2, M) to their residues in [0, M).

        Parameters
        ----------
        values
            A 1-D integer array (signed values are read as centred representatives).

        Raises
        ------
        TypeError, ValueError
            As :meth:`check`.

        Examples
        --------
        >>> Ring(3).reduce(np.array([-4, 7, 0])).tolist()
        [4, 7, 0]
        """
        arr = self.check(values)
        # A cast to the unsigned storage word wraps two's complement (the residue modulo 2^32
        # or 2^64); masking to b bits then gives the residue modulo 2^b. One copy, one pass.
        out = arr.astype(self.dtype, copy=True)
        if not self.full_word:
            np.bitwise_and(out, out.dtype.type(self.word_mask), out=out)
        return cast(RingArray, out)

    def centered(self, values: RingArray) -> NDArray[np.int64]:
        """Centred representatives in [-M/2, M/2) of ring elements, as ``int64``.

        Examples
        --------
        >>> Ring(64).centered(np.array([2**64 - 5], dtype=np.uint64)).tolist()
        [-5]
        """
        # Sign-extend from bit b − 1: shift the residue to the top of a 64-bit word, reinterpret
        # as signed, and shift back arithmetically.
        shift = np.uint64(64 - self.bits)
        wide = np.left_shift(np.asarray(values).astype(np.uint64), shift).view(np.int64)
        return np.right_shift(wide, np.int64(64 - self.bits))

    def packed_size(self, dimension: int) -> int:
        """Bytes of a bit-packed vector: ⌈dimension · bits / 8⌉.

        Examples
        --------
        >>> Ring(20).packed_size(10)
        25
        """
        return -(-_check_dimension(dimension) * self.bits // 8)

    def pack(self, values: RingArray) -> bytes:
        """Bit-pack ring elements little-endian, ``bits`` bits per entry, no padding between.

        Examples
        --------
        >>> Ring(4).pack(np.array([1, 2, 15], dtype=np.uint32)).hex()
        '210f'
        """
        arr = np.asarray(values)
        if arr.ndim != 1:
            raise ValueError(f"expected a 1-D vector, got shape {arr.shape}")
        b = self.bits
        if b in (8, 16, 32, 64):
            return arr.astype(f"<u{b // 8}", copy=False).tobytes()
        if arr.size * b <= _SMALL_PACK_BITS:
            # Short vectors: one bit matrix, a few numpy calls instead of 64 column passes.
            shifts = np.arange(b, dtype=np.uint64)
            bits = (arr.astype(np.uint64)[:, None] >> shifts) & np.uint64(1)
            return np.packbits(bits.astype(np.uint8).reshape(-1), bitorder="little").tobytes()
        groups = -(-arr.size // 64)
        slots = np.zeros(groups * 64, dtype=np.uint64)
        slots[: arr.size] = arr
        columns = slots.reshape(groups, 64)
        words = np.zeros((groups, b), dtype=np.uint64)
        # 64 values of b bits fill exactly b 64-bit words; value j starts at bit j·b.
        for j in range(64):
            word, offset = divmod(j * b, 64)
            column = columns[:, j]
            words[:, word] |= column << np.uint64(offset)
            if offset + b > 64:
                words[:, word + 1] |= column >> np.uint64(64 - offset)
        return words.astype("<u8", copy=False).tobytes()[: self.packed_size(arr.size)]

    def pack_buffer(self, values: RingArray) -> bytes | memoryview:
        """:meth:`pack` without a copy where the layout already is the wire's (b = 8, 16, 32,
        64 on a little-endian machine): a read-only view to join into a message.

        Examples
        --------
        >>> bytes(Ring(32).pack_buffer(np.array([1, 2], dtype=np.uint32))).hex()
        '0100000002000000'
        """
        arr = np.asarray(values)
        b = self.bits
        if b in (8, 16, 32, 64) and arr.ndim == 1 and arr.flags.c_contiguous:
            wire = np.dtype(f"<u{b // 8}")
            if arr.dtype == wire:
                return memoryview(arr).cast("B")  # type: ignore[arg-type]
        return self.pack(cast(RingArray, arr))

    def unpack(self, data: bytes | bytearray | memoryview, dimension: int) -> RingArray:
        """Inverse of :meth:`pack`; rejects wrong lengths and non-zero padding bits.

        Raises
        ------
        ValueError
            If the length is not ⌈dimension · bits / 8⌉ or padding bits are set (the encoding
            is canonical: one vector, one byte string).

        Examples
        --------
        >>> ring = Ring(4)
        >>> ring.unpack(ring.pack(np.array([1, 2, 15], dtype=np.uint32)), 3).tolist()
        [1, 2, 15]
        """
        dimension = _check_dimension(dimension)
        expected = self.packed_size(dimension)
        if len(data) != expected:
            raise ValueError(
                f"a packed vector of {dimension} entries of {self.bits} bits has {expected} "
                f"bytes; got {len(data)}"
            )
        b = self.bits
        if b in (8, 16, 32, 64):
            # A read-only view of the received bytes where the dtypes agree (no copy).
            raw = np.frombuffer(data, dtype=f"<u{b // 8}")
            return cast(RingArray, raw.astype(self.dtype, copy=False))
        if dimension * b <= _SMALL_PACK_BITS:
            raw_bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")
            if raw_bits[dimension * b :].any():
                raise ValueError("non-zero padding bits after the last entry")
            matrix = raw_bits[: dimension * b].reshape(dimension, b).astype(np.uint64)
            values = (matrix << np.arange(b, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)
            return cast(RingArray, values.astype(self.dtype))
        groups = -(-dimension // 64)
        raw = np.zeros(groups * b * 8, dtype=np.uint8)
        raw[:expected] = np.frombuffer(data, dtype=np.uint8)
        words = raw.view("<u8").astype(np.uint64, copy=False).reshape(groups, b)
        columns = np.empty((groups, 64), dtype=np.uint64)
        value_mask = np.uint64(self.word_mask)
        for j in range(64):
            word, offset = divmod(j * b, 64)
            column = words[:, word] >> np.uint64(offset)
            if offset + b > 64:
                column |= words[:, word + 1] << np.uint64(64 - offset)
            np.bitwise_and(column, value_mask, out=columns[:, j])
        flat = columns.reshape(-1)
        if flat[dimension:].any():
            raise ValueError("non-zero padding bits after the last entry")
        return cast(RingArray, flat[:dimension].astype(self.dtype))


def _exact_integers(values: ArrayLike) -> NDArray[np.integer]:
    """A list of Python ints as uint64 (all ≥ 0) or int64; floats are refused."""
    items = list(np.asarray(values, dtype=object).reshape(-1))
    if not all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in items):
        raise TypeError(
            "ring elements must be integers, got dtype float64; quantise floats with "
            "secagg.Quantizer first"
        )
    if items and min(int(v) for v in items) >= 0 and max(int(v) for v in items) < 1 << 64:
        return np.array([int(v) for v in items], dtype=np.uint64)
    return np.array([int(v) for v in items], dtype=object)


def _check_dimension(dimension: object) -> int:
    if isinstance(dimension, bool) or not isinstance(dimension, int | np.integer):
        raise TypeError(f"dimension must be an int; got {type(dimension).__name__}")
    if dimension < 0:
        raise ValueError(f"dimension must be non-negative; got {dimension}")
    return int(dimension)


def required_bits(num_clients: int, max_abs: int, noise_bound: int = 0) -> int:
    """Smallest b such that a sum of ``num_clients`` values of magnitude ≤ ``max_abs`` plus a
    noise term of magnitude ≤ ``noise_bound`` has its centred representative in [-M/2, M/2).

    Examples
    --------
    >>> required_bits(num_clients=100, max_abs=1000)
    18
    """
    if num_clients < 1 or max_abs < 0 or noise_bound < 0:
        raise ValueError(
            "num_clients must be ≥ 1 and max_abs, noise_bound ≥ 0; "
            f"got {num_clients}, {max_abs}, {noise_bound}"
        )
    magnitude = num_clients * max_abs + noise_bound
    # Need magnitude ≤ 2^(b−1) − 1.
    return max(1, (magnitude).bit_length() + 1)


def check_headroom(num_clients: int, max_abs: int, bits: int, noise_bound: int = 0) -> None:
    """Raise :class:`HeadroomError` if the sum could wrap modulo 2^bits.

    Examples
    --------
    >>> check_headroom(num_clients=10, max_abs=100, bits=16)
    >>> check_headroom(num_clients=1000, max_abs=100, bits=16)
    Traceback (most recent call last):
    ...
    secagg.ring.HeadroomError: 1000 clients × |q| ≤ 100 (+ noise bound 0) can reach 100000, \
which wraps modulo 2^16 (centred range ±32767); use at least 18 bits
    """
    bits = _check_bits(bits)
    needed = required_bits(num_clients, max_abs, noise_bound)
    if needed > bits:
        remedy = (
            f"use at least {needed} bits"
            if needed <= 64
            else f"no ring of at most 64 bits holds it (it needs {needed}): use fewer clients "
            "per sum, a smaller clip, or a coarser quantisation scale"
        )
        raise HeadroomError(
            f"{num_clients} clients × |q| ≤ {max_abs} (+ noise bound {noise_bound}) can reach "
            f"{num_clients * max_abs + noise_bound}, which wraps modulo 2^{bits} "
            f"(centred range ±{(1 << (bits - 1)) - 1}); {remedy}",
            required_bits=needed,
        )


def _as_random_source(rng: RandomSource | int | None) -> RandomSource:
    if rng is None or isinstance(rng, int):
        return KeystreamRandom(rng, label=b"secagg/quantize")
    if isinstance(rng, KeystreamRandom | RandomSource):  # the concrete class first: fast
        return rng
    raise TypeError(
        f"rng must be a secagg RandomSource, an int seed or None; got {type(rng).__name__}"
    )


@dataclass(frozen=True, slots=True)
class Quantizer:
    """Clip, scale and stochastically round floats to integers, and decode sums back.

    A value x becomes q = floor(clip(x)·scale + u) with u uniform on [0, 1) (2^-32 grid):
    E[q] = clip(x)·scale, |q| ≤ ⌈clip·scale⌉.

    Parameters
    ----------
    clip
        Values are clipped to [-clip, clip] (per coordinate) before scaling.
    scale
        Grid points per unit: the quantisation step is 1/scale.

    Examples
    --------
    >>> quantizer = Quantizer(clip=1.0, scale=100.0)
    >>> q = quantizer.quantize(np.array([0.5, -2.0, 0.123]), rng=1)
    >>> q[:2].tolist(), int(q[2]) in (12, 13)
    ([50, -100], True)
    >>> quantizer.dequantize(np.array([50, -100])).tolist()
    [0.5, -1.0]
    """

    clip: float
    scale: float

    def __post_init__(self) -> None:
        for name in ("clip", "scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
                raise TypeError(f"{name} must be a positive float; got {type(value).__name__}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive finite float; got {value}")
            object.__setattr__(self, name, float(value))
        if self.clip * self.scale > _MAX_SCALED:
            raise ValueError(
                f"clip·scale = {self.clip * self.scale:.3g} exceeds 2^52: float64 cannot "
                "represent the rounding grid; lower scale or clip"
            )

    @property
    def max_abs(self) -> int:
        """The largest possible |q|: ⌈clip · scale⌉."""
        return math.ceil(self.clip * self.scale)

    @classmethod
    def for_ring(
        cls, *, clip: float, bits: int, num_clients: int, noise_bound: int = 0
    ) -> Quantizer:
        """The finest quantiser whose sum over ``num_clients`` (plus noise) cannot wrap.

        Examples
        --------
        >>> q = Quantizer.for_ring(clip=1.0, bits=32, num_clients=100)
        >>> check_headroom(100, q.max_abs, 32)  # fits by construction
        >>> q.scale
        21474836.0
        """
        bits = _check_bits(bits)
        if num_clients < 1 or noise_bound < 0:
            raise ValueError("num_clients must be ≥ 1 and noise_bound ≥ 0")
        budget = (1 << (bits - 1)) - 1 - noise_bound
        max_abs = budget // num_clients
        if max_abs < 1:
            need = required_bits(num_clients, 1, noise_bound)
            raise HeadroomError(
                f"{bits} bits leave no room for {num_clients} clients (noise bound "
                f"{noise_bound}); use at least {need} bits",
                required_bits=need,
            )
        max_abs = min(max_abs, int(_MAX_SCALED))
        # ⌈clip·scale⌉ ≤ max_abs  ⇐  clip·scale ≤ max_abs (floor of the scale keeps it exact).
        scale = math.floor(max_abs / clip) if max_abs / clip >= 1 else max_abs / clip
        return cls(clip=clip, scale=float(scale))

    def _round_into(
        self,
        values: ArrayLike,
        out: NDArray[np.int32] | NDArray[np.int64],
        rng: RandomSource | int | None,
    ) -> None:
        """Write floor(clip(x)·scale + u) into ``out``, chunk by chunk.

        Each chunk's scratch stays in cache, so the vector is read once and written once.
        """
        x = np.asarray(values, dtype=np.float64)
        if x.ndim != 1:
            raise ValueError(f"expected a 1-D float vector, got shape {x.shape}")
        if not math.isfinite(float(np.sum(x))) and not np.isfinite(x).all():
            bad = int(np.flatnonzero(~np.isfinite(x))[0])
            raise ValueError(f"non-finite value {x[bad]} at index {bad}")
        source = _as_random_source(rng)
        limit = self.clip * self.scale
        chunk = min(_ROUNDING_CHUNK, max(1, x.size))
        scaled = np.empty(chunk, dtype=np.float64)
        uniform = np.empty(chunk, dtype=np.float64)
        words = np.empty(chunk, dtype="<u4")
        for start in range(0, x.size, chunk):
            n = min(chunk, x.size - start)
            y, u, r = scaled[:n], uniform[:n], words[:n]
            np.multiply(x[start : start + n], self.scale, out=y)
            np.clip(y, -limit, limit, out=y)
            source.fill(r)
            # floor(y + u) with u = r / 2^32: P[round up] = frac(y) on the 2^-32 grid.
            np.multiply(r, 2.0**-32, out=u)
            np.add(y, u, out=y)
            np.floor(y, out=y)
            np.copyto(out[start : start + n], y, casting="unsafe")

    def quantize(
        self, values: ArrayLike, *, rng: RandomSource | int | None = None
    ) -> NDArray[np.int64]:
        """Clip, scale and stochastically round a float vector to ``int64``.

        Parameters
        ----------
        values
            A 1-D float vector without NaN or infinity.
        rng
            Randomness for the rounding: a :class:`~secagg.RandomSource`, an int seed, or
            ``None`` for fresh cryptographic randomness.

        Raises
        ------
        ValueError
            On NaN or infinite entries (naming the first index) or a non 1-D input.
        """
        size = np.shape(values)[0] if np.ndim(values) == 1 else -1
        out = np.empty(max(size, 0), dtype=np.int64)
        self._round_into(values, out, rng)
        return out

    def to_ring(
        self, values: ArrayLike, ring: Ring, *, rng: RandomSource | int | None = None
    ) -> RingArray:
        """Quantise straight into ring elements (q mod M), fused for speed.

        Raises
        ------
        HeadroomError
            If a single quantised value cannot be represented centred in the ring.

        Examples
        --------
        >>> ring = Ring(16)
        >>> r = Quantizer(clip=1.0, scale=10.0).to_ring(np.array([-1.0, 1.0]), ring, rng=0)
        >>> ring.centered(r).tolist()
        [-10, 10]
        """
        check_headroom(1, self.max_abs, ring.bits)
        size = np.shape(values)[0] if np.ndim(values) == 1 else -1
        if ring.bits <= 32:
            signed32 = np.empty(max(size, 0), dtype=np.int32)
            self._round_into(values, signed32, rng)
            out: RingArray = signed32.view(np.uint32)
        else:
            signed64 = np.empty(max(size, 0), dtype=np.int64)
            self._round_into(values, signed64, rng)
            out = signed64.view(np.uint64)
        return ring.normalize(out)

    def dequantize(self, total: ArrayLike) -> NDArray[np.float64]:
        """Map an integer (centred) sum back to float units: total / scale.

        Examples
        --------
        >>> Quantizer(clip=2.0, scale=4.0).dequantize(np.array([8, -2])).tolist()
        [2.0, -0.5]
        """
        return np.asarray(total, dtype=np.float64) / self.scale
