"""Privacy events, the zCDP / Rényi accountant, and a budget that refuses to overspend.

Every noisy release is described by an immutable *event*. An event bounds the Rényi divergence of
the release by a minimum of lines, ``D_α ≤ min_i (ξ_i + α·ρ_i)`` for all orders α > 1 (pure ρ-zCDP
is the single line ``(0, ρ)``). The :class:`ZCDPAccountant` adds these curves under composition and
converts the total to (ε, δ) with the tight conversion of Canonne–Kamath–Steinke (CKS20 Cor. 13,
applied order by order), minimised over real α. An event may also carry a total-variation bound η
(the fast sampler's distance from the exact discrete Gaussian); the accountant adds
``(1 + e^ε)·η`` to δ. A :class:`PrivacyBudget` checks a release against its limit *before* the
release happens and leaves its ledger untouched when it refuses.

References: CKS20 = Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy"
(NeurIPS 2020, arXiv:2004.00010); KLS21 = Kairouz, Liu, Steinke, "The Distributed Discrete Gaussian
Mechanism for Federated Learning with Secure Aggregation" (ICML 2021, arXiv:2102.06387);
BS16 = Bun, Steinke, "Concentrated Differential Privacy" (TCC 2016, arXiv:1605.02065).
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import importlib
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from types import ModuleType
from typing import Any, Literal, Self

import numpy as np
from numpy.typing import NDArray

from dpquantile._checks import (
    check_count,
    check_nonnegative,
    check_positive,
    check_probability,
)
from dpquantile.pmf import discrete_gaussian_pmf, discrete_gaussian_tail

__all__ = [
    "NEIGHBOURING_RELATIONS",
    "ZCDP",
    "BudgetExceededError",
    "Certificate",
    "ComposedEvent",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "DistributedDiscreteGaussian",
    "MechanismEvent",
    "Neighbouring",
    "NeighbouringMismatchError",
    "PrivacyBudget",
    "PrivacyEvent",
    "SelfComposedEvent",
    "ZCDPAccountant",
    "kls21_sensitivities",
    "on_common_relation",
    "rho_for_epsilon",
]

# A Rényi bound D_α ≤ ξ + α·ρ for every α > 1, stored as (ξ, ρ).
RenyiLine = tuple[float, float]

# Which datasets an event's guarantee compares: one client added or removed (the number of
# clients is private), or one client's data replaced by another's (the number is public).
Neighbouring = Literal["add_remove", "replace_one"]
NEIGHBOURING_RELATIONS: tuple[Neighbouring, ...] = ("add_remove", "replace_one")

# Orders α are searched as u = log(α − 1) on this interval (α − 1 from 1e-8 to 1e9).
_LOG_ORDER_MIN = math.log(1e-8)
_LOG_ORDER_MAX = math.log(1e9)
_ORDER_GRID = np.linspace(_LOG_ORDER_MIN, _LOG_ORDER_MAX, 601)
# Thm. 7 tail sums stay direct (≈40σ terms) in this σ range; outside it the Rényi route is used.
_EXACT_SIGMA_LIMIT = 1e5
_EXACT_SIGMA_FLOOR = 1e-3
# T-fold compositions of one scalar DG are exact (convolved pmf) up to this many support points.
_COMPOSED_MAX_POINTS = 1 << 14
# Relative error allowed for each convolved tail sum: δ is overstated by this margin, never under.
_COMPOSED_MARGIN = 1e-9


# Relative margin of _round_up: a few float operations (sums of exp, square roots) each err by
# ≤ 1 ulp, so the computed value may lie several ulps below the true one; 2^-40 ≈ 9·10^-13
# covers ≥ 4 000 such errors, far below any tolerance that matters to ε or δ.
_ROUND_UP_MARGIN = 2.0**-40


def _round_up(value: float) -> float:
    """A float above the true value of a positive ``value`` computed in floating point
    (transcendental terms, a few operations): ``value·(1 + 2^-40)``, then the next float — an
    upper bound however the inputs' roundings fell. Non-positive values are returned as is."""
    if value > 0:
        return math.nextafter(value * (1.0 + _ROUND_UP_MARGIN), math.inf)
    return value


def _ceil_ratio(numerator: int, denominator: int) -> float:
    """The smallest float >= numerator/denominator (> 0); Python's int division rounds exactly."""
    try:
        result = numerator / denominator
    except OverflowError:
        return math.inf
    if math.isinf(result):
        return result
    low_num, low_den = result.as_integer_ratio()
    if low_num * denominator < numerator * low_den:
        result = math.nextafter(result, math.inf)
    return result


def _ceil_float(value: Fraction) -> float:
    """The smallest float >= the exact rational ``value`` (directed rounding for ratios)."""
    return _ceil_ratio(value.numerator, value.denominator)


