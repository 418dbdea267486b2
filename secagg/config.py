"""The public parameters of one secure-sum round, agreed by server and clients, and the names
of its phases and threat models."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from enum import StrEnum

from secagg.ring import Ring

__all__ = ["PHASES", "Phase", "SecAggConfig", "ThreatModel"]

_CONFIG_VERSION = 2
_DIGEST_DOMAIN = b"secagg-dp/v2/config"
_HEADER = struct.Struct("<BQBIIBIB")
MIN_NONCE_BYTES = 16


class ThreatModel(StrEnum):
    """Who the protocol defends against (README, "Threat models").

    ``MALICIOUS``: the server may deviate arbitrarily (substitute keys, show different clients
    different views, replay, drop, forge) and collude with up to ``max_colluding`` clients; every
    client holds a long-term identity key and a trust store (Bonawitz et al. 2017, the
    active-adversary protocol). ``SEMI_HONEST``: the server follows the protocol but reads
    everything it receives; no identities, one message round fewer (opt-in, for speed).
    """

    MALICIOUS = "malicious"
    SEMI_HONEST = "semi-honest"


class Phase(StrEnum):
    """The phases of a round, in protocol order; their values name them everywhere (dropout
    specifications, timings, the Flower record's ``stage``). ``CONSISTENCY_CHECK`` runs only in
    the malicious mode."""

    ADVERTISE_KEYS = "advertise_keys"
    SHARE_KEYS = "share_keys"
    MASKED_INPUT = "masked_input"
    CONSISTENCY_CHECK = "consistency_check"
    UNMASK = "unmask"

    @classmethod
    def of(cls, threat_model: ThreatModel) -> tuple[Phase, ...]:
        """The phases a round under ``threat_model`` runs.

        Examples
        --------
        >>> [p.value for p in Phase.of(ThreatModel.SEMI_HONEST)]
        ['advertise_keys', 'share_keys', 'masked_input', 'unmask']
        """
        if threat_model is ThreatModel.MALICIOUS:
            return tuple(cls)
        return tuple(p for p in cls if p is not cls.CONSISTENCY_CHECK)


PHASES: tuple[str, ...] = tuple(p.value for p in Phase)
"""Every phase name in protocol order (``consistency_check`` only runs in the malicious mode)."""


def _check_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int; got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name} must lie in [{low}, {high}]; got {value}")
    return value


def _threat_model(value: object) -> ThreatModel:
    if isinstance(value, ThreatModel):
        return value
    if isinstance(value, str):
        try:
            return ThreatModel(value)
        except ValueError:
            pass
    raise ValueError(
        f"threat_model must be 'malicious' or 'semi-honest'; got {value!r}"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SecAggConfig:
    """Parameters of a secure-sum round; every party must hold the same ones.

    The config is bound into every message: phase-0 messages carry its digest (and, in the
    malicious mode, a signature over it), later ones the session id, which hashes the digest
    together with all advertised keys.

    Parameters
    ----------
    dimension
        Length d of every input vector.
    threshold
        t: Shamir threshold. A client's secrets are recoverable from any t of its neighbours,
        and the round needs every surviving client to keep ≥ t surviving neighbours.
    round_nonce
        16 to 64 bytes unique to this round (draw them with ``os.urandom(16)``), so messages
        of one round can never be replayed into another with the same parameters.
    modulus_bits
        b, with M = 2^b, between 1 and 64.
    neighbors
        ``None`` for the complete graph (SecAgg); an even degree k for SecAgg+.
    vector_name
        Name of the summed vector (up to 64 bytes), mixed into every mask key.
    threat_model
        ``"malicious"`` (default) or ``"semi-honest"``; see :class:`ThreatModel`.
    max_colluding
        c: how many clients may collude with a malicious server. Default t − 1, the most the
        threshold can defend. The consistency check needs ⌊(n + c)/2⌋ + 1 signatures from the
        n clients of the key directory (:meth:`consistency_quorum`).
    iterations
        R: how many secure sums one session may run (1 to 255) after a single key setup
        (:class:`secagg.Session`); 1 is a single secure sum.

    Examples
    --------
    >>> cfg = SecAggConfig(dimension=1000, threshold=3, neighbors=4, round_nonce=bytes(16))
    >>> cfg.ring.modulus == 2**32, cfg.threat_model.value, cfg.max_colluding
    (True, 'malicious', 2)
    >>> SecAggConfig.from_bytes(cfg.to_bytes()) == cfg
    True
    >>> SecAggConfig(dimension=10, threshold=5, neighbors=4, round_nonce=bytes(16))
    Traceback (most recent call last):
    ...
    ValueError: threshold t=5 exceeds the number of neighbours k=4: need 1 ≤ t ≤ k
    """

    dimension: int
    threshold: int
    round_nonce: bytes
    modulus_bits: int = 32
    neighbors: int | None = None
    vector_name: bytes = b""
    threat_model: ThreatModel | str = ThreatModel.MALICIOUS
    max_colluding: int | None = None
    iterations: int = 1
    _digest: bytes = field(default=b"", init=False, repr=False, compare=False)

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
        if len(self.round_nonce) < MIN_NONCE_BYTES:
            raise ValueError(
                f"round_nonce needs at least {MIN_NONCE_BYTES} bytes unique to this round "
                f"(os.urandom(16)); got {len(self.round_nonce)}"
            )
        object.__setattr__(self, "threat_model", _threat_model(self.threat_model))
        if self.max_colluding is None:
            object.__setattr__(self, "max_colluding", self.threshold - 1)
        _check_int("max_colluding", self.max_colluding, 0, 2**31 - 2)
        _check_int("iterations", self.iterations, 1, 255)
        object.__setattr__(
            self, "_digest", hashlib.sha256(_DIGEST_DOMAIN + self.to_bytes()).digest()
        )

    @property
    def malicious(self) -> bool:
        """Whether the round runs the malicious-server protocol."""
        return self.threat_model is ThreatModel.MALICIOUS

    @property
    def mac_approvals(self) -> bool:
        """Whether the consistency check is approved with pairwise MACs (a malicious-mode session
        of several sums) rather than Ed25519 signatures (a single sum).

        A session agrees one approval key with every client once (n X25519 and at most n
        signature checks per client), then each sum costs one HMAC per pair instead of a quorum
        of Ed25519 verifications per client; a single sum is cheaper with signatures
        (``secagg/malicious_security.md`` §5).

        Examples
        --------
        >>> config = SecAggConfig(dimension=1, threshold=1, round_nonce=bytes(16), iterations=3)
        >>> config.mac_approvals, config.threat_model.value
        (True, 'malicious')
        """
        return self.malicious and self.iterations > 1

    @property
    def phases(self) -> tuple[Phase, ...]:
        """The phases this round runs."""
        return Phase.of(ThreatModel(self.threat_model))

    @property
    def min_clients(self) -> int:
        """The fewest clients a sum can go on with: t + 1 (each client's shares are held by
        t neighbours, so a sum needs a client and t others).

        Every phase's "too few" check reads it (the server's, the client's), so the refusal and
        the number its message states cannot drift apart.

        Examples
        --------
        >>> SecAggConfig(dimension=1, threshold=3, round_nonce=bytes(16)).min_clients
        4
        """
        return self.threshold + 1

    def consistency_quorum(self, num_advertised: int) -> int:
        """Valid consistency signatures a client needs before it unmasks (malicious mode).

        max(t, ⌊(n + c)/2⌋ + 1) for n clients in the key directory and c colluding: two sets
        of that size share more than c members, so at least one honest client, who signs one
        survivor set only — two different survivor sets can never both be certified (the
        quorum form of Bonawitz et al.'s ≥ t consistency signatures; derivation in
        ``secagg/malicious_security.md``).

        Examples
        --------
        >>> SecAggConfig(dimension=1, threshold=8, neighbors=14, round_nonce=bytes(16),
        ...              max_colluding=5).consistency_quorum(100)
        53
        """
        colluding = int(self.max_colluding or 0)
        return max(self.threshold, (num_advertised + colluding) // 2 + 1)

    @property
    def ring(self) -> Ring:
        """The ring Z_M of this round."""
        return Ring(self.modulus_bits)

    def to_bytes(self) -> bytes:
        """Canonical encoding (also what the digest hashes)."""
        threat = list(ThreatModel).index(ThreatModel(self.threat_model))
        return (
            _HEADER.pack(
                _CONFIG_VERSION,
                self.dimension,
                self.modulus_bits,
                self.threshold,
                0 if self.neighbors is None else self.neighbors,
                threat,
                int(self.max_colluding or 0),
                self.iterations,
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
        (version, dimension, bits, threshold, neighbors, threat, colluding, iterations) = (
            _HEADER.unpack_from(data)
        )
        if version != _CONFIG_VERSION:
            raise ValueError(f"unsupported config version {version}")
        if threat >= len(ThreatModel):
            raise ValueError(f"unknown threat model code {threat}")
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
            threat_model=list(ThreatModel)[threat],
            max_colluding=colluding,
            iterations=iterations,
        )

    @property
    def digest(self) -> bytes:
        """SHA-256 of the canonical encoding: identifies the round before keys exist."""
        return self._digest
