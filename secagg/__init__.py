"""Pairwise-masking secure sum over Z_M (SecAgg and SecAgg+) with dropout recovery.

The quickest way in is :func:`secure_sum`, which runs the real client and server state
machines in memory::

    >>> from secagg import secure_sum
    >>> secure_sum([[1, 2], [3, 4], [5, 6]], seed=0).total.tolist()
    [9, 12]

To run the protocol over your own transport, drive :class:`Client` and :class:`Server`
yourself: each takes a message (or its bytes) and returns the messages to send.
"""

from __future__ import annotations

from secagg.client import Client, ClientState
from secagg.config import PHASES, Phase, SecAggConfig, ThreatModel
from secagg.driver import Delivery, PeerFault, RoundDriver, Transport
from secagg.errors import (
    InsecureSettingsWarning,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    TooFewSurvivorsError,
)
from secagg.graph import CommunicationGraph, build_graph
from secagg.identity import IdentityKey, TrustStore, generate_identities
from secagg.inputs import LazyInputs
from secagg.messages import (
    AdvertiseKeys,
    ConsistencyRequest,
    ConsistencySignature,
    EncryptedShares,
    ForwardedShares,
    IterationRequest,
    KeyDirectory,
    MaskedInput,
    Message,
    UnmaskRequest,
    UnmaskResponse,
    decode_message,
    encode_message,
)
from secagg.randomness import KeystreamRandom, RandomSource
from secagg.ring import HeadroomError, Quantizer, Ring, check_headroom, required_bits
from secagg.runner import (
    SecureSumResult,
    Session,
    default_threshold,
    parse_dropouts,
    plain_outcome,
    secure_sum,
    summed_clients,
)
from secagg.server import SecAggResult, Server, ServerState

__all__ = [
    "PHASES",
    "AdvertiseKeys",
    "Client",
    "ClientState",
    "CommunicationGraph",
    "ConsistencyRequest",
    "ConsistencySignature",
    "Delivery",
    "EncryptedShares",
    "ForwardedShares",
    "HeadroomError",
    "IdentityKey",
    "InsecureSettingsWarning",
    "IterationRequest",
    "KeyDirectory",
    "KeystreamRandom",
    "LazyInputs",
    "LocalProtocolError",
    "MaskedInput",
    "Message",
    "PeerFault",
    "Phase",
    "ProtocolError",
    "Quantizer",
    "RandomSource",
    "RemoteProtocolError",
    "Ring",
    "RoundDriver",
    "SecAggConfig",
    "SecAggResult",
    "SecureSumResult",
    "Server",
    "ServerState",
    "Session",
    "ThreatModel",
    "TooFewSurvivorsError",
    "Transport",
    "TrustStore",
    "UnmaskRequest",
    "UnmaskResponse",
    "build_graph",
    "check_headroom",
    "decode_message",
    "default_threshold",
    "encode_message",
    "generate_identities",
    "parse_dropouts",
    "plain_outcome",
    "required_bits",
    "secure_sum",
    "summed_clients",
]
