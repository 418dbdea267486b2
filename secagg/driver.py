"""The round driver: one phase loop that runs a :class:`~secagg.Server` over any transport.

A transport moves ``(peer, bytes)`` — an address and a wire message — to the clients and brings
their replies back before a deadline; it never interprets a message. The driver owns everything
else: encoding the server's messages, decoding replies with the transport's peer as the claimed
sender, learning each peer's client id from its (signed) advertisement, feeding the server,
closing each phase, and keeping the books (bytes, server time, signatures). Faults of peers —
garbage, a wrong sender, an error reply, a duplicate identity — come back as
:class:`PeerFault` records, never as exceptions a caller must catch; a silent peer is simply
that phase's dropout.

The in-memory runner (:class:`secagg.Session`, :func:`secagg.secure_sum`) and the Flower Grid
(:func:`secagg.integrations.flower.run_secure_sum`) are the two transports of this package.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from secagg.config import PHASES, Phase
from secagg.errors import RemoteProtocolError
from secagg.identity import TrustStore
from secagg.messages import (
    AdvertiseKeys,
    ConsistencySignature,
    Message,
    decode_message,
    encode_message,
)
from secagg.server import Server

__all__ = ["Delivery", "PeerFault", "RoundDriver", "Transport"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Delivery:
    """One reply a transport brought back: the transport's ``peer`` and the bytes it sent."""

    peer: int
    data: bytes


@dataclass(frozen=True, slots=True)
class PeerFault:
    """What a peer did wrong in a phase (the round goes on without that message).

    Examples
    --------
    >>> str(PeerFault(7, "share_keys", "undecodable message"))
    'peer 7 in share_keys: undecodable message'
    """

    peer: int
    phase: str
    reason: str

    def __str__(self) -> str:
        return f"peer {self.peer} in {self.phase}: {self.reason}"


class Transport(Protocol):
    """Moves one phase's messages to the clients and their replies back.

    ``exchange`` sends each ``(peer, data)`` and yields the replies as they arrive (a
    :class:`Delivery` per reply, or a :class:`PeerFault` for a reply that is not one of ours)
    until every addressed peer answered or ``timeout`` seconds passed. In the first phase of a
    setup the data is the transport's own start request (see :meth:`RoundDriver.setup`).
    """

    def exchange(
        self, phase: Phase, outgoing: Sequence[tuple[int, bytes]], timeout: float | None
    ) -> Iterable[Delivery | PeerFault]:
        """Deliver ``outgoing``; yield the replies."""
        ...


