"""Snapshot of a :class:`~secagg.Client` between two messages, as bytes (private).

A transport whose client side is not one long-lived process (Flower re-runs its ClientApp for
every message and keeps only the node's ``Context``) must carry the client's state from one
message to the next. The snapshot holds exactly the fields the state machine keeps between
calls; its random source is not saved, because a client only draws randomness inside one call
(key generation in ``start``, the self-mask seed and the share polynomials on the key
directory). The bytes hold secrets: they must stay on the client's node.

Format (little-endian): ``version:u8 ‖ state:u8 ‖ client_id:u32 ‖ field*``, each field a
``u32`` length followed by its bytes, in the fixed order of ``_FIELDS``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from secagg.client import Client, ClientState
from secagg.config import SecAggConfig
from secagg.keys import KeyPair
from secagg.messages import ClientKeys
from secagg.randomness import RandomSource

_VERSION = 1
_HEADER = struct.Struct("<BBI")
_LENGTH = struct.Struct("<I")
_ENTRY_ID = struct.Struct("<I")
_STATES = tuple(ClientState)


def _encode_map(entries: dict[int, bytes]) -> bytes:
    return b"".join(
        _ENTRY_ID.pack(k) + _LENGTH.pack(len(v)) + v for k, v in sorted(entries.items())
    )


def _decode_map(data: bytes) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    offset = 0
    while offset < len(data):
        (key,) = _ENTRY_ID.unpack_from(data, offset)
        (size,) = _LENGTH.unpack_from(data, offset + 4)
        offset += 8
        value = data[offset : offset + size]
        if len(value) != size:
            raise ValueError("truncated client snapshot")
        out[key] = value
        offset += size
    return out


def snapshot_client(client: Client) -> bytes:
    """The client's state between two calls, as bytes (secret: keep it on the node)."""
    ring_input = b"" if client._input is None else client._input.astype("<u8").tobytes()
    fields = [
        client.config.to_bytes(),
        (client._abort_reason or "").encode(),
        b"" if client._encryption_keys is None else client._encryption_keys.private,
        b"" if client._mask_keys is None else client._mask_keys.private,
        client._self_mask_seed,
        client._session_id,
        b"".join(_ENTRY_ID.pack(v) for v in client._neighbors),
        _encode_map({v: keys[0] + keys[1] for v, keys in client._neighbor_keys.items()}),
        _encode_map(client._share_keys),
        _encode_map(client._held_seed_shares),
        _encode_map(client._held_key_shares),
        ring_input,
    ]
    head = _HEADER.pack(_VERSION, _STATES.index(client.state), client.client_id)
    return head + b"".join(_LENGTH.pack(len(f)) + f for f in fields)


def restore_client(
    data: bytes, *, random_factory: Callable[[SecAggConfig, int], RandomSource] | None = None
) -> Client:
    """The client :func:`snapshot_client` saved, ready for its next call.

    ``random_factory(config, client_id)`` gives the restored client's random source (default:
    fresh operating-system randomness).

    Raises
    ------
    ValueError
        If the bytes are not a snapshot of this version.
    """
    data = bytes(data)
    try:
        version, state_index, client_id = _HEADER.unpack_from(data)
        if version != _VERSION or state_index >= len(_STATES):
            raise ValueError(f"unsupported client snapshot (version {version})")
        fields: list[bytes] = []
        offset = _HEADER.size
        while offset < len(data):
            (size,) = _LENGTH.unpack_from(data, offset)
            fields.append(data[offset + 4 : offset + 4 + size])
            offset += 4 + size
        if len(fields) != 12 or offset != len(data):
            raise ValueError("truncated client snapshot")
        (config_bytes, reason, enc, mask, seed, session, neighbors, neighbor_keys, share_keys,
         seed_shares, key_shares, ring_input) = fields  # fmt: skip
        config = SecAggConfig.from_bytes(config_bytes)
        random_source = None if random_factory is None else random_factory(config, client_id)
        client = Client(config, client_id, random_source=random_source)
        client._state = _STATES[state_index]
        client._abort_reason = reason.decode() or None
        client._encryption_keys = KeyPair.from_private_bytes(enc) if enc else None
        client._mask_keys = KeyPair.from_private_bytes(mask) if mask else None
        client._self_mask_seed = seed
        client._session_id = session
        client._neighbors = tuple(int(v) for v in np.frombuffer(neighbors, dtype="<u4"))
        client._neighbor_keys = {
            v: ClientKeys(keys[:32], keys[32:]) for v, keys in _decode_map(neighbor_keys).items()
        }
        client._share_keys = _decode_map(share_keys)
        client._held_seed_shares = _decode_map(seed_shares)
        client._held_key_shares = _decode_map(key_shares)
        if ring_input:
            words = np.frombuffer(ring_input, dtype="<u8")
            client._input = config.ring.reduce(words)
    except struct.error:
        raise ValueError("truncated client snapshot") from None
    return client