def _exact_sum(terms: Iterable[tuple[int, float]]) -> float:
    """Σ count·x over (count, x) pairs of floats >= 0, computed exactly and rounded up."""
    terms = [(count, x) for count, x in terms if count]
    if any(math.isinf(x) for _, x in terms):
        return math.inf
    parts = [(count * n, d) for count, x in terms for n, d in (x.as_integer_ratio(),)]
    if not parts:
        return 0.0
    denominator = max(d for _, d in parts)  # every d is a power of two
    return _ceil_ratio(sum(n * (denominator // d) for n, d in parts), denominator)


# --------------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------------


class NeighbouringMismatchError(ValueError):
    """Events whose guarantees compare different neighbouring datasets were composed.

    An add/remove guarantee and a replace-one guarantee do not add up to either; convert the
    add/remove events first with :meth:`PrivacyEvent.under_replace_one`.

    Examples
    --------
    >>> ComposedEvent((ZCDP(0.5), ZCDP(0.5, neighbouring="replace_one")))
    Traceback (most recent call last):
    ...
    dpquantile.accounting.NeighbouringMismatchError: cannot compose add_remove and replace_one \
events: convert the add_remove ones with event.under_replace_one() first
    """


def _check_neighbouring(value: object) -> Neighbouring:
    if value not in NEIGHBOURING_RELATIONS:
        raise ValueError(
            f"neighbouring must be one of {', '.join(NEIGHBOURING_RELATIONS)}; got {value!r}"
        )
    return value


def _common_relation(relations: Iterable[Neighbouring]) -> Neighbouring | None:
    found = set(relations)
    if len(found) > 1:
        raise NeighbouringMismatchError(
            "cannot compose add_remove and replace_one events: convert the add_remove ones "
            "with event.under_replace_one() first"
        )
    return found.pop() if found else None


def on_common_relation(events: Iterable[PrivacyEvent]) -> tuple[PrivacyEvent, ...]:
    """``events`` stated for one neighbouring relation, so that they compose: if any is
    replace-one, every add/remove one is converted (:meth:`PrivacyEvent.under_replace_one`);
    otherwise they are returned as they are.

    Examples
    --------
    >>> aligned = on_common_relation([ZCDP(0.5, neighbouring="replace_one"), ZCDP(0.25)])
    >>> [(e.rho, e.relation) for e in aligned]
    [(0.5, 'replace_one'), (1.0, 'replace_one')]
    """
    events = tuple(events)
    if not any(event.relation == "replace_one" for event in events):
        return events
    return tuple(event.under_replace_one() for event in events)


class PrivacyEvent(abc.ABC):
    """An immutable description of one or more noisy releases (base class of all events).

    Examples
    --------
    >>> isinstance(SelfComposedEvent(ZCDP(0.5), 2), PrivacyEvent)
    True
    """

    __slots__ = ()

    @abc.abstractmethod
    def leaves(self) -> Iterator[tuple[MechanismEvent, int]]:
        """Yield ``(mechanism_event, count)`` pairs whose composition this event is.

        Examples
        --------
        >>> list(SelfComposedEvent(ZCDP(0.5), 3).leaves())
        [(ZCDP(rho=0.5), 3)]
        """

    @property
    def relation(self) -> Neighbouring | None:
        """The neighbouring relation of every leaf (``None`` for an empty composition).

        Examples
        --------
        >>> SelfComposedEvent(ZCDP(0.5, neighbouring="replace_one"), 2).relation
        'replace_one'
        """
        return _common_relation(leaf.neighbouring for leaf, _ in self.leaves())

    @abc.abstractmethod
    def under_replace_one(self) -> PrivacyEvent:
        """The same release's guarantee for replace-one neighbours (itself if it already is).

        Replacing one client is removing it and adding another, so a query's sensitivity under
        replace-one is at most twice its add/remove sensitivity (triangle inequality); an event
        without a sensitivity (:class:`ZCDP`) uses zCDP group privacy for groups of 2, ρ → 4ρ
        (BS16 Prop. 27).

        Examples
        --------
        >>> ZCDP(0.5).under_replace_one()
        ZCDP(rho=2.0)
        >>> ZCDP(0.5).under_replace_one().relation
        'replace_one'
        """

    @property
    def rho(self) -> float:
        """The zCDP parameter ρ of the event: D_α ≤ α·ρ for every α > 1 (ρ adds, BS16 Lemma 2.3).

        Examples
        --------
        >>> ComposedEvent((ZCDP(0.5), ZCDP(0.25))).rho
        0.75
        """
        return _exact_sum((count, leaf.rho) for leaf, count in self.leaves())

    @abc.abstractmethod
    def to_dp_accounting(self, *, ignore_sampler_tv: bool = False) -> Any:
        """Return the equivalent ``dp_accounting.DpEvent`` (needs ``pip install 'secagg-dp[dp]'``).

        Parameters
        ----------
        ignore_sampler_tv
            ``dp_accounting`` has no total-variation term; an event carrying a sampler TV bound
            raises unless this is true, in which case the caller must add ``(1 + e^ε)·η`` to δ.

        Examples
        --------
        >>> ZCDP(0.5).to_dp_accounting()  # doctest: +SKIP
        ZCDpEvent(rho=0.5, xi=0.0)
        """


class MechanismEvent(PrivacyEvent):
    """One noisy release, described by Rényi lines and an optional total-variation bound.

    Examples
    --------
    >>> isinstance(DiscreteGaussian(1.0, 1.0), MechanismEvent)
    True
    """

    __slots__ = ()
    neighbouring: Neighbouring

    @abc.abstractmethod
    def renyi_bounds(self) -> tuple[RenyiLine, ...]:
        """Lines ``(ξ, ρ)`` such that ``D_α ≤ min (ξ + α·ρ)`` for every α > 1.

        Examples
        --------
        >>> ZCDP(0.5).renyi_bounds()
        ((0.0, 0.5),)
        """

    def total_variation(self) -> float:
        """Total-variation distance between the noise actually drawn and the analysed noise.

        Examples
        --------
        >>> ZCDP(0.5).total_variation()
        0.0
        """
        return 0.0

    def leaves(self) -> Iterator[tuple[MechanismEvent, int]]:
        """Yield ``(self, 1)``.

        Examples
        --------
        >>> list(ZCDP(0.5).leaves())
        [(ZCDP(rho=0.5), 1)]
        """
        yield self, 1

    @property
    def rho(self) -> float:
        """The zCDP parameter: ``min (ξ + ρ)`` over the lines, since ξ + αρ ≤ α(ξ + ρ) for α ≥ 1.

        Examples
        --------
        >>> DiscreteLaplace(scale=1.0, l1_sensitivity=1.0).rho  # min(ε₀, ε₀²/2)
        0.5
        """
        return min(_exact_sum(((1, xi), (1, rho))) for xi, rho in self.renyi_bounds())

    def _check_tv(self, ignore_sampler_tv: bool) -> None:
        if self.total_variation() > 0 and not ignore_sampler_tv:
            raise ValueError(
                f"{type(self).__name__} carries a sampler total-variation bound "
                f"{self.total_variation():.3g} that dp_accounting cannot express; pass "
                "ignore_sampler_tv=True and add (1 + e^ε)·η to δ yourself, or use ZCDPAccountant"
            )


def _dp_event_module() -> ModuleType:
    try:
        return importlib.import_module("dp_accounting.dp_event")
    except ImportError as error:
        raise ImportError(
            "to_dp_accounting() needs Google's dp_accounting package: pip install 'secagg-dp[dp]'"
        ) from error


@dataclass(frozen=True, slots=True)
class ZCDP(MechanismEvent):
    """A release known to satisfy ρ-zCDP (BS16 Def. 1.1).

    Parameters
    ----------
    rho
        ρ >= 0.

    Examples
    --------
    >>> ZCDP(0.5).rho
    0.5
    >>> ZCDPAccountant().compose(ZCDP(0.5)).rho
    0.5
    """

    rho: float
    neighbouring: Neighbouring = field(default="add_remove", repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_nonnegative("rho", self.rho))
        object.__setattr__(self, "neighbouring", _check_neighbouring(self.neighbouring))

    def under_replace_one(self) -> ZCDP:
        """ρ-zCDP for add/remove neighbours is 4ρ-zCDP for replace-one ones (BS16 Prop. 27, k = 2).

        Examples
        --------
        >>> ZCDP(0.25).under_replace_one().rho
        1.0
        """
        if self.neighbouring == "replace_one":
            return self
        return ZCDP(4.0 * self.rho, neighbouring="replace_one")  # exact: a power of two

    def renyi_bounds(self) -> tuple[RenyiLine, ...]:
        """``((0, ρ),)``: ρ-zCDP is D_α ≤ αρ (BS16 Def. 1.1).

        Examples
        --------
        >>> ZCDP(0.25).renyi_bounds()
        ((0.0, 0.25),)
        """
        return ((0.0, self.rho),)

    def to_dp_accounting(self, *, ignore_sampler_tv: bool = False) -> Any:
        """Return ``dp_accounting.ZCDpEvent(rho)``.

        Examples
        --------
        >>> ZCDP(0.5).to_dp_accounting()  # doctest: +SKIP
        ZCDpEvent(rho=0.5, xi=0.0)
        """
        return _dp_event_module().ZCDpEvent(rho=self.rho)


@dataclass(frozen=True, slots=True)
class DiscreteGaussian(MechanismEvent):
    """Release of an integer vector plus N_ℤ(0, σ²)^d noise (CKS20).

    Parameters
    ----------
    sigma
        Noise scale σ > 0 (grid units).
    l2_sensitivity
        L2 sensitivity Δ₂ >= 0 of the integer query.
    dimension
        Number of coordinates d >= 1 (Δ₂ already covers the vector; d scales the TV bound).
    sampler_tv_bound
        Total-variation distance η in [0, 1) between the noise drawn and exact N_ℤ(0, σ²)^d
        (0 for the exact sampler; the fast sampler reports its own bound times d).

    Examples
    --------
    >>> event = DiscreteGaussian(sigma=2.0, l2_sensitivity=1.0)
    >>> event.rho
    0.125
    >>> round(ZCDPAccountant().compose(event).epsilon(1e-5), 4)  # exact, CKS20 Thm. 7
    2.0113
    """

    sigma: float
    l2_sensitivity: float
    dimension: int = 1
    sampler_tv_bound: float = 0.0
    neighbouring: Neighbouring = field(default="add_remove", repr=False)
    _bounds: tuple[RenyiLine, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "neighbouring", _check_neighbouring(self.neighbouring))
        object.__setattr__(self, "sigma", check_positive("sigma", self.sigma))
        object.__setattr__(
            self, "l2_sensitivity", check_nonnegative("l2_sensitivity", self.l2_sensitivity)
        )
        object.__setattr__(self, "dimension", check_count("dimension", self.dimension, minimum=1))
        tv = check_nonnegative("sampler_tv_bound", self.sampler_tv_bound)
        if tv >= 1.0:
            raise ValueError(f"sampler_tv_bound must lie in [0, 1); got {tv!r}")
        object.__setattr__(self, "sampler_tv_bound", tv)
        # ρ = Δ²/(2σ²) (CKS20 Thm. 4 / Thm. 14), computed exactly and rounded up.
        l2_num, l2_den = self.l2_sensitivity.as_integer_ratio()
        sigma_num, sigma_den = self.sigma.as_integer_ratio()
        rho = _ceil_ratio(l2_num**2 * sigma_den**2, 2 * l2_den**2 * sigma_num**2)
        object.__setattr__(self, "_bounds", ((0.0, rho),))

    def renyi_bounds(self) -> tuple[RenyiLine, ...]:
        """``((0, Δ₂²/2σ²),)`` (CKS20 Thm. 4 and its multivariate form, Thm. 14).

        Examples
        --------
        >>> DiscreteGaussian(sigma=1.0, l2_sensitivity=1.0).renyi_bounds()
        ((0.0, 0.5),)
        """
        return self._bounds

    def total_variation(self) -> float:
        """The sampler's total-variation bound η for the whole release.

        Examples
        --------
        >>> DiscreteGaussian(1.0, 1.0, sampler_tv_bound=1e-30).total_variation()
        1e-30
        """
        return self.sampler_tv_bound

    def under_replace_one(self) -> DiscreteGaussian:
        """The same noise against a replace-one change: Δ₂ doubles (triangle inequality).

        Examples
        --------
        >>> DiscreteGaussian(sigma=2.0, l2_sensitivity=1.0).under_replace_one().rho
        0.5
        """
        if self.neighbouring == "replace_one":
            return self
        return dataclasses.replace(
            self, l2_sensitivity=2.0 * self.l2_sensitivity, neighbouring="replace_one"
        )

    def to_dp_accounting(self, *, ignore_sampler_tv: bool = False) -> Any:
        """Return ``dp_accounting.ZCDpEvent(Δ₂²/2σ²)``.

        Not a ``GaussianDpEvent``: a PLD accountant would then use the continuous Gaussian's exact
        curve, which is *below* the discrete Gaussian's for small σ (4.3772 vs 4.4302 at σ = 1).

        Examples
        --------
        >>> DiscreteGaussian(1.0, 1.0).to_dp_accounting()  # doctest: +SKIP
        ZCDpEvent(rho=0.5, xi=0.0)
        """
        self._check_tv(ignore_sampler_tv)
        return _dp_event_module().ZCDpEvent(rho=self.rho)


def _kls21_tau(num_clients: int, sigma: float) -> float:
    """τ = 10·Σ_{k=1}^{n−1} exp(−2π²σ²·k/(k+1)) (KLS21 Thm. 1)."""
    k = np.arange(1, num_clients, dtype=np.float64)
    return _round_up(float(10.0 * np.exp(-2.0 * math.pi**2 * sigma**2 * k / (k + 1.0)).sum()))


@dataclass(frozen=True, slots=True)
class DistributedDiscreteGaussian(MechanismEvent):
    """Release of a secure sum to which each of n clients added N_ℤ(0, σ²)^d (KLS21).

    Parameters
    ----------
    num_clients
        n >= 1 clients, each adding independent noise.
    sigma
        Per-client σ in grid units; KLS21's bound needs σ >= 1/2.
    l1_sensitivity, l2_sensitivity
        Δ₁ >= Δ₂ >= 0 of the (scaled, rounded) sum in grid units.
    dimension
        d >= 1.
    sampler_tv_bound
        Total-variation bound η of the noise drawn by all clients together (0 for exact noise).

    Examples
    --------
    >>> event = DistributedDiscreteGaussian.from_model_units(
    ...     num_clients=100, local_sigma=0.1, l2_clip=1.0, granularity=1e-3, dimension=2**16)
    >>> round(ZCDPAccountant().compose(event, count=100).epsilon(1e-5), 2)
    97.32
    """

    num_clients: int
    sigma: float
    l1_sensitivity: float
    l2_sensitivity: float
    dimension: int
    sampler_tv_bound: float = 0.0
    neighbouring: Neighbouring = field(default="add_remove", repr=False)
    tau: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "neighbouring", _check_neighbouring(self.neighbouring))
        n = check_count("num_clients", self.num_clients, minimum=1)
        sigma = check_positive("sigma", self.sigma)
        if sigma < 0.5:
            raise ValueError(
                f"sigma must be >= 1/2 in grid units for the KLS21 bound (τ explodes below ~0.8); "
                f"got {sigma!r}"
            )
        l1 = check_nonnegative("l1_sensitivity", self.l1_sensitivity)
        l2 = check_nonnegative("l2_sensitivity", self.l2_sensitivity)
        if l1 < l2:
            raise ValueError(
                f"l1_sensitivity must be >= l2_sensitivity (‖v‖₁ >= ‖v‖₂); got {l1!r} < {l2!r}"
            )
        tv = check_nonnegative("sampler_tv_bound", self.sampler_tv_bound)
        if tv >= 1.0:
            raise ValueError(f"sampler_tv_bound must lie in [0, 1); got {tv!r}")
        object.__setattr__(self, "num_clients", n)
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "l1_sensitivity", l1)
        object.__setattr__(self, "l2_sensitivity", l2)
        object.__setattr__(self, "dimension", check_count("dimension", self.dimension, minimum=1))
        object.__setattr__(self, "sampler_tv_bound", tv)
        object.__setattr__(self, "tau", _kls21_tau(n, sigma))

    @classmethod
    def from_model_units(
        cls,
        *,
        num_clients: int,
        local_sigma: float,
        l2_clip: float,
        granularity: float,
        dimension: int,
        beta: float | None = math.exp(-0.5),
        sampler_tv_bound: float = 0.0,
    ) -> DistributedDiscreteGaussian:
        """Build the event from model-unit parameters: clip c, grid γ, local σ (KLS21 Thm. 1).

        Parameters
        ----------
        num_clients, dimension
            n and d.
        local_sigma
            Per-client noise σ in model units; the grid σ is ``local_sigma / granularity``.
        l2_clip
            The clipping norm c of each client's vector.
        granularity
            The grid step γ (values are scaled by 1/γ and randomly rounded).
        beta
            Conditional-rounding parameter β in (0, 1) (KLS21 Prop. 22); ``None`` for plain
            randomized rounding. Default ``exp(-0.5)``, as in Google's reference accounting.
        sampler_tv_bound
            As for the constructor.

        Returns
        -------
        DistributedDiscreteGaussian

        Examples
        --------
        >>> event = DistributedDiscreteGaussian.from_model_units(
        ...     num_clients=100, local_sigma=0.1, l2_clip=1.0, granularity=1e-3, dimension=2**16)
        >>> event.sigma, round(event.l2_sensitivity ** 2)
        (100.0, 1017512)
        """
        l1, l2 = kls21_sensitivities(l2_clip, granularity, dimension, beta=beta)
        sigma = check_positive("local_sigma", local_sigma) / check_positive(
            "granularity", granularity
        )
        return cls(
            num_clients=num_clients,
            sigma=sigma,
            l1_sensitivity=l1,
            l2_sensitivity=l2,
            dimension=dimension,
            sampler_tv_bound=sampler_tv_bound,
        )

    def renyi_bounds(self) -> tuple[RenyiLine, ...]:
        """The three lines of KLS21 Thm. 1 (α-free term τd; L1 term; squared-sum term).

        Examples
        --------
        >>> lines = DistributedDiscreteGaussian(4, 2.0, 2.0, 2.0, 4).renyi_bounds()
        >>> len(lines), round(lines[1][1], 6)
        (3, 0.125)
        """
        n, sigma, d, tau = self.num_clients, self.sigma, self.dimension, self.tau
        l1, l2 = self.l1_sensitivity, self.l2_sensitivity
        root_n_sigma = math.sqrt(n) * sigma
        # KLS21 Thm. 1: D_α ≤ min{αΔ₂²/(2nσ²) + τd, (α/2)(Δ₂²/(nσ²) + 2Δ₁τ/(√n σ) + τ²d),
        #                         (α/2)(Δ₂/(√n σ) + τ√d)²}.
        first = (_round_up(tau * d), _round_up(l2**2 / (2.0 * n * sigma**2)))
        second = (
            0.0,
            _round_up(0.5 * (l2**2 / (n * sigma**2) + 2 * l1 * tau / root_n_sigma + tau**2 * d)),
        )
        third = (0.0, _round_up(0.5 * (l2 / root_n_sigma + tau * math.sqrt(d)) ** 2))
        return (first, second, third)

    def under_replace_one(self) -> DistributedDiscreteGaussian:
        """The same noise against a replace-one change: Δ₁ and Δ₂ double (triangle inequality).

        Examples
        --------
        >>> event = DistributedDiscreteGaussian(4, 2.0, 2.0, 2.0, 4).under_replace_one()
        >>> event.l1_sensitivity, event.l2_sensitivity, event.relation
        (4.0, 4.0, 'replace_one')
        """
        if self.neighbouring == "replace_one":
            return self
        return dataclasses.replace(
            self,
            l1_sensitivity=2.0 * self.l1_sensitivity,
            l2_sensitivity=2.0 * self.l2_sensitivity,
            neighbouring="replace_one",
        )

    def total_variation(self) -> float:
        """The clients' noise total-variation bound η.

        Examples
        --------
        >>> DistributedDiscreteGaussian(4, 2.0, 2.0, 2.0, 4).total_variation()
        0.0
        """
        return self.sampler_tv_bound

    def to_dp_accounting(self, *, ignore_sampler_tv: bool = False) -> Any:
        """Return ``dp_accounting.ZCDpEvent(rho, xi)`` for the line smallest at α = 1.

        ``dp_accounting`` cannot express a minimum of lines; one line alone is a valid (slightly
        looser) bound. With σ >= 1 in grid units τ is negligible and the lines coincide.

        Examples
        --------
        >>> DistributedDiscreteGaussian(4, 2.0, 2.0, 2.0, 4).to_dp_accounting()  # doctest: +SKIP
        ZCDpEvent(rho=0.125, xi=...)
        """
        self._check_tv(ignore_sampler_tv)
        xi, rho = min(self.renyi_bounds(), key=lambda line: line[0] + line[1])
        return _dp_event_module().ZCDpEvent(rho=rho, xi=xi)


def kls21_sensitivities(
    l2_clip: float, granularity: float, dimension: int, *, beta: float | None = math.exp(-0.5)
) -> tuple[float, float]:
    """Return (Δ₁, Δ₂) on the integer grid after scaling by 1/γ and randomized rounding (KLS21).

    Parameters
    ----------
    l2_clip
        Clipping norm c > 0 of each client's vector (model units).
    granularity
        Grid step γ > 0.
    dimension
        d >= 1.
    beta
        Conditional-rounding parameter β in (0, 1), or ``None`` for plain randomized rounding.

    Returns
    -------
    tuple of float
        ``(l1_sensitivity, l2_sensitivity)``.

    Examples
    --------
    >>> l1, l2 = kls21_sensitivities(1.0, 1e-3, 2**16, beta=None)
    >>> round(l2, 6)
    1256.0
    """
    c = check_positive("l2_clip", l2_clip)
    gamma = check_positive("granularity", granularity)
    d = check_count("dimension", dimension, minimum=1)
    # Plain randomized rounding: Δ₂ ≤ c/γ + √d (KLS21 Thm. 1).
    squared = (c / gamma + math.sqrt(d)) ** 2
    if beta is not None:
        beta = check_probability("beta", beta)
        # Conditional rounding: Δ₂² ≤ c²/γ² + d/4 + √(2 log 1/β)·(c/γ + √d/2) (KLS21 Prop. 22).
        conditional = (
            (c / gamma) ** 2
            + d / 4.0
            + math.sqrt(2.0 * math.log(1.0 / beta)) * (c / gamma + math.sqrt(d) / 2.0)
        )
        squared = min(squared, conditional)
    l2 = _round_up(math.sqrt(_round_up(squared)))
    # Integer vectors have ‖v‖₁ ≤ min(√d·‖v‖₂, ‖v‖₂²) (KLS21 Thm. 1).
    l1 = _round_up(l2 * min(math.sqrt(d), l2))
    return l1, l2


@dataclass(frozen=True, slots=True)
class DiscreteLaplace(MechanismEvent):
    """Release of an integer query plus discrete Laplace noise, P[x] ∝ exp(-|x|/scale).

    ε₀-DP with ε₀ = Δ₁/scale (CKS20 §4 / Ghosh et al. 2009), hence D_α ≤ min(ε₀, αε₀²/2)
    (BS16 Prop. 3.3).

    Parameters
    ----------
    scale
        The scale > 0.
    l1_sensitivity
        Δ₁ >= 0 of the integer query.

    Examples
    --------
    >>> event = DiscreteLaplace(scale=2.0, l1_sensitivity=1.0)
    >>> event.epsilon0
    0.5
    >>> ZCDPAccountant().compose(event).delta(0.5)  # pure DP: δ = 0 at ε₀
    0.0
    """

    scale: float
    l1_sensitivity: float
    neighbouring: Neighbouring = field(default="add_remove", repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "neighbouring", _check_neighbouring(self.neighbouring))
        object.__setattr__(self, "scale", check_positive("scale", self.scale))
        object.__setattr__(
            self, "l1_sensitivity", check_nonnegative("l1_sensitivity", self.l1_sensitivity)
        )

    def under_replace_one(self) -> DiscreteLaplace:
        """The same noise against a replace-one change: Δ₁ doubles (triangle inequality).

        Examples
        --------
        >>> DiscreteLaplace(scale=2.0, l1_sensitivity=1.0).under_replace_one().epsilon0
        1.0
        """
        if self.neighbouring == "replace_one":
            return self
        return dataclasses.replace(
            self, l1_sensitivity=2.0 * self.l1_sensitivity, neighbouring="replace_one"
        )

    @property
    def epsilon0(self) -> float:
        """The pure-DP parameter ε₀ = Δ₁/scale (computed exactly, rounded up).

        Examples
        --------
        >>> DiscreteLaplace(scale=4.0, l1_sensitivity=2.0).epsilon0
        0.5
        """
        return _ceil_float(Fraction(self.l1_sensitivity) / Fraction(self.scale))

    def renyi_bounds(self) -> tuple[RenyiLine, ...]:
        """``((ε₀, 0), (0, ε₀²/2))``: D_α ≤ D_∞ = ε₀ and BS16 Prop. 3.3.

        Examples
        --------
        >>> DiscreteLaplace(1.0, 1.0).renyi_bounds()
        ((1.0, 0.0), (0.0, 0.5))
        """
        eps0 = self.epsilon0
        return ((eps0, 0.0), (0.0, _ceil_float(Fraction(eps0) ** 2 / 2)))

    def to_dp_accounting(self, *, ignore_sampler_tv: bool = False) -> Any:
        """Return ``dp_accounting.DiscreteLaplaceDpEvent(1/scale, ⌈Δ₁⌉)``.

        Examples
        --------
        >>> DiscreteLaplace(2.0, 1.0).to_dp_accounting()  # doctest: +SKIP
        DiscreteLaplaceDpEvent(noise_parameter=0.5, sensitivity=1)
        """
        return _dp_event_module().DiscreteLaplaceDpEvent(
            noise_parameter=1.0 / self.scale, sensitivity=math.ceil(self.l1_sensitivity)
        )


@dataclass(frozen=True, slots=True)
class ComposedEvent(PrivacyEvent):
    """The composition of several events (in any order; ρ and Rényi curves add).

    Examples
    --------
    >>> both = ComposedEvent((ZCDP(0.25), ZCDP(0.5)))
    >>> both.rho
    0.75
    """

    events: tuple[PrivacyEvent, ...]

    def __post_init__(self) -> None:
        events = tuple(self.events)
        for event in events:
            if not isinstance(event, PrivacyEvent):
                raise TypeError(f"events must be PrivacyEvents; got {type(event).__name__}")
        object.__setattr__(self, "events", events)
        _common_relation(event.relation for event in events if event.relation is not None)

    def under_replace_one(self) -> ComposedEvent:
        """Every member under replace-one neighbours.

        Examples
        --------
        >>> ComposedEvent((ZCDP(0.25), ZCDP(1.0, neighbouring="replace_one"))).rho
        Traceback (most recent call last):
        ...
        dpquantile.accounting.NeighbouringMismatchError: cannot compose add_remove and \
replace_one events: convert the add_remove ones with event.under_replace_one() first
        >>> converted = ZCDP(0.25).under_replace_one()
        >>> ComposedEvent((converted, ZCDP(1.0, neighbouring="replace_one"))).rho
        2.0
        """
        return ComposedEvent(tuple(event.under_replace_one() for event in self.events))

    def leaves(self) -> Iterator[tuple[MechanismEvent, int]]:
        """Yield the leaves of every member.

        Examples
        --------
        >>> [count for _, count in ComposedEvent((ZCDP(0.1), ZCDP(0.2))).leaves()]
        [1, 1]
        """
        for event in self.events:
            yield from event.leaves()

    def to_dp_accounting(self, *, ignore_sampler_tv: bool = False) -> Any:
        """Return ``dp_accounting.ComposedDpEvent`` of the members' equivalents.

        Examples
        --------
        >>> ComposedEvent((ZCDP(0.1),)).to_dp_accounting()  # doctest: +SKIP
        ComposedDpEvent(events=[ZCDpEvent(rho=0.1, xi=0.0)])
        """
        for leaf, _ in self.leaves():  # a sampler TV refuses before dp_accounting is needed
            leaf._check_tv(ignore_sampler_tv)
        members = [e.to_dp_accounting(ignore_sampler_tv=ignore_sampler_tv) for e in self.events]
        return _dp_event_module().ComposedDpEvent(members)


@dataclass(frozen=True, slots=True)
class SelfComposedEvent(PrivacyEvent):
    """``count`` repetitions of one event.

    Examples
    --------
    >>> SelfComposedEvent(ZCDP(0.5), 100).rho
    50.0
    """

    event: PrivacyEvent
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.event, PrivacyEvent):
            raise TypeError(f"event must be a PrivacyEvent; got {type(self.event).__name__}")
        object.__setattr__(self, "count", check_count("count", self.count))

    def under_replace_one(self) -> SelfComposedEvent:
        """The member under replace-one neighbours, ``count`` times.

        Examples
        --------
        >>> SelfComposedEvent(ZCDP(0.25), 2).under_replace_one().rho
        2.0
        """
        return SelfComposedEvent(self.event.under_replace_one(), self.count)

    def leaves(self) -> Iterator[tuple[MechanismEvent, int]]:
        """Yield the member's leaves with their counts multiplied.

        Examples
        --------
        >>> list(SelfComposedEvent(SelfComposedEvent(ZCDP(0.1), 2), 3).leaves())
        [(ZCDP(rho=0.1), 6)]
        """
        for leaf, count in self.event.leaves():
            yield leaf, count * self.count

    def to_dp_accounting(self, *, ignore_sampler_tv: bool = False) -> Any:
        """Return ``dp_accounting.SelfComposedDpEvent``.

        Examples
        --------
        >>> SelfComposedEvent(ZCDP(0.1), 2).to_dp_accounting()  # doctest: +SKIP
        SelfComposedDpEvent(event=ZCDpEvent(rho=0.1, xi=0.0), count=2)
        """
        inner = self.event.to_dp_accounting(ignore_sampler_tv=ignore_sampler_tv)
        return _dp_event_module().SelfComposedDpEvent(inner, self.count)


