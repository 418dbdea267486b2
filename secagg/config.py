"""The public parameters of one secure-sum round, agreed by server and clients."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from secagg.ring import Ring

__all__ = ["SecAggConfig"]

_CONFIG_VERSION = 1
_DIGEST_DOMAIN = b"secagg-dp/v1/config"
_HEADER = struct.Struct("<BQBII")


def _check_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int; got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name} must lie in [{low}, {high}]; got {value}")
    return value


@dataclass(frozen=True, slots=True)
class SecAggConfig:
    """Parameters of a secure-sum round; every party must hold the same ones.

    The config is bound into every message: phase-0 messages carry its digest, later ones the
    session id, which hashes the digest together with all advertised keys.

    Parameters
    ----------
    dimension
        Length d of every input vector.
    threshold
        t: Shamir threshold. A client's secrets are recoverable from any t of its neighbours,
        and the round needs every surviving client to keep ≥ t surviving neighbours.
    modulus_bits
        b, with M = 2^b, between 1 and 64.
    neighbors
        ``None`` for the complete graph (SecAgg); an even degree k for SecAgg+.
    round_nonce
        Bytes unique to this round (up to 64), so phase-0 messages cannot be replayed across
        rounds. The in-memory runner sets a fresh one.
    vector_name
        Name of the summed vector (up to 64 bytes), mixed into every mask key.

    Examples
    --------
    >>> cfg = SecAggConfig(dimension=1000, threshold=3, neighbors=4)
    >>> cfg.ring.modulus == 2**32
    True
    >>> SecAggConfig.from_bytes(cfg.to_bytes()) == cfg
    True
    >>> SecAggConfig(dimension=10, threshold=5, neighbors=4)
    Traceback (most recent call last):
    ...
    ValueError: threshold t=5 exceeds the number of neighbours k=4: need 1 ≤ t ≤ k
    """

    dimension: int
    threshold: int
    modulus_bits: int = 32
    neighbors: int | None = None
    round_nonce: bytes = b""
    vector_name: bytes = b""

    def __post_init__(self) -> None:
        _check_int("dimension", self.dimension, 1, 2**40)
        _check_int("threshold", self.threshold, 1, 2**31 - 2)
        _check_int("modulus_bits", self.modulus_bits, 1, 64)
        if self.neighbors is not None:
            _check_int("neighbors", self.neighbors, 2, 2**31 - 2)
            if self.neighbors % 2:
                raise ValueError(
                    f"neighbors (the SecAgg+ Harary degree k) must be even; got "
                    f"{self.neighbors}: use {self.neighbors + 1} or {self.neighbors - 1}"
                )
            if self.threshold > self.neighbors:
                raise ValueError(
                    f"threshold t={self.threshold} exceeds the number of neighbours "
                    f"k={self.neighbors}: need 1 ≤ t ≤ k"
                )
        for name in ("round_nonce", "vector_name"):
            value = getattr(self, name)
            if not isinstance(value, bytes):
                raise TypeError(f"{name} must be bytes; got {type(value).__name__}")
            if len(value) > 64:
                raise ValueError(f"{name} holds at most 64 bytes; got {len(value)}")

    @property
    def ring(self) -> Ring:
        """The ring Z_M of this round."""
        return Ring(self.modulus_bits)

    def to_bytes(self) -> bytes:
        """Canonical encoding (also what the digest hashes)."""
        return (
            _HEADER.pack(
                _CONFIG_VERSION,
                self.dimension,
                self.modulus_bits,
                self.threshold,
                0 if self.neighbors is None else self.neighbors,
            )
            + bytes([len(self.round_nonce)])
            + self.round_nonce
            + bytes([len(self.vector_name)])
            + self.vector_name
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> SecAggConfig:
        """Decode :meth:`to_bytes` output.

        Raises
        ------
        ValueError
            On any malformed or non-canonical encoding.
        """
        data = bytes(data)
        if len(data) < _HEADER.size + 2:
            raise ValueError("truncated config")
        version, dimension, bits, threshold, neighbors = _HEADER.unpack_from(data)
        if version != _CONFIG_VERSION:
            raise ValueError(f"unsupported config version {version}")
        offset = _HEADER.size
        nonce_len = data[offset]
        nonce = data[offset + 1 : offset + 1 + nonce_len]
        offset += 1 + nonce_len
        if len(nonce) != nonce_len or offset >= len(data):
            raise ValueError("truncated config")
        name_len = data[offset]
        name = data[offset + 1 : offset + 1 + name_len]
        if len(name) != name_len or offset + 1 + name_len != len(data):
            raise ValueError("truncated config or trailing bytes")
        return cls(
            dimension=dimension,
            threshold=threshold,
            modulus_bits=bits,
            neighbors=None if neighbors == 0 else neighbors,
            round_nonce=nonce,
            vector_name=name,
        )

    @property
    def digest(self) -> bytes:
        """SHA-256 of the canonical encoding: identifies the round before keys exist."""
        return hashlib.sha256(_DIGEST_DOMAIN + self.to_bytes()).digest()
