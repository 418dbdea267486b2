"""Message encoding: round trips, known answers, and fuzzing of the decoder."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secagg import (
    AdvertiseKeys,
    ConsistencyRequest,
    ConsistencySignature,
    EncryptedShares,
    ForwardedShares,
    IterationRequest,
    KeyDirectory,
    MaskedInput,
    RemoteProtocolError,
    Ring,
    UnmaskRequest,
    UnmaskResponse,
    decode_message,
    encode_message,
)
from secagg.messages import ClientKeys

ids = st.integers(1, 2**31 - 2)
session = st.binary(min_size=32, max_size=32)
key = st.binary(min_size=32, max_size=32)
blobs = st.lists(st.tuples(ids, st.binary(max_size=120)), max_size=6).map(tuple)
iterations = st.integers(1, 255)
iterate = st.binary(max_size=80)


@st.composite
def masked_inputs(draw: st.DrawFn) -> MaskedInput:
    bits = draw(st.integers(1, 64))
    ring = Ring(bits)
    size = draw(st.integers(0, 70))
    values = draw(st.lists(st.integers(0, ring.modulus - 1), min_size=size, max_size=size))
    vector = np.array(values, dtype=np.uint64).astype(ring.dtype)
    complaints = draw(st.lists(ids, max_size=4).map(tuple))
    return MaskedInput(draw(session), draw(ids), bits, vector, complaints, draw(iterations))


signature = st.one_of(st.just(b""), st.binary(min_size=64, max_size=64))
id_lists = st.lists(ids, max_size=8).map(tuple)


@st.composite
def directories(draw: st.DrawFn) -> KeyDirectory:
    members = draw(st.sets(ids, max_size=8))
    signed = draw(st.booleans())
    keys = {
        u: ClientKeys(draw(key), draw(key), draw(st.binary(min_size=64, max_size=64)))
        for u in members
    }
    return KeyDirectory.build(draw(session), draw(ids), keys, signed=signed)


@st.composite
def share_messages(draw: st.DrawFn) -> EncryptedShares:
    # One 32-byte commitment per sum of a session and 64 escrow bytes per sum and neighbour
    # (a few sums, to keep examples small).
    sums = draw(st.integers(1, 4))
    commitments = st.binary(min_size=32 * sums, max_size=32 * sums)
    escrows = st.lists(
        st.tuples(ids, st.binary(min_size=64 * sums, max_size=64 * sums)), max_size=4
    ).map(tuple)
    return EncryptedShares(
        draw(session), draw(ids), draw(commitments), draw(blobs), draw(commitments), draw(escrows)
    )


messages = st.one_of(
    st.builds(AdvertiseKeys, session, ids, key, key, signature),
    directories(),
    share_messages(),
    st.builds(ForwardedShares, session, ids, blobs, iterate),
    st.builds(
        IterationRequest, session, ids, iterations, id_lists, iterate, st.integers(0, 2**40)
    ),
    masked_inputs(),
    st.builds(ConsistencyRequest, session, ids, id_lists, iterations),
    st.builds(ConsistencySignature, session, ids, st.binary(min_size=64, max_size=64), iterations),
    st.builds(UnmaskRequest, session, ids, id_lists, id_lists, blobs, iterations),
    st.builds(
        UnmaskResponse,
        session,
        ids,
        blobs,
        blobs,
        st.one_of(st.just(b""), st.binary(min_size=32, max_size=32)),
        blobs,
        iterations,
    ),
)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, MaskedInput):
        return a == b and np.array_equal(a.vector, b.vector) and a.vector.dtype == b.vector.dtype
    return bool(a == b)


@given(messages)
def test_roundtrip(message: Any) -> None:
    data = encode_message(message)
    assert same(decode_message(data), message)
    assert encode_message(decode_message(data)) == data  # canonical


@given(masked_inputs())
def test_masked_input_size_is_packed(message: MaskedInput) -> None:
    header = 1 + 1 + 32 + 4 + 2 + 1 + 4 + 4 * len(message.complaints) + 8
    assert len(encode_message(message)) == header + Ring(message.modulus_bits).packed_size(
        message.vector.size
    )


def test_committed_encodings(known_answers: dict[str, Any]) -> None:
    for case in known_answers["messages"]:
        message = decode_message(bytes.fromhex(case["hex"]))
        assert type(message).__name__ == case["type"]
        assert encode_message(message).hex() == case["hex"]


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_decoding_arbitrary_bytes_raises_only_remote_errors(data: bytes) -> None:
    with contextlib.suppress(RemoteProtocolError):  # any other exception fails the test
        decode_message(data)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(messages, st.data())
def test_decoding_mutated_messages_raises_only_remote_errors(
    message: Any, data: st.DataObject
) -> None:
    encoded = bytearray(encode_message(message))
    action = data.draw(st.sampled_from(["truncate", "flip", "extend", "splice"]))
    if action == "truncate":
        encoded = encoded[: data.draw(st.integers(0, max(0, len(encoded) - 1)))]
    elif action == "flip" and encoded:
        position = data.draw(st.integers(0, len(encoded) - 1))
        encoded[position] ^= data.draw(st.integers(1, 255))
    elif action == "extend":
        encoded += data.draw(st.binary(min_size=1, max_size=8))
    else:
        position = data.draw(st.integers(0, len(encoded)))
        encoded[position:position] = data.draw(st.binary(min_size=1, max_size=8))
    try:
        decoded = decode_message(bytes(encoded))
    except RemoteProtocolError:
        return
    assert encode_message(decoded) == bytes(encoded)  # whatever decodes is canonical


def test_specific_malformations_are_explained() -> None:
    good = encode_message(AdvertiseKeys(bytes(32), 1, bytes(32), bytes(32)))
    with pytest.raises(RemoteProtocolError, match="unsupported protocol version 1"):
        decode_message(b"\x01" + good[1:])
    with pytest.raises(RemoteProtocolError, match="unknown message type 99"):
        decode_message(good[:1] + b"\x63" + good[2:])
    with pytest.raises(RemoteProtocolError, match="trailing bytes"):
        decode_message(good + b"\x00")
    with pytest.raises(RemoteProtocolError, match="sender"):
        decode_message(good[:34] + b"\x00\x00\x00\x00" + good[38:])  # id 0 is invalid
    directory = KeyDirectory.build(
        bytes(32), 1, {2: ClientKeys(bytes(32), bytes(32)), 5: ClientKeys(bytes(32), bytes(32))}
    )
    data = bytearray(encode_message(directory))
    data[43:47] = (9).to_bytes(4, "little")  # first id 9 > second id 5: not sorted
    with pytest.raises(RemoteProtocolError, match="strictly increasing"):
        decode_message(bytes(data))
    masked = encode_message(MaskedInput(bytes(32), 1, 12, np.arange(3, dtype=np.uint32)))
    with pytest.raises(RemoteProtocolError, match="dimension"):
        decode_message(masked[:-1])
    with pytest.raises(RemoteProtocolError, match="count exceeds"):
        decode_message(
            encode_message(UnmaskRequest(bytes(32), 1, (), ()))[:-12]
            + b"\xff\xff\xff\xff"
            + bytes(8)
        )
    advert = encode_message(AdvertiseKeys(bytes(32), 1, bytes(32), bytes(32), bytes(64)))
    with pytest.raises(RemoteProtocolError, match="field of 63 bytes"):
        decode_message(advert[:102] + b"\x3f" + advert[103:-1])
    with pytest.raises(RemoteProtocolError, match="directory flag 2"):
        encoded = bytearray(encode_message(directory))
        encoded[38] = 2
        decode_message(bytes(encoded))


def test_construction_validates_structure() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        AdvertiseKeys(bytes(31), 1, bytes(32), bytes(32))
    with pytest.raises(ValueError, match="sender"):
        AdvertiseKeys(bytes(32), 0, bytes(32), bytes(32))
    with pytest.raises(TypeError, match="tuple"):
        UnmaskRequest(bytes(32), 1, [1], ())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="uint32"):
        MaskedInput(bytes(32), 1, 16, np.zeros(3, dtype=np.uint64))