# --------------------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------------------


def _conversion_epsilon(
    divergence: NDArray[np.float64], alpha: NDArray[np.float64], log_inv_delta: float
) -> NDArray[np.float64]:
    # ε_α = D_α + (log(1/δ) + (α−1)·log(1−1/α) − log α)/(α−1) (CKS20 Prop. 12 / Cor. 13).
    am1 = alpha - 1.0
    return divergence + (log_inv_delta + am1 * np.log1p(-1.0 / alpha) - np.log(alpha)) / am1


def _conversion_log_delta(
    divergence: NDArray[np.float64], alpha: NDArray[np.float64], epsilon: float
) -> NDArray[np.float64]:
    # log δ_α = (α−1)(D_α − ε) + (α−1)·log(1−1/α) − log α (CKS20 Prop. 12, solved for δ).
    am1 = alpha - 1.0
    return am1 * (divergence - epsilon) + am1 * np.log1p(-1.0 / alpha) - np.log(alpha)


def _minimise_over_orders(
    objective: Callable[[NDArray[np.float64]], NDArray[np.float64]],
) -> tuple[float, float]:
    """Minimise ``objective(α)`` over real α > 1; return ``(value, α)``.

    Every α gives a valid bound, so the result is whatever the search finds, evaluated exactly at
    the α it returns: a coarse grid over u = log(α − 1) locates the basin (the objective need not be
    convex once KLS21 minima are composed), bounded Brent refines between the grid neighbours.
    """
    grid_values = objective(1.0 + np.exp(_ORDER_GRID))
    best = int(np.nanargmin(grid_values))
    best_value = float(grid_values[best])
    best_alpha = 1.0 + math.exp(float(_ORDER_GRID[best]))
    low = float(_ORDER_GRID[max(best - 1, 0)])
    high = float(_ORDER_GRID[min(best + 1, _ORDER_GRID.size - 1)])

    def scalar(u: float) -> float:
        return float(objective(np.array([1.0 + math.exp(u)]))[0])

    from scipy import optimize  # noqa: PLC0415 - lazy: a Flower ClientApp process imports this module per message

    refined = optimize.minimize_scalar(
        scalar, bounds=(low, high), method="bounded", options={"xatol": 1e-12}
    )
    alpha = 1.0 + math.exp(float(refined.x))
    value = scalar(float(refined.x))
    if value < best_value:
        return value, alpha
    return best_value, best_alpha


