"""Secure averages, iterative secure aggregates, federated trainers and the ``secagg-dp`` CLI.

Two wings: :mod:`protocols.aggregation` (secure weighted average, iterative secure aggregates,
geometric median / RFA, superquantile / Δ-FL, Fed+) and :mod:`protocols.training` (numpy models,
federated datasets, corruption models, the FedAvg / Δ-FL / RFA, Fed+ and FFGB trainers). The main
entry points are re-exported here.
"""

from __future__ import annotations

from protocols.aggregation import (
    AverageResult,
    AverageSettings,
    DiscreteGaussianNoise,
    FedPlusAggregate,
    GeometricMedianResult,
    IterativeResult,
    IterativeSecureAggregate,
    SuperquantileResult,
    fedplus_aggregate,
    geometric_median,
    one_step_rfa,
    run_iterative_aggregate,
    secure_coordinate_average,
    secure_weighted_average,
    superquantile_aggregate,
)
from protocols.training import (
    FedPlusConfig,
    FFGBConfig,
    TrainerConfig,
    TrainingResult,
    train,
    train_fedplus,
    train_ffgb,
)

__all__ = [
    "AverageResult",
    "AverageSettings",
    "DiscreteGaussianNoise",
    "FFGBConfig",
    "FedPlusAggregate",
    "FedPlusConfig",
    "GeometricMedianResult",
    "IterativeResult",
    "IterativeSecureAggregate",
    "SuperquantileResult",
    "TrainerConfig",
    "TrainingResult",
    "fedplus_aggregate",
    "geometric_median",
    "one_step_rfa",
    "run_iterative_aggregate",
    "secure_coordinate_average",
    "secure_weighted_average",
    "superquantile_aggregate",
    "train",
    "train_fedplus",
    "train_ffgb",
]
