"""Audit 7: a session whose later sum has no secure member set left is refused when that sum
begins (``Server.begin_iteration`` raises ``TooFewSurvivorsError`` and aborts) — and a server
that opens the sum anyway, or refuses it with another error, is caught."""

from __future__ import annotations

from typing import Any

import pytest

import secagg
from audits.ours import OurTarget


def _problem() -> str | None:
    probe: Any = OurTarget().secure_sum()
    result: str | None = probe.late_member_floor(0)
    return result


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_ours_refuses_a_sum_whose_members_peel_to_nobody() -> None:
    assert _problem() is None


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_server_that_opens_the_sum_anyway_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 12's survivor `len(members) < t % 1`: the floor never binds, begin_iteration
    # returns no request and the server waits for masked inputs from nobody.
    real = secagg.Server.begin_iteration

    def lenient(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return real(self, *args, **kwargs)
        except secagg.TooFewSurvivorsError:
            return []

    monkeypatch.setattr(secagg.Server, "begin_iteration", lenient)
    problem = _problem()
    assert problem is not None and "instead of refusing it" in problem, problem


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_refusal_with_another_error_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = secagg.Server.begin_iteration

    def other(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return real(self, *args, **kwargs)
        except secagg.TooFewSurvivorsError as error:
            raise ValueError(str(error)) from None

    monkeypatch.setattr(secagg.Server, "begin_iteration", other)
    problem = _problem()
    assert problem is not None and "not TooFewSurvivorsError" in problem, problem