# --------------------------------------------------------------------------------------------------
# Accountant
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Certificate:
    """What :meth:`ZCDPAccountant.certificate` certifies.

    Attributes
    ----------
    epsilon, delta
        The history is (ε, δ)-DP (``epsilon`` may be ``inf``).
    rho
        The composed zCDP ρ.
    sampler_tv_bound
        The samplers' total-variation bound η, summed.
    epsilon_without_tv
        The ε the releases' Rényi curves alone give (what η = 0 would certify).
    reason
        Why ``epsilon`` is infinite, or ``None``.

    Examples
    --------
    >>> ZCDPAccountant().compose(ZCDP(0.5)).certificate(1e-5).reason is None
    True
    """

    epsilon: float
    delta: float
    rho: float
    sampler_tv_bound: float
    epsilon_without_tv: float
    reason: str | None


class ZCDPAccountant:
    """Composes privacy events and converts the total to (ε, δ).

    ``compose`` adds an event's Rényi curve (pure zCDP events add their ρ); ``epsilon(δ)`` is the
    tight CKS20 Cor. 13 conversion minimised over real orders α > 1, except that a history that
    is exactly one scalar discrete Gaussian release is reported by its exact (ε, δ) curve
    (CKS20 Thm. 7), and exactly one discrete Laplace release by its pure ε₀ when smaller. Sampler
    total-variation bounds η add ``(1 + e^ε)·η`` to δ.

    Examples
    --------
    >>> accountant = ZCDPAccountant().compose(ZCDP(0.5), count=100)
    >>> accountant.rho
    50.0
    >>> round(ZCDPAccountant().compose(ZCDP(0.5)).epsilon(1e-5), 4)
    4.7284
    """

    __slots__ = ("_cache", "_dirty", "_linear_rho", "_linear_xi", "_lines", "_tv", "_weights")

    def __init__(self) -> None:
        self._weights: dict[MechanismEvent, int] = {}
        self._linear_xi = 0.0
        self._linear_rho = 0.0
        self._lines: list[tuple[NDArray[np.float64], NDArray[np.float64], int]] = []
        self._tv = 0.0
        self._cache: dict[tuple[str, float], tuple[float, float]] = {}
        self._dirty = False

    def compose(self, event: PrivacyEvent, count: int = 1) -> Self:
        """Add ``count`` repetitions of ``event`` to the history; return ``self``.

        Parameters
        ----------
        event
            Any :class:`PrivacyEvent` (composed events are flattened).
        count
            Number of repetitions, >= 0.

        Returns
        -------
        ZCDPAccountant
            ``self``, so that calls chain.

        Examples
        --------
        >>> ZCDPAccountant().compose(ZCDP(0.125)).compose(ZCDP(0.25), count=2).rho
        0.625
        """
        if not isinstance(event, PrivacyEvent):
            raise TypeError(f"event must be a PrivacyEvent; got {type(event).__name__}")
        count = check_count("count", count)
        relation = event.relation
        if relation is not None and self.relation not in (None, relation):
            raise NeighbouringMismatchError(
                f"this history is {self.relation}; the event is {relation}: convert the "
                "add_remove events with event.under_replace_one() before composing"
            )
        for leaf, leaf_count in list(event.leaves()):
            self._weights[leaf] = self._weights.get(leaf, 0) + leaf_count * count
        self._cache.clear()
        self._dirty = True
        return self

    def _refresh(self) -> None:
        """Aggregate the history: single-line events into one line, the rest grouped by event."""
        if not self._dirty:
            return
        self._dirty = False
        xi_terms: list[tuple[int, float]] = []
        rho_terms: list[tuple[int, float]] = []
        tv_terms: list[tuple[int, float]] = []
        lines: list[tuple[NDArray[np.float64], NDArray[np.float64], int]] = []
        for leaf, count in self._weights.items():
            if count == 0:
                continue
            bounds = leaf.renyi_bounds()
            if len(bounds) == 1:
                xi_terms.append((count, bounds[0][0]))
                rho_terms.append((count, bounds[0][1]))
            else:
                lines.append(
                    (np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds]), count)
                )
            tv_terms.append((count, leaf.total_variation()))
        self._linear_xi = _exact_sum(xi_terms)
        self._linear_rho = _exact_sum(rho_terms)
        self._lines = lines
        self._tv = _exact_sum(tv_terms)

    @property
    def relation(self) -> Neighbouring | None:
        """The neighbouring relation of the history (``None`` while it is empty).

        Examples
        --------
        >>> accountant = ZCDPAccountant().compose(ZCDP(0.5, neighbouring="replace_one"))
        >>> accountant.relation
        'replace_one'
        >>> accountant.compose(ZCDP(0.5))
        Traceback (most recent call last):
        ...
        dpquantile.accounting.NeighbouringMismatchError: this history is replace_one; the event \
is add_remove: convert the add_remove events with event.under_replace_one() before composing
        """
        for leaf in self._weights:
            return leaf.neighbouring
        return None

    def copy(self) -> ZCDPAccountant:
        """Return an independent accountant with the same history.

        Examples
        --------
        >>> original = ZCDPAccountant().compose(ZCDP(0.5))
        >>> clone = original.copy().compose(ZCDP(0.5))
        >>> original.rho, clone.rho
        (0.5, 1.0)
        """
        clone = ZCDPAccountant()
        clone._weights = dict(self._weights)
        clone._dirty = True
        return clone

    def as_event(self) -> ComposedEvent:
        """The whole history as one :class:`ComposedEvent` (each event ``count`` times).

        Raises
        ------
        ValueError
            For an empty history.

        Examples
        --------
        >>> ZCDPAccountant().compose(ZCDP(0.25), count=3).as_event().rho
        0.75
        """
        history = self.history
        if not history:
            raise ValueError("the accountant has composed nothing")
        return ComposedEvent(tuple(SelfComposedEvent(event, count) for event, count in history))

    def to_dp_accounting(self, *, ignore_sampler_tv: bool = False) -> Any:
        """The whole history as one ``dp_accounting.DpEvent`` (``pip install 'secagg-dp[dp]'``).

        Feed it to Google's accountants to check our ε independently, e.g.
        ``dp_accounting.rdp.RdpAccountant().compose(event).get_epsilon(1e-5)``.

        Examples
        --------
        >>> ZCDPAccountant().compose(ZCDP(0.5), count=2).to_dp_accounting()  # doctest: +SKIP
        ComposedDpEvent(events=[SelfComposedDpEvent(event=ZCDpEvent(rho=0.5, xi=0.0), count=2)])
        """
        return self.as_event().to_dp_accounting(ignore_sampler_tv=ignore_sampler_tv)

    @property
    def history(self) -> tuple[tuple[MechanismEvent, int], ...]:
        """The composed mechanism events with their counts, in first-seen order.

        Examples
        --------
        >>> ZCDPAccountant().compose(ZCDP(0.5), count=2).history
        ((ZCDP(rho=0.5), 2),)
        """
        return tuple((leaf, count) for leaf, count in self._weights.items() if count)

    @property
    def rho(self) -> float:
        """Total zCDP ρ of the history (ρ adds under composition, BS16 Lemma 2.3).

        Examples
        --------
        >>> ZCDPAccountant().compose(DiscreteGaussian(1.0, 1.0), count=4).rho
        2.0
        """
        return _exact_sum((count, leaf.rho) for leaf, count in self.history)

    @property
    def sampler_tv_bound(self) -> float:
        """Total sampler total-variation bound η of the history (TVs add over releases).

        Examples
        --------
        >>> event = DiscreteGaussian(1.0, 1.0, sampler_tv_bound=2.0**-130)
        >>> ZCDPAccountant().compose(event, count=4).sampler_tv_bound == 2.0**-128
        True
        """
        self._refresh()
        return self._tv

    def renyi_divergence(self, alpha: float) -> float:
        """Upper bound on the Rényi divergence of order ``alpha`` > 1 of the whole history.

        Examples
        --------
        >>> ZCDPAccountant().compose(ZCDP(0.5)).renyi_divergence(3.0)
        1.5
        """
        alpha = check_positive("alpha", alpha)
        if alpha <= 1.0:
            raise ValueError(f"alpha must be > 1; got {alpha!r}")
        return float(self._divergence(np.array([alpha]))[0])

    def _divergence(self, alpha: NDArray[np.float64]) -> NDArray[np.float64]:
        self._refresh()
        with np.errstate(over="ignore"):  # a huge ρ at a huge order is +inf, as it should be
            total = self._linear_xi + alpha * self._linear_rho
            for xis, rhos, count in self._lines:
                total = total + count * np.min(
                    xis[:, None] + rhos[:, None] * alpha[None, :], axis=0
                )
        return np.asarray(total, dtype=np.float64)

    def _single(self) -> MechanismEvent | None:
        history = self.history
        if len(history) == 1 and history[0][1] == 1:
            return history[0][0]
        return None

    def _exact_composed(self) -> _ComposedProfile | None:
        """The exact profile when the history is T ≥ 2 copies of one scalar DG release."""
        history = self.history
        if len(history) != 1 or history[0][1] < 2:
            return None
        event, count = history[0]
        if not (
            isinstance(event, DiscreteGaussian)
            and event.dimension == 1
            and event.l2_sensitivity > 0
            and event.l2_sensitivity.is_integer()
            and event.sigma >= _EXACT_SIGMA_FLOOR
            and math.isfinite(event.rho)
        ):
            return None
        return _composed_profile(event.sigma, int(event.l2_sensitivity), count)

    def _exact_gaussian(self) -> DiscreteGaussian | None:
        """The event when the history is one scalar DG release with an integer Δ (CKS20 Thm. 7)."""
        single = self._single()
        if (
            isinstance(single, DiscreteGaussian)
            and single.dimension == 1
            and single.l2_sensitivity > 0
            and single.l2_sensitivity.is_integer()
            and _EXACT_SIGMA_FLOOR <= single.sigma <= _EXACT_SIGMA_LIMIT
            and math.isfinite(single.rho)
        ):
            return single
        return None

    # -- (ε, δ) without the TV term -------------------------------------------------------------

    def _renyi_epsilon(self, delta: float) -> tuple[float, float]:
        key = ("eps", delta)
        if key not in self._cache:
            self._refresh()
            if self._linear_rho == 0 and self._linear_xi == 0 and not self._lines:
                self._cache[key] = (0.0, math.inf)
            else:
                log_inv_delta = -math.log(delta)
                value, alpha = _minimise_over_orders(
                    lambda a: _conversion_epsilon(self._divergence(a), a, log_inv_delta)
                )
                self._cache[key] = (max(0.0, _round_up(value)), alpha)
        return self._cache[key]

    def _renyi_delta(self, epsilon: float) -> float:
        key = ("delta", epsilon)
        if key not in self._cache:
            value, alpha = _minimise_over_orders(
                lambda a: _conversion_log_delta(self._divergence(a), a, epsilon)
            )
            self._cache[key] = (min(1.0, _round_up(math.exp(value))), alpha)
        return self._cache[key][0]

    def _base_epsilon(self, delta: float) -> float:
        renyi = self._renyi_epsilon(delta)[0]
        exact = self._exact_gaussian()
        if exact is not None:
            return _exact_gaussian_epsilon(exact, delta, upper=renyi)
        composed = self._exact_composed()
        if composed is not None:
            return _smallest_epsilon(composed.delta, delta, upper=renyi)
        single = self._single()
        if isinstance(single, DiscreteLaplace):
            return min(renyi, single.epsilon0)
        return renyi

    def _base_delta(self, epsilon: float) -> float:
        exact = self._exact_gaussian()
        if exact is not None:
            return _exact_gaussian_delta(exact, epsilon)
        composed = self._exact_composed()
        if composed is not None:
            return min(1.0, composed.delta(epsilon), self._renyi_delta(epsilon))
        single = self._single()
        if isinstance(single, DiscreteLaplace) and epsilon >= single.epsilon0:
            return 0.0
        self._refresh()
        if self._linear_rho == 0 and self._linear_xi == 0 and not self._lines:
            return 0.0
        return self._renyi_delta(epsilon)

    # -- public conversions ---------------------------------------------------------------------

    def epsilon(self, delta: float) -> float:
        """Smallest ε this accountant can certify at ``delta``: the history is (ε, δ)-DP.

        Parameters
        ----------
        delta
            δ in (0, 1).

        Returns
        -------
        float
            ε >= 0 (``inf`` if the sampler TV term alone exceeds δ).

        Examples
        --------
        >>> accountant = ZCDPAccountant().compose(ZCDP(1 / 8), count=100)
        >>> round(accountant.epsilon(1e-5), 4)
        35.0673
        """
        delta = check_probability("delta", delta)
        return self._with_tv(delta, self._base_epsilon)

    def certificate(self, delta: float) -> Certificate:
        """The (ε, δ) this history certifies, with the reason when no finite ε exists.

        A fast-sampler event carries a total-variation bound η (its distance from the ideal
        discrete Gaussian); the conversion pays (1 + e^ε)·η out of δ. At large ε that term
        exceeds δ and no finite ε can be certified, however little the releases leak: the
        certificate then says so. Events of the exact sampler carry η = 0.

        Examples
        --------
        >>> heavy = DistributedDiscreteGaussian(10, 2.0, 40.0, 20.0, 100, sampler_tv_bound=1e-30)
        >>> certificate = ZCDPAccountant().compose(heavy, count=10).certificate(1e-5)
        >>> certificate.epsilon, certificate.epsilon_without_tv > 60
        (inf, True)
        >>> print(certificate.reason)  # doctest: +ELLIPSIS
        no finite ε: the samplers' total-variation bound η = 1e-29 costs (1 + e^ε)·η of δ...
        """
        delta = check_probability("delta", delta)
        epsilon = self.epsilon(delta)
        ideal = self._base_epsilon(delta)
        eta = self.sampler_tv_bound
        reason = None
        if math.isinf(epsilon) and eta > 0 and math.isfinite(ideal):
            cost = (1.0 + math.exp(min(ideal, 700.0))) * eta
            reason = (
                f"no finite ε: the samplers' total-variation bound η = {eta:.3g} costs "
                f"(1 + e^ε)·η of δ, and at the ε = {ideal:.4g} the releases need without it "
                f"that is {cost:.3g} ≥ δ = {delta:g}; use the exact sampler "
                "(sampler='exact', η = 0) for this regime, or spend less"
            )
        elif math.isinf(epsilon):
            reason = "no finite ε: the releases' own Rényi curves certify none at this δ"
        return Certificate(
            epsilon=epsilon,
            delta=delta,
            rho=self.rho,
            sampler_tv_bound=eta,
            epsilon_without_tv=ideal,
            reason=reason,
        )

    def epsilon_renyi(self, delta: float) -> float:
        """ε from the Rényi curve alone (CKS20 Cor. 13 over real α), without the exact paths.

        :meth:`epsilon` returns the minimum of this and, for a single release, its exact curve.

        Examples
        --------
        >>> accountant = ZCDPAccountant().compose(DiscreteGaussian(1.0, 1.0))
        >>> round(accountant.epsilon_renyi(1e-5), 4), round(accountant.epsilon(1e-5), 4)
        (4.7284, 4.4302)
        """
        delta = check_probability("delta", delta)
        return self._with_tv(delta, lambda d: self._renyi_epsilon(d)[0])

    def epsilon_simple(self, delta: float) -> float:
        """The simple conversion ε = ρ + 2√(ρ·log(1/δ)) (BS16 Prop. 1.3), always >= :meth:`epsilon`.

        Examples
        --------
        >>> round(ZCDPAccountant().compose(ZCDP(0.5)).epsilon_simple(1e-5), 4)
        5.2985
        """
        delta = check_probability("delta", delta)

        def simple(d: float) -> float:
            rho = self.rho
            # BS16 Prop. 1.3: ρ-zCDP ⇒ (ρ + 2√(ρ log(1/δ)), δ)-DP.
            return _round_up(rho + 2.0 * math.sqrt(rho * math.log(1.0 / d)))

        return self._with_tv(delta, simple)

    def optimal_order(self, delta: float) -> float:
        """The real order α at which :meth:`epsilon`'s Rényi conversion is attained.

        Examples
        --------
        >>> round(ZCDPAccountant().compose(ZCDP(0.5)).optimal_order(1e-5), 2)
        5.43
        """
        delta = check_probability("delta", delta)
        return self._renyi_epsilon(delta)[1]

    def delta(self, epsilon: float) -> float:
        """Smallest δ this accountant can certify at ``epsilon`` (the inverse of :meth:`epsilon`).

        Parameters
        ----------
        epsilon
            ε >= 0.

        Returns
        -------
        float
            δ in [0, 1].

        Examples
        --------
        >>> accountant = ZCDPAccountant().compose(ZCDP(0.5))
        >>> accountant.delta(accountant.epsilon(1e-5)) <= 1e-5
        True
        """
        epsilon = check_nonnegative("epsilon", epsilon)
        base = self._base_delta(epsilon)
        self._refresh()
        if self._tv == 0:
            return base
        # TV coupling: P[M̃(x)∈S] ≤ P[M(x)∈S] + η ≤ e^ε(P[M̃(x')∈S] + η) + δ + η.
        return min(1.0, _round_up(base + (1.0 + math.exp(min(epsilon, 700.0))) * self._tv))

    def _with_tv(self, delta: float, base: Callable[[float], float]) -> float:
        """Smallest ε with base-δ(ε) + (1 + e^ε)·η ≤ δ, by monotone fixed-point iteration."""
        eta = self.sampler_tv_bound
        epsilon = base(delta)
        if eta == 0:
            return epsilon
        for _ in range(200):
            remaining = delta - (1.0 + math.exp(min(epsilon, 700.0))) * eta
            if remaining <= 0:
                return math.inf
            updated = base(remaining)
            if updated <= epsilon * (1.0 + 1e-13) + 1e-300:
                candidate = _round_up(max(updated, epsilon) * (1.0 + 1e-12))
                if self.delta(candidate) <= delta:
                    return candidate
            epsilon = max(updated, epsilon)
        return math.inf


