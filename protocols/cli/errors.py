"""One error handler for both command lines (``secagg-dp``, ``secagg-dp-audit``).

Every error is one line on stderr, ``<program>: error: <message>`` (a warning, such as
:class:`secagg.InsecureSettingsWarning`, ``<program>: warning: <message>``), and the exit status
says what happened:

====  ==================================================================================
0     success
1     the command ran and its verdict is negative (a secure total that does not match, an
      audit that failed)
2     a bad argument, input or setting: nothing (further) was done
3     ``secagg-dp sum``: the round aborted cleanly (too few survivors)
130   interrupted (Ctrl-C)
141   the output pipe closed early (``| head``): the command stops quietly
====  ==================================================================================

``--verbose`` (or ``SECAGG_DP_TRACEBACK=1``) shows the traceback of an unexpected error.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CommandError",
    "run_guarded",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class CommandError(Exception):
    """A user-facing error of a command: printed as one line, exit status 2.

    Examples
    --------
    >>> str(CommandError("--bits must lie in [1, 64]; got 70"))
    '--bits must lie in [1, 64]; got 70'
    """


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (captured output in tests)
        pass


def run_guarded(program: str, command: Callable[[], int], *, verbose: bool = False) -> int:
    """Run ``command`` and turn every way it can end into one line and an exit status.

    Parameters
    ----------
    program
        The name printed before ``error:`` (``"secagg-dp train"``).
    command
        The subcommand; returns its own exit status.
    verbose
        Re-raise unexpected errors with their traceback.

    Returns
    -------
    int
        The exit status (see the module's table).

    Examples
    --------
    >>> def bad() -> int:
    ...     raise CommandError("--out is not writable")
    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     status = run_guarded("secagg-dp train", bad)
    >>> status, err.getvalue()
    (2, 'secagg-dp train: error: --out is not writable\\n')
    """

    def one_line(message: Warning | str, *_where: Any, **_options: Any) -> None:
        # warnings.showwarning's signature; the source location means nothing to a user.
        print(f"{program}: warning: {message}", file=sys.stderr)

    try:
        with warnings.catch_warnings():
            warnings.showwarning = one_line
            return command()
    except KeyboardInterrupt:
        print(f"{program}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except MemoryError:
        print(
            f"{program}: error: out of memory: reduce the problem size (--clients, --dim, ...)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except CommandError as error:
        print(f"{program}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, TypeError, OSError, RuntimeError) as error:
        if verbose or os.environ.get("SECAGG_DP_TRACEBACK"):
            raise
        print(f"{program}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
