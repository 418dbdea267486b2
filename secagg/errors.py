"""The protocol error families (DESIGN.md: one base, local misuse versus invalid peer input)."""

from __future__ import annotations

__all__ = [
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
    """