def _exact_gaussian_delta(event: DiscreteGaussian, epsilon: float) -> float:
    """Exact δ(ε) of one scalar discrete Gaussian release with integer Δ (CKS20 Thm. 7)."""
    sigma_sq = event.sigma**2
    sensitivity = event.l2_sensitivity
    centre = epsilon * sigma_sq / sensitivity
    # δ = P[X > εσ²/Δ − Δ/2] − e^ε·P[X > εσ²/Δ + Δ/2], X ~ N_ℤ(0, σ²) (CKS20 Thm. 7).
    head = discrete_gaussian_tail(centre - sensitivity / 2.0, event.sigma)
    tail = discrete_gaussian_tail(centre + sensitivity / 2.0, event.sigma)
    if tail == 0.0:
        return max(0.0, head)
    return max(0.0, head - math.exp(epsilon) * tail)


def _exact_gaussian_epsilon(event: DiscreteGaussian, delta: float, *, upper: float) -> float:
    """Smallest ε with exact δ(ε) ≤ δ, searched in [0, upper] (``upper`` from the Rényi route)."""
    return _smallest_epsilon(lambda eps: _exact_gaussian_delta(event, eps), delta, upper=upper)


def _smallest_epsilon(profile: Callable[[float], float], delta: float, *, upper: float) -> float:
    """Smallest ε in [0, upper] with profile(ε) ≤ δ (profile decreasing; ``upper`` certified)."""
    if profile(0.0) <= delta:
        return 0.0
    if profile(upper) > delta:
        return upper  # numerical safety: never return less than the certified Rényi bound
    from scipy import optimize  # noqa: PLC0415 - lazy, as above

    root = optimize.brentq(lambda eps: profile(eps) - delta, 0.0, upper, xtol=1e-14, rtol=1e-14)
    candidate = float(root)
    # Step up until the computed δ is certainly within the target. brentq stops within
    # xtol + rtol·|root| of the crossing, an absolute 1e-14 that is many ulps of a small ε:
    # start at that width and double (64 doublings pass any ``upper``), so the first ε that
    # passes lies within about twice that distance of the crossing.
    step = 1e-14 * (1.0 + candidate)
    for _ in range(64):
        if profile(candidate) <= delta:
            return min(candidate, upper)
        candidate += step
        step *= 2.0
    return upper


