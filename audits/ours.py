"""The adapter for this toolkit: every capability of :class:`~audits.targets.AuditTarget`.

Functions of the real modules are looked up when called (``module.function``, not imported
names), so a mutant patched over a module (:mod:`audits.mutants`) is what the audits see.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import itertools
import json
import logging
import math
import pickle
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from functools import partial
from importlib import resources
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

import dpquantile
import dpquantile.quantile
import secagg
import secagg.client
import secagg.graph_parameters
import secagg.masks
import secagg.messages
import secagg.shamir
from audits.attacks import AttackSurface, OurAttackSurface
from audits.targets import (
    AccountantUnderTest,
    Draw,
    DropoutNoise,
    GraphParametersUnderTest,
    KnownAnswer,
    MaskPRGUnderTest,
    NeighbouringMechanism,
    NoisyAverageUnderTest,
    OverflowProbe,
    PathRelease,
    SamplerUnderTest,
    SansIOSecureSum,
    SecretSharingUnderTest,
    SecureSumUnderTest,
)
from protocols.aggregation import encoding, secure_average

__all__ = ["KNOWN_ANSWER_LABEL", "REFERENCE_RHO", "OurTarget"]

#: Label of the replayed streams of the known answers (as in tests/dpquantile).
KNOWN_ANSWER_LABEL = b"dpquantile/known-answers"
#: ρ of the reference configuration of audit 5: Gaussian-equivalent μ = √(2ρ) = 4.
REFERENCE_RHO = 8.0


def _rotation_block(dimension: int) -> int:
    """KLS21 flattening's block B for a row of ``dimension``, from its documented rule
    (``secure_average_notes.md`` §6): the whole row padded to one power of two when that adds at
    most 1/16 of padding (or the row fits one block of 64), else the largest power of two ≥ 64
    whose padding to a multiple of it stays within 1/16 — restated here, not imported.

    Examples
    --------
    >>> _rotation_block(1024), _rotation_block(1001), _rotation_block(10_001), _rotation_block(4)
    (1024, 1024, 2048, 4)
    """
    whole = 1 << max(0, (dimension - 1).bit_length())
    if whole - dimension <= dimension / 16 or whole <= 64:
        return whole
    block = whole // 2
    while block > 64 and -(-dimension // block) * block - dimension > dimension / 16:
        block //= 2
    return block


# ----------------------------------------------------------------------------- samplers


class _Words:
    """A RandomSource that hands out given 64-bit words (little-endian), then zeros."""

    def __init__(self, words: NDArray[np.uint64]) -> None:
        self._bytes = np.asarray(words, dtype="<u8").tobytes()

    def fill(self, out: Any) -> None:
        view = memoryview(out).cast("B")
        taken, self._bytes = self._bytes[: len(view)], self._bytes[len(view) :]
        view[: len(taken)] = taken
        view[len(taken) :] = bytes(len(view) - len(taken))

    def random_bytes(self, n: int) -> bytes:
        buffer = bytearray(n)
        self.fill(buffer)
        return bytes(buffer)


@dataclasses.dataclass(frozen=True)
class _OurSampler:
    name: str
    class_name: str
    exact: bool
    constant_time: bool = False  # neither sampler claims one (see dpquantile.samplers' docstring)
    sampling_modules: tuple[str, ...] = ("dpquantile", "secagg.randomness")

    @property
    def tv_bound(self) -> float:
        # The largest it states: σ ≥ 64 draws from two alias tables (fast_sampler_proof.md §1).
        return 0.0 if self.exact else dpquantile.FastDiscreteGaussian(64.0).tv_bound

    def stated_tv(self, sigma: float) -> tuple[float, float]:
        """(TV per draw the sampler states at σ, the bound its proof gives): η = 2^-193 +
        2^-200 + 10^-75 below σ = 64, twice that from 64 on (fast_sampler_proof.md §1,
        restated here); 0 and 0 for the exact sampler."""
        if self.exact:
            return 0.0, 0.0
        proved = 2.0**-193 + 2.0**-200 + 1e-75
        return dpquantile.FastDiscreteGaussian(sigma).tv_bound, proved * (2 if sigma >= 64 else 1)

    def alias_ties(self, sigma: float) -> list[tuple[str, NDArray[np.uint64], int]] | None:
        """Crafted word streams on the fast sampler's alias table (σ < 64) that tie U's top 32
        bits with a column's threshold, and the draw its documented rule gives (column i keeps
        i iff the 192-bit uniform U < τ_i, else takes its alias; proof note §2; one word
        holds the column in its low bits and U's top 32 bits in its high half, three more
        words U's other 160 bits): ``[(label, words, expected value)]``; ``None`` for the
        exact sampler. The table's τ, aliases and offset are read from the sampler."""
        if self.exact or sigma >= 64:
            return None
        sampler = dpquantile.FastDiscreteGaussian(sigma)
        table, offset = sampler._direct, sampler._offset  # the stated table (white-box)
        assert table is not None
        bits = 192 - 32
        eligible = [  # a tie decided the same way by any U, or no alias to take: no case
            column
            for column, tau in enumerate(table.thresholds)
            if tau & ((1 << bits) - 1) and int(table.alias[column]) != column
        ]
        # Columns with τ's top 32 bits zero (tail columns) and non-zero: the tie compares U's
        # 160 low bits with τ's 160 low bits, which only the second kind tells from all of τ.
        chosen = [
            next((c for c in eligible if table.thresholds[c] >> bits == 0), None),
            next((c for c in eligible if table.thresholds[c] >> bits), None),
            eligible[len(eligible) // 2] if eligible else None,
        ]
        cases: list[tuple[str, NDArray[np.uint64], int]] = []
        for column in dict.fromkeys(c for c in chosen if c is not None):
            tau = table.thresholds[column]
            low, other = tau & ((1 << bits) - 1), int(table.alias[column])
            top = tau >> bits
            word = (top << 32) | column
            for label, rest, value in (
                ("U just below τ", low - 1, column),
                ("U at τ", low, other),
            ):
                fresh = rest << 32  # U's 160 bits, at the top of the three words' 192
                words = [word, fresh >> 128, (fresh >> 64) & (2**64 - 1), fresh & (2**64 - 1)]
                cases.append((f"column {column}, {label}", np.array(words, dtype=np.uint64),
                              value - offset))  # fmt: skip
        return cases

    def sampled_variance_problem(self, sigma: float, sampled: Fraction) -> str | None:
        """The fast sampler's σ̃² against its documented rule (fast_sampler_proof.md §1, the
        module docstring): σ² itself below σ = 64 and where σ² = a/b has 2a < 2^56; otherwise
        σ² rounded up to the next multiple of 2^-e with 2a < 2^56, a relative change below
        2^-52. A finding, or ``None`` (always for the exact sampler: σ̃² = σ² is held
        elsewhere)."""
        if self.exact:
            return None
        squared = Fraction(sigma) ** 2
        if sigma < 64 or 2 * squared.numerator < 1 << 56:
            if sampled == squared:
                return None
            return f"samples σ̃² = {float(sampled):.17g}; documented: σ² itself (2a < 2^56)"
        step = Fraction(1, sampled.denominator)  # 2^-e, or coarser once a/2^e is reduced
        if (
            sampled.denominator & (sampled.denominator - 1)
            or 2 * sampled.numerator >= 1 << 56
            or not squared <= sampled < squared + step
            or sampled - squared >= squared / 2**52
        ):
            return (
                f"samples σ̃² = {sampled.numerator}/{sampled.denominator} for σ² = "
                f"{squared.numerator}/{squared.denominator}; documented: σ² rounded up to the "
                "next multiple of a power of two with 2a < 2^56, within 2^-52 relative"
            )
        return None

    def rejected_words(self, sigma: float) -> list[tuple[str, NDArray[np.uint64], int]] | None:
        """Crafted word streams for the fast sampler's block regime (σ ≥ 64, σ² = a/b, 2a <
        2^56): the Bernoulli word d is uniform on [0, 2a) only below q·2a, q = ⌊2^64/2a⌋, so
        words at or above q·2a must be rejected (proof note §3) — with probability
        (2^64 mod 2a)/2^64 ≤ 2^-8 per candidate, far above the stated TV, yet below what any
        statistic of the fast tier sees for the σ the audits use. A candidate word w (sign
        bit 0, no tie, a non-zero magnitude) with d = q·2a − 1 is accepted (value v); with d =
        q·2a or 2^64 − 1 it must be rejected and the next candidate, w with its sign bit set
        and d = q·2a − 1, decides: −v. ``[(label, words, expected)]``; ``None`` for the exact
        sampler or where 2a divides 2^64 (nothing to reject). q·2a is recomputed here from σ²."""
        if self.exact or sigma < 64:
            return None
        squared = Fraction(sigma) ** 2
        if 2 * squared.numerator >= 1 << 56:
            return None
        denominator = 2 * squared.numerator
        limit = ((1 << 64) // denominator) * denominator
        if limit == 1 << 64:
            return None
        word = 0x0123_4567_89AB_CDEF  # sign 0; J, column and U's top bits from the pattern
        accepted = self.draw_from_words(sigma, np.array([word, limit - 1], dtype=np.uint64))
        if accepted == 0:  # pragma: no cover - the pattern's magnitude is non-zero at these σ
            return None
        negative = word | (1 << 63)
        cases: list[tuple[str, NDArray[np.uint64], int]] = []
        for label, d in (("at q·2a", limit), ("at 2^64 − 1", (1 << 64) - 1)):
            words = np.array([word, d, negative, limit - 1], dtype=np.uint64)
            cases.append((f"Bernoulli word {label}", words, -accepted))
        return cases

    @staticmethod
    def draw_from_words(sigma: float, words: NDArray[np.uint64]) -> int:
        """One draw of the fast sampler at σ from exactly these words (then zeros)."""
        return int(dpquantile.FastDiscreteGaussian(sigma).sample(1, rng=_Words(words))[0])

    def stated_sigma_squared(self, sigma: float) -> tuple[Any, Any]:
        """(target σ², sampled σ̃²) as the sampler states them (its public properties)."""
        sampler = getattr(dpquantile, self.class_name)(sigma)
        if self.exact:  # it states σ² twice: as its target and as what it samples
            return sampler.target_sigma_squared, sampler.sigma_squared
        return sampler.target_sigma_squared, sampler.sampled_sigma_squared

    def prepare(self, sigma: float) -> Draw:
        sampler = getattr(dpquantile, self.class_name)(sigma)
        random_class = secagg.KeystreamRandom

        def draw(size: int, seed: int) -> NDArray[np.generic]:
            stream = random_class(seed, label=KNOWN_ANSWER_LABEL)
            values: NDArray[np.generic] = sampler.sample(size, rng=stream)
            return values

        return draw


def _one_line_accountant(xi: float, rho: float) -> Any:
    """A ZCDPAccountant holding one release known only by the Rényi line (ξ, ρ): a
    user-defined :class:`dpquantile.MechanismEvent` (the base class is public)."""

    @dataclasses.dataclass(frozen=True)
    class OneLine(dpquantile.MechanismEvent):
        neighbouring: Literal["add_remove", "replace_one"] = "add_remove"

        def renyi_bounds(self) -> tuple[tuple[float, float], ...]:
            return ((xi, rho),)

        def under_replace_one(self) -> Any:  # pragma: no cover - not composed so here
            raise NotImplementedError

        def to_dp_accounting(self, *, ignore_sampler_tv: bool = False) -> Any:
            raise NotImplementedError  # pragma: no cover - not exported here

    return dpquantile.ZCDPAccountant().compose(OneLine())


class _OurAccountant:
    def discrete_gaussian_epsilon(
        self, sigma: float, sensitivity: float, rounds: int, delta: float
    ) -> float:
        event = dpquantile.DiscreteGaussian(sigma=sigma, l2_sensitivity=sensitivity)
        return float(dpquantile.ZCDPAccountant().compose(event, count=rounds).epsilon(delta))

    def discrete_gaussian_epsilon_grouped(
        self, sigma: float, sensitivity: float, grouping: tuple[str, tuple[int, ...]], delta: float
    ) -> float:
        """ε(δ) of the same releases composed in groups: ``("nested", (a, b, …))`` is a
        self-composition of a self-composition (a·b·… releases), ``("parts", (p, q, …))`` a
        composition of self-compositions (p + q + … releases)."""
        kind, counts = grouping
        event: Any = dpquantile.DiscreteGaussian(sigma=sigma, l2_sensitivity=sensitivity)
        if kind == "nested":
            for count in counts:
                event = dpquantile.SelfComposedEvent(event, count)
        else:
            event = dpquantile.ComposedEvent(
                tuple(dpquantile.SelfComposedEvent(event, count) for count in counts)
            )
        return float(dpquantile.ZCDPAccountant().compose(event).epsilon(delta))

    def discrete_gaussian_epsilon_then(
        self,
        sigma: float,
        sensitivity: float,
        rounds: int,
        multiples: tuple[int, ...],
        delta: float,
    ) -> float:
        """ε(δ) of ``rounds`` releases at Δ, then one at m·Δ (same σ) per m in ``multiples``,
        composed in one accountant."""
        accountant = dpquantile.ZCDPAccountant().compose(
            dpquantile.DiscreteGaussian(sigma=sigma, l2_sensitivity=sensitivity), count=rounds
        )
        for multiple in multiples:
            accountant.compose(
                dpquantile.DiscreteGaussian(sigma=sigma, l2_sensitivity=multiple * sensitivity)
            )
        return float(accountant.epsilon(delta))

    @staticmethod
    def _with_tv(sigma: float, sensitivity: float, rounds: int, tv: float) -> Any:
        """T releases whose noise together is within TV ``tv`` of the ideal (tv/T per draw)."""
        event = dpquantile.DiscreteGaussian(
            sigma=sigma, l2_sensitivity=sensitivity, sampler_tv_bound=tv / rounds
        )
        return dpquantile.ZCDPAccountant().compose(event, count=rounds)

    def discrete_gaussian_epsilon_with_tv(
        self, sigma: float, sensitivity: float, rounds: int, delta: float, tv: float
    ) -> float:
        return float(self._with_tv(sigma, sensitivity, rounds, tv).epsilon(delta))

    def discrete_gaussian_delta_with_tv(
        self, sigma: float, sensitivity: float, rounds: int, epsilon: float, tv: float
    ) -> float:
        return float(self._with_tv(sigma, sensitivity, rounds, tv).delta(epsilon))

    def discrete_gaussian_certificate_with_tv(
        self, sigma: float, sensitivity: float, rounds: int, delta: float, tv: float
    ) -> tuple[float, float, str | None]:
        """The accountant's certificate for the same releases: (ε, ε without the TV, the
        reason it states when no finite ε exists)."""
        certificate = self._with_tv(sigma, sensitivity, rounds, tv).certificate(delta)
        return (
            float(certificate.epsilon),
            float(certificate.epsilon_without_tv),
            certificate.reason,
        )

    # ε(δ) of a Rényi curve is CKS20 Prop. 12's conversion at its best order (audit 4 checks).
    zcdp_conversion = "cks20"

    budget_neighbourings = ("add_remove", "replace_one")

    @staticmethod
    def budget_trial(
        limit: tuple[str, float],
        delta: float | None,
        sigma: float,
        sensitivity: float,
        attempts: int,
        *,
        replace_one: bool = False,
    ) -> tuple[int, float, bool, tuple[Any, ...]]:
        """Spend one N_ℤ(0, σ²) release of sensitivity Δ (add/remove) at a time against a
        PrivacyBudget of ``limit`` ((ε at ``delta``) or ρ; stated for replace-one neighbours
        with ``replace_one``) until it refuses: (releases accepted, spent(), whether
        ``would_exceed`` asked before each spend agreed with it every time, the limit as the
        budget states it: its ``epsilon``, ``delta``, ``rho`` and ``neighbouring``)."""
        kind, value = limit
        relation: Literal["replace_one"] | None = "replace_one" if replace_one else None
        if kind == "rho":
            budget = dpquantile.PrivacyBudget(rho=value, neighbouring=relation)
        else:
            budget = dpquantile.PrivacyBudget(epsilon=value, delta=delta, neighbouring=relation)
        event = dpquantile.DiscreteGaussian(sigma=sigma, l2_sensitivity=sensitivity)
        accepted, agreed = 0, True
        for _ in range(attempts):
            predicted = budget.would_exceed(event)
            try:
                budget.spend(event)
            except dpquantile.BudgetExceededError:
                agreed = agreed and predicted
                break
            agreed = agreed and not predicted
            accepted += 1
        stated = (budget.epsilon, budget.delta, budget.rho, budget.neighbouring)
        return accepted, float(budget.spent()), agreed, stated

    @staticmethod
    def discrete_gaussian_profile_is_exact(sigma: float, sensitivity: float, rounds: int) -> bool:
        """Where ZCDPAccountant documents an exact ε for T releases of one scalar discrete
        Gaussian with an integer Δ (audit 4 holds it to the exact profile there): one release
        for 10⁻³ ≤ σ ≤ 10⁵ (CKS20 Thm. 7), T ≥ 2 by convolution while its support,
        (2·(⌈20σ⌉ + 2) + 1)·T points, stays within 2¹⁴ (``dpquantile.accounting``)."""
        if not (float(sensitivity).is_integer() and sensitivity > 0 and sigma >= 1e-3):
            return False
        if rounds == 1:
            return sigma <= 1e5
        return (2 * (math.ceil(20.0 * sigma) + 2) + 1) * rounds <= 1 << 14

    histogram_mechanisms = ("tree", "flat")

    @staticmethod
    def histogram_sensitivity_trial(
        mechanism: str, bins: int, branching: int
    ) -> tuple[
        tuple[float, float], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]
    ]:
        """dp_quantile's stated replace-one (Δ₁, Δ₂), in released units; its released counts
        for 8 values in which client 0 moves from the first bin to the last (same seed: the same
        noise; audit 4 measures the move); and the move as the histogram's public counts define
        it (``HistogramTree.counts`` × the release's scale)."""
        values = np.linspace(0.2, 0.8, 8)
        released, exact = [], []
        event: Any = None
        tree = dpquantile.HistogramTree(bins, 0.0, 1.0, branching)
        for moved in (0.0, 1.0 - 0.5 / bins):
            values[0] = moved
            result = dpquantile.quantile.dp_quantile(
                values, 0.5, lower=0.0, upper=1.0, bins=bins, branching=branching,
                mechanism=mechanism, rho=1.0, secure=False, seed=7,  # type: ignore[arg-type]
            )  # fmt: skip
            event = result.event
            released.append(np.asarray(result.released, dtype=np.float64))
            exact.append(tree.counts(values, flat=mechanism == "flat") * result.scale)
        stated = (float(event.l1_sensitivity), float(event.l2_sensitivity))
        return stated, released[0], released[1], (exact[0] - exact[1]).astype(np.float64)

    def kls21_sensitivities(
        self, l2_clip: float, granularity: float, dimension: int, beta: float | None
    ) -> tuple[float, float]:
        """(Δ₁, Δ₂) of a clipped vector randomly rounded to the grid, as the planner uses."""
        l1, l2 = dpquantile.accounting.kls21_sensitivities(
            l2_clip, granularity, dimension, beta=beta
        )
        return float(l1), float(l2)

    @staticmethod
    def kls21_exports() -> tuple[tuple[tuple[int, float, float, float, int], Any], ...]:
        """DistributedDiscreteGaussian(n, σ, Δ₁, Δ₂, d).to_dp_accounting() as (ρ, ξ), for σ where
        τ matters and for Δ = 0 (audit 4); empty without dp_accounting."""
        cases: tuple[tuple[int, float, float, float, int], ...] = (
            (2, 0.5, 1.0, 1.0, 1),
            (10, 0.6, 30.0, 30.0, 64),
            (4, 2.0, 2.0, 2.0, 4),
            (3, 0.5, 0.0, 0.0, 8),
        )
        out = []
        for n, sigma, l1, l2, d in cases:
            event = dpquantile.DistributedDiscreteGaussian(n, sigma, l1, l2, d)
            try:
                exported = event.to_dp_accounting()
            except ImportError:
                return ()
            out.append(((n, sigma, l1, l2, d), (float(exported.rho), float(exported.xi))))
        return tuple(out)

    def sampler_tv_exports(self, tv: float) -> tuple[tuple[str, Callable[[], Any]], ...]:
        """Every export to ``dp_accounting`` of an event whose noise carries sampler TV ``tv``,
        called with its defaults (audit 4: with tv > 0 each must refuse)."""
        gaussian = dpquantile.DiscreteGaussian(2.0, 1.0, sampler_tv_bound=tv)
        distributed = dpquantile.DistributedDiscreteGaussian(
            4, 2.0, 2.0, 2.0, 4, sampler_tv_bound=tv
        )
        accountant = dpquantile.ZCDPAccountant().compose(gaussian, count=3)
        accountant.compose(dpquantile.ZCDP(0.1))
        events: tuple[tuple[str, Any], ...] = (
            ("DiscreteGaussian", gaussian),
            ("DistributedDiscreteGaussian", distributed),
            ("ComposedEvent", dpquantile.ComposedEvent((dpquantile.ZCDP(0.1), distributed))),
            ("SelfComposedEvent", dpquantile.SelfComposedEvent(gaussian, 3)),
            ("ZCDPAccountant", accountant),
        )
        return tuple((name, event.to_dp_accounting) for name, event in events)

    def invalid_parameters(self) -> tuple[tuple[Any, ...], ...]:
        """Events, accountant, DP quantile, secure-average noise and budget, each called with one
        parameter that voids the guarantee (audit 4: each must raise ValueError or TypeError,
        or the error named third). ρ = 0 (a release with no loss) and composing 0 times are
        valid, so not listed."""
        nan, inf = math.nan, math.inf
        events = dpquantile.accounting
        values = np.linspace(0.1, 0.9, 8)

        def gaussian(**changed: Any) -> Callable[[], Any]:
            kwargs = {"sigma": 2.0, "l2_sensitivity": 1.0, **changed}
            return lambda: events.DiscreteGaussian(**kwargs)

        def distributed(**changed: Any) -> Callable[[], Any]:
            kwargs = {
                "num_clients": 4,
                "sigma": 2.0,
                "l1_sensitivity": 2.0,
                "l2_sensitivity": 2.0,
                "dimension": 4,
                **changed,
            }
            return lambda: events.DistributedDiscreteGaussian(**kwargs)

        def laplace(**changed: Any) -> Callable[[], Any]:
            kwargs = {"scale": 1.0, "l1_sensitivity": 1.0, **changed}
            return lambda: events.DiscreteLaplace(**kwargs)

        def quantile(**changed: Any) -> Callable[[], Any]:
            kwargs = {"q": 0.5, "lower": 0.0, "upper": 1.0, "bins": 8, "rho": 1.0, **changed}
            return lambda: dpquantile.dp_quantile(values, seed=0, secure=False, **kwargs)

        def composed() -> Any:
            return events.ZCDPAccountant().compose(events.ZCDP(0.1), count=3)

        exact = dpquantile.ExactDiscreteGaussian
        tv_event = events.DiscreteGaussian(2.0, 1.0, sampler_tv_bound=1e-12)
        kls21 = events.kls21_sensitivities

        cases: list[tuple[str, Callable[[], Any]]] = []
        cases += [(f"ZCDP(rho={r})", partial(events.ZCDP, r)) for r in (-1.0, nan, inf)]
        cases += [(f"DiscreteGaussian(sigma={v})", gaussian(sigma=v)) for v in (0.0, -1, nan, inf)]
        cases += [
            (f"DiscreteGaussian(l2_sensitivity={v})", gaussian(l2_sensitivity=v))
            for v in (-1.0, nan, inf)
        ]
        cases += [
            (f"DiscreteGaussian(sampler_tv_bound={v})", gaussian(sampler_tv_bound=v))
            for v in (1.0, -1e-9, nan)
        ]
        cases += [
            (f"DistributedDiscreteGaussian({k}={v})", distributed(**{k: v}))
            for k, v in (
                ("num_clients", 0),
                ("sigma", 0.0),
                ("sigma", nan),
                ("l1_sensitivity", -1.0),
                ("l2_sensitivity", nan),
                ("dimension", 0),
                ("sampler_tv_bound", 1.0),
            )
        ]
        cases += [
            (f"DiscreteLaplace({k}={v})", laplace(**{k: v}))
            for k, v in (("scale", 0.0), ("scale", nan), ("l1_sensitivity", -1.0))
        ]
        cases += [
            ("compose(count=-1)", lambda: events.ZCDPAccountant().compose(events.ZCDP(0.1), -1))
        ]

        def epsilon(delta: float) -> Any:
            return composed().epsilon(delta)

        def delta(epsilon: float) -> Any:
            return composed().delta(epsilon)

        cases += [(f"epsilon(delta={d})", partial(epsilon, d)) for d in (0.0, 1.0, nan)]
        cases += [(f"delta(epsilon={e})", partial(delta, e)) for e in (-1.0, nan)]
        cases += [(f"dp_quantile(rho={r})", quantile(rho=r)) for r in (0.0, -1.0, nan, inf)]
        cases += [(f"dp_quantile(q={q})", quantile(q=q)) for q in (-0.1, 1.5, nan)]
        cases += [
            ("dp_quantile(lower > upper)", quantile(lower=1.0, upper=0.0)),
            ("dp_quantile(bins=1)", quantile(bins=1)),
        ]
        # Documented: a distributed quantile needs at least 2 clients (one client's "quantile"
        # is its value; with none there is nothing to release).
        cases += [
            (
                f"dp_quantile of {len(few)} client(s)",
                partial(
                    dpquantile.dp_quantile, few, 0.5, lower=0.0, upper=1.0, bins=8, rho=1.0,
                    seed=0, secure=False,
                ),
            )
            for few in (np.array([0.5]), np.array([], dtype=np.float64))
        ]
        mechanism: Callable[..., Any] = dpquantile.quantile.quantile_mechanism
        cases += [
            (
                f"quantile_mechanism(scale={v!r})",
                partial(mechanism, 1.0, num_clients=10, bins=8, scale=v),
            )
            for v in (0, 2.5, True)
        ]
        noise = secure_average.DiscreteGaussianNoise
        cases += [(f"DiscreteGaussianNoise(rho={r})", partial(noise, rho=r)) for r in (0, nan, inf)]
        cases += [
            ("PrivacyBudget(epsilon=0)", lambda: events.PrivacyBudget(0.0, 1e-5)),
            ("PrivacyBudget(delta=1)", lambda: events.PrivacyBudget(1.0, 1.0)),
            ("DiscreteGaussian(dimension=0)", gaussian(dimension=0)),
            # The sensitivities the noise is calibrated to (KLS21): every argument in range.
            ("kls21_sensitivities(dimension=0)", partial(kls21, 1.0, 0.01, 0, beta=None)),
            ("kls21_sensitivities(l2_clip=0)", partial(kls21, 0.0, 0.01, 4, beta=None)),
            ("kls21_sensitivities(granularity=0)", partial(kls21, 1.0, 0.0, 4, beta=None)),
            ("kls21_sensitivities(beta=1)", partial(kls21, 1.0, 0.01, 4, beta=1.0)),
            # ρ cannot carry a sampler TV: a ρ budget must refuse such an event, not drop the TV.
            (
                "PrivacyBudget(rho=1).spend(an event with sampler TV)",
                lambda: events.PrivacyBudget(rho=1.0).spend(tv_event),
            ),
            # The documented ceiling σ ≤ 2^40 (dpquantile.MAX_EXACT_SIGMA), as a number: the
            # constant itself could be what is wrong.
            ("ExactDiscreteGaussian(sigma=1.01·2^40)", partial(exact, 1.01 * 2.0**40)),
            # The fast sampler's TV bound is proved for σ ≤ 2^25 only (fast_sampler_proof.md §1;
            # dpquantile.MAX_FAST_SIGMA), as a number for the same reason.
            (
                "FastDiscreteGaussian(sigma=1.01·2^25)",
                partial(dpquantile.FastDiscreteGaussian, 1.01 * 2.0**25),
            ),
            # The discrete Laplace sampler's documented numerator ceiling, below 2^62 (its U + t·V
            # must fit int64 on the 64-bit path), at a scale under the σ ceiling 2^40.
            (
                "ExactDiscreteLaplace(scale=2^62/(2^22 + 1))",
                partial(dpquantile.ExactDiscreteLaplace, Fraction(2**62, 2**22 + 1)),
            ),
        ]
        # Typed: a ring wider than the secure sum's 64 bits is a HeadroomError naming the bits
        # (2^20 clients at 2^43 grid points per count need 65), and an issued certificate is
        # read-only (AttributeError), so what an auditor was handed cannot be edited.
        big = np.full(2**20, 0.5)
        certificate = composed().certificate(1e-5)
        typed: list[tuple[str, Callable[[], Any], type[BaseException]]] = [
            (
                "dp_quantile needing a 65-bit ring",
                lambda: dpquantile.dp_quantile(
                    big, 0.5, lower=0.0, upper=1.0, bins=8, rho=1.0, seed=0, secure=False,
                    scale=2**43, sampler="exact",
                ),
                secagg.HeadroomError,
            ),
            (
                "Certificate.epsilon = 0",
                lambda: setattr(certificate, "epsilon", 0.0),
                AttributeError,
            ),
            # A noisy average's plan is cached and handed to every later call with the same
            # arguments: it must be read-only too, or one caller's edit changes the next's noise.
            (
                "QuantizationPlan.noise_bound = 0",
                lambda: setattr(
                    encoding.ContributionLayout(3, clip=1.0, weight_cap=1.0).plan(
                        10, 32, noise_rho=1.0
                    ),
                    "noise_bound",
                    0,
                ),
                AttributeError,
            ),
            # Add/remove and replace-one guarantees do not add up (a ρ understated up to 4×):
            # neither in one ComposedEvent nor in a history.
            (
                "a ComposedEvent of an add/remove and a replace-one event",
                lambda: events.ComposedEvent(
                    (events.ZCDP(0.25), events.ZCDP(1.0, neighbouring="replace_one"))
                ),
                events.NeighbouringMismatchError,
            ),
            (
                "an add/remove event composed into a replace-one history",
                lambda: events.ZCDPAccountant()
                .compose(events.DiscreteGaussian(2.0, 1.0, neighbouring="replace_one"))
                .compose(events.DiscreteGaussian(2.0, 1.0)),
                events.NeighbouringMismatchError,
            ),
        ]
        # A spend whose total overflows to ρ = ∞ is a budget exceeded like any other, in ρ and
        # in (ε, δ) alike: BudgetExceededError, nothing spent.
        def overflow(budget: Any) -> None:
            budget.spend(events.ZCDP(1e308), count=10**6)

        for label, budget in (
            ("PrivacyBudget(rho=1)", partial(events.PrivacyBudget, rho=1.0)),
            ("PrivacyBudget(epsilon=1, delta=1e-5)", partial(events.PrivacyBudget, 1.0, 1e-5)),
        ):
            typed.append(
                (
                    f"{label}.spend(ZCDP(1e308), count=10**6): ρ = ∞",
                    partial(overflow, budget()),
                    events.BudgetExceededError,
                )
            )
        return (*cases, *typed)

    def boundary_parameters(self) -> tuple[tuple[str, Callable[[], Any]], ...]:
        """Calls at the ends of documented ranges, which must be served (audit 4)."""
        values = np.linspace(0.1, 0.9, 8)
        return (
            ("ExactDiscreteGaussian(sigma=2^40)", partial(dpquantile.ExactDiscreteGaussian, 2**40)),
            ("FastDiscreteGaussian(sigma=2^25)", partial(dpquantile.FastDiscreteGaussian, 2**25)),
            (
                "ExactDiscreteLaplace(scale=(2^62 − 1)/(2^22 + 1))",
                partial(dpquantile.ExactDiscreteLaplace, Fraction(2**62 - 1, 2**22 + 1)),
            ),
            (
                "dp_quantile(min_survivors=1)",
                lambda: dpquantile.dp_quantile(
                    values, 0.5, lower=0.0, upper=1.0, bins=8, rho=1.0, seed=0, secure=False,
                    min_survivors=1,
                ),
            ),
            (
                "dp_quantile of 2 clients (the fewest it serves)",
                lambda: dpquantile.dp_quantile(
                    values[:2], 0.5, lower=0.0, upper=1.0, bins=8, rho=1.0, seed=0, secure=False
                ),
            ),
            (
                # "auto" built at run time (as read from a config file or a command line): a
                # string equal to the default, not the same object.
                "dp_quantile(secure=True, neighbors='auto' read at run time)",
                lambda: dpquantile.dp_quantile(
                    values, 0.5, lower=0.0, upper=1.0, bins=8, rho=1.0, seed=0, secure=True,
                    neighbors="".join(("au", "to")),  # type: ignore[arg-type]
                ),
            ),
            ("rho_for_epsilon(1e-20, 1e-5)", partial(dpquantile.rho_for_epsilon, 1e-20, 1e-5)),
            # Where ε = 0 is the answer (δ above the whole privacy profile): δ ∈ (0, 1) is served.
            ("ε(δ = 0.5) of N_Z(σ = 1), Δ = 1", partial(self._epsilon_of, 1.0, 0.5)),
            ("ε(δ = 1e-5) of N_Z(σ = 5e4), Δ = 1", partial(self._epsilon_of, 5e4, 1e-5)),
            (
                "PrivacyBudget(epsilon=5, delta=1e-5).spend(an event with sampler TV)",
                lambda: dpquantile.PrivacyBudget(epsilon=5.0, delta=1e-5).spend(
                    dpquantile.DiscreteGaussian(2.0, 1.0, sampler_tv_bound=1e-12)
                ),
            ),
        )

    @staticmethod
    def _epsilon_of(sigma: float, delta: float) -> float:
        event = dpquantile.DiscreteGaussian(sigma, 1.0)
        return float(dpquantile.ZCDPAccountant().compose(event).epsilon(delta))

    def zcdp_epsilon(self, rho: float, rounds: int, delta: float) -> float:
        event = dpquantile.ZCDP(rho)
        return float(dpquantile.ZCDPAccountant().compose(event, count=rounds).epsilon(delta))

    @staticmethod
    def rho_for_epsilon(epsilon: float, delta: float) -> float:
        """The ρ the library plans for a target (ε, δ): its documented inverse of ε(ρ)."""
        return float(dpquantile.rho_for_epsilon(epsilon, delta))

    @staticmethod
    def renyi_line_delta(xi: float, rho: float, epsilon: float) -> float:
        """δ(ε) the accountant states for one release it is told only the Rényi line (ξ, ρ) of
        (a user-defined :class:`dpquantile.MechanismEvent`: the base class is public)."""
        return float(_one_line_accountant(xi, rho).delta(epsilon))

    @staticmethod
    def renyi_line_epsilon(xi: float, rho: float, delta: float) -> float:
        """ε(δ) the accountant states for the same one-line release (``renyi_line_delta``)."""
        return float(_one_line_accountant(xi, rho).epsilon(delta))

    def zcdp_history_rho(self, history: tuple[tuple[float, int], ...]) -> float:
        """The total ρ the accountant states for ρ-zCDP events composed ``count`` times each."""
        accountant = dpquantile.ZCDPAccountant()
        for rho, count in history:
            accountant.compose(dpquantile.ZCDP(rho), count=count)
        return float(accountant.rho)

    def zcdp_optimal_order(self, rho: float, rounds: int, delta: float) -> float:
        """The Rényi order α at which the accountant states ``zcdp_epsilon``'s ε."""
        event = dpquantile.ZCDP(rho)
        accountant = dpquantile.ZCDPAccountant().compose(event, count=rounds)
        return float(accountant.optimal_order(delta))

    def discrete_laplace_epsilon(self, epsilon0: float, rounds: int, delta: float) -> float:
        event = dpquantile.DiscreteLaplace(scale=1.0 / epsilon0, l1_sensitivity=1.0)
        return float(dpquantile.ZCDPAccountant().compose(event, count=rounds).epsilon(delta))

    def discrete_laplace_delta(self, epsilon0: float, rounds: int, epsilon: float) -> float:
        event = dpquantile.DiscreteLaplace(scale=1.0 / epsilon0, l1_sensitivity=1.0)
        return float(dpquantile.ZCDPAccountant().compose(event, count=rounds).delta(epsilon))

    def distributed_discrete_gaussian_renyi(
        self,
        num_clients: int,
        sigma: float,
        *,
        l1: float,
        l2: float,
        dimension: int,
        rounds: int,
        alpha: float,
    ) -> float:
        event = dpquantile.DistributedDiscreteGaussian(num_clients, sigma, l1, l2, dimension)
        composed = dpquantile.ZCDPAccountant().compose(event, count=rounds)
        return float(composed.renyi_divergence(alpha))


# ----------------------------------------------------------------------------- mechanisms


class _EventClaims:
    """What a mechanism adapter claims, read from its first release's privacy event: the ε it
    states (composed by the accountant) and the ρ it states, beside the ρ it was planned for."""

    rho: float
    _event: Any

    def release(self, neighbour: int, seed: int, *, secure: bool = False) -> NDArray[np.float64]:
        raise NotImplementedError

    def _first_event(self) -> Any:
        if self._event is None:
            self.release(0, 0)
        return self._event

    def claimed_epsilon(self, delta: float) -> float:
        return float(dpquantile.ZCDPAccountant().compose(self._first_event()).epsilon(delta))

    @property
    def planned_rho(self) -> float:
        """The ρ the noise was asked to be planned for (every client surviving)."""
        return self.rho

    def stated_rho(self) -> float:
        """The ρ the release's own privacy event states."""
        return float(self._first_event().rho)


class _SecureAverageMechanism(_EventClaims):
    """secure_weighted_average on 9 clients, d = 1, clip 1, weight cap 1, ρ planned = 8.

    D: client 0 sends w = 1 with weight 1; D′: client 0 has weight 0 (its row is all zeros):
    the rows differ by exactly the L2 norm the sensitivity assumes, B·c·√(1 + λ²). The release is
    the noisy integer total (vector and weight coordinates) in grid units, recovered from the
    released average and weight sum (a bijection of them).
    """

    releases = None

    def __init__(self, rho: float = REFERENCE_RHO, *, replace_one: bool = False) -> None:
        self.rho = rho
        self.replace_one = replace_one
        self.name = "noisy secure sum" + (" (replace-one)" if replace_one else "")
        change = (
            "D′ flips client 0's value from +1 to −1 (noise planned for replace-one)"
            if replace_one
            else "D′ zeroes client 0's row"
        )
        self.description = (
            f"secure_weighted_average, n = 9, d = 1, clip = weight cap = 1, 32-bit ring, "
            f"distributed discrete Gaussian planned for ρ = {rho:g}; {change}"
        )
        self._event: Any = None

    def _run(self, neighbour: int, seed: int, secure: bool) -> Any:
        # Eight other clients keep the noisy weight sum far from 0 (≈ 8σ of its noise).
        if self.replace_one:  # the same client, another value: its row moves by 2·B·c
            first, weights = [-1.0 if neighbour else 1.0], [1.0] * 9
        else:
            first, weights = [1.0], [0.0 if neighbour else 1.0] + [1.0] * 8
        return secure_average.secure_weighted_average(
            [first] + [[0.0]] * 8,
            weights,
            clip=1.0,
            weight_cap=1.0,
            bits=32,
            noise=secure_average.DiscreteGaussianNoise(
                rho=self.rho, neighbouring="replace_one" if self.replace_one else "add_remove"
            ),
            seed=seed,
            secure=secure,
            quantize=True,
        )

    def release(self, neighbour: int, seed: int, *, secure: bool = False) -> NDArray[np.float64]:
        result = self._run(neighbour, seed, secure)
        if self._event is None:
            self._event = result.event
        step = float(result.quantization_step)
        auxiliary = encoding.WEIGHT_COORDINATE_SCALE * result.clip
        total = result.average * result.weight_sum / step
        return np.array([*np.rint(total), round(result.weight_sum * auxiliary / step)])


class _QuantileMechanism(_EventClaims):
    """dp_quantile of 8 values, 8 bins, ρ = 8: D has client 0 in bin 0, D′ in bin 7."""

    name = "DP quantile"
    releases = None

    def __init__(self, rho: float = REFERENCE_RHO) -> None:
        self.rho = rho
        self.description = (
            f"dp_quantile, n = 8, 8 bins on [0, 1], tree, replace-one, ρ = {rho:g}; "
            "client 0's value moves from bin 0 to bin 7; release = the noisy tree counts"
        )
        self._values = np.linspace(0.2, 0.8, 8)
        self._event: Any = None

    def release(self, neighbour: int, seed: int, *, secure: bool = False) -> NDArray[np.float64]:
        values = self._values.copy()
        values[0] = 0.99 if neighbour else 0.01
        result = dpquantile.quantile.dp_quantile(
            values, 0.5, lower=0.0, upper=1.0, bins=8, rho=self.rho, secure=secure, seed=seed
        )
        if self._event is None:
            self._event = result.event
        return np.asarray(result.released, dtype=np.float64)


@contextlib.contextmanager
def _warnings_logged(name: str) -> Iterator[list[logging.LogRecord]]:
    """The records of WARNING or above that logger ``name`` emits meanwhile, kept from the
    console (the audits quiet the library's loggers: this one is heard, not shown)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.WARNING)
    logger = logging.getLogger(name)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


class _SecureAverageDropout:
    """Zero vectors from 10 clients, noise planned for all 10; ``dropped`` leave before masking."""

    name = "secure average"
    num_clients = 10
    shortfall_error = None  # secure_weighted_average reports a shortfall, it cannot refuse one

    def _run(self, dropped: Sequence[int], seed: int, secure: bool) -> Any:
        n, d = self.num_clients, 64
        result = secure_average.secure_weighted_average(
            np.zeros((n, d)),
            np.ones(n),
            clip=1.0,
            weight_cap=1.0,
            bits=48,
            # ρ = 16 keeps the noisy weight sum ≥ 9 of its noise sds from 0 (it divides the total).
            noise=secure_average.DiscreteGaussianNoise(rho=16.0),
            seed=seed,
            secure=secure,
            quantize=True,
            dropouts={"masked_input": [int(u) for u in dropped]} if len(dropped) else None,
            # The noise is the question, not the threat model: allow more dropouts than the
            # malicious mode's consistency quorum would.
            threat_model="semi-honest",
        )
        assert result.quantization_step is not None and result.event is not None
        return result

    @staticmethod
    def noise_level(seed: int) -> str | None:
        """In a session of noisy averages, each sum's noise is planned for the clients still in
        the session: after client 3 of 8 drops before its masked input in sum 1, the session's
        members are the other 7, and sum 2 — nobody dropping — is planned for and released by
        those 7 (no privacy shortfall), on the secure path and the plain one. ``None``: so."""
        n = 8
        rows = np.full((n, 2), 0.1)
        # ρ = 16 keeps the noisy weight sum many noise sds from 0 (it divides the total).
        settings = secure_average.AverageSettings(
            clip=1.0, bits=32, noise=secure_average.DiscreteGaussianNoise(rho=16.0)
        )
        left = tuple(u for u in range(n) if u != 3)
        for secure in (True, False):
            where = f"a session of noisy averages (secure={secure}), client 3 gone in sum 1"
            session = secure_average.SecureAverageSession(
                n, sums=2, settings=settings, seed=seed, secure=secure
            )
            session.average(
                rows, np.ones(n), weight_cap=1.0, seed=seed, dropouts={"masked_input": [3]}
            )
            if tuple(session.members) != left:
                return f"{where}: members after sum 1 are {tuple(session.members)}, not {left}"
            second = session.average(
                rows, np.ones(n), weight_cap=1.0, seed=seed + 1, iterate=b"sum 2"
            )
            if tuple(second.survivors) != left or second.privacy_shortfall:
                return (
                    f"{where}: sum 2 summed {tuple(second.survivors)} with noise planned for "
                    f"more (privacy shortfall: {second.privacy_shortfall})"
                )
        return None

    def noise(self, dropped: Sequence[int], seed: int) -> tuple[NDArray[np.float64], float]:
        result = self._run(dropped, seed, False)
        noise = result.average * result.weight_sum / result.quantization_step  # inputs are 0
        variance = dpquantile.discrete_gaussian_variance(result.event.sigma)
        return noise, float(result.event.num_clients) * variance

    def release(
        self, dropped: Sequence[int], seed: int, *, secure: bool, refuse_shortfall: bool
    ) -> PathRelease:
        if refuse_shortfall:
            raise ValueError("secure_weighted_average cannot refuse a shortfall")
        with _warnings_logged(secure_average.__name__) as logged:
            result = self._run(dropped, seed, secure)
        step = float(result.quantization_step)
        total = np.rint(result.average * result.weight_sum / step)
        weight = round(result.weight_sum * encoding.WEIGHT_COORDINATE_SCALE * result.clip / step)
        return PathRelease(
            np.array([*total, weight]),
            protocol_steps=None,
            survivors=tuple(int(u) for u in result.survivors),
            dropped=tuple(int(u) for u in result.dropped),
            warned=bool(logged),  # its only warning on finite inputs: a shortfall
        )


class _QuantileDropout:
    """dp_quantile of 10 values (16 bins), noise planned for 10; ``dropped`` leave early."""

    name = "DP quantile"
    num_clients = 10
    shortfall_error = secagg.TooFewSurvivorsError
    _BINS = 16

    def _run(
        self,
        dropped: Sequence[int],
        seed: int,
        *,
        secure: bool = False,
        refuse_shortfall: bool = False,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> Any:
        values = np.linspace(0.05, 0.95, self.num_clients)
        gone = sorted(int(u) for u in dropped)
        return dpquantile.quantile.dp_quantile(
            values,
            0.5,
            lower=0.0,
            upper=1.0,
            bins=self._BINS,
            rho=1.0,
            consistency=True,
            interpolate=True,
            reader="first",
            secure=secure,
            seed=seed,
            refuse_shortfall=refuse_shortfall,
            progress=progress,
            dropouts={"masked_input": gone} if gone else None,
            neighbors=None,  # the complete graph: any third of the clients may drop
        )

    def noise(self, dropped: Sequence[int], seed: int) -> tuple[NDArray[np.float64], float]:
        result = self._run(dropped, seed)
        values = np.linspace(0.05, 0.95, self.num_clients)
        tree = dpquantile.HistogramTree(self._BINS, 0.0, 1.0)
        exact = tree.counts(np.delete(values, sorted(int(u) for u in dropped))) * result.scale
        event = result.event
        noise = np.asarray(result.released, dtype=np.float64) - exact
        return noise, float(event.num_clients) * dpquantile.discrete_gaussian_variance(event.sigma)

    @staticmethod
    def noise_level(seed: int) -> str | None:
        """The documented count scale (``quantile_scale``): s is the smallest integer making
        the ideal per-client σ, s·Δ₂/√(2nρ), at least 2 grid units — so KLS21's τ term is
        negligible and the noise relative to the counts, σ/s, is the central-DP level
        Δ₂/√(2nρ) (Δ₂ = √(2L) for replace-one on a tree of L levels). Checked on dp_quantile
        at n = 10 (ρ = 1: s > 1; ρ = 0.01: s = 1), 200 and 1000 clients. ``None``: it
        holds."""
        for n, rho, bins in ((10, 1.0, 16), (10, 0.01, 16), (200, 0.5, 64), (1000, 0.125, 64)):
            result = dpquantile.quantile.dp_quantile(
                np.linspace(0.0, 1.0, n), 0.5, lower=0.0, upper=1.0, bins=bins, rho=rho,
                seed=seed, secure=False,
            )  # fmt: skip
            levels = dpquantile.HistogramTree(bins, 0.0, 1.0).levels
            central = math.sqrt(2 * levels) / math.sqrt(2 * n * rho)
            s = int(result.scale)
            where = f"dp_quantile of {n} clients, ρ = {rho:g}, {bins} bins"
            if s < 1 or s * central < 2.0 or (s > 1 and (s - 1) * central >= 2.0):
                return (
                    f"{where}: count scale {s}, not the smallest integer s with "
                    f"s·Δ₂/√(2nρ) ≥ 2 (Δ₂/√(2nρ) = {central:.6g})"
                )
            if not float(result.sigma) / s <= central * (1.0 + 1e-6):
                return (
                    f"{where}: noise σ/s = {float(result.sigma) / s:.6g} of a count, above "
                    f"the central-DP level Δ₂/√(2nρ) = {central:.6g}"
                )
        return None

    def release(
        self, dropped: Sequence[int], seed: int, *, secure: bool, refuse_shortfall: bool
    ) -> PathRelease:
        steps: list[str] = []
        with _warnings_logged(dpquantile.quantile.__name__) as logged:
            result = self._run(
                dropped,
                seed,
                secure=secure,
                refuse_shortfall=refuse_shortfall,
                progress=lambda phase, done, total: steps.append(phase),
            )
        released = np.asarray(result.released, dtype=np.float64)
        # The documented post-processing, from the released vector and the public survivor
        # count alone (HistogramTree.estimate with the reader dp_quantile was given).
        tree = dpquantile.HistogramTree(self._BINS, 0.0, 1.0)
        recomputed, _ = tree.estimate(
            released / float(result.scale),
            float(result.survivors),
            0.5,
            mechanism="tree",
            consistency=True,
            interpolate=True,
            reader="first",
        )
        return PathRelease(
            released,
            len(steps),
            float(result.estimate),
            float(recomputed),
            survivors=result.survivors,
            dropped=result.dropped,
            warned=bool(logged),  # its only warning: a shortfall
        )


# ----------------------------------------------------------------------------- protocol


def _average_settings(
    clip: float, bits: int, rotate: bool, rho: float | None
) -> secure_average.AverageSettings:
    """A quantised secure average's settings, with the discrete Gaussian planned for ρ (or none)."""
    noise = None if rho is None else secure_average.DiscreteGaussianNoise(rho=rho)
    return secure_average.AverageSettings(
        clip=clip, bits=bits, rotate=rotate, quantize=True, noise=noise
    )


#: The snapshot fields that are maps (``secagg/client.py``'s ``_encode_map``).
_SNAPSHOT_MAPS = frozenset(
    {
        "pair_secrets",
        "neighbor_keys",
        "receive_keys",
        "held_seed_shares",
        "held_key_shares",
        "approval_keys",
    }
)


class _OurSansIO:
    """Our Client and Server, exactly as tests/secagg/test_state_machine.py drives them."""

    protocol_error = secagg.ProtocolError
    peer_error = secagg.RemoteProtocolError
    abort_error = secagg.TooFewSurvivorsError
    threat_models: tuple[str, ...] = ("semi-honest", "malicious")
    _TO_SERVER = (
        "AdvertiseKeys",
        "EncryptedShares",
        "MaskedInput",
        "ConsistencySignature",
        "UnmaskResponse",
    )

    def setup(
        self,
        *,
        n: int,
        degree: int | None,
        threshold: int,
        bits: int,
        dimension: int,
        seed: int,
        constant: int | None = None,
        threat_model: str = "malicious",
    ) -> tuple[dict[int, Any], Any, dict[int, NDArray[np.uint64]], list[Any]]:
        config = secagg.SecAggConfig(
            dimension=dimension,
            threshold=threshold,
            modulus_bits=bits,
            neighbors=degree,
            round_nonce=b"secagg-dp audits",
            threat_model=threat_model,
        )
        rng = np.random.default_rng(seed)
        inputs = {
            u: rng.integers(0, 2**bits, size=dimension, dtype=np.uint64)
            if constant is None
            else np.full(dimension, constant, dtype=np.uint64)
            for u in range(1, n + 1)
        }
        root = secagg.KeystreamRandom(seed)
        keys, store = secagg.generate_identities(inputs, seed)
        clients = {
            u: secagg.Client(
                config,
                u,
                input_vector=inputs[u],
                random_source=root.spawn(b"%d" % u),
                identity=keys[u],
                trust_store=store,
            )
            for u in inputs
        }
        server = secagg.Server(config, inputs, trust_store=store)
        pool = [m for c in clients.values() for m in c.start()]
        return clients, server, inputs, pool

    def client_receive(self, client: Any, message: Any) -> list[Any]:
        replies: list[Any] = client.receive(message)
        return replies

    def restore(self, client: Any) -> Any:
        """The client rebuilt from its snapshot bytes (a crash and a restart; audit 7)."""
        return secagg.Client.restore(
            client.snapshot(), identity=client._identity, trust_store=client._trust_store
        )

    @staticmethod
    def snapshot_bytes(client: Any) -> bytes:
        """What a client saves to survive a crash (audit 7 damages it)."""
        return bytes(client.snapshot())

    @staticmethod
    def damaged_snapshots(data: bytes) -> dict[str, bytes]:
        """Our snapshot (version, state, id, then u32-length-prefixed fields; secagg/client.py)
        with the last field's length one more than the bytes left: every field still reads
        whole, only the length check can tell; with its first non-empty map field's last
        entry a byte short (the field's length shrunk to match); and with another format
        version (the next and the previous) or a state past the last, the rest intact: "this
        build reads version" its own only."""
        offset, last = 6, 6
        while offset + 4 <= len(data):
            last = offset
            offset += 4 + int.from_bytes(data[offset : offset + 4], "little")
        size = int.from_bytes(data[last : last + 4], "little")
        longer = data[:last] + (size + 1).to_bytes(4, "little") + data[last + 4 :]
        version = data[0]
        damaged = {}
        # A map field (u32 key, u32 size, value; entries back to back) whose last value lost
        # its last byte, the field's length shrunk to match: only the entry's own check sees it.
        offset = 6
        for name in secagg.client._SNAPSHOT_FIELDS:
            length = int.from_bytes(data[offset : offset + 4], "little")
            if name in _SNAPSHOT_MAPS and length:
                end = offset + 4 + length
                damaged["whose map field's last entry is a byte short"] = (
                    data[:offset] + (length - 1).to_bytes(4, "little")
                    + data[offset + 4 : end - 1] + data[end:]
                )  # fmt: skip
                break
            offset += 4 + length
        return {
            **damaged,
            "whose last field claims a byte more than is left": longer,
            "of the next format version": bytes([(version + 1) % 256]) + data[1:],
            "of the previous format version": bytes([(version - 1) % 256]) + data[1:],
            "in a state past the last": data[:1] + bytes([len(secagg.ClientState)]) + data[2:],
            "in state 255": data[:1] + bytes([255]) + data[2:],
        }

    @staticmethod
    def restore_bytes(client: Any, data: bytes) -> Any:
        """A client restarted from ``data`` with its own identity and trust store (audit 7)."""
        return secagg.Client.restore(
            data, identity=client._identity, trust_store=client._trust_store
        )

    def wire(self, message: Any) -> bytes:
        """A message's bytes on the wire (audit 7 compares replies byte for byte)."""
        return bytes(secagg.messages.encode_message(message))

    def server_receive(self, server: Any, message: Any) -> list[Any]:
        replies: list[Any] = server.receive(message, peer_id=message.peer)
        return replies

    def close_phase(self, server: Any) -> list[Any]:
        replies: list[Any] = server.close_phase()
        return replies

    def to_server(self, message: Any) -> bool:
        return type(message).__name__ in self._TO_SERVER

    def peer(self, message: Any) -> int:
        return int(message.peer)

    def hostile_unmask(self, message: Any, *, swap: bool = False) -> Any | None:
        if not isinstance(message, secagg.UnmaskRequest) or not message.survivors:
            return None
        victim, *others = message.survivors
        survivors = tuple(others) if swap else message.survivors
        return dataclasses.replace(message, survivors=survivors, dropped=(*message.dropped, victim))

    def revealed_shares(self, reply: Any) -> tuple[frozenset[int], frozenset[int]] | None:
        if not isinstance(reply, secagg.UnmaskResponse):
            return None
        # A revealed pairwise key with a neighbour counts as its mask-key side, like its share.
        return (
            frozenset(v for v, _ in reply.seed_shares),
            frozenset(v for v, _ in reply.key_shares) | {v for v, _ in reply.pairwise_keys},
        )

    def server_outcome(self, server: Any) -> str:
        state = server.state
        if state is secagg.ServerState.COMPLETED:
            return "completed"
        if state is secagg.ServerState.ABORTED:
            return "aborted"
        return "running"

    def server_total(self, server: Any) -> tuple[NDArray[np.uint64], tuple[int, ...]]:
        result = server.result
        return np.asarray(result.total, dtype=np.uint64), tuple(result.survivors)

    def server_secrets(self, server: Any) -> tuple[dict[int, tuple[int, int]], set[int], set[int]]:
        return (
            dict(server.held_share_counts()),
            set(server.reconstructed_seed_owners),
            set(server.reconstructed_key_owners),
        )


_PHASES = {
    "keys": "advertise_keys",
    "shares": "share_keys",
    "masked": "masked_input",
    "unmask": "unmask",
}


class _OurSecureSum:
    # Seeded rounds repeat: every client's randomness comes from the seed (audit 8 checks it).
    seeded = True

    def __init__(self, sans_io: _OurSansIO) -> None:
        self._sans_io = sans_io

    def run_round(
        self, inputs: NDArray[np.int64], *, bits: int, dropped: Sequence[int], seed: int
    ) -> tuple[NDArray[np.int64], tuple[int, ...]] | None:
        try:
            result = secagg.secure_sum(
                inputs,
                modulus_bits=bits,
                dropouts={"masked_input": list(dropped)} if dropped else None,
                seed=seed,
            )
        except secagg.TooFewSurvivorsError:
            return None
        return np.asarray(result.total, dtype=np.int64), result.survivors

    def run_session(
        self,
        inputs: Sequence[NDArray[np.int64]],
        *,
        bits: int,
        dropped: Sequence[Sequence[int]],
        threshold: int,
        threat_model: str,
        neighbors: int | None,
        seed: int,
    ) -> list[tuple[NDArray[np.int64], tuple[int, ...]]] | None:
        # One key setup, then len(inputs) sums; sum r's rows may have their own width.
        n = inputs[0].shape[0]
        try:
            session = secagg.Session(
                n,
                inputs[0].shape[1],
                iterations=len(inputs),
                modulus_bits=bits,
                threshold=threshold,
                neighbors=neighbors,
                threat_model=threat_model,
                seed=seed,
            )
            out = []
            for r, (rows, gone) in enumerate(zip(inputs, dropped, strict=True)):
                result = session.sum(
                    rows,
                    iterate=b"sum %d" % r,
                    dropouts={"masked_input": list(gone)} if gone else None,
                )
                out.append((np.asarray(result.total, dtype=np.int64), result.survivors))
        except secagg.TooFewSurvivorsError:
            return None
        return out

    def invalid_parameters(self) -> tuple[tuple[Any, ...], ...]:
        """A round configured with a threshold, width, modulus, degree or number of sums out of
        range, a server given client ids outside the wire format or twice, or a client given an
        id outside it (audit 7: each must raise ValueError or TypeError); a 2-client sum must
        warn. t = 1 is valid (with a warning), so not listed."""
        base: dict[str, Any] = {"dimension": 3, "threshold": 2, "round_nonce": b"secagg-dp audits"}
        changes = (
            ("threshold", 0),
            ("dimension", 0),
            ("modulus_bits", 0),
            ("modulus_bits", 65),
            ("neighbors", 3),
            ("neighbors", 0),
            ("iterations", 0),
            ("iterations", 256),
        )
        cases: list[tuple[str, Callable[[], Any]]] = [
            (f"SecAggConfig({k}={v})", partial(secagg.SecAggConfig, **{**base, k: v}))
            for k, v in changes
        ]
        config = secagg.SecAggConfig(**base, threat_model="semi-honest")
        largest = secagg.messages.MAX_ID
        cases += [
            (f"Server(ids={ids})", partial(secagg.Server, config, ids))
            for ids in ([0, 1, 2], [1, 2, largest + 1], [1, 1, 2])
        ]
        cases += [
            (f"Client(client_id={u})", partial(secagg.Client, config, u, input_vector=[1, 2, 3]))
            for u in (0, largest + 1, 2**64)
        ]
        # Served, but with the documented warning: with two clients each learns the other's
        # input from the total (README's threat model), which the caller must be told.
        pair = np.arange(6, dtype=np.int64).reshape(2, 3)
        warned: list[tuple[str, Callable[[], Any], type[Warning], str]] = [
            (
                "secure_sum of 2 clients",
                partial(secagg.secure_sum, pair, modulus_bits=16, seed=0),
                secagg.InsecureSettingsWarning,
                "2-client",  # not only the t = 1 warning such a sum also gets
            ),
            (
                "secure_sum of 4 clients with t = 1",
                partial(secagg.secure_sum, np.ones((4, 3), np.int64), modulus_bits=16, threshold=1),
                secagg.InsecureSettingsWarning,
                "t = 1",
            ),
        ]
        return (*cases, *warned)

    @staticmethod
    def boundary_parameters() -> tuple[tuple[str, Callable[[], Any]], ...]:
        """A sound configuration must run without an InsecureSettingsWarning (audit 7): a
        warning on every round would teach users to ignore it; clients at both ends of the
        documented id range must be built."""

        def quietly() -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("error", secagg.InsecureSettingsWarning)
                inputs = np.arange(15, dtype=np.int64).reshape(5, 3)
                return secagg.secure_sum(inputs, modulus_bits=16, threshold=3, seed=0)

        # The ends of the client ids' documented range [1, MAX_ID] (the wire format's).
        config = secagg.SecAggConfig(
            dimension=3, threshold=2, round_nonce=b"secagg-dp audits", threat_model="semi-honest"
        )
        ends = [
            (f"Client(client_id={u})", partial(secagg.Client, config, u, input_vector=[1, 2, 3]))
            for u in (1, secagg.messages.MAX_ID)
        ]
        return (("secure_sum of 5 clients, t = 3, without a warning", quietly), *ends)

    def survives_dropout(self, phase: str, seed: int) -> str | None:
        inputs = np.arange(15, dtype=np.int64).reshape(5, 3)
        dropouts = {_PHASES[phase]: [0]}
        try:
            result = secagg.secure_sum(
                inputs, modulus_bits=16, threshold=3, dropouts=dropouts, seed=seed
            )
        except secagg.ProtocolError as exc:
            return f"the round aborted: {exc}"
        members = secagg.summed_clients(dropouts, 5)
        if list(result.survivors) != members:
            return f"survivors {result.survivors}, expected {members}"
        if not np.array_equal(
            np.asarray(result.total, dtype=np.int64), inputs[members].sum(axis=0)
        ):
            return "the total is not the survivors' sum"
        return None

    def answers_both_shares(self, seed: int) -> bool:
        sans_io = self._sans_io
        clients, server, _, pool = sans_io.setup(
            n=5, degree=None, threshold=3, bits=16, dimension=2, seed=seed
        )
        requests: list[Any] = []
        for _ in range(12):
            outgoing: list[Any] = []
            for message in pool:
                if sans_io.to_server(message):
                    outgoing.extend(sans_io.server_receive(server, message))
                elif isinstance(message, secagg.UnmaskRequest):
                    requests.append(message)
                else:
                    outgoing.extend(sans_io.client_receive(clients[message.peer], message))
            if requests:
                break
            pool = outgoing or sans_io.close_phase(server)
        if not requests:
            raise RuntimeError("the round never reached the unmask phase")
        request = requests[0]
        hostile = sans_io.hostile_unmask(request)
        try:
            replies = sans_io.client_receive(clients[request.peer], hostile)
        except secagg.ProtocolError:
            return False
        victim = request.survivors[0]
        revealed = [sans_io.revealed_shares(r) for r in replies]
        return any(r is not None and victim in r[0] and victim in r[1] for r in revealed)

    @staticmethod
    def headroom_refusal(seed: int) -> str | None:
        """A ring with no room for n clients: secure_weighted_average (plain and rotated) must
        refuse it with a HeadroomError naming the smallest b that works — b runs, b − 1 is
        refused (README: "names the smallest sufficient b"). ``None``: it does."""
        vectors = np.full((8, 3), 0.5)
        for rotate in (False, True):

            def run(bits: int, rotate: bool = rotate) -> Any:
                settings = secure_average.AverageSettings(clip=1.0, bits=bits, rotate=rotate)
                return secure_average.secure_weighted_average(
                    vectors, np.ones(8), settings=settings, weight_cap=1.0, seed=seed, secure=True
                )

            where = f"secure_weighted_average of 8 clients on a 4-bit ring (rotate={rotate})"
            try:
                run(4)
            except secagg.HeadroomError as error:
                needed = error.required_bits
            except ValueError as error:
                return f"{where}: refused without naming the bits it needs ({error})"[:300]
            else:
                return f"{where}: accepted"
            try:
                run(needed)
            except ValueError as error:
                return f"{where}: the {needed} bits it named are refused too ({error})"[:300]
            try:
                run(needed - 1)
            except ValueError:
                continue
            return f"{where}: named {needed} bits, but {needed - 1} suffice"
        return None

    @staticmethod
    def late_member_floor(seed: int) -> str | None:
        """A session whose later sum has no secure member set left must be refused when it
        begins: ``Server.begin_iteration`` raises ``TooFewSurvivorsError`` and aborts
        (its documented ``Raises``), instead of opening a sum nobody is asked to join.

        The state is reachable honestly: responders reveal only their own seeds, so a sum
        completes with t unmask responders that need not keep t neighbours among themselves.
        Five clients on the complete graph, semi-honest; at t = 2 clients 3–5 and at t = 1
        clients 2–5 go silent in sum 1's unmask phase, so sum 1 completes over all five
        and its responders peel to nobody. ``None``: refused as documented."""
        from audits.adversary import AdversarialRound  # noqa: PLC0415 (a cycle via attacks)
        from audits.attacks import inputs_for  # noqa: PLC0415

        for t, silent in ((2, [3, 4, 5]), (1, [2, 3, 4, 5])):
            where = (
                f"a semi-honest session of 5 clients (complete graph, t = {t}) whose sum 1 "
                f"completed with clients {silent} silent in its unmask phase"
            )
            game = AdversarialRound(
                inputs_for(5),
                threshold=t,
                neighbors=None,
                iterations=2,
                seed=seed,
                threat_model="semi-honest",
            )
            game.run(silent={"unmask": silent})
            server = game.server
            after_sum_1 = server.state
            if after_sum_1 is not secagg.ServerState.AWAITING_ITERATION:
                return f"{where}: sum 1 ended in {after_sum_1.name}, not completed"
            try:
                outgoing = server.begin_iteration(b"sum 2")
            except secagg.TooFewSurvivorsError:
                refused = server.state
                if refused is not secagg.ServerState.ABORTED:
                    return f"{where}: sum 2 refused, but the server is {refused.name}"
                continue
            except Exception as error:
                return (
                    f"{where}: begin_iteration raised {type(error).__name__}, not "
                    f"TooFewSurvivorsError ({error})"
                )[:300]
            return (
                f"{where}: begin_iteration opened sum 2 ({len(outgoing)} requests, server "
                f"{game.server.state.name}) instead of refusing it with TooFewSurvivorsError"
            )
        return None

    @staticmethod
    def grid_rule(seed: int) -> str | None:
        """secure_weighted_average's grid is the one its documented no-wrap rule gives
        (``bits``: "the scale is the finest with n·⌈B·c·scale⌉ (+ noise tail) < 2^(b−1)";
        rotated rows, secure_average_notes.md §6: each rotated coordinate of the sum within
        ⌈s·n·‖row‖·t/√B⌉ + n, ‖row‖ = B·c·√(1 + λ²), t = √(2 ln(2D/2⁻⁴⁰)), D the padded wire
        width and B its rotation block; the scale the larger of that rule and the worst case).
        Without noise the scale must be that largest admissible one (the next float grid
        10⁻⁹ finer breaks the rule); with noise the rule plus the noise tail ⌈t·σ·√n⌉ must
        hold, and ``ContributionLayout.plan`` must state that tail as its noise bound (0
        without noise). On rings of 56 and 64 bits float64's limit binds instead: the
        quantiser's clip·scale ≤ 2^52 (``secagg.Quantizer``), the scale the finest within both.
        ``None``: it does."""
        lam = encoding.WEIGHT_COORDINATE_SCALE
        cases = [
            (10, 3, 32, False, None, 1.0),
            (10, 1000, 20, False, None, 1.0),
            (25, 50, 40, False, None, 1.0),
            (10, 1000, 20, True, None, 1.0),
            (2, 1000, 20, True, None, 1.0),  # n·‖x‖·t/√B < 1: the flattened candidate's regime
            (7, 300, 24, True, None, 1.0),
            (10, 3, 32, True, None, 1.0),
            (10, 64, 48, False, 16.0, 1.0),
            (10, 1000, 48, True, 16.0, 1.0),
            # The ring, not the fast sampler's σ ceiling, limits these grids.
            (10, 1000, 20, True, 1.0, 1.0),
            (10, 64, 24, False, 1.0, 1.0),
            # Clip norms other than 1, where c and c² (or c^anything) part.
            (10, 1000, 32, True, None, 0.5),
            (10, 1000, 32, True, None, 25.0),
            (10, 64, 24, False, None, 0.5),
            (7, 300, 40, True, None, 25.0),
            # A clip far from 1 on a narrow ring: a coarse grid (scale ≪ 1) is still a grid.
            (10, 64, 16, False, None, 1e10),
            (10, 1000, 24, True, None, 1e10),
            # Rings wide enough that float64's 2^52 limit on clip·scale, not the ring, binds.
            (5, 3, 56, False, None, 1.0),
            (10, 64, 64, False, None, 1.0),
            (10, 1000, 64, True, None, 1.0),
            (10, 64, 64, False, 16.0, 1.0),
        ]
        for n, d, bits, rotate, rho, clip in cases:
            magnitude_of_coordinates = clip  # B·c (B = 1): the vector's and the weight's
            vectors = np.random.default_rng([seed, n, d]).normal(size=(n, d))
            vectors *= clip / (2.0 * np.linalg.norm(vectors, axis=1, keepdims=True))
            settings = _average_settings(clip, bits, rotate, rho)
            where = (
                f"secure_weighted_average, n = {n}, d = {d}, {bits}-bit ring, rotate={rotate}"
                + ("" if rho is None else f", noise ρ = {rho:g}")
                + ("" if clip == 1.0 else f", clip {clip:g}")
            )
            try:
                result = secure_average.secure_weighted_average(
                    vectors, np.ones(n), settings=settings, weight_cap=1.0, seed=seed,
                    secure=False,
                )  # fmt: skip
            except Exception as error:  # a ring of the documented range refused
                return f"{where}: raised {error!r}"[:300]
            assert result.quantization_step is not None
            scale = 1.0 / float(result.quantization_step)
            budget = (1 << (bits - 1)) - 1
            block = _rotation_block(d + 1)
            wire = -(-(d + 1) // block) * block if rotate else d + 1
            tail = math.sqrt(2.0 * math.log(2.0 * wire / 2.0**-40))
            row_norm = magnitude_of_coordinates * math.sqrt(1.0 + lam**2)
            spread = tail / math.sqrt(block) if rotate else 0.0

            def bound(
                s: float,
                n: int = n,
                norm: float = row_norm,
                spread: float = spread,
                magnitude: float = magnitude_of_coordinates,
            ) -> int:
                if not spread:  # unrotated: every coordinate within B·c
                    return n * math.ceil(magnitude * s)
                return min(n * math.ceil(norm * s), math.ceil(n * norm * s * spread) + n)

            noise = 0
            if result.event is not None:
                noise = math.ceil(tail * float(result.event.sigma) * math.sqrt(n))
            # The quantiser's clip: the row norm rotated, B·c not; float64 resolves its
            # stochastic-rounding grid only while clip·scale ≤ 2^52 (secagg.Quantizer).
            float_limit = (row_norm if rotate else magnitude_of_coordinates) * scale
            if bound(scale) + noise > budget:
                return (
                    f"{where}: its grid (scale {scale:.6g}) lets the sum reach "
                    f"{bound(scale) + noise} > 2^(b−1) − 1 = {budget}: it can wrap"
                )
            if float_limit > 2.0**52:
                return (
                    f"{where}: its grid (scale {scale:.6g}) puts clip·scale at "
                    f"{float_limit:.6g} > 2^52, finer than float64 resolves"
                )
            finer = scale * (1.0 + 1e-9)
            if rho is None and bound(finer) <= budget and float_limit * (1.0 + 1e-9) <= 2.0**52:
                return (
                    f"{where}: its grid (scale {scale:.6g}) is coarser than the documented "
                    "finest admissible one (a grid 10⁻⁹ finer still fits the ring and float64)"
                )
            # The public plan's stated noise bound: ⌈t·σ·√n⌉ of its own σ, 0 without noise.
            plan = encoding.ContributionLayout(d, clip=clip, weight_cap=1.0).plan(
                n, bits, noise_rho=rho, rotate=rotate
            )
            stated = 0
            if plan.mechanism is not None:
                stated = math.ceil(tail * float(plan.mechanism.sigma) * math.sqrt(n))
            if plan.noise_bound != stated:
                return (
                    f"{where}: ContributionLayout.plan states a noise bound of "
                    f"{plan.noise_bound} grid units, not ⌈t·σ·√n⌉ = {stated}"
                    + ("" if plan.mechanism is not None else " (it has no noise)")
                )
        return None

    @staticmethod
    def clip_equivariance(seed: int) -> str | None:
        """The secure average is stated in units of the clip c (grid step ∝ c, sensitivity
        B·c, noise planned in grid units), so rows and clip scaled by c release c times the
        clip-1 average and the same weight sum (same seed): within 10⁻⁹ of the clip and 10⁻⁶
        (measured: 10⁻¹⁶ and 7·10⁻⁹, the rotated grid being bisected), at c = 0.5, 25, 10¹⁰
        and 2⁻²⁰, with and without noise, rotated and not. ``None``: it does."""
        cases = [  # (n, d, bits, rotate, ρ)
            (10, 64, 24, False, 1.0),
            (10, 1000, 24, True, 1.0),
            (10, 64, 20, False, 16.0),
            (10, 3, 32, False, None),
            (7, 300, 40, True, None),
        ]
        for n, d, bits, rotate, rho in cases:
            rows = np.random.default_rng([seed, n, d]).normal(size=(n, d))
            rows /= 2.0 * np.linalg.norm(rows, axis=1, keepdims=True)
            where = (
                f"secure_weighted_average, n = {n}, d = {d}, {bits}-bit ring, rotate={rotate}"
                + ("" if rho is None else f", noise ρ = {rho:g}")
            )
            unit: Any = None
            for clip in (1.0, 0.5, 25.0, 1e10, 2.0**-20):
                settings = _average_settings(clip, bits, rotate, rho)
                try:
                    scaled = secure_average.secure_weighted_average(
                        rows * clip, np.ones(n), settings=settings, weight_cap=1.0, seed=seed,
                        secure=False,
                    )  # fmt: skip
                except Exception as error:
                    if unit is None:
                        raise  # refused at clip 1: not this check's question
                    problem = f"{where}: refused at clip {clip:g} but served at clip 1: {error!r}"
                    return problem[:300]
                if unit is None:
                    unit = scaled
                    continue
                moved = float(np.max(np.abs(scaled.average / clip - unit.average)))
                weights = abs(scaled.weight_sum - unit.weight_sum)
                if moved > 1e-9 or weights > 1e-6:
                    return (
                        f"{where}: at clip {clip:g} the average moved by {moved:.3g} clips and "
                        f"the weight sum by {weights:.3g} from c × the clip-1 release"
                    )
        return None

    def overflow_probe(self, seed: int) -> OverflowProbe:
        # 6 values in bin 0: the root count n·scale ≥ 2^(b−1) with b one bit below its length.
        values = np.full(6, 0.05)
        quantile = dpquantile.quantile
        reference = quantile.dp_quantile(
            values, 0.5, lower=0.0, upper=1.0, bins=4, rho=1.0, seed=seed, secure=True
        )
        bits = max(2, int(6 * reference.scale).bit_length())
        note = f"dp_quantile with modulus_bits = {bits} (it needs {reference.modulus_bits})"
        try:
            small = quantile.dp_quantile(
                values,
                0.5,
                lower=0.0,
                upper=1.0,
                bins=4,
                rho=1.0,
                seed=seed,
                secure=True,
                modulus_bits=bits,
            )
        except (secagg.HeadroomError, ValueError):
            probe = OverflowProbe(True, 0.0, 0.0, note)
        else:
            error = float(np.max(np.abs(small.released - reference.released)))
            probe = OverflowProbe(False, error, 0.0, note)
        if probe.refused or probe.max_abs_error <= probe.tolerance:
            return self._widest_rings(values, reference, seed) or self._headroom_edge() or probe
        return probe

    @staticmethod
    def _widest_rings(
        values: NDArray[np.float64], reference: Any, seed: int
    ) -> OverflowProbe | None:
        """dp_quantile on the widest rings it accepts (63 and 64 bits, where its int64 counts
        are never reduced), secure and simulated, releases what it does securely on its own
        ring (``None``: it does)."""
        for bits, secure in itertools.product((63, 64), (False, True)):
            path = "secure" if secure else "simulated"
            note = f"dp_quantile ({path}) with modulus_bits = {bits}, against its own ring's"
            try:
                wide = dpquantile.quantile.dp_quantile(
                    values, 0.5, lower=0.0, upper=1.0, bins=4, rho=1.0, seed=seed,
                    secure=secure, modulus_bits=bits,
                )  # fmt: skip
            except Exception as exc:  # a valid ring refused, or the reduction overflowed
                return OverflowProbe(False, math.inf, 0.0, f"{note}: raised {exc!r}"[:200])
            error = float(np.max(np.abs(wide.released - reference.released)))
            if error > 0.0:
                return OverflowProbe(False, error, 0.0, note)
        return None

    @staticmethod
    def _headroom_edge() -> OverflowProbe | None:
        """The secure average at the edge of its plan: 8 clients (a power of two, so n·max|q|
        can meet 2^(b−1) exactly) each at β = B, w = c·e₁, whose grid puts every row's first
        coordinate at the largest value the plan allows; the sum must not wrap (``None``: it
        did not)."""
        average_module = secure_average
        vectors = np.zeros((8, 3))
        vectors[:, 0] = 1.0
        for bits in (12, 16):
            result = average_module.secure_weighted_average(
                vectors,
                np.ones(8),
                settings=average_module.AverageSettings(clip=1.0, bits=bits),
                weight_cap=1.0,
                seed=0,
                secure=True,
            )
            error = float(np.max(np.abs(result.average - vectors[0])))
            if error > 0.01:  # quantisation moves it by < 8 steps of 2^-(b−4); a wrap by ≈ 2
                note = f"secure_weighted_average of 8 rows at the plan's largest value, {bits} bits"
                return OverflowProbe(False, error, 0.01, note)
        # With noise the plan must leave the noise's tail bound on top of the rows: a plan that
        # does not wraps about every other release. ρ = 50: the average's noise has SD ≈ 0.05
        # here (measured max 0.145 over these seeds), a wrap moves it by ≈ 2.
        noisy = average_module.AverageSettings(
            clip=1.0, bits=16, noise=average_module.DiscreteGaussianNoise(rho=50.0)
        )
        for seed in range(4):
            result = average_module.secure_weighted_average(
                vectors, np.ones(8), settings=noisy, weight_cap=1.0, seed=seed, secure=True
            )
            error = float(np.max(np.abs(result.average - vectors[0])))
            if error > 0.5:
                note = f"noisy secure_weighted_average (ρ = 50) of 8 rows at the edge, seed {seed}"
                return OverflowProbe(False, error, 0.5, note)
        return None

    def masked_inputs(self, bits: int, dimension: int, seed: int) -> NDArray[np.uint64] | None:
        # Five clients on a SecAgg+ graph of degree 2: each masked input carries 2 pairwise masks.
        sans_io = self._sans_io
        clients, server, _, pool = sans_io.setup(
            n=5, degree=2, threshold=2, bits=bits, dimension=dimension, seed=seed, constant=1
        )
        rows: list[NDArray[np.uint64]] = []
        for _ in range(12):
            outgoing: list[Any] = []
            for message in pool:
                if isinstance(message, secagg.MaskedInput):
                    rows.append(np.asarray(message.vector, dtype=np.uint64))
                elif sans_io.to_server(message):
                    outgoing.extend(sans_io.server_receive(server, message))
                else:
                    outgoing.extend(sans_io.client_receive(clients[message.peer], message))
            if rows:
                return np.vstack(rows)
            pool = outgoing or sans_io.close_phase(server)
        raise RuntimeError("the round never reached the masked-input phase")


class _OurMasks:
    seed_bytes = 32
    session_bound = True

    @staticmethod
    def invalid_parameters() -> tuple[tuple[Any, ...], ...]:
        """A pairwise mask of a client with itself must be refused (audit 8: its two masks
        would not cancel): the same id twice, as ints built apart (beyond CPython's small-int
        cache) and as NumPy integers; so must mask keys of another length than 16 bytes, and
        accumulators that are not 1-D arrays of the ring's dtype (TypeError, as documented)."""
        masks = importlib.import_module("secagg.masks")
        key = masks.pairwise_mask_key
        same = [(int("300"), int("300")), (np.int64(7), np.int64(7)), (5, 5)]
        selves = tuple(
            (
                f"pairwise_mask_key(first={a}, second={b})",
                partial(key, bytes(32), session_id=b"s" * 32, first=a, second=b),
            )
            for a, b in same
        )
        # Mask keys are 16 bytes (the derived AES-128 keys): a raw 32-byte agreement secret, or
        # any other length, must not become a mask stream of its own (AES-192/256 would take it).
        ring = secagg.Ring(16)
        lengths = tuple(
            (
                f"add_masks(a {size}-byte key)",
                partial(masks.add_masks, ring.zeros(4), ring, add=(bytes(size),)),
            )
            for size in (15, 24, 32)
        )
        # The accumulator: "a 1-D contiguous array of the ring's storage dtype" (TypeError).
        shapes = tuple(
            (
                f"add_masks(an accumulator {what})",
                partial(masks.add_masks, accumulator, ring, add=(bytes(16),)),
                TypeError,
            )
            for what, accumulator in (
                ("of 0 dimensions", np.array(5, dtype=ring.dtype)),
                ("of 2 dimensions", ring.zeros(4).reshape(2, 2)),
                ("of int64", np.zeros(4, dtype=np.int64)),
            )
        )
        return (*selves, *lengths, *shapes)

    @staticmethod
    def boundary_parameters() -> tuple[tuple[str, Callable[[], Any]], ...]:
        """An accumulator of the ring's dtype that is equal to, but not, NumPy's canonical dtype
        object — as an unpickled array has (multiprocessing, a stored state) — must be served."""
        masks = importlib.import_module("secagg.masks")
        ring = secagg.Ring(16)
        unpickled = pickle.loads(pickle.dumps(ring.zeros(4)))  # our own bytes
        return (
            (
                "add_masks(an unpickled accumulator)",
                partial(masks.add_masks, unpickled, ring, add=(bytes(16),)),
            ),
        )

    def expand(self, seed: bytes, bits: int, dimension: int, session: bytes) -> NDArray[np.uint64]:
        # The path a client runs (add_masks into its vector), not the expand_mask helper.
        masks = importlib.import_module("secagg.masks")
        key = masks.pairwise_mask_key(seed, session_id=session, first=1, second=2)
        ring = secagg.Ring(bits)
        vector = ring.zeros(dimension)
        masks.add_masks(vector, ring, add=(key,))
        out: NDArray[np.uint64] = np.asarray(ring.normalize(vector), dtype=np.uint64)
        return out

    @staticmethod
    def expand_in_sum(
        seed: bytes, dimension: int, session: bytes, iteration: int, iterate: bytes
    ) -> NDArray[np.uint64]:
        """The 32-bit mask of ``seed`` in a session's sum ``iteration`` at ``iterate``, through
        the key a client derives for it and the path a client runs."""
        masks = importlib.import_module("secagg.masks")
        key = masks.pairwise_mask_key(
            seed, session_id=session, first=1, second=2, iteration=iteration, iterate=iterate
        )
        ring = secagg.Ring(32)
        vector = ring.zeros(dimension)
        masks.add_masks(vector, ring, add=(key,))
        return np.asarray(ring.normalize(vector), dtype=np.uint64)


class _OurShamir:
    secret_bytes = 32

    def invalid_parameters(self) -> tuple[tuple[str, Callable[[], Any]], ...]:
        """What joining and interpolation must refuse (audit 8): a sub-secret outside
        [0, 2^bits) or with bits set beyond the secret (how inconsistent shares show — joined,
        they would become a different key), share arrays of the wrong shape or outside Z_p."""
        shamir = secagg.shamir
        bits = shamir.sub_secret_bits(shamir.DEFAULT_PRIME)
        chunks = -(-8 * self.secret_bytes // bits)  # the documented count (audit 8 checks it)
        zeros = [0] * (chunks - 1)
        top = 1 << (8 * self.secret_bytes - bits * (chunks - 1))  # first bit past the secret
        prime, join, interpolate = shamir.DEFAULT_PRIME, shamir.join_secret, shamir.reconstruct
        return (
            ("join_secret(a sub-secret = 2^bits)", lambda: join([1 << bits, *zeros], 32)),
            ("join_secret(a sub-secret = 2^bits + 1)", lambda: join([(1 << bits) + 1, *zeros], 32)),
            ("join_secret(a sub-secret = p − 1)", lambda: join([prime - 1, *zeros], 32)),
            ("join_secret(a sub-secret = −1)", lambda: join([-1, *zeros], 32)),
            ("join_secret(a bit past the secret)", lambda: join([*zeros, top], 32)),
            ("reconstruct(3-D shares)", lambda: interpolate([1, 2], np.ones((2, 2, 1)))),
            ("reconstruct(3 points, 2 rows)", lambda: interpolate([1, 2, 3], np.ones((2, 3)))),
            ("reconstruct(a share = p)", lambda: interpolate([1, 2], [[1], [prime]])),
            ("reconstruct(1-D shares)", lambda: interpolate([1, 2], [1, 2])),
            (
                "robust_reconstruct(a share = p)",
                lambda: shamir.robust_reconstruct([1, 2], [[prime], [3]], 2),
            ),
            # "(m, S) share values, row i held at points[i]": any other shape is refused.
            (
                "robust_reconstruct(1-D shares)",
                lambda: shamir.robust_reconstruct([1, 2], [1, 2], 2),
            ),
            (
                "robust_reconstruct(3-D shares)",
                lambda: shamir.robust_reconstruct([1, 2], np.ones((2, 2, 1), dtype=np.int64), 2),
            ),
            (
                "robust_reconstruct(3 points, 2 rows)",
                lambda: shamir.robust_reconstruct([1, 2, 3], np.ones((2, 3), dtype=np.int64), 2),
            ),
        )

    def share(self, secret: bytes, threshold: int, num_shares: int, seed: int) -> list[Any]:
        shamir = secagg.shamir
        points = list(range(1, num_shares + 1))
        rows = shamir.share(
            shamir.split_secret(secret), points, threshold, secagg.KeystreamRandom(seed)
        )
        return [(points[i], rows[i]) for i in range(num_shares)]

    def reconstruct(self, shares: Sequence[Any]) -> bytes | None:
        shamir = secagg.shamir
        try:
            values = shamir.reconstruct([p for p, _ in shares], np.stack([r for _, r in shares]))
            return bytes(shamir.join_secret(values, self.secret_bytes))
        except ValueError:
            return None

    def robust_reconstruct(
        self, shares: Sequence[Any], threshold: int
    ) -> tuple[bytes, tuple[int, ...]] | None:
        # Berlekamp–Welch, as the server decodes unmask shares some clients may have garbled.
        shamir = secagg.shamir
        try:
            values, wrong = shamir.robust_reconstruct(
                [p for p, _ in shares], np.stack([r for _, r in shares]), threshold
            )
            return bytes(shamir.join_secret(values, self.secret_bytes)), tuple(wrong)
        except ValueError:
            return None

    def evaluate(
        self, secret: int, coefficients: Sequence[int], points: Sequence[int], prime: int
    ) -> list[int] | None:
        rows = secagg.shamir.evaluate_shares(
            [secret], points, np.asarray(coefficients, dtype=np.int64).reshape(-1, 1), prime
        )
        return [int(v) for v in rows[:, 0]]

    @staticmethod
    def split_join(secret: bytes, prime: int) -> tuple[list[int], bytes]:
        """The secret cut into sub-secrets for ``prime`` and joined back (split_secret and
        join_secret, each documented "below prime", for any prime in [3, 2^31))."""
        pieces = secagg.shamir.split_secret(secret, prime=prime)
        return [int(v) for v in pieces], secagg.shamir.join_secret(pieces, len(secret), prime)

    def share_in_field(
        self,
        secret: int,
        *,
        copies: int,
        threshold: int,
        points: Sequence[int],
        prime: int,
        seed: int,
    ) -> NDArray[np.int64] | None:
        rows: NDArray[np.int64] = secagg.shamir.share(
            np.full(copies, secret, dtype=np.int64),
            list(points),
            threshold,
            secagg.KeystreamRandom(seed),
            prime,
        )
        return rows


class _OurGraph:
    # secagg_plus_parameters claims the smallest even degree meeting both bounds (audit 8 checks
    # that k − 2 meets them with no threshold) and, at it, the smallest valid threshold but 2
    # rather than 1 (audit 8 recomputes it).
    claims_smallest_degree = True
    claims_smallest_threshold = True

    def __init__(self, failure_log2: float = -20.0, security_bits: float = 40.0) -> None:
        self.failure_log2 = failure_log2
        self.security_bits = security_bits

    def at_targets(self, failure_log2: float, security_bits: float) -> _OurGraph:
        """The same picker for other targets (audit 8 checks several)."""
        return _OurGraph(failure_log2, security_bits)

    def _chosen(self, n: int, dropout_rate: float, corruption_rate: float) -> Any:
        return secagg.graph_parameters.secagg_plus_parameters(
            n,
            dropout_rate=dropout_rate,
            corruption_rate=corruption_rate,
            failure_log2=self.failure_log2,
            security_bits=self.security_bits,
        )

    def invalid_parameters(self) -> tuple[tuple[Any, ...], ...]:
        """The picker called with a rate, failure target or security target out of its range,
        or one client, or targets no graph meets (each refusal saying the numbers of the limit
        it enforces), and a chosen record edited to a degree, threshold or count out of range
        (audit 8: each must raise ValueError or TypeError)."""
        pick = secagg.graph_parameters.secagg_plus_parameters
        nan, inf = math.nan, math.inf
        changes = (
            ("dropout_rate", 1.0),
            ("dropout_rate", -0.1),
            ("dropout_rate", nan),
            ("corruption_rate", 1.0),
            ("corruption_rate", nan),
            ("failure_log2", 0.0),
            ("failure_log2", 1.0),  # above 0: a "probability" of 2
            ("failure_log2", inf),
            ("failure_log2", nan),
            ("security_bits", 0.0),
            ("security_bits", -1.0),
            ("security_bits", nan),
            ("security_bits", inf),
            ("failure_log2", -200.5),  # just outside the documented [−200, 0)
            ("security_bits", 200.5),  # just outside the documented (0, 200]
        )
        cases: list[tuple[Any, ...]] = [
            (f"secagg_plus_parameters({k}={v})", partial(pick, 100, **{k: v}))
            for k, v in changes
        ]
        cases.append(("secagg_plus_parameters(num_clients=1)", lambda: pick(1)))
        # Targets even the complete graph cannot meet; each refusal states the limit it
        # enforces, with its numbers: t ≤ n − 1 = 9 against 10 corrupt of 10 (t > 10), and
        # corrupt + dropped ≤ n − 2 = 8 against 5 + 5 (δ = γ = 0.5: t ≥ 6 but t ≤ 4).
        for (drop, corrupt), phrase in (
            ((0.0, 0.95), "t must exceed 10 but can be at most n - 1 = 9"),
            ((0.5, 0.5), "t >= 6 (one more than the 5 corrupt clients)"),
            ((0.5, 0.5), "t <= 4 (the surviving neighbours of a survivor when 5 of 10 drop)"),
            ((0.5, 0.5), "corrupt + dropped <= n - 2 = 8, got 10"),
        ):
            call = partial(pick, 10, dropout_rate=drop, corruption_rate=corrupt)
            label = f"secagg_plus_parameters(10, dropout_rate={drop}, corruption_rate={corrupt})"
            cases.append((label, call, ValueError, phrase))
        # A chosen (k, t) edited into one no picker may return: the record validates itself.
        chosen = pick(100)  # k = 16, t = 6 (between its bounds 6 and 7)
        edits = (
            ("degree", 100),
            ("degree", 17),
            # The complete graph's flag must match its degree, both ways.
            ("degree", 99),
            ("complete_graph", True),
            ("threshold", 0),
            ("threshold", 17),
            ("num_dropped", -1),
            ("num_corrupt", -1),
        )
        for field, value in edits:
            label = f"SecAggPlusParameters({field}={value}, n=100)"
            edited = partial(dataclasses.replace, chosen, **{field: value})
            if field == "degree" and value != 99:  # a degree refused states the limit n − 1
                cases.append((label, edited, ValueError, f"n - 1 = 99; got {value}"))
            else:
                cases.append((label, edited))
        # The hypergeometric tail the bounds are built from, public: N ≥ 1, 0 ≤ K, m ≤ N.
        tail: Callable[..., float] = secagg.graph_parameters.log2_hypergeometric_tail
        tail_cases: tuple[tuple[str, Callable[[], float]], ...] = (
            ("population=0", partial(tail, 0, 0, 0, 1)),
            ("successes=-1", partial(tail, 10, -1, 3, 1)),
            ("successes > population", partial(tail, 10, 11, 3, 1)),
            ("draws > population", partial(tail, 10, 3, 11, 1)),
            ("at_least=1.0", partial(tail, 10, 3, 3, 1.0)),
        )
        cases += [(f"log2_hypergeometric_tail({label})", bad) for label, bad in tail_cases]
        return tuple(cases)

    def boundary_parameters(self) -> tuple[tuple[str, Callable[[], Any]], ...]:
        """The picker at the ends of its documented ranges (audit 8: each must be served)."""
        pick = secagg.graph_parameters.secagg_plus_parameters
        ends = (
            ("failure_log2", -200.0),
            ("security_bits", 200.0),
            ("dropout_rate", 0.0),
            ("corruption_rate", 0.0),
        )
        cases = [
            (f"secagg_plus_parameters({k}={v})", partial(pick, 100, **{k: v})) for k, v in ends
        ]
        tail = secagg.graph_parameters.log2_hypergeometric_tail
        return (
            *cases,
            ("secagg_plus_parameters(num_clients=2)", partial(pick, 2)),
            ("log2_hypergeometric_tail(population=1)", partial(tail, 1, 1, 1, 1)),
        )

    def parameters(
        self, num_clients: int, dropout_rate: float, corruption_rate: float
    ) -> tuple[int, int]:
        chosen = self._chosen(num_clients, dropout_rate, corruption_rate)
        return int(chosen.degree), int(chosen.threshold)

    @staticmethod
    def log2_tail(population: int, successes: int, draws: int, at_least: int) -> float:
        """log2 P[X ≥ at_least] for X ~ Hypergeometric(N, K, m): the library's own primitive
        of the SecAgg+ bounds."""
        return secagg.graph_parameters.log2_hypergeometric_tail(
            population, successes, draws, at_least
        )

    def reported_bounds(
        self, num_clients: int, dropout_rate: float, corruption_rate: float
    ) -> tuple[float, float, float, float]:
        chosen = self._chosen(num_clients, dropout_rate, corruption_rate)
        return (
            float(chosen.log2_failure),
            float(chosen.security_bits),
            float(chosen.security_bits_secrecy),
            float(chosen.security_bits_connectivity),
        )


class _OurNoisyAverage:
    def noisy_average(
        self, vectors: NDArray[np.float64], *, clip: float, rho: float, seed: int
    ) -> tuple[NDArray[np.float64], Any]:
        settings = secure_average.AverageSettings(
            bits=48,
            clip=clip,
            noise=secure_average.DiscreteGaussianNoise(rho=rho),
            quantize=True,
            denominator="survivors",  # the noisy sum over n: a noisy Σβ ≤ 0 cannot end the run
        )
        result = secure_average.secure_weighted_average(
            vectors,
            np.ones(vectors.shape[0]),
            settings=settings,
            weight_cap=1.0,
            seed=seed,
            secure=False,
        )
        total = result.average * len(result.survivors)
        return np.asarray(total, dtype=np.float64), result.event

    def epsilon(self, events: Sequence[Any], delta: float) -> float:
        accountant = dpquantile.ZCDPAccountant()
        for event in events:
            accountant.compose(event)
        return float(accountant.epsilon(delta))


# ----------------------------------------------------------------------------- the target


class OurTarget:
    """secagg-dp itself: every capability.

    Examples
    --------
    >>> target = OurTarget()
    >>> [s.name for s in target.samplers()]
    ['exact', 'fast']
    >>> round(target.accountant().discrete_gaussian_epsilon(1.0, 1.0, 1, 1e-5), 4)
    4.4302
    """

    name = "ours"

    def __init__(self) -> None:
        self._sans_io = _OurSansIO()

    def describe(self) -> Mapping[str, str]:
        """Versions, for the report."""
        return {"implementation": "secagg-dp", "numpy": np.__version__}

    def samplers(self) -> Sequence[SamplerUnderTest]:
        """The exact CKS20 sampler and the fast alias-table sampler."""
        return (
            _OurSampler("exact", "ExactDiscreteGaussian", exact=True),
            _OurSampler("fast", "FastDiscreteGaussian", exact=False),
        )

    @staticmethod
    def discrete_laplace_stated_scale(scale: float) -> Any:
        """The scale :class:`dpquantile.ExactDiscreteLaplace` states (audit 2)."""
        return dpquantile.ExactDiscreteLaplace(scale).scale

    #: Where audit 2 traces the discrete Laplace sampler's draws for floating point.
    discrete_laplace_trace_modules = ("dpquantile", "secagg.randomness")

    def discrete_laplace_sampler(self) -> Callable[[float], Draw]:
        """:class:`dpquantile.ExactDiscreteLaplace`: scale → draw function (audit 1)."""

        def prepare(scale: float) -> Draw:
            sampler = dpquantile.ExactDiscreteLaplace(scale)

            def draw(size: int, seed: int) -> NDArray[np.generic]:
                stream = secagg.KeystreamRandom(seed, label=KNOWN_ANSWER_LABEL)
                values: NDArray[np.generic] = sampler.sample(size, rng=stream)
                return values

            return draw

        return prepare

    def known_answers(self) -> Sequence[KnownAnswer]:
        """The Gaussian samplers' committed vectors: package data ``dpquantile/known_answers.json``,
        the file the unit tests check too."""
        text = resources.files("dpquantile").joinpath("known_answers.json").read_text()
        names = {"exact_gaussian": "exact", "fast_gaussian": "fast"}
        return tuple(
            KnownAnswer(
                names[c["sampler"]],
                float(c["parameter"]),
                int(c["seed"]),
                tuple(int(v) for v in c.get("values", ())),
                count=int(c.get("count", 0)),
                sha256=str(c.get("sha256", "")),
            )
            for c in json.loads(text)["cases"]
            if c["sampler"] in names
        )

    def accountant(self) -> AccountantUnderTest | None:
        """:class:`dpquantile.ZCDPAccountant` on :class:`dpquantile.DiscreteGaussian` events."""
        return _OurAccountant()

    def mechanisms(self) -> Sequence[NeighbouringMechanism]:
        """The noisy secure sum (reference configuration), the DP quantile, and the noisy
        secure sum planned for replace-one neighbours."""
        return (
            _SecureAverageMechanism(),
            _QuantileMechanism(),
            _SecureAverageMechanism(replace_one=True),
        )

    def dropout_noise(self) -> Sequence[DropoutNoise]:
        """The secure average's and the DP quantile's noise under dropout."""
        return (_SecureAverageDropout(), _QuantileDropout())

    def sans_io(self) -> SansIOSecureSum | None:
        """The real Client and Server."""
        return self._sans_io

    def secure_sum(self) -> SecureSumUnderTest | None:
        """secure_sum and dp_quantile's headroom check."""
        return _OurSecureSum(self._sans_io)

    def mask_prg(self) -> MaskPRGUnderTest | None:
        """secagg.masks."""
        return _OurMasks()

    def secret_sharing(self) -> SecretSharingUnderTest | None:
        """secagg.shamir."""
        return _OurShamir()

    def graph_parameters(self) -> GraphParametersUnderTest | None:
        """secagg.graph_parameters.secagg_plus_parameters."""
        return _OurGraph()

    def noisy_average(self) -> NoisyAverageUnderTest | None:
        """secure_weighted_average with distributed discrete Gaussian noise."""
        return _OurNoisyAverage()

    def attack_surface(self) -> AttackSurface | None:
        """The real Client and Server in both threat models, driven by a malicious server."""
        return OurAttackSurface()
