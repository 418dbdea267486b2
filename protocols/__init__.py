"""Secure averages, iterative secure aggregates, federated trainers and the ``secagg-dp`` CLI."""

from __future__ import annotations

__all__: list[str] = []
