"""Our aggregations and trainers in other stacks: Flower (:mod:`protocols.integrations.flower`,
extra ``flower``) and PyTorch (:mod:`protocols.integrations.torch`, extra ``torch``).

Both are imported lazily: importing this package never needs ``flwr`` or ``torch``.
"""

from __future__ import annotations

__all__: list[str] = []