@dataclass(frozen=True)
class _ComposedProfile:
    """δ(ε) of T scalar DG releases with integer Δ, from the pmf of S = X₁ + … + X_T.

    The privacy loss of T releases depends on the data only through S (the DG pmf is ∝
    exp(−x²/2σ²)), so, as CKS20 Thm. 7 for T = 1: δ(ε) = P[S > c − TΔ/2] − e^ε·P[S > c + TΔ/2]
    with c = εσ²/Δ. Derivation and error margin: ``accounting_composed.md``.
    """

    sigma: float
    sensitivity: int
    count: int
    lowest: int  # the support point of suffix[0]
    suffix: NDArray[np.float64]  # suffix[k] = P[S ≥ lowest + k]

    def _greater(self, threshold: float) -> float:
        """P[S > threshold]."""
        index = math.floor(threshold) + 1 - self.lowest
        if index <= 0:
            return 1.0
        return float(self.suffix[index]) if index < self.suffix.size else 0.0

    def delta(self, epsilon: float) -> float:
        """δ(ε), overstated by the relative margin of the sums (never understated)."""
        shift = self.count * self.sensitivity / 2.0
        centre = epsilon * self.sigma**2 / self.sensitivity
        head = self._greater(centre - shift) * (1.0 + _COMPOSED_MARGIN)
        tail = self._greater(centre + shift) * (1.0 - _COMPOSED_MARGIN)
        return max(0.0, head - math.exp(min(epsilon, 700.0)) * tail)


