"""Audit 7's session and cross-round checks, audit 8's robust-decoding check: each passes on our
code and catches the defect it exists for (a weakened session check, a width check that breaks
sessions, a decoder that misses or misnames garbled shares)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from audits.ours import OurTarget
from audits.protocol_audits import (
    _cross_round_checks,
    _session_checks,
    _shamir_error_correction,
)


def test_cross_round_messages_are_refused_and_every_round_completes() -> None:
    sans_io = OurTarget().sans_io()
    assert sans_io is not None
    rounds, findings = _cross_round_checks(sans_io, 0)
    # Per mode and graph, both directions × every kind of server message the victim receives:
    # key directory, forwarded shares, unmask request (+ consistency request when malicious).
    assert rounds == 2 * 2 * (3 + 4) and findings == []


@pytest.mark.parametrize("order", ["<", ">"])
def test_a_session_check_that_passes_half_of_other_sessions_is_caught(
    order: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from secagg.client import Client  # noqa: PLC0415
    from secagg.errors import RemoteProtocolError  # noqa: PLC0415

    def check(self: Any, message: Any, expected: bytes) -> None:
        stale = message.session_id < expected if order == "<" else message.session_id > expected
        if stale:  # refuses other sessions on one side of its own id only
            raise RemoteProtocolError("message from another session", peer_id=0)

    monkeypatch.setattr(Client, "_check_envelope", check)
    sans_io = OurTarget().sans_io()
    assert sans_io is not None
    _, findings = _cross_round_checks(sans_io, 0)
    assert any("accepted another round's UnmaskRequest" in f for f in findings), findings


def test_sessions_whose_sums_differ_in_width_are_exact() -> None:
    secure_sum = OurTarget().secure_sum()
    for seed in range(3):
        assert _session_checks(secure_sum, seed, 6) == []


def test_a_client_that_refuses_a_later_sums_width_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from secagg.client import Client  # noqa: PLC0415

    real = Client.set_input

    def fixed_width(self: Any, vector: Any) -> None:
        if np.asarray(vector).size != self.config.dimension:
            raise ValueError("only the configured width")
        real(self, vector)

    monkeypatch.setattr(Client, "set_input", fixed_width)
    findings = _session_checks(OurTarget().secure_sum(), 0, 4)
    assert findings and all("only the configured width" in f for f in findings), findings


def test_one_session_is_as_long_as_a_trainers_and_one_that_halts_past_eight_sums_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The seed-6 survivor `len(seed_commitment) is not 32 * iterations`: an identity comparison
    # that holds while 32·T is a cached small int (T ≤ 8 sums) and refuses every longer session.
    from secagg.server import Server  # noqa: PLC0415

    lengths: list[int] = []
    secure_sum = OurTarget().secure_sum()
    real_session = secure_sum.run_session

    def recorded(inputs: Any, **kwargs: Any) -> Any:
        lengths.append(len(inputs))
        return real_session(inputs, **kwargs)

    monkeypatch.setattr(secure_sum, "run_session", recorded)
    assert _session_checks(secure_sum, 0, 4) == [] and max(lengths) == 12
    real = Server.receive

    def short_sessions_only(self: Any, message: Any, **kwargs: Any) -> Any:
        if self.config.iterations > 8:
            raise self._fault("seed commitments of the wrong length", message.peer)
        return real(self, message, **kwargs)

    monkeypatch.setattr(Server, "receive", short_sessions_only)
    findings = _session_checks(OurTarget().secure_sum(), 0, 4)
    assert len(findings) == 1 and "session 1 (malicious" in findings[0], findings


def test_a_client_comparing_a_later_sums_width_by_identity_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 14's survivor `self._input.size is not dimension`: true for every width past
    # 256 (two equal ints that CPython does not cache are two objects), so a client refused
    # every later sum of a model-sized vector.
    from secagg import client as client_module  # noqa: PLC0415
    from secagg.errors import LocalProtocolError  # noqa: PLC0415
    from secagg.messages import IterationRequest  # noqa: PLC0415

    key = (client_module.ClientState.AWAITING_ITERATION, IterationRequest)
    real = client_module._TRANSITIONS[key]

    def by_identity(self: Any, message: Any) -> Any:
        width = message.dimension or self.config.dimension
        if self._input is not None and self._input.size > 256 and self._input.size == width:
            raise LocalProtocolError(f"input has {self._input.size} entries, not {width}")
        return real(self, message)

    monkeypatch.setitem(client_module._TRANSITIONS, key, by_identity)
    findings = _session_checks(OurTarget().secure_sum(), 0, 4)
    assert len(findings) == 2 and all("widths [300, 257]" in f for f in findings), findings


def test_a_target_without_sessions_is_not_asked() -> None:
    class RoundsOnly:
        pass

    assert _session_checks(RoundsOnly(), 0, 4) == []  # type: ignore[arg-type]


def test_robust_reconstruction_corrects_and_names_garbled_shares() -> None:
    sharing = OurTarget().secret_sharing()
    assert sharing is not None
    for seed in range(3):
        # 60 random trials, then 8 entries × each of the t + 1 holders for t = 2, 3, 5.
        assert _shamir_error_correction(sharing, seed, 60) == (60 + 8 * (3 + 4 + 6), [])


class _Decoder:
    """Our sharing with a defective robust reconstruction."""

    def __init__(self, defect: str) -> None:
        self._real: Any = OurTarget().secret_sharing()
        self.defect = defect

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def robust_reconstruct(self, shares: Any, threshold: int) -> Any:
        if self.defect == "plain":  # no error correction: the first t shares interpolated
            return self._real.reconstruct(shares[:threshold]), ()
        if self.defect == "unchecked extra" and len(shares) == threshold + 1:
            # The held-out survivor (seed 4): with e = 0 the (t + 1)-th share goes unchecked.
            return self._real.reconstruct(shares[:threshold]), ()
        decoded = self._real.robust_reconstruct(shares, threshold)
        if decoded is None or self.defect != "names none":
            return decoded
        return decoded[0], ()


@pytest.mark.parametrize(
    ("defect", "expected"),
    [
        ("plain", "returned a wrong secret"),
        ("names none", "named [] as wrong"),
        ("unchecked extra", "returned a wrong secret instead of refusing"),
    ],
)
def test_a_defective_robust_reconstruction_is_caught(defect: str, expected: str) -> None:
    _, findings = _shamir_error_correction(_Decoder(defect), 0, 60)  # type: ignore[arg-type]
    assert any(expected in f for f in findings), findings


def test_restarted_clients_answer_byte_for_byte_and_rounds_stay_exact() -> None:
    from audits.protocol_audits import _restore_checks  # noqa: PLC0415

    sans_io = OurTarget().sans_io()
    assert sans_io is not None
    # 4 rounds, each counted with its 11 restores from the snapshot: intact, damaged 6 ways (4
    # generic, a length one too big, a map entry a byte short), and of another format version
    # or state (4 ways).
    assert _restore_checks(sans_io, 0) == (48, [])


def test_a_restart_that_draws_fresh_secrets_or_cannot_restore_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os  # noqa: PLC0415

    from audits.protocol_audits import _restore_checks  # noqa: PLC0415
    from secagg.client import Client  # noqa: PLC0415

    real = Client.restore.__func__  # type: ignore[attr-defined]

    def fresh(cls: Any, data: bytes, **kwargs: Any) -> Any:
        client = real(cls, data, **kwargs)
        if client._round_secret:  # the round's secrets drawn anew after a restart
            client._round_secret = os.urandom(len(client._round_secret))
        return client

    monkeypatch.setattr(Client, "restore", classmethod(fresh))
    sans_io = OurTarget().sans_io()
    assert sans_io is not None
    _, findings = _restore_checks(sans_io, 0)
    assert len(findings) == 4 and all("with other bytes" in f for f in findings), findings

    def broken(cls: Any, data: bytes, **kwargs: Any) -> Any:
        raise ValueError("corrupt client snapshot")

    monkeypatch.setattr(Client, "restore", classmethod(broken))
    _, findings = _restore_checks(sans_io, 0)
    # The rounds go on with the clients that never crashed; each names the failed restore, and
    # the intact snapshot of the damage check does not restore either.
    assert len(findings) == 8, findings
    assert sum("a snapshot did not restore, before KeyDirectory" in f for f in findings) == 4
    assert sum("an intact snapshot did not restore" in f for f in findings) == 4


def test_a_session_member_left_with_exactly_t_neighbours_must_sum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 9's survivor `len(members) == t` for `< t`: a client with exactly t neighbours
    # left refuses the next sum, so an honest session ends; the random sessions never left one.
    import dataclasses  # noqa: PLC0415

    import secagg.client as client_module  # noqa: PLC0415

    key = (client_module.ClientState.AWAITING_ITERATION, client_module.IterationRequest)
    real = client_module._TRANSITIONS[key]

    def refuses_at_t(self: Any, message: Any) -> Any:
        config = self.config  # as if the floor were t + 1: exactly t members are refused
        self.config = dataclasses.replace(config, threshold=config.threshold + 1)
        try:
            return real(self, message)
        finally:
            self.config = config

    monkeypatch.setitem(client_module._TRANSITIONS, key, refuses_at_t)
    findings = _session_checks(OurTarget().secure_sum(), 0, 1)
    assert len(findings) == 4 and all("complete, t = 3" in f for f in findings), findings
