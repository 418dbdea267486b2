"""``secagg-dp keys``: provision identities for the malicious mode (one key file per client and
the trust store that lists them all)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from protocols.cli.arguments import HelpFormatter, examples, positive_int
from protocols.cli.errors import CommandError
from secagg.identity import write_identities

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``keys`` subcommand."""
    parser = subparsers.add_parser(
        "keys",
        formatter_class=HelpFormatter,
        epilog=examples(
            "secagg-dp keys --clients 4 --out keys/",
        ),
        help="write identity keys and a trust store for malicious-mode rounds",
        description=(
            "Generate one Ed25519 identity per client (identity-<id>.key, readable by its owner "
            "only) and trust-store.json with every verification key, in --out. Give each node "
            "its own key file and every party the trust store, out of band (never through the "
            "aggregation server)."
        ),
    )
    parser.add_argument("--clients", type=positive_int, required=True, help="client ids 1..N")
    parser.add_argument("--out", type=Path, required=True, help="directory to write into")
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="reproducible keys (tests only: anyone with the seed has every key)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``secagg-dp keys``."""
    try:
        store = write_identities(args.out, range(1, args.clients + 1), args.seed)
    except OSError as error:
        raise CommandError(f"cannot write into {args.out}: {error}") from None
    print(
        f"wrote {len(store.ids())} identity keys and trust-store.json into {args.out} "
        f"(client ids 1..{args.clients})"
    )
    return 0
