"""Secure averages, iterative secure aggregates, federated trainers and the ``secagg-dp`` CLI.

Two wings: :mod:`protocols.aggregation` (secure weighted average, iterative secure aggregates,
geometric median / RFA) and :mod:`protocols.training` (numpy models, federated datasets,
corruption models). The aggregation entry points are re-exported here.
"""

from __future__ import annotations

from protocols.aggregation import (
    AverageResult,
    AverageSettings,
    DiscreteGaussianNoise,
    GeometricMedianResult,
    IterativeResult,
    IterativeSecureAggregate,
    geometric_median,
    one_step_rfa,
    run_iterative_aggregate,
    secure_weighted_average,
)

__all__ = [
    "AverageResult",
    "AverageSettings",
    "DiscreteGaussianNoise",
    "GeometricMedianResult",
    "IterativeResult",
    "IterativeSecureAggregate",
    "geometric_median",
    "one_step_rfa",
    "run_iterative_aggregate",
    "secure_weighted_average",
]
