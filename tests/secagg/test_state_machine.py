"""The protocol state machine over the real client and server: any delivery order, duplicates,
replays, crashes at any point, premature deadlines and hostile unmask requests.

There is one such machine, audit 7's (:func:`audits.protocol_audits.secure_sum_machine`); this
module runs it on our parties and adds what only our server exposes (its dropped list, its
abort reason, its refusal of calls after an abort)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from audits.ours import OurTarget
from audits.protocol_audits import secure_sum_machine
from secagg import LocalProtocolError, Server, ServerState

_PARTIES = OurTarget().sans_io()
assert _PARTIES is not None
_Audited = secure_sum_machine(_PARTIES, seed=0)


class SecureSumMachine(_Audited):  # type: ignore[misc, valid-type]
    """Audit 7's machine, plus the checks only our :class:`secagg.Server` makes possible."""

    def teardown(self) -> None:
        super().teardown()
        server = self.server
        assert isinstance(server, Server)
        if server.state is ServerState.COMPLETED:
            result = server.result
            assert set(result.survivors) | set(result.dropped) == set(self.clients)
        else:
            assert server.state is ServerState.ABORTED and server.abort_reason
            with pytest.raises(LocalProtocolError):
                server.close_phase()


TestSecureSumMachine = SecureSumMachine.TestCase
TestSecureSumMachine.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.slow
def test_state_machine_deep() -> None:
    """The same machine, fifteen times the examples (slow tier)."""
    run_state_machine_as_test(
        SecureSumMachine,
        settings=settings(
            max_examples=1500,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
