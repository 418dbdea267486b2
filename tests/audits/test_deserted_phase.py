"""Audit 7's deserted phases: when no client, or one alone at t = 2, answers a phase, the server
must abort at that phase's deadline instead of opening the next phase."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from audits import OurTarget, Verdict, run_audits
from audits.protocol_audits import _DESERTED, _deserted_phase_checks
from secagg.errors import InsecureSettingsWarning
from secagg.server import Server


@pytest.fixture(autouse=True)
def _quiet() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureSettingsWarning)  # the t = 1 rounds
        yield


def test_our_server_aborts_every_deserted_phase_in_both_modes() -> None:
    sans_io = OurTarget().sans_io()
    assert sans_io is not None
    rounds, findings = _deserted_phase_checks(sans_io, 0)
    # Four phases semi-honest (keys, shares, masked inputs, unmask) and five malicious (the
    # consistency check), each deserted under every (t, answering) setting.
    assert findings == [] and rounds == len(_DESERTED) * (4 + 5)


@pytest.mark.parametrize("emptied", ["even t", "t = 1"])
def test_a_server_going_on_after_an_empty_share_phase_is_caught(
    monkeypatch: pytest.MonkeyPatch, emptied: str
) -> None:
    # The held-out survivors `len(shared) < t & 1` (even t) and `< t ^ 1` (t = 1): after peeling,
    # too few sharers open the masked-input phase instead of aborting. Planted: the share
    # phase's deadline, at that t, reads a threshold of −1 (no peeling, no quorum).
    real = Server._close_shares
    threshold = 2 if emptied == "even t" else 1

    def go_on(self: Any) -> Any:
        original = self.config
        if original.threshold == threshold:
            self.config = _Lenient(original)
        try:
            return real(self)
        finally:
            self.config = original

    monkeypatch.setattr(Server, "_close_shares", go_on)
    sans_io = OurTarget().sans_io()
    assert sans_io is not None
    _, findings = _deserted_phase_checks(sans_io, 0)
    assert findings, "the empty share phase went unnoticed"
    assert all(f"t={threshold}: phase 2" in f and "did not abort" in f for f in findings)
    [result] = run_audits(OurTarget(), only=[7])
    assert result.verdict is Verdict.FAIL
    assert any("phase 2" in f for f in result.findings)


class _Lenient:
    """A config whose threshold reads as −1 (and its minimum of clients, t + 1, as 0)."""

    def __init__(self, config: Any) -> None:
        self._config = config

    def __getattr__(self, name: str) -> Any:
        return getattr(self._config, name)

    @property
    def threshold(self) -> int:
        return -1

    @property
    def min_clients(self) -> int:  # t + 1, as SecAggConfig.min_clients reads it
        return 0
