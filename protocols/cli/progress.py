"""Progress for the command line (stderr): tqdm on a terminal, log lines elsewhere.

On a terminal the bar is `tqdm <https://tqdm.github.io>`_'s when it is installed
(``pip install 'secagg-dp[progress]'``), else a built-in one line; both show the rate and the
time left. When stderr is not a terminal (a log file, CI) a long task prints one line every
``log_every`` seconds instead — ``label: done/total (rate/s, ETA …)`` — so a five-minute audit
is never silent, and a short one stays quiet.
"""

from __future__ import annotations

import importlib
import sys
import time
from typing import Any, TextIO

__all__ = ["ProgressBar", "format_seconds"]


def format_seconds(seconds: float) -> str:
    """A duration as ``1h02m``, ``3m05s`` or ``42s``.

    Examples
    --------
    >>> format_seconds(42.4), format_seconds(185), format_seconds(3720)
    ('42s', '3m05s', '1h02m')
    """
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _tqdm() -> Any | None:
    try:
        return importlib.import_module("tqdm").tqdm
    except ImportError:
        return None


class ProgressBar:
    """Progress of labelled tasks (``update(label, done, total)``), at most every ``interval`` s.

    Parameters
    ----------
    stream
        Where to write (default stderr).
    width
        The built-in bar's width in characters.
    interval
        Least seconds between two redraws of the terminal bar.
    force
        Draw the terminal bar even when ``stream`` is not a terminal.
    log_every
        Off a terminal: seconds between two log lines of a running task.
    use_tqdm
        Use tqdm on a terminal when it is installed.

    Examples
    --------
    >>> import io
    >>> stream = io.StringIO()
    >>> bar = ProgressBar(stream=stream, force=True, interval=0.0, use_tqdm=False)
    >>> bar.update("share_keys", 5, 10)
    >>> bar.close()
    >>> "share_keys" in stream.getvalue() and "5/10" in stream.getvalue()
    True
    >>> log = io.StringIO()
    >>> quiet = ProgressBar(stream=log, log_every=0.0)
    >>> quiet.update("audit 4", 3, 9)
    >>> log.getvalue().startswith("audit 4: 3/9 (")
    True
    """

    def __init__(
        self,
        *,
        stream: TextIO | None = None,
        width: int = 30,
        interval: float = 0.1,
        force: bool = False,
        log_every: float = 30.0,
        use_tqdm: bool = True,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.interval = interval
        self.log_every = log_every
        terminal = force or _isatty(self.stream)
        self.enabled = True
        self._terminal = terminal
        self._tqdm_class = _tqdm() if terminal and use_tqdm else None
        self._tqdm: Any | None = None
        self._label: str | None = None
        self._start = time.monotonic()
        self._last = 0.0
        self._drawn = False

    def update(self, label: str, done: int, total: int) -> None:
        """Show ``done`` of ``total`` for ``label`` (a new label starts a new task)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if label != self._label:
            self.close()
            self._label, self._start, self._last = label, now, now
            if not self._terminal:
                self._last = now  # the first log line comes after log_every
        if self._tqdm_class is not None:
            self._update_tqdm(label, done, total)
            return
        if self._terminal:
            if done < total and now - self._last < self.interval:
                return
            self._last = now
            filled = self.width * done // max(total, 1)
            bar = "█" * filled + "·" * (self.width - filled)
            self.stream.write(f"\r{label:>15s} |{bar}| {done}/{total} {self._rate(done, total)}")
            self.stream.flush()
            self._drawn = True
        elif done < total and now - self._last >= self.log_every:
            self._last = now
            self.stream.write(f"{label}: {done}/{total} ({self._rate(done, total)})\n")
            self.stream.flush()

    def _rate(self, done: int, total: int) -> str:
        elapsed = time.monotonic() - self._start
        if done <= 0 or elapsed <= 0:
            return "…"
        rate = done / elapsed
        left = (total - done) / rate
        return f"{rate:.3g}/s, ETA {format_seconds(left)}"

    def _update_tqdm(self, label: str, done: int, total: int) -> None:
        assert self._tqdm_class is not None
        if self._tqdm is None:
            self._tqdm = self._tqdm_class(
                total=total, desc=label, file=self.stream, leave=False, dynamic_ncols=True
            )
        if self._tqdm.total != total:
            self._tqdm.total = total
        self._tqdm.update(done - self._tqdm.n)

    def close(self) -> None:
        """End the current task's line."""
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
        self._label = None


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
