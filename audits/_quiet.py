"""Silence the library's expected warnings while an audit drives it (private)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["quiet_library_warnings"]


@contextlib.contextmanager
def quiet_library_warnings() -> Iterator[None]:
    """Raise the library loggers to ERROR (planned-vs-delivered ρ, aborted rounds) meanwhile.

    Examples
    --------
    >>> with quiet_library_warnings():
    ...     logging.getLogger("secagg").getEffectiveLevel() == logging.ERROR
    True
    """
    names = ("protocols", "dpquantile", "secagg")
    previous = {name: logging.getLogger(name).level for name in names}
    try:
        for name in names:
            logging.getLogger(name).setLevel(logging.ERROR)
        yield
    finally:
        for name, level in previous.items():
            logging.getLogger(name).setLevel(level)