@functools.lru_cache(maxsize=32)
def _composed_profile(sigma: float, sensitivity: int, count: int) -> _ComposedProfile | None:
    """The profile of ``count`` releases, or ``None`` when the convolved support is too large."""
    reach = math.ceil(20.0 * sigma) + 2  # the DG mass beyond 20σ is below e^-200
    if (2 * reach + 1) * count > _COMPOSED_MAX_POINTS:
        return None
    base = discrete_gaussian_pmf(np.arange(-reach, reach + 1), sigma)
    pmf = base
    for _ in range(count - 1):
        pmf = np.convolve(pmf, base)
    # Sum from the far tail inwards so that small tails keep their relative accuracy.
    suffix = np.cumsum(pmf[::-1])[::-1]
    return _ComposedProfile(sigma, sensitivity, count, -reach * count, suffix)


# --------------------------------------------------------------------------------------------------
# Budget
# --------------------------------------------------------------------------------------------------


class BudgetExceededError(RuntimeError):
    """A release would exceed the privacy budget; nothing was released and the ledger is unchanged.

    Attributes
    ----------
    event
        The refused event.
    would_spend
        The ε (or ρ) the history would reach with the event.
    limit
        The budget's ε (or ρ).

    Examples
    --------
    >>> try:
    ...     PrivacyBudget(rho=0.1).spend(ZCDP(0.2))
    ... except BudgetExceededError as error:
    ...     print(error.would_spend, error.limit)
    0.2 0.1
    """

    def __init__(self, message: str, *, event: PrivacyEvent, would_spend: float, limit: float):
        super().__init__(message)
        self.event = event
        self.would_spend = would_spend
        self.limit = limit


