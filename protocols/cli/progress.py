"""A dependency-free progress bar for the command line (written to stderr)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """Redraws one line per update, at most every ``interval`` seconds, on a terminal.

    When the stream is not a terminal (a log file, CI) it prints nothing unless ``force``.

    Examples
    --------
    >>> import io
    >>> stream = io.StringIO()
    >>> bar = ProgressBar(stream=stream, force=True, interval=0.0)
    >>> bar.update("share_keys", 5, 10)
    >>> bar.close()
    >>> "share_keys" in stream.getvalue() and "5/10" in stream.getvalue()
    True
    """

    def __init__(
        self,
        *,
        stream: TextIO | None = None,
        width: int = 30,
        interval: float = 0.1,
        force: bool = False,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.interval = interval
        self.enabled = force or self.stream.isatty()
        self._last = 0.0
        self._drawn = False

    def update(self, label: str, done: int, total: int) -> None:
        """Show ``done`` of ``total`` for ``label``."""
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < self.interval:
            return
        self._last = now
        filled = self.width * done // max(total, 1)
        bar = "█" * filled + "·" * (self.width - filled)
        self.stream.write(f"\r{label:>15s} |{bar}| {done}/{total}")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """End the progress line."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