@dataclass
class RoundDriver:
    """Runs a server's phases over a transport and keeps the books of the round.

    Parameters
    ----------
    transport
        Any :class:`Transport`.
    timeout
        Seconds each phase may take (``None``: the transport's own patience).
    on_phase
        Called as ``on_phase(phase, number_of_messages)`` as each phase's messages go out.

    Attributes
    ----------
    client_of
        Transport peer → client id, learned from the advertisements (or given).
    faults
        Every :class:`PeerFault`, in order.
    server_seconds, wire_seconds, upload, download
        Per phase: the server's compute time, its encoding and decoding time, and the bytes
        received and sent.
    signatures
        Signed messages received (advertisements and consistency signatures).

    Examples
    --------
    The in-memory runner is this driver over a transport that calls the clients directly:

    >>> from secagg import secure_sum
    >>> secure_sum([[1], [2], [3]], seed=0).upload_bytes["masked_input"] > 0
    True
    """

    transport: Transport
    timeout: float | None = None
    on_phase: Callable[[str, int], None] | None = None
    client_of: dict[int, int] = field(default_factory=dict)
    faults: list[PeerFault] = field(default_factory=list)
    server_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    wire_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    upload: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    download: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    signatures: int = 0

    @property
    def peer_of(self) -> dict[int, int]:
        """Client id → transport peer."""
        return {u: peer for peer, u in self.client_of.items()}

    def setup(
        self,
        starts: Sequence[tuple[int, bytes]],
        make_server: Callable[[list[int]], Server],
        phases: Sequence[Phase],
        *,
        expected: Mapping[int, int] | None = None,
        trust_store: TrustStore | None = None,
    ) -> Server:
        """Run a round from its first phase: ``starts`` go out, the advertisements that come
        back name each peer's client id, ``make_server(ids)`` builds the server, and the
        remaining ``phases`` run.

        ``expected`` (peer → the client id that peer must claim) is the semi-honest assignment;
        without it a peer may claim any id the ``trust_store`` lists (the malicious mode: the
        advertisement's signature then proves it). A second claim of one id, an id the store
        does not list or a claim other than the expected one is a fault, and that peer is out.
        """
        first = phases[0]
        adverts: list[tuple[int, AdvertiseKeys]] = []
        for reply in self._exchange(first, starts):
            if expected is not None and reply.peer not in expected:
                self._fault(reply.peer, first, "not invited to this round")
                continue
            claimed = None if expected is None else expected[reply.peer]
            message = self._decode(reply, first, peer_id=claimed)
            if message is None:
                continue
            if not isinstance(message, AdvertiseKeys):
                self._fault(reply.peer, first, "expected an advertisement")
                continue
            adverts.append((reply.peer, message))
        for peer, advert in sorted(adverts, key=lambda item: item[0]):
            claimed = advert.peer
            if claimed in self.client_of.values() or (
                trust_store is not None and claimed not in trust_store
            ):
                self._fault(peer, first, f"claims client {claimed}")
                continue
            self.client_of[peer] = claimed
        server = make_server(sorted(self.client_of.values()))
        produced = self._feed(server, [(p, a) for p, a in adverts if p in self.client_of], first)
        produced.extend(self._close(server, first))
        self.run(server, produced, phases[1:])
        return server

    def run(self, server: Server, outgoing: list[Message], phases: Sequence[Phase]) -> None:
        """Send ``outgoing`` (the server's messages for ``phases[0]``) and run ``phases``."""
        peer_of = self.peer_of
        for phase in phases:
            wire = []
            start = time.perf_counter()
            for message in outgoing:
                data = encode_message(message)
                self.download[phase.value] += len(data)
                wire.append((peer_of[message.peer], data))
            self.wire_seconds[phase.value] += time.perf_counter() - start
            produced: list[Message] = []
            for reply in self._exchange(phase, wire):
                decoded = self._decode(reply, phase, peer_id=self.client_of.get(reply.peer))
                if decoded is not None:
                    # Fed at once: the server sums masked inputs as they arrive (O(d) memory).
                    produced.extend(self._feed(server, [(reply.peer, decoded)], phase))
            produced.extend(self._close(server, phase))
            outgoing = produced

    # -- internals ---------------------------------------------------------------------------

    def _exchange(self, phase: Phase, wire: Sequence[tuple[int, bytes]]) -> Iterable[Delivery]:
        if self.on_phase is not None:
            self.on_phase(phase.value, len(wire))
        if not wire:
            return
        for item in self.transport.exchange(phase, wire, self.timeout):
            if isinstance(item, PeerFault):
                self.faults.append(item)
                continue
            self.upload[phase.value] += len(item.data)
            yield item

    def _decode(self, reply: Delivery, phase: Phase, *, peer_id: int | None) -> Message | None:
        if peer_id is None and phase is not Phase.ADVERTISE_KEYS:
            self._fault(reply.peer, phase.value, "not a client of this round")
            return None
        start = time.perf_counter()
        try:
            message = decode_message(reply.data, peer_id=peer_id)
        except RemoteProtocolError as error:
            self._fault(reply.peer, phase.value, str(error))
            return None
        finally:
            self.wire_seconds[phase.value] += time.perf_counter() - start
        signed = isinstance(message, ConsistencySignature | AdvertiseKeys) and bool(
            message.signature
        )
        self.signatures += int(signed)
        return message

    def _feed(
        self, server: Server, messages: list[tuple[int, Message]], phase: Phase
    ) -> list[Message]:
        produced: list[Message] = []
        start = time.perf_counter()
        for peer, message in messages:
            try:
                produced.extend(server.receive(message, peer_id=self.client_of[peer]))
            except RemoteProtocolError as error:  # also in server.faults
                logger.warning(
                    "server rejected a %s message of peer %d: %s", phase.value, peer, error
                )
        self.server_seconds[phase.value] += time.perf_counter() - start
        return produced

    def _close(self, server: Server, phase: Phase) -> list[Message]:
        if server.phase is not phase:
            return []  # it closed when its last expected message arrived
        start = time.perf_counter()
        try:
            return server.close_phase()
        finally:
            self.server_seconds[phase.value] += time.perf_counter() - start

    def _fault(self, peer: int, phase: Phase | str, reason: str) -> None:
        name = phase.value if isinstance(phase, Phase) else phase
        fault = PeerFault(peer, name, reason)
        logger.warning("%s", fault)
        self.faults.append(fault)
