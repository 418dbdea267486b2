"""Discrete Gaussian and Laplace samplers, the zCDP accountant and the distributed DP quantile.

Samplers draw integer noise from a cryptographic stream (:class:`secagg.KeystreamRandom`): the
exact CKS20 sampler, a fast table-based sampler with a proven total-variation bound, and the exact
discrete Laplace. Every release is described by an immutable event; :class:`ZCDPAccountant`
composes events and converts them to (ε, δ); :class:`PrivacyBudget` refuses a release that would
overspend before its noise is drawn. :func:`dp_quantile` estimates a quantile of the clients'
values from a noisy hierarchical histogram summed through :func:`secagg.secure_sum`.
"""

from __future__ import annotations

from dpquantile._fast_sampler import (
    MAX_FAST_SIGMA,
    FastDiscreteGaussian,
    sample_discrete_gaussian,
)
from dpquantile.accounting import (
    NEIGHBOURING_RELATIONS,
    ZCDP,
    BudgetExceededError,
    Certificate,
    ComposedEvent,
    DiscreteGaussian,
    DiscreteLaplace,
    DistributedDiscreteGaussian,
    MechanismEvent,
    Neighbouring,
    NeighbouringMismatchError,
    PrivacyBudget,
    PrivacyEvent,
    SelfComposedEvent,
    ZCDPAccountant,
    kls21_sensitivities,
    on_common_relation,
    rho_for_epsilon,
)
from dpquantile.histogram import QUANTILE_READERS, HistogramTree, QuantileReader, isotonic_cdf
from dpquantile.mechanisms import (
    TAIL_FAILURE_PROBABILITY,
    DistributedDiscreteGaussianMechanism,
    noise_tail_bound,
    sigma_for_rho,
    tail_factor,
)
from dpquantile.pmf import (
    discrete_gaussian_pmf,
    discrete_gaussian_tail,
    discrete_gaussian_variance,
    discrete_laplace_pmf,
)
from dpquantile.quantile import (
    QuantileResult,
    SumRunner,
    dp_quantile,
    histogram_sensitivities,
    quantile_mechanism,
    quantile_noise_sigma,
    quantile_scale,
)
from dpquantile.release import NoisyRelease, add_discrete_gaussian_noise
from dpquantile.samplers import (
    MAX_EXACT_SIGMA,
    ExactDiscreteGaussian,
    ExactDiscreteLaplace,
    IntegerNoiseSampler,
    sample_discrete_gaussian_exact,
    sample_discrete_laplace,
)

__all__ = [
    "MAX_EXACT_SIGMA",
    "MAX_FAST_SIGMA",
    "NEIGHBOURING_RELATIONS",
    "QUANTILE_READERS",
    "TAIL_FAILURE_PROBABILITY",
    "ZCDP",
    "BudgetExceededError",
    "Certificate",
    "ComposedEvent",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "DistributedDiscreteGaussian",
    "DistributedDiscreteGaussianMechanism",
    "ExactDiscreteGaussian",
    "ExactDiscreteLaplace",
    "FastDiscreteGaussian",
    "HistogramTree",
    "IntegerNoiseSampler",
    "MechanismEvent",
    "Neighbouring",
    "NeighbouringMismatchError",
    "NoisyRelease",
    "PrivacyBudget",
    "PrivacyEvent",
    "QuantileReader",
    "QuantileResult",
    "SelfComposedEvent",
    "SumRunner",
    "ZCDPAccountant",
    "add_discrete_gaussian_noise",
    "discrete_gaussian_pmf",
    "discrete_gaussian_tail",
    "discrete_gaussian_variance",
    "discrete_laplace_pmf",
    "dp_quantile",
    "histogram_sensitivities",
    "isotonic_cdf",
    "kls21_sensitivities",
    "noise_tail_bound",
    "on_common_relation",
    "quantile_mechanism",
    "quantile_noise_sigma",
    "quantile_scale",
    "rho_for_epsilon",
    "sample_discrete_gaussian",
    "sample_discrete_gaussian_exact",
    "sample_discrete_laplace",
    "sigma_for_rho",
    "tail_factor",
]
