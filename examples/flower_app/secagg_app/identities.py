"""Where each party of the app finds the identities the malicious mode needs.

In order of preference:

1. A node's own config (``flower-supernode --node-config "secagg-dp-identity='…'
   secagg-dp-trust-store='…'"``): what a deployment uses — the node operator provisions the key,
   the server has no say (``deploy.py`` does this).
2. The run config's ``keys-dir`` (a directory ``secagg-dp keys`` wrote): convenient when server
   and nodes share a disk (a simulation on one machine).
3. Neither: *demo identities* derived from a public label and the partition id, so that
   ``flwr run .`` works out of the box. Anyone can compute them — they exercise the protocol but
   give no security against a malicious server; a warning says so.
"""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path

from flwr.app import Context

from secagg import IdentityKey, TrustStore, generate_identities
from secagg.identity import load_identity
from secagg.integrations.flower import IDENTITY_CONFIG_KEY, TRUST_STORE_CONFIG_KEY

logger = logging.getLogger(__name__)

DEMO_SEED = b"secagg-dp example app: demo identities, NOT SECRET"


@cache
def demo_identities(count: int) -> tuple[dict[int, IdentityKey], TrustStore]:
    """Identities for client ids 1..count that anyone can recompute (demo only)."""
    logger.warning(
        "using demo identities derived from a public label: the malicious mode runs, but a "
        "malicious server could impersonate every client; provision keys with `secagg-dp keys`"
    )
    return generate_identities(range(1, count + 1), DEMO_SEED)


def _partition(context: Context) -> tuple[int, int]:
    return int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])


def node_identity(context: Context) -> IdentityKey:
    """This node's identity key (client id = partition id + 1)."""
    path = context.node_config.get(IDENTITY_CONFIG_KEY)
    if isinstance(path, str) and path:
        return load_identity(path)
    partition, count = _partition(context)
    keys_dir = str(context.run_config.get("keys-dir", ""))
    if keys_dir:
        return load_identity(Path(keys_dir) / f"identity-{partition + 1}.key")
    return demo_identities(count)[0][partition + 1]


def node_trust_store(context: Context) -> TrustStore:
    """The trust store this node checks every other client against."""
    path = context.node_config.get(TRUST_STORE_CONFIG_KEY)
    if isinstance(path, str) and path:
        return TrustStore.from_file(path)
    keys_dir = str(context.run_config.get("keys-dir", ""))
    if keys_dir:
        return TrustStore.from_file(Path(keys_dir) / "trust-store.json")
    return demo_identities(_partition(context)[1])[1]


def server_trust_store(keys_dir: str, num_partitions: int) -> TrustStore:
    """The ServerApp's trust store: ``keys-dir``'s, else the demo one."""
    if keys_dir:
        return TrustStore.from_file(Path(keys_dir) / "trust-store.json")
    return demo_identities(num_partitions)[1]
