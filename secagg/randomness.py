"""Cryptographic random byte streams: the only source of key material, masks and DP noise.

A :class:`KeystreamRandom` is the AES-256-CTR keystream under a key derived by HKDF-SHA256 from a
32-byte seed. With ``seed=None`` the seed comes from the operating system (``os.urandom``), so the
stream is a standard CTR-DRBG-style generator; with an explicit seed it is deterministic, as tests
and reproducible simulations use. ``spawn(label)`` derives an independent, domain-separated child
stream, so every party of a simulation gets its own stream from one recorded root seed.

numpy's ``Generator`` is deliberately not used here: its output is not guaranteed stable across
numpy versions, and two parties must be able to expand identical streams.
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from numpy.typing import NDArray

__all__ = ["KeystreamRandom", "RandomSource"]

_DOMAIN = b"secagg-dp/v1/keystream-random"
# Zero plaintext the keystream is produced from; slices of it are never copied.
_ZERO_CHUNK = bytes(1 << 18)


@runtime_checkable
class RandomSource(Protocol):
    """A cryptographically strong stream of random bytes.

    Implementations fill caller-provided buffers so hot loops allocate nothing.
    """

    def fill(self, out: NDArray[np.generic] | bytearray | memoryview) -> None:
        """Overwrite every byte of the writable, C-contiguous buffer ``out`` with random bytes."""
        ...

    def random_bytes(self, n: int) -> bytes:
        """Return ``n`` random bytes."""
        ...


class KeystreamRandom:
    """AES-256-CTR keystream keyed by HKDF-SHA256 of a seed.

    Parameters
    ----------
    seed
        32 (or more) bytes of seed material, or an ``int`` (encoded as 32 bytes big-endian, for
        reproducible simulations), or ``None`` to draw the seed from ``os.urandom``.
    label
        Domain-separation label mixed into the key derivation.

    Examples
    --------
    >>> a = KeystreamRandom(seed=7, label=b"demo")
    >>> b = KeystreamRandom(seed=7, label=b"demo")
    >>> a.random_bytes(8) == b.random_bytes(8)
    True
    >>> KeystreamRandom(seed=7, label=b"other").random_bytes(8) == KeystreamRandom(
    ...     seed=7, label=b"demo").random_bytes(8)
    False
    """

    __slots__ = ("_encryptor", "_key", "_seeded")

    def __init__(self, seed: bytes | int | None = None, *, label: bytes = b"") -> None:
        if seed is None:
            seed_bytes = os.urandom(32)
            self._seeded = False
        elif isinstance(seed, bool):
            raise TypeError("seed must be bytes, a non-negative int, or None; got bool")
        elif isinstance(seed, int):
            if not 0 <= seed < 1 << 256:
                raise ValueError(f"an int seed must lie in [0, 2**256); got {seed}")
            seed_bytes = seed.to_bytes(32, "big")
            self._seeded = True
        elif isinstance(seed, bytes | bytearray | memoryview):
            seed_bytes = bytes(seed)
            if len(seed_bytes) < 16:
                raise ValueError(f"a bytes seed needs at least 16 bytes; got {len(seed_bytes)}")
            self._seeded = True
        else:
            raise TypeError(f"seed must be bytes, int or None; got {type(seed).__name__}")
        if not isinstance(label, bytes):
            raise TypeError(f"label must be bytes; got {type(label).__name__}")
        self._key = HKDF(algorithm=hashes.SHA256(), length=32, salt=_DOMAIN, info=label).derive(
            seed_bytes
        )
        self._encryptor = Cipher(algorithms.AES(self._key), modes.CTR(bytes(16))).encryptor()

    @property
    def deterministic(self) -> bool:
        """Whether the stream was seeded explicitly (and is therefore reproducible)."""
        return self._seeded

    def spawn(self, label: bytes) -> KeystreamRandom:
        """Derive an independent child stream, domain-separated by ``label``.

        The child depends only on this stream's key and ``label``, not on how much of this stream
        has been consumed.

        Examples
        --------
        >>> root = KeystreamRandom(seed=1)
        >>> root.spawn(b"client-1").random_bytes(4) == root.spawn(b"client-1").random_bytes(4)
        True
        """
        child = KeystreamRandom(self._key, label=b"spawn/" + label)
        child._seeded = self._seeded
        return child

    def derive_seed(self, label: bytes, size: int = 16) -> int:
        """The integer seed of a child computation: ``size`` bytes of :meth:`spawn` ``(label)``.

        Every derived seed in the project (a secure sum's inside an average, each call of an
        iterative aggregate) is made here, so equal labels give equal seeds.

        Examples
        --------
        >>> root = KeystreamRandom(seed=1)
        >>> root.derive_seed(b"secure-sum") == root.derive_seed(b"secure-sum")
        True
        >>> root.derive_seed(b"x", size=8) < 2**64
        True
        """
        return int.from_bytes(self.spawn(label).random_bytes(size), "big")

    def fill(self, out: NDArray[np.generic] | bytearray | memoryview) -> None:
        """Overwrite the writable, C-contiguous buffer ``out`` with keystream bytes.

        Examples
        --------
        >>> buf = np.zeros(4, dtype=np.uint64)
        >>> KeystreamRandom(seed=3).fill(buf)
        >>> bool(buf.any())
        True
        """
        view = memoryview(out).cast("B")  # type: ignore[arg-type]
        total = len(view)
        chunk = len(_ZERO_CHUNK)
        for start in range(0, total, chunk):
            stop = min(total, start + chunk)
            self._encryptor.update_into(memoryview(_ZERO_CHUNK)[: stop - start], view[start:stop])

    def random_bytes(self, n: int) -> bytes:
        """Return ``n`` keystream bytes.

        Examples
        --------
        >>> len(KeystreamRandom(seed=5).random_bytes(32))
        32
        """
        if n < 0:
            raise ValueError(f"n must be non-negative; got {n}")
        buf = bytearray(n)
        self.fill(buf)
        return bytes(buf)

    def uint64(self, n: int) -> NDArray[np.uint64]:
        """Return ``n`` independent uniform 64-bit words (little-endian interpretation).

        Examples
        --------
        >>> KeystreamRandom(seed=5).uint64(3).dtype
        dtype('uint64')
        """
        if n < 0:
            raise ValueError(f"n must be non-negative; got {n}")
        out = np.empty(n, dtype="<u8")
        self.fill(out)
        return out.astype(np.uint64, copy=False)
