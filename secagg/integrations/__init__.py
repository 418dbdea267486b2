"""Adapters that run the secure sum inside other federated-learning stacks.

:mod:`secagg.integrations.flower` carries the client and server state machines over Flower's
Message API (``pip install "secagg-dp[flower]"``). Flower is imported lazily: importing this
package, or the module itself, never needs ``flwr``.
"""

from __future__ import annotations

__all__: list[str] = []
