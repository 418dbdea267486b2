"""The ``secagg-dp`` command line.

Each subcommand lives in its own module with a ``register(subparsers)`` function that adds its
parser and sets ``func`` to a callable ``(argparse.Namespace) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import logging
from collections.abc import Callable, Sequence

from protocols.cli.errors import run_guarded

__all__ = ["build_parser", "main", "package_version"]

# Subcommand modules, imported only when the command line starts.
_COMMAND_MODULES: tuple[str, ...] = (
    "protocols.cli._sum",
    "protocols.cli._keys",
    "protocols.cli._account",
    "protocols.cli._quantile",
    "protocols.cli._train",
)


def package_version() -> str:
    """The installed secagg-dp version (``"unknown"`` when run from a source tree).

    Examples
    --------
    >>> isinstance(package_version(), str)
    True
    """
    try:
        return importlib.metadata.version("secagg-dp")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """Build the ``secagg-dp`` argument parser with every registered subcommand.

    Returns
    -------
    argparse.ArgumentParser
        The parser; ``parse_args`` yields a namespace whose ``func`` runs the subcommand.

    Examples
    --------
    >>> parser = build_parser()
    >>> args = parser.parse_args(["sum", "--clients", "4", "--dim", "8"])
    >>> args.clients, args.dim
    (4, 8)
    """
    parser = argparse.ArgumentParser(
        prog="secagg-dp",
        description="Secure aggregation and differential privacy for federated learning.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log protocol events")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in _COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``secagg-dp`` command line.

    Parameters
    ----------
    argv
        Arguments without the program name; ``None`` reads ``sys.argv``.

    Returns
    -------
    int
        The process exit status (0 on success).

    Examples
    --------
    >>> main(["sum", "--clients", "5", "--dim", "16", "--seed", "1", "--quiet"])
    0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    command: Callable[[argparse.Namespace], int] = args.func
    return run_guarded(f"secagg-dp {args.command}", lambda: command(args), verbose=args.verbose)