class PrivacyBudget:
    """A ledger with a limit, in (ε, δ) or in zCDP ρ, that refuses to overspend.

    Parameters
    ----------
    epsilon, delta
        The (ε, δ) limit: ε > 0, δ in (0, 1). Checked with :meth:`ZCDPAccountant.epsilon`.
    rho
        Alternatively a zCDP limit ρ > 0 (then ``epsilon`` and ``delta`` must be omitted).
    neighbouring
        The relation the whole ledger is stated for. ``None`` (default): the first event's, and a
        later event on another relation is refused (:class:`NeighbouringMismatchError`).
        ``"replace_one"``: add/remove events are restated with
        :meth:`PrivacyEvent.under_replace_one` as they are spent, so releases of both kinds share
        one ledger. ``"add_remove"``: replace-one events are refused (no sound restatement).

    Examples
    --------
    >>> budget = PrivacyBudget(epsilon=5.0, delta=1e-5)
    >>> budget.spend(DiscreteGaussian(sigma=1.0, l2_sensitivity=1.0))   # exact ε 4.4302
    >>> budget.spend(DiscreteGaussian(sigma=1.0, l2_sensitivity=1.0))
    Traceback (most recent call last):
    ...
    dpquantile.accounting.BudgetExceededError: ...
    >>> len(budget.history)
    1
    >>> mixed = PrivacyBudget(rho=1.0, neighbouring="replace_one")
    >>> mixed.spend(ZCDP(0.125))   # add/remove, stated for replace-one: 4ρ
    >>> mixed.spent(), mixed.history[0][0].relation
    (0.5, 'replace_one')
    """

    __slots__ = ("_accountant", "_delta", "_epsilon", "_ledger", "_neighbouring", "_rho")

    def __init__(
        self,
        epsilon: float | None = None,
        delta: float | None = None,
        *,
        rho: float | None = None,
        neighbouring: Neighbouring | None = None,
    ) -> None:
        self._neighbouring = None if neighbouring is None else _check_neighbouring(neighbouring)
        if rho is not None:
            if epsilon is not None or delta is not None:
                raise ValueError("give either (epsilon, delta) or rho, not both")
            self._rho: float | None = check_positive("rho", rho)
            self._epsilon: float | None = None
            self._delta: float | None = None
        else:
            if epsilon is None or delta is None:
                raise ValueError("a budget needs both epsilon and delta (or rho alone)")
            self._rho = None
            self._epsilon = check_positive("epsilon", epsilon)
            self._delta = check_probability("delta", delta)
        self._accountant = ZCDPAccountant()
        self._ledger: list[tuple[PrivacyEvent, int]] = []

    @property
    def ledger(self) -> tuple[tuple[PrivacyEvent, int], ...]:
        """Every spend in order, as recorded (restated for the ledger's relation), with its count.

        Examples
        --------
        >>> budget = PrivacyBudget(rho=1.0)
        >>> budget.spend(ZCDP(0.25)); budget.spend(ZCDP(0.125), count=2)
        >>> [(event.rho, count) for event, count in budget.ledger]
        [(0.25, 1), (0.125, 2)]
        """
        return tuple(self._ledger)

    @property
    def neighbouring(self) -> Neighbouring | None:
        """The relation every spent event is stated for (``None``: the first event's).

        Examples
        --------
        >>> PrivacyBudget(rho=1.0, neighbouring="replace_one").neighbouring
        'replace_one'
        """
        return self._neighbouring

    def stated(self, event: PrivacyEvent) -> PrivacyEvent:
        """``event`` as this ledger records it (restated for replace-one where the ledger is).

        Raises
        ------
        NeighbouringMismatchError
            A replace-one event for an add/remove ledger.

        Examples
        --------
        >>> PrivacyBudget(rho=1.0, neighbouring="replace_one").stated(ZCDP(0.25))
        ZCDP(rho=1.0)
        """
        if self._neighbouring is None or event.relation == self._neighbouring:
            return event
        if self._neighbouring == "replace_one":
            return event.under_replace_one()
        raise NeighbouringMismatchError(
            f"this budget is stated for add/remove neighbours; a {event.relation} event "
            "cannot be restated for them"
        )

    @property
    def epsilon(self) -> float | None:
        """The ε limit (``None`` for a ρ budget).

        Examples
        --------
        >>> PrivacyBudget(epsilon=1.0, delta=1e-6).epsilon
        1.0
        """
        return self._epsilon

    @property
    def delta(self) -> float | None:
        """The δ of the limit (``None`` for a ρ budget).

        Examples
        --------
        >>> PrivacyBudget(epsilon=1.0, delta=1e-6).delta
        1e-06
        """
        return self._delta

    @property
    def rho(self) -> float | None:
        """The ρ limit (``None`` for an (ε, δ) budget).

        Examples
        --------
        >>> PrivacyBudget(rho=0.5).rho
        0.5
        """
        return self._rho

    @property
    def accountant(self) -> ZCDPAccountant:
        """A copy of the ledger's accountant (mutating it does not change the budget).

        Examples
        --------
        >>> budget = PrivacyBudget(rho=1.0)
        >>> budget.accountant.compose(ZCDP(5.0)).rho, budget.spent()
        (5.0, 0.0)
        """
        return self._accountant.copy()

    @property
    def history(self) -> tuple[tuple[MechanismEvent, int], ...]:
        """The spent events with their counts.

        Examples
        --------
        >>> budget = PrivacyBudget(rho=1.0)
        >>> budget.spend(ZCDP(0.25))
        >>> budget.history
        ((ZCDP(rho=0.25), 1),)
        """
        return self._accountant.history

    def spent(self) -> float:
        """What the ledger has spent, in the budget's unit (ε at the budget's δ, or ρ).

        Examples
        --------
        >>> budget = PrivacyBudget(rho=1.0)
        >>> budget.spend(ZCDP(0.25))
        >>> budget.spent()
        0.25
        """
        return self._measure(self._accountant)

    def _measure(self, accountant: ZCDPAccountant) -> float:
        if self._rho is not None:
            return accountant.rho
        assert self._delta is not None
        return accountant.epsilon(self._delta)

    def _limit(self) -> float:
        limit = self._rho if self._rho is not None else self._epsilon
        assert limit is not None
        return limit

    def would_exceed(self, event: PrivacyEvent, count: int = 1) -> bool:
        """Whether spending ``event`` (``count`` times) would exceed the limit.

        Examples
        --------
        >>> PrivacyBudget(rho=1.0).would_exceed(ZCDP(2.0))
        True
        """
        return self._prospective(event, count)[1] > self._limit()

    def _prospective(self, event: PrivacyEvent, count: int) -> tuple[ZCDPAccountant, float]:
        trial = self._accountant.copy().compose(self.stated(event), count)
        if self._rho is not None and trial.sampler_tv_bound > 0:
            raise ValueError(
                "a rho budget cannot account for a sampler total-variation bound; "
                "use an (epsilon, delta) budget for events from the fast sampler"
            )
        return trial, self._measure(trial)

    def spend(self, event: PrivacyEvent, count: int = 1) -> None:
        """Record ``event`` (``count`` times) or raise :class:`BudgetExceededError`.

        Call this *before* drawing the noise of the release it describes.

        Examples
        --------
        >>> budget = PrivacyBudget(rho=1.0)
        >>> budget.spend(ZCDP(0.5), count=2)
        >>> budget.spent()
        1.0
        """
        trial, would_spend = self._prospective(event, count)
        limit = self._limit()
        if would_spend > limit:
            unit = "rho" if self._rho is not None else f"epsilon at delta={self._delta:g}"
            why = ""
            if math.isinf(would_spend) and self._delta is not None:
                why = f" ({trial.certificate(self._delta).reason})"
            raise BudgetExceededError(
                f"spending {event!r} x{count} would raise {unit} to {would_spend:.6g}, above the "
                f"budget {limit:.6g}{why}; nothing was spent",
                event=event,
                would_spend=would_spend,
                limit=limit,
            )
        self._accountant = trial
        self._ledger.append((self.stated(event), count))


# Relative precision of rho_for_epsilon's bisection.
_RHO_PRECISION = 1e-9


@functools.lru_cache(maxsize=64)
def rho_for_epsilon(epsilon: float, delta: float) -> float:
    """The largest zCDP ρ whose (ε, δ)-DP, as the accountant converts it, is at most ε.

    The inverse of ``ZCDPAccountant().compose(ZCDP(rho)).epsilon(delta)`` (CKS20 Cor. 13, the
    accountant's own conversion), found by bisection (ε(ρ) is increasing in ρ). A history whose
    events compose to at most this ρ is (ε, δ)-DP.

    Parameters
    ----------
    epsilon
        Target ε > 0.
    delta
        δ in (0, 1).

    Returns
    -------
    float
        ρ, within a relative 1e-9 below the exact inverse.

    Examples
    --------
    >>> rho = rho_for_epsilon(5.0, 1e-5)
    >>> round(rho, 4)
    0.551
    >>> ZCDPAccountant().compose(ZCDP(rho)).epsilon(1e-5) <= 5.0
    True
    >>> rho_for_epsilon(5.0, 0.0)
    Traceback (most recent call last):
    ...
    ValueError: delta must lie in the open interval (0, 1); got 0.0
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_probability("delta", delta)

    def converted(rho: float) -> float:
        return ZCDPAccountant().compose(ZCDP(rho)).epsilon(delta)

    low, high = 0.0, epsilon  # ε(ρ) > ρ for the usual δ; the loop below widens otherwise
    while converted(high) <= epsilon:
        low, high = high, 2.0 * high
    while high - low > _RHO_PRECISION * high:
        middle = 0.5 * (low + high)
        if not low < middle < high:  # no float left between them: ρ fell to the subnormals
            break
        low, high = (middle, high) if converted(middle) <= epsilon else (low, middle)
    if low == 0.0:
        raise ValueError(
            f"no ρ > 0 gives ε ≤ {epsilon:g} at δ = {delta:g} under the accountant's "
            f"conversion: its Rényi orders stop at α = 1 + 1e9, which keeps ε above about "
            f"log(1/δ)/1e9 = {math.log(1.0 / delta) / math.exp(_LOG_ORDER_MAX):.2g}"
        )
    return low
