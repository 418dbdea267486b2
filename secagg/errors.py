"""The protocol error families (DESIGN.md: one base, local misuse versus invalid peer input)."""

from __future__ import annotations

__all__ = [
    "InsecureSettingsWarning",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "TooFewSurvivorsError",
]


class ProtocolError(Exception):
    """Base class of every error a protocol party raises."""


class LocalProtocolError(ProtocolError):
    """The caller misused the API (for example, a message passed in the wrong state)."""


class RemoteProtocolError(ProtocolError):
    """A peer sent something invalid.

    Parameters
    ----------
    message
        What was wrong, without secret-dependent detail.
    peer_id
        The id of the peer that sent it, or ``None`` when the bytes cannot be attributed yet
        (for example, a message that failed to decode).

    Examples
    --------
    >>> err = RemoteProtocolError("bad share", peer_id=7)
    >>> err.peer_id, str(err)
    (7, 'bad share (peer 7)')
    """

    def __init__(self, message: str, *, peer_id: int | None = None) -> None:
        self.peer_id = peer_id
        self.reason = message
        super().__init__(message if peer_id is None else f"{message} (peer {peer_id})")


class TooFewSurvivorsError(ProtocolError):
    """Fewer parties survived than the threshold needs: the round aborted cleanly.

    Nothing about any individual input was revealed; the round must be restarted.

    Parameters
    ----------
    message
        Which phase fell short, and by how much.
    arrived, min_inputs
        Set when the server refused to unmask because only ``arrived`` masked inputs came in
        and the release needs ``min_inputs`` (``Server(min_inputs=...)``); ``None`` otherwise.

    Examples
    --------
    >>> err = TooFewSurvivorsError("short", arrived=3, min_inputs=4)
    >>> err.arrived, err.min_inputs, str(err)
    (3, 4, 'short')
    """

    def __init__(
        self, message: str, *, arrived: int | None = None, min_inputs: int | None = None
    ) -> None:
        self.arrived = arrived
        self.min_inputs = min_inputs
        super().__init__(message)


class InsecureSettingsWarning(UserWarning):
    """Settings that run but protect (almost) nothing: a 2-client sum (each client learns the
    other's input by subtracting its own), Shamir threshold t = 1 (any one client's shares
    reveal the secrets), a quantisation grid coarser than every input.

    Examples
    --------
    >>> issubclass(InsecureSettingsWarning, UserWarning)
    True
    """
