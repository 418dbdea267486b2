"""The mask PRG: a seed expands to a uniform vector over Z_M by AES-128-CTR keystream.

Key schedule (every key single-use, so the CTR nonce is fixed at zero):

    mask_key = HKDF-SHA256(ikm = seed, salt = session_id,
                           info = "secagg-dp/v1/mask/" ‖ purpose ‖ ids ‖ vector_name)[:16]

with purpose ``self`` (ids = the owner) or ``pair`` (ids = the two ids, smaller first), and
``‖ "/" ‖ r`` for the r-th sum (r ≥ 2) of a session (its seeds and key pairs are per-sum already;
the suffix separates the domains too; the first sum keeps the single-sum derivation). The
keystream is read as little-endian words of the ring's storage type (uint32 for b ≤ 32, uint64
otherwise); the low b bits of a uniform word are uniform on Z_{2^b}, so no value is favoured
(unlike ``randint(0, M − 1)``, which never yields M − 1).

Expansion is fused with accumulation: the keystream is written by ``update_into`` into one
preallocated chunk that stays in cache and is added to (or subtracted from) the accumulator in
place, so a mask never exists as a full-length vector.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from secagg.ring import Ring, RingArray

__all__ = [
    "add_mask",
    "add_masks",
    "expand_mask",
    "pairwise_mask_key",
    "self_mask_key",
]

_INFO_PREFIX = b"secagg-dp/v1/mask/"
_CHUNK_BYTES = 1 << 18  # 256 KiB: the keystream chunk stays in L2 while it is added
_ZERO_CHUNK = bytes(_CHUNK_BYTES)
_NONCE = bytes(16)


def _derive(
    ikm: bytes,
    session_id: bytes,
    purpose: bytes,
    ids: bytes,
    vector_name: bytes,
    *,
    iteration: int = 1,
    iterate: bytes = b"",
) -> bytes:
    if len(ikm) < 16:
        raise ValueError(f"mask seed material needs at least 16 bytes; got {len(ikm)}")
    if iterate and len(iterate) != 32:
        raise ValueError(f"iterate must be a 32-byte digest or empty; got {len(iterate)} bytes")
    info = _INFO_PREFIX + purpose + b"/" + ids + b"/" + vector_name
    if iteration != 1 or iterate:
        info += b"/" + struct.pack(">H", iteration)
    if iterate:
        info += b"/" + iterate
    return HKDF(algorithm=hashes.SHA256(), length=16, salt=session_id, info=info).derive(ikm)


def self_mask_key(
    seed: bytes, *, session_id: bytes, owner: int, vector_name: bytes = b"", iteration: int = 1
) -> bytes:
    """The AES-128 key of client ``owner``'s self mask PRG(b_u).

    Examples
    --------
    >>> self_mask_key(bytes(32), session_id=b"s" * 32, owner=1).hex()[:16]
    'f70ce59bfc8449d7'
    """
    owner_id = struct.pack(">I", owner)
    return _derive(seed, session_id, b"self", owner_id, vector_name, iteration=iteration)


def pairwise_mask_key(
    shared_secret: bytes,
    *,
    session_id: bytes,
    first: int,
    second: int,
    vector_name: bytes = b"",
    iteration: int = 1,
    iterate: bytes = b"",
) -> bytes:
    """The AES-128 key of the pairwise mask PRG(s_uv); symmetric in the two ids.

    ``iterate`` is the :func:`secagg.identity.iterate_digest` of what the server broadcast for
    this sum (empty when it broadcast nothing): two neighbours shown different iterates derive
    different keys, so their masks do not cancel and the sum comes out uniformly random — a
    server that sends one client a crafted model and the others another learns nothing of it
    (``secagg/malicious_security.md`` §5).

    Examples
    --------
    >>> k1 = pairwise_mask_key(bytes(32), session_id=b"s" * 32, first=2, second=5)
    >>> k1 == pairwise_mask_key(bytes(32), session_id=b"s" * 32, first=5, second=2)
    True
    """
    if first == second:
        raise ValueError(f"a pairwise mask needs two distinct ids; got {first} twice")
    low, high = sorted((first, second))
    ids = struct.pack(">II", low, high)
    return _derive(
        shared_secret, session_id, b"pair", ids, vector_name, iteration=iteration, iterate=iterate
    )


def add_masks(
    accumulator: RingArray,
    ring: Ring,
    *,
    add: Sequence[bytes] = (),
    subtract: Sequence[bytes] = (),
) -> None:
    """Add the masks of ``add`` and subtract those of ``subtract``, in place, in one pass.

    The loop runs chunk-major: each 256 KiB chunk of the accumulator stays in cache while every
    mask's keystream for it is generated and added, so memory traffic does not grow with the
    number of masks. The accumulator wraps modulo the storage word; call ``ring.normalize``
    once at the end.

    Parameters
    ----------
    accumulator
        A 1-D contiguous array of the ring's storage dtype.
    ring
        The ring (it fixes the word size of the keystream).
    add, subtract
        16-byte mask keys from :func:`self_mask_key` or :func:`pairwise_mask_key`.

    Examples
    --------
    >>> ring = Ring(32)
    >>> acc = ring.zeros(5)
    >>> keys = [bytes(range(16)), bytes(16)]
    >>> add_masks(acc, ring, add=keys)
    >>> add_masks(acc, ring, subtract=keys[::-1])
    >>> acc.tolist()
    [0, 0, 0, 0, 0]
    """
    if accumulator.dtype != ring.dtype or accumulator.ndim != 1:
        raise TypeError(
            f"accumulator must be a 1-D {ring.dtype} array; got {accumulator.ndim}-D "
            f"{accumulator.dtype}"
        )
    if not accumulator.flags.c_contiguous:
        raise ValueError("accumulator must be C-contiguous")
    streams = []
    for keys, operation in ((add, np.add), (subtract, np.subtract)):
        for key in keys:
            if len(key) != 16:
                raise ValueError(f"mask keys are 16 bytes; got {len(key)}")
            streams.append((Cipher(algorithms.AES(key), modes.CTR(_NONCE)).encryptor(), operation))
    itemsize = accumulator.itemsize
    chunk_words = _CHUNK_BYTES // itemsize
    scratch = np.empty(chunk_words, dtype=accumulator.dtype.newbyteorder("<"))
    scratch_bytes = memoryview(scratch).cast("B")  # type: ignore[arg-type]
    zeros = memoryview(_ZERO_CHUNK)
    total = accumulator.size
    for start in range(0, total, chunk_words):
        count = min(chunk_words, total - start)
        size = count * itemsize
        segment = accumulator[start : start + count]
        words = scratch[:count]
        for encryptor, operation in streams:
            encryptor.update_into(zeros[:size], scratch_bytes[:size])
            operation(segment, words, out=segment)


def add_mask(accumulator: RingArray, key: bytes, ring: Ring, *, subtract: bool = False) -> None:
    """Add (or subtract) the one mask expanded from ``key``; see :func:`add_masks`.

    Examples
    --------
    >>> ring = Ring(32)
    >>> acc = ring.zeros(5)
    >>> add_mask(acc, bytes(range(16)), ring)
    >>> add_mask(acc, bytes(range(16)), ring, subtract=True)
    >>> acc.tolist()
    [0, 0, 0, 0, 0]
    """
    if subtract:
        add_masks(accumulator, ring, subtract=(key,))
    else:
        add_masks(accumulator, ring, add=(key,))


def expand_mask(key: bytes, ring: Ring, dimension: int) -> RingArray:
    """The mask vector PRG(key) over Z_M (for tests, audits and known-answer vectors).

    Examples
    --------
    >>> expand_mask(bytes(16), Ring(8), 4).tolist()
    [102, 239, 136, 202]
    """
    out = ring.zeros(dimension)
    add_mask(out, key, ring)
    return ring.normalize(out)
