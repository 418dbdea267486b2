"""One privacy budget per training run: every private release planned before round 1.

A run's (ε, δ) is converted once to a total zCDP ρ (:func:`dpquantile.rho_for_epsilon`) and split
before training starts over everything the run may release privately:

- ``"thresholds"``: Δ-FL's DP loss quantile, one per round (the model averages carry no noise);
- ``"model"``: every secure average of the model carries the clients' distributed discrete
  Gaussian noise (KLS21), so the released model is (ε, δ)-DP at the user level;
- ``"both"``: a share :attr:`RunPrivacyPlan.threshold_share` of ρ for the quantiles, the rest for
  the averages.

Each round's releases get fixed shares, planned for the worst case (RFA's K + 1 Weiszfeld
averages; without model DP, Δ-FL's empty tail, which costs a second average under
``empty_tail="all"``; under model DP Δ-FL's tail divides by θ·|survivors| and always releases
once). Every
release is spent from the run's one :class:`~dpquantile.PrivacyBudget` *before* its noise is drawn
and withheld (the round skipped) when fewer clients survive than its noise was planned for, so a
run never spends more than planned whatever drops. With private thresholds every event is stated
for replace-one neighbours (the quantile's relation: the number of clients is public); with the
model alone, add/remove (user-level DP).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from dpquantile import (
    BudgetExceededError,
    Neighbouring,
    PrivacyBudget,
    ZCDPAccountant,
    rho_for_epsilon,
)
from dpquantile.accounting import ZCDP
from protocols.aggregation import (
    AverageSettings,
    DiscreteGaussianNoise,
    ZeroWeightSumError,
    secure_weighted_average,
)
from secagg import HeadroomError

__all__ = [
    "AMPLIFICATION",
    "DEFAULT_DP_CLIP",
    "DP_SCOPES",
    "KLS21_ROUNDING_BETA",
    "DPScope",
    "ModelPrivacy",
    "RunPrivacyPlan",
    "check_headroom",
    "ledger_entry",
    "planned_survivors",
    "privacy_report",
]

AMPLIFICATION = (
    "not used: the clients cannot verify the server's sampling, so ε holds for any choice of "
    "clients"
)
"""What every run's report says about amplification by subsampling."""

KLS21_ROUNDING_BETA = math.exp(-0.5)
"""KLS21's conditional-rounding β (their experiments' e^−1/2) for every noisy model average."""

DPScope = Literal["model", "thresholds", "both"]
DP_SCOPES: tuple[str, ...] = get_args(DPScope)
"""What a run's ε covers: the model averages, Δ-FL's loss thresholds, or both."""

DEFAULT_DP_CLIP = 1.0
"""The public L2 clip of each update under model DP when none is given (the median update norm
of the default Synthetic(1, 1) logistic-regression run is ≈ 0.85; never derived from the data)."""

# The plan spends at most this fraction of rho_for_epsilon(ε, δ): the fast sampler's
# total-variation terms (≤ 1e-50 per event at moderate ε) then fit under ε.
_PLAN_MARGIN = 1.0 - 1e-6
# Noise is calibrated for the number of survivors exceeded except with probability 10⁻³.
_SURVIVOR_QUANTILE = 1e-3


def planned_survivors(participants: int, dropout: float, q: float = _SURVIVOR_QUANTILE) -> int:
    """The largest k with P[Binomial(n, 1 − dropout) < k] ≤ q (at least 2, at most n).

    Examples
    --------
    >>> planned_survivors(10, 0.0), planned_survivors(100, 0.1)
    (10, 80)
    """
    if dropout <= 0.0:
        return participants
    p = 1.0 - dropout
    log_p, log_q = math.log(p), math.log1p(-p)
    below = 0.0
    for k in range(participants + 1):
        log_pmf = (
            math.lgamma(participants + 1) - math.lgamma(k + 1) - math.lgamma(participants - k + 1)
        )
        mass = math.exp(log_pmf + k * log_p + (participants - k) * log_q)
        if below + mass > q:
            return max(2, min(k, participants))
        below += mass
    return participants


