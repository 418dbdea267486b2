"""The round driver over a transport of the caller's: one phase loop for every transport, peer
faults as records, the claimed sender checked against the transport's peer."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pytest

from secagg import (
    Client,
    Delivery,
    PeerFault,
    Phase,
    RoundDriver,
    Server,
    TooFewSurvivorsError,
    decode_message,
    encode_message,
)
from tests.secagg.conftest import make_round

INPUTS = {u: np.array([u, 10 * u], dtype=np.int64) for u in range(1, 7)}

Tamper = Callable[[Phase, int, bytes], list[tuple[int, bytes]]]


class Loopback:
    """A transport of our own: peer p is client p; ``tamper`` rewrites what each client sends
    (to drop, duplicate, corrupt or re-address it)."""

    def __init__(self, clients: dict[int, Client], tamper: Tamper | None = None) -> None:
        self.clients, self.tamper = clients, tamper
        self.timeouts: list[float | None] = []

    def exchange(
        self, phase: Phase, outgoing: Sequence[tuple[int, bytes]], timeout: float | None
    ) -> Iterator[Delivery | PeerFault]:
        self.timeouts.append(timeout)
        for peer, data in outgoing:
            client = self.clients[peer]
            replies = client.start() if not data else client.receive(decode_message(data))
            for reply in replies:
                wire = [(peer, encode_message(reply))]
                if self.tamper is not None:
                    wire = self.tamper(phase, peer, wire[0][1])
                for sender, payload in wire:
                    yield Delivery(sender, payload)


def run(
    tamper: Tamper | None = None, threat_model: str = "malicious", threshold: int = 3
) -> tuple[RoundDriver, Server]:
    config, clients, server = make_round(INPUTS, threshold=threshold, threat_model=threat_model)
    driver = RoundDriver(Loopback(clients, tamper), timeout=2.5)
    ids = sorted(INPUTS)
    result_server = driver.setup(
        [(u, b"") for u in ids], lambda _: server, config.phases, expected={u: u for u in ids}
    )
    return driver, result_server


@pytest.mark.parametrize("threat_model", ["malicious", "semi-honest"])
def test_an_honest_round_over_a_custom_transport(threat_model: str) -> None:
    driver, server = run(threat_model=threat_model)
    assert server.result.total.tolist() == [21, 210]
    assert driver.faults == []
    phases = [p.value for p in server.config.phases]
    assert all(driver.upload[p] > 0 for p in phases)
    assert driver.signatures == (0 if threat_model == "semi-honest" else 6 + 6)
    assert set(driver.transport.timeouts) == {2.5}  # type: ignore[attr-defined]


def test_peer_faults_are_records_and_the_round_goes_on() -> None:
    def tamper(phase: Phase, peer: int, data: bytes) -> list[tuple[int, bytes]]:
        if phase is Phase.SHARE_KEYS and peer == 2:
            return [(2, b"\x01\x02garbage")]  # undecodable: client 2 drops at share_keys
        if phase is Phase.MASKED_INPUT and peer == 3:
            return [(4, data)]  # client 3's masked input arrives from peer 4: refused
        if phase is Phase.MASKED_INPUT and peer == 5:
            return [(5, data), (5, data)]  # a duplicate
        return [(peer, data)]

    driver, server = run(tamper, threshold=2)  # quorum max(t, ⌊(6 + 1)/2⌋ + 1) = 4
    # Client 2 never shared keys; client 3's input never arrived under its own name.
    assert server.result.survivors == (1, 4, 5, 6)
    assert server.result.total.tolist() == [16, 160]
    # What the transport delivered wrongly is the driver's record; what the server refused
    # (a message under another client's name) is the server's, blaming the peer it came from.
    assert [(f.peer, f.phase) for f in driver.faults] == [(2, "share_keys")]
    assert 4 in {fault.peer_id for fault in server.result.faults}
    assert all(isinstance(f, PeerFault) and str(f).startswith("peer ") for f in driver.faults)


def test_a_peer_claiming_another_client_at_setup_is_out() -> None:
    def tamper(phase: Phase, peer: int, data: bytes) -> list[tuple[int, bytes]]:
        if phase is Phase.ADVERTISE_KEYS and peer == 6:
            return [(6, data), (9, data)]  # an uninvited peer replays client 6's advertisement
        return [(peer, data)]

    driver, server = run(tamper)
    assert server.result.total.tolist() == [21, 210]
    assert [(f.peer, f.reason) for f in driver.faults] == [(9, "not invited to this round")]


def test_too_few_survivors_still_raises() -> None:
    def silence(phase: Phase, peer: int, data: bytes) -> list[tuple[int, bytes]]:
        return [] if phase is Phase.MASKED_INPUT and peer > 2 else [(peer, data)]

    with pytest.raises(TooFewSurvivorsError):
        run(silence)
