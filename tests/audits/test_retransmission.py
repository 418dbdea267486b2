"""Audit 7's retransmission rounds: a message that reaches the server again while its phase is
open (the same object, or an equal copy) is no fault, and the round's total is exact."""

from __future__ import annotations

from typing import Any

from audits.ours import OurTarget
from audits.protocol_audits import _retransmission_checks


class _FaultsOnRepeat:
    """Our sans-I/O parties, but the server faults a sender whose message arrives again."""

    def __init__(self, *, same_object_only: bool) -> None:
        self._real = OurTarget().sans_io()
        assert self._real is not None
        self.same_object_only = same_object_only
        self.seen: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def server_receive(self, server: Any, message: Any) -> list[Any]:
        repeat = any(
            m is message if self.same_object_only else type(m) is type(message) and m == message
            for m in self.seen
        )
        self.seen.append(message)
        if repeat:
            raise self._real.peer_error("second message")
        out: list[Any] = self._real.server_receive(server, message)
        return out


def test_our_server_takes_every_retransmission_in_both_modes_and_graphs() -> None:
    sans_io = OurTarget().sans_io()
    assert sans_io is not None
    assert _retransmission_checks(sans_io, 0) == (2 * len(sans_io.threat_models), [])


def test_a_server_that_faults_a_retransmitted_message_is_caught() -> None:
    for same_object_only in (True, False):
        rounds, findings = _retransmission_checks(
            _FaultsOnRepeat(same_object_only=same_object_only),  # type: ignore[arg-type]
            0,
        )
        assert rounds == 4 and len(findings) == 4, findings
        assert all("refused as a fault" in f for f in findings)