@dataclass(frozen=True, slots=True)
class RunPrivacyPlan:
    """The shares of a run's ρ, fixed before round 1.

    Attributes
    ----------
    scope
        What the budget covers (:data:`DP_SCOPES`).
    epsilon, delta
        The run's (ε, δ).
    rho
        The total zCDP ρ the plan may spend.
    rounds
        Rounds T.
    threshold_rho
        ρ of each round's DP quantile (``None``: the thresholds are exact, not private).
    average_rho
        ρ of each noisy secure average (``None``: the averages carry no noise).
    averages_per_round
        The most noisy averages a round can release (planned for all of them).
    survivors
        The clients each release's noise is planned for; fewer withhold the release.
    threshold_share
        The fraction of ρ given to the thresholds under ``"both"``.
    neighbouring
        The relation every event is stated for.
    clip_rho
        ρ of each round's adaptive-clip count (``None``: a fixed clip).
    threshold_releases
        How many rounds release a private threshold (``rounds`` unless thresholds are released
        every k-th round only).

    Examples
    --------
    >>> plan = RunPrivacyPlan.split(
    ...     "both", epsilon=5.0, delta=1e-5, rounds=10, averages_per_round=2, survivors=10)
    >>> round(plan.threshold_rho * 10 + plan.average_rho * 20, 6) == round(plan.rho, 6)
    True
    >>> plan.neighbouring, plan.covers
    ('replace_one', 'model + thresholds')
    """

    scope: DPScope
    epsilon: float
    delta: float
    rho: float
    rounds: int
    threshold_rho: float | None
    average_rho: float | None
    averages_per_round: int
    survivors: int
    threshold_share: float
    neighbouring: Neighbouring
    clip_rho: float | None = None
    threshold_releases: int | None = None

    @classmethod
    def split(
        cls,
        scope: DPScope,
        *,
        epsilon: float,
        delta: float,
        rounds: int,
        averages_per_round: int,
        survivors: int,
        threshold_share: float = 0.5,
        clip_share: float | None = None,
        threshold_releases: int | None = None,
    ) -> RunPrivacyPlan:
        """Split (ε, δ) over ``rounds`` rounds of the releases ``scope`` names.

        ``clip_share`` (model DP only): the fraction of ρ for one adaptive-clip count per round
        (Andrew et al. 2021); the rest is split as without it.

        Raises
        ------
        ValueError
            An unknown scope, or a share outside (0, 1).
        dpquantile.BudgetExceededError
            If the planned schedule does not fit the budget (nothing was spent).

        Examples
        --------
        >>> plan = RunPrivacyPlan.split("model", epsilon=2.0, delta=1e-6, rounds=4,
        ...                             averages_per_round=1, survivors=100)
        >>> plan.threshold_rho is None, round(plan.average_rho * 4 / plan.rho, 6)
        (True, 1.0)
        """
        if scope not in DP_SCOPES:
            raise ValueError(f"dp must be one of {', '.join(DP_SCOPES)}; got {scope!r}")
        if not 0.0 < threshold_share < 1.0:
            raise ValueError(f"threshold_share must lie in (0, 1); got {threshold_share!r}")
        rho = rho_for_epsilon(epsilon, delta) * _PLAN_MARGIN
        clip_rho = None
        rest = rho
        if clip_share is not None:
            if scope == "thresholds" or not 0.0 < clip_share < 1.0:
                raise ValueError(
                    f"clip_share must lie in (0, 1) and needs model DP; got {clip_share!r} "
                    f"with scope {scope!r}"
                )
            clip_rho = clip_share * rho / rounds
            rest = (1.0 - clip_share) * rho
        share = {"thresholds": 1.0, "model": 0.0, "both": threshold_share}[scope]
        releases = rounds if threshold_releases is None else threshold_releases
        if not 1 <= releases <= rounds:
            raise ValueError(f"threshold_releases must lie in [1, {rounds}]; got {releases}")
        threshold_rho = share * rest / releases if share > 0 else None
        average_rho = (1.0 - share) * rest / (rounds * averages_per_round) if share < 1 else None
        plan = cls(
            scope=scope,
            epsilon=epsilon,
            delta=delta,
            rho=rho,
            rounds=rounds,
            threshold_rho=threshold_rho,
            average_rho=average_rho,
            averages_per_round=averages_per_round if average_rho is not None else 0,
            survivors=survivors,
            threshold_share=threshold_share,
            neighbouring="add_remove" if scope == "model" else "replace_one",
            clip_rho=clip_rho,
            threshold_releases=releases if threshold_rho is not None else None,
        )
        budget = plan.budget()
        schedule = plan.schedule()
        if budget.would_exceed(schedule):  # pragma: no cover - a split fits by construction
            raise BudgetExceededError(
                f"the planned schedule ({schedule.rho:.6g} zCDP) exceeds (ε, δ) = "
                f"({epsilon:g}, {delta:g}); nothing was spent",
                event=ZCDP(schedule.rho, neighbouring=plan.neighbouring),
                would_spend=ZCDPAccountant().compose(schedule).epsilon(delta),
                limit=epsilon,
            )
        return plan

    @property
    def covers(self) -> str:
        """What the run's ε is a guarantee for, in words.

        Examples
        --------
        >>> RunPrivacyPlan.split("thresholds", epsilon=5.0, delta=1e-5, rounds=5,
        ...                      averages_per_round=1, survivors=10).covers
        'thresholds only (model: no DP)'
        """
        return {
            "model": "model",
            "thresholds": "thresholds only (model: no DP)",
            "both": "model + thresholds",
        }[self.scope]

    def budget(self) -> PrivacyBudget:
        """A fresh ledger for the run: (ε, δ) on the plan's relation.

        Examples
        --------
        >>> RunPrivacyPlan.split("model", epsilon=1.0, delta=1e-5, rounds=2,
        ...                      averages_per_round=1, survivors=4).budget().neighbouring
        'add_remove'
        """
        return PrivacyBudget(self.epsilon, self.delta, neighbouring=self.neighbouring)

    def schedule(self) -> ZCDP:
        """Every planned release at its share, composed (sampler TV terms left out).

        Examples
        --------
        >>> plan = RunPrivacyPlan.split("model", epsilon=1.0, delta=1e-5, rounds=2,
        ...                             averages_per_round=3, survivors=4)
        >>> abs(plan.schedule().rho - plan.rho) < 1e-12
        True
        """
        releases = self.rounds if self.threshold_releases is None else self.threshold_releases
        total = releases * (self.threshold_rho or 0.0) + self.rounds * (
            self.averages_per_round * (self.average_rho or 0.0) + (self.clip_rho or 0.0)
        )
        return ZCDP(total, neighbouring=self.neighbouring)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable record of the plan.

        Examples
        --------
        >>> record = RunPrivacyPlan.split("model", epsilon=1.0, delta=1e-5, rounds=2,
        ...                               averages_per_round=1, survivors=4).to_dict()
        >>> record["covers"], record["neighbouring"]
        ('model', 'add_remove')
        """
        return {
            "scope": self.scope,
            "covers": self.covers,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "rounds": self.rounds,
            "threshold_rho_per_round": self.threshold_rho,
            "average_rho_per_average": self.average_rho,
            "averages_per_round": self.averages_per_round,
            "planned_survivors": self.survivors,
            "threshold_share": self.threshold_share if self.scope == "both" else None,
            "neighbouring": self.neighbouring,
            "clip_rho_per_round": self.clip_rho,
            "threshold_releases": self.threshold_releases,
        }

    def noise(self) -> DiscreteGaussianNoise | None:
        """The distributed discrete Gaussian of each model average, or ``None`` (no model DP).

        Examples
        --------
        >>> plan = RunPrivacyPlan.split("model", epsilon=1.0, delta=1e-5, rounds=2,
        ...                             averages_per_round=1, survivors=4)
        >>> noise = plan.noise()
        >>> noise.min_survivors, noise.neighbouring, noise.rho == plan.average_rho
        (4, 'add_remove', True)
        """
        if self.average_rho is None:
            return None
        return DiscreteGaussianNoise(
            rho=self.average_rho, min_survivors=self.survivors, neighbouring=self.neighbouring
        )


def check_headroom(settings: AverageSettings, *, participants: int, dimension: int) -> None:
    """Refuse, before round 1, a noisy average whose ring cannot hold ``participants`` rows.

    Raises
    ------
    secagg.HeadroomError
        If ``settings.bits`` cannot hold the planned noise (the message says so).

    Examples
    --------
    >>> plan = RunPrivacyPlan.split("model", epsilon=1.0, delta=1e-5, rounds=1,
    ...                             averages_per_round=1, survivors=4)
    >>> check_headroom(AverageSettings(bits=32, clip=1.0, noise=plan.noise()),
    ...                participants=4, dimension=3) is None
    True
    """
    try:
        secure_weighted_average(
            np.zeros((participants, dimension)),
            np.ones(participants),
            settings=settings,
            weight_cap=1.0,
            secure=False,
            seed=0,
        )
    except ZeroWeightSumError:
        pass  # a noisy weight sum of zeros came out ≤ 0: the ring held it (not a headroom issue)
    except HeadroomError as error:
        raise HeadroomError(
            f"the planned noise does not fit bits={settings.bits}: {error}",
            required_bits=error.required_bits,
        ) from error


def ledger_entry(index: int, event: object, count: int) -> dict[str, object]:
    """One spend of a run's budget in round ``index``, as a JSON record.

    Examples
    --------
    >>> ledger_entry(3, ZCDP(0.5), 1)
    {'round': 3, 'event': 'ZCDP', 'count': 1, 'rho': 0.5, 'relation': 'add_remove'}
    """
    record: dict[str, object] = {"round": index, "event": type(event).__name__, "count": count}
    for name in ("rho", "relation", "num_clients", "sigma", "dimension", "l2_sensitivity"):
        value = getattr(event, name, None)
        if value is not None:
            record[name] = value
    return record


def privacy_report(
    plan: RunPrivacyPlan | None,
    budget: PrivacyBudget | None,
    ledger: list[dict[str, object]],
) -> tuple[float | None, float | None, dict[str, object] | None]:
    """A run's (ρ spent, ε certified at the plan's δ, JSON ``privacy`` record); ``None`` × 3
    without DP (never ε = 0 for a run that has none).

    Examples
    --------
    >>> plan = RunPrivacyPlan.split("model", epsilon=1.0, delta=1e-5, rounds=1,
    ...                             averages_per_round=1, survivors=4)
    >>> budget = plan.budget()
    >>> rho, epsilon, record = privacy_report(plan, budget, [])
    >>> rho, epsilon, sorted(record)
    (0.0, 0.0, ['amplification_by_subsampling', 'ledger', 'plan'])
    >>> privacy_report(None, None, [])
    (None, None, None)
    """
    if plan is None or budget is None:
        return None, None, None
    spent = budget.accountant
    epsilon = spent.epsilon(plan.delta) if spent.rho > 0 else 0.0
    record: dict[str, object] = {
        "plan": plan.to_dict(),
        "ledger": list(ledger),
        "amplification_by_subsampling": AMPLIFICATION,
    }
    if math.isinf(epsilon):
        record["reason"] = spent.certificate(plan.delta).reason
    return spent.rho, epsilon, record


class ModelPrivacy:
    """Model DP for a trainer whose every release is one noisy secure average per call: the
    run's plan, its one budget, the ledger, and the settings of each noisy average.

    Parameters
    ----------
    plan
        A ``"model"`` :class:`RunPrivacyPlan`.
    bits
        The ring size of the averages.
    clip
        The public L2 clip of each contribution.

    Examples
    --------
    >>> privacy = ModelPrivacy.plan_for(epsilon=5.0, delta=1e-5, rounds=2, averages_per_round=1,
    ...                                 participants=10, dropout=0.0, dimension=4, bits=32,
    ...                                 clip=1.0)
    >>> privacy.shortfall(9)
    '9 contribution(s): the noise is planned for 10 survivors (nothing released, nothing spent)'
    >>> settings = privacy.settings(mean=True)
    >>> settings.denominator, settings.rotate, settings.noise.rho == privacy.plan.average_rho
    ('survivors', True, True)
    """

    def __init__(self, plan: RunPrivacyPlan, *, bits: int, clip: float) -> None:
        if plan.average_rho is None:
            raise ValueError("ModelPrivacy needs a plan that noises the model averages")
        self.plan = plan
        self.bits = bits
        self.clip = clip
        self.budget = plan.budget()
        self.ledger: list[dict[str, object]] = []
        self._mark = 0

    @classmethod
    def plan_for(
        cls,
        *,
        epsilon: float,
        delta: float,
        rounds: int,
        averages_per_round: int,
        participants: int,
        dropout: float,
        dimension: int,
        bits: int,
        clip: float,
    ) -> ModelPrivacy:
        """Split (ε, δ) before round 1 and check the ring holds ``participants`` noisy rows.

        Raises
        ------
        secagg.HeadroomError
            If ``bits`` cannot hold the planned noise (before any training).
        """
        plan = RunPrivacyPlan.split(
            "model",
            epsilon=epsilon,
            delta=delta,
            rounds=rounds,
            averages_per_round=averages_per_round,
            survivors=planned_survivors(participants, dropout),
        )
        privacy = cls(plan, bits=bits, clip=clip)
        check_headroom(privacy.settings(mean=True), participants=participants, dimension=dimension)
        return privacy

    def settings(self, *, mean: bool) -> AverageSettings:
        """KLS21's noisy, flattened, conditionally rounded average; ``mean``: every weight is 1
        and the sum is divided by the public survivor count (else by the released weight sum)."""
        return AverageSettings(
            bits=self.bits,
            clip=self.clip,
            noise=self.plan.noise(),
            denominator="survivors" if mean else "released",
            rotate=True,
            rounding_beta=KLS21_ROUNDING_BETA,
        )

    def shortfall(self, available: int) -> str | None:
        """Why a round with ``available`` contributions is withheld, or ``None``."""
        if available >= self.plan.survivors:
            return None
        return (
            f"{available} contribution(s): the noise is planned for {self.plan.survivors} "
            "survivors (nothing released, nothing spent)"
        )

    @property
    def rho_spent(self) -> float:
        """The zCDP ρ the run's budget has spent so far."""
        return float(self.budget.accountant.rho)

    def begin_round(self) -> None:
        """Mark the ledger: :meth:`end_round` records what the round spent after this."""
        self._mark = len(self.budget.ledger)

    def end_round(self, index: int) -> None:
        """Append the round's spends to :attr:`ledger`."""
        self.ledger.extend(
            ledger_entry(index, event, count) for event, count in self.budget.ledger[self._mark :]
        )
        self._mark = len(self.budget.ledger)

    def report(self) -> tuple[float | None, float | None, dict[str, object] | None]:
        """:func:`privacy_report` of the run so far."""
        return privacy_report(self.plan, self.budget, self.ledger)
