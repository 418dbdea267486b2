"""Discrete Gaussian and Laplace samplers, the zCDP accountant and the distributed DP quantile."""

from __future__ import annotations

__all__: list[str] = []
