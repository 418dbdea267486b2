"""Aggregations over secure sums: the secure weighted average, iterative secure aggregates (RFA
Definition 1), and the geometric median by smoothed Weiszfeld with one-step RFA (RFA Algorithms 2
and 3).

The oracle :func:`secure_weighted_average` computes Σβᵢwᵢ/Σβᵢ through one secure sum (weights ride
in the same sum), optionally with distributed discrete Gaussian noise and RFA's effective-weight
condition; :func:`run_iterative_aggregate` chains oracle calls whose weights each client recomputes
from the previous release; :func:`geometric_median` is smoothed Weiszfeld as such an aggregate.
Every entry point has ``secure=False`` for plain numpy that agrees to quantisation error.
"""

from __future__ import annotations

from protocols.aggregation.encoding import (
    WEIGHT_COORDINATE_SCALE,
    ContributionLayout,
    DecodedSum,
)
from protocols.aggregation.fedplus import (
    REGULARIZERS,
    CoordinateAverageResult,
    FedPlusAggregate,
    FedPlusL2Rule,
    Regularizer,
    fedplus_aggregate,
    fedplus_objective,
    fedplus_offsets,
    secure_coordinate_average,
)
from protocols.aggregation.geometric_median import (
    GeometricMedianResult,
    WeiszfeldRule,
    geometric_median,
    geometric_median_objective,
    one_step_rfa,
    privacy_smoothing,
)
from protocols.aggregation.iterative import (
    CallPlan,
    Contributions,
    IterativeResult,
    IterativeRule,
    IterativeSecureAggregate,
    IterativeState,
    clip_rows,
    clip_rows_with_norms,
    run_iterative_aggregate,
)
from protocols.aggregation.secure_average import (
    AverageResult,
    AverageSettings,
    DiscreteGaussianNoise,
    EffectiveWeightError,
    SecureAverageSession,
    ServerView,
    ZeroWeightSumError,
    secure_weighted_average,
)
from protocols.aggregation.superquantile import (
    EMPTY_TAIL_POLICIES,
    QuantileSettings,
    QuantileTracker,
    SuperquantileResult,
    TrackingStep,
    superquantile_aggregate,
    tail_weights,
)

__all__ = [
    "EMPTY_TAIL_POLICIES",
    "REGULARIZERS",
    "WEIGHT_COORDINATE_SCALE",
    "AverageResult",
    "AverageSettings",
    "CallPlan",
    "ContributionLayout",
    "Contributions",
    "CoordinateAverageResult",
    "DecodedSum",
    "DiscreteGaussianNoise",
    "EffectiveWeightError",
    "FedPlusAggregate",
    "FedPlusL2Rule",
    "GeometricMedianResult",
    "IterativeResult",
    "IterativeRule",
    "IterativeSecureAggregate",
    "IterativeState",
    "QuantileSettings",
    "QuantileTracker",
    "Regularizer",
    "SecureAverageSession",
    "ServerView",
    "SuperquantileResult",
    "TrackingStep",
    "WeiszfeldRule",
    "ZeroWeightSumError",
    "clip_rows",
    "clip_rows_with_norms",
    "fedplus_aggregate",
    "fedplus_objective",
    "fedplus_offsets",
    "geometric_median",
    "geometric_median_objective",
    "one_step_rfa",
    "privacy_smoothing",
    "run_iterative_aggregate",
    "secure_coordinate_average",
    "secure_weighted_average",
    "superquantile_aggregate",
    "tail_weights",
]
