"""Superquantile aggregation (Δ-FL, Pillutla, Laguel, Malick, Harchaoui, Algorithms 1 and 2).

One round of Δ-FL's aggregation over m sampled clients with losses Fᵢ = Fᵢ(w) at the broadcast
model, weights αᵢ and updates wᵢ:

1. estimate the (1 − θ)-quantile Q̂ of the losses — exactly (the server sees the losses: a
   simulation baseline), or with :func:`dpquantile.dp_quantile` (a noisy hierarchical histogram
   summed through the secure sum, ½ε²-zCDP in the paper's sense);
2. each client sets its weight to αᵢ if Fᵢ ≥ Q̂ and to 0 otherwise (line 6 of Algorithm 1);
3. one secure weighted average of the wᵢ with those weights. Zero-weight clients still send
   (zeros), so the server learns the tail's weight sum but not who is in the tail.

θ = 1 is FedAvg: no quantile is computed, no privacy is spent, and the single secure average is
the very call FedAvg makes. Choices that are ours (the exact threshold, what happens when the
tail is empty, what that costs) are in ``superquantile_notes.md`` beside this module.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpquantile import (
    QUANTILE_READERS,
    ComposedEvent,
    PrivacyBudget,
    PrivacyEvent,
    QuantileReader,
    QuantileResult,
    dp_quantile,
    on_common_relation,
)
from protocols.aggregation._arrays import as_matrix, row_norms
from protocols.aggregation.secure_average import (
    AverageResult,
    AverageSettings,
    EffectiveWeightError,
    SecureAverageSession,
    ZeroWeightSumError,
    secure_weighted_average,
)
from secagg import HeadroomError, KeystreamRandom, LazyInputs, TooFewSurvivorsError
from secagg.validation import check_fraction, check_int, check_positive, check_real, check_seed

__all__ = [
    "EMPTY_TAIL_POLICIES",
    "EmptyTailPolicy",
    "QuantileSettings",
    "QuantileTracker",
    "SuperquantileResult",
    "TrackingStep",
    "empirical_tail_threshold",
    "superquantile_aggregate",
    "tail_weights",
]

logger = logging.getLogger(__name__)

_DOMAIN = b"secagg-dp/v1/protocols/superquantile"

EmptyTailPolicy = Literal["skip", "all"]
EMPTY_TAIL_POLICIES: tuple[str, ...] = get_args(EmptyTailPolicy)
"""What :func:`superquantile_aggregate` does when no client's loss reaches the threshold."""


@dataclass(frozen=True, slots=True)
class QuantileSettings:
    """How the (1 − θ)-quantile of the clients' losses is estimated.

    Parameters
    ----------
    rho
        ``None``: the exact empirical quantile (no privacy; the server sees the losses). Otherwise
        the zCDP ρ of one :func:`dpquantile.dp_quantile` release (ρ = ε²/2 for the paper's ε).
    lower, upper
        The public loss range of the histogram; losses outside are clipped *in the histogram only*
        (the tail test uses each client's own loss).
    bins, mechanism, consistency
        Passed to :func:`dpquantile.dp_quantile` (``bins`` a power of 2).
    min_survivors
        The number of surviving clients the noise is calibrated for (capped at the number of
        participating clients). If fewer send their masked histogram, the server refuses to
        unmask it (:class:`secagg.TooFewSurvivorsError`): the release never exceeds ``rho``.
        ``None``: calibrated for all participants, and a shortfall is released and reported
        with the larger ρ it delivers.
    neighbors
        The quantile's secure-sum graph (``"auto"``: SecAgg+ parameters for the round's size).
    sampler
        ``"fast"`` (its total-variation bound is charged in the event) or ``"exact"``.
    reader
        How the quantile is read from the noisy CDF (``"first"`` or ``"isotonic"``; see
        :func:`dpquantile.dp_quantile`).

    Examples
    --------
    >>> QuantileSettings(rho=0.5, upper=4.0).bins
    64
    >>> QuantileSettings(rho=0.5, lower=2.0, upper=1.0)
    Traceback (most recent call last):
    ...
    ValueError: the loss range needs lower < upper; got [2.0, 1.0]
    """

    rho: float | None = None
    lower: float = 0.0
    upper: float = 1.0
    bins: int = 64
    mechanism: Literal["tree", "flat"] = "tree"
    consistency: bool = True
    min_survivors: int | None = None
    neighbors: int | Literal["auto"] | None = "auto"
    sampler: Literal["fast", "exact"] = "fast"
    reader: QuantileReader = "first"

    def __post_init__(self) -> None:
        if self.reader not in QUANTILE_READERS:
            raise ValueError(
                f"reader must be one of {', '.join(QUANTILE_READERS)}; got {self.reader!r}"
            )
        if self.rho is not None:
            object.__setattr__(self, "rho", check_positive("rho", self.rho))
        lower, upper = check_real("lower", self.lower), check_real("upper", self.upper)
        if not lower < upper:
            raise ValueError(f"the loss range needs lower < upper; got [{lower}, {upper}]")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        bins = check_int("bins", self.bins, minimum=2)
        if bins & (bins - 1):
            raise ValueError(f"bins must be a power of 2; got {bins}")
        object.__setattr__(self, "bins", bins)
        if self.mechanism not in ("tree", "flat"):
            raise ValueError(f"mechanism must be 'tree' or 'flat'; got {self.mechanism!r}")
        if not isinstance(self.consistency, bool):
            raise TypeError("consistency must be a bool")
        if self.min_survivors is not None:
            object.__setattr__(
                self, "min_survivors", check_int("min_survivors", self.min_survivors, minimum=2)
            )
        if self.neighbors not in ("auto", None):
            object.__setattr__(self, "neighbors", check_int("neighbors", self.neighbors, minimum=2))
        if self.sampler not in ("fast", "exact"):
            raise ValueError(f"sampler must be 'fast' or 'exact'; got {self.sampler!r}")

    @property
    def private(self) -> bool:
        """Whether the quantile is a DP release (``rho`` given).

        Examples
        --------
        >>> QuantileSettings().private, QuantileSettings(rho=0.1).private
        (False, True)
        """
        return self.rho is not None


@dataclass(frozen=True, slots=True, eq=False)
class SuperquantileResult:
    """The outcome of :func:`superquantile_aggregate`.

    Attributes
    ----------
    average
        The released tail average Σβᵢwᵢ/Σβᵢ, or ``None`` when nothing was released (an empty tail
        under the ``"skip"`` policy, or a ``failure``).
    threshold
        Q̂, the loss threshold of the tail (``None`` for θ = 1).
    theta
        The tail fraction θ.
    num_clients
        Clients asked (rows of ``vectors``).
    tail
        SIMULATOR ONLY: indices of the participating clients with Fᵢ ≥ Q̂ (the server learns
        only the released weight sum). All participants for θ = 1.
    rejected
        Clients dropped before any secure sum because their loss, weight or vector was not
        finite (never averaged in, never in the histogram).
    survivors
        Clients in the released average's sum (empty when nothing was released).
    empty_tail
        SIMULATOR ONLY: whether no participating client reached Q̂ (only possible with a DP or
        tracked threshold). Under a fixed denominator the server cannot tell, and the release
        is the tail's noisy sum over θ·|survivors| (no fallback).
    fallback
        ``None``, or the empty-tail policy that was applied (``"skip"`` or ``"all"``; never
        under a fixed denominator).
    failure
        ``None``, or why the average's secure sum released nothing (too few survivors, a zero
        weight sum because every tail client dropped out, a withheld certificate). The round's
        quantile event, if any, is still in ``events``: its privacy was spent.
    quantile
        The :class:`dpquantile.QuantileResult` of the DP quantile, or ``None``.
    averages
        The :class:`AverageResult` of every secure average that completed.
    num_secure_averages
        Secure averages a deployment pays for this round, including the one whose zero weight
        sum revealed an empty tail (which the simulator does not run; see the notes).
    events
        Every privacy event of the round: the quantile's, then each noisy average's.
    secure
        Whether the secure sums ran (else plain numpy, identical noise).
    seed
        The seed (``None``: fresh randomness).

    Examples
    --------
    >>> result = superquantile_aggregate([[0.0], [1.0], [2.0], [3.0]], [1.0, 1.0, 1.0, 1.0],
    ...                                  [0.1, 0.4, 0.3, 0.9], theta=0.5, secure=False)
    >>> result.threshold, result.tail, result.average.tolist()
    (0.4, (1, 3), [2.0])
    """

    average: NDArray[np.float64] | None
    threshold: float | None
    theta: float
    num_clients: int
    tail: tuple[int, ...]
    rejected: tuple[int, ...]
    survivors: tuple[int, ...]
    empty_tail: bool
    fallback: EmptyTailPolicy | None
    failure: str | None
    quantile: QuantileResult | None
    averages: tuple[AverageResult, ...]
    num_secure_averages: int
    events: tuple[PrivacyEvent, ...]
    secure: bool
    seed: int | None

    def __post_init__(self) -> None:
        if (self.average is None) != (self.fallback == "skip" or self.failure is not None):
            raise ValueError("no average is released exactly on a 'skip' fallback or a failure")
        if self.fallback is not None and not self.empty_tail:
            raise ValueError("a fallback applies only when the tail is empty")

    @property
    def num_tail_clients(self) -> int:
        """SIMULATOR ONLY: how many participating clients were in the tail.

        Examples
        --------
        >>> superquantile_aggregate([[1.0], [2.0]], [1.0, 1.0], [0.0, 1.0], theta=0.5,
        ...                         secure=False).num_tail_clients
        1
        """
        return len(self.tail)

    @property
    def num_secure_sums(self) -> int:
        """Secure sums of the round: the averages plus the DP quantile's histogram (if any).

        Examples
        --------
        >>> superquantile_aggregate([[1.0], [2.0]], [1.0, 1.0], [0.0, 1.0], theta=1.0,
        ...                         secure=False).num_secure_sums
        1
        """
        return self.num_secure_averages + (self.quantile is not None)

    @property
    def event(self) -> PrivacyEvent | None:
        """All the round's privacy events composed, or ``None`` if it spent none.

        Examples
        --------
        >>> superquantile_aggregate([[1.0], [2.0]], [1.0, 1.0], [0.0, 1.0], theta=1.0,
        ...                         secure=False).event is None
        True
        """
        return ComposedEvent(self.events) if self.events else None


def empirical_tail_threshold(losses: ArrayLike, theta: float) -> float:
    """The exact threshold: the ⌈θm⌉-th largest of m losses (the tail then holds ⌈θm⌉ clients).

    This is the empirical (1 − θ)-quantile read from the top, so that without ties exactly
    ⌈θm⌉ clients satisfy Fᵢ ≥ Q̂ — the support of the superquantile's maximising weights when θm is
    an integer (Δ-FL Proposition 3(c)); θ = 1 gives the smallest loss (everyone is in the tail).

    Examples
    --------
    >>> empirical_tail_threshold([0.3, 0.1, 0.9, 0.5], 0.5)
    0.5
    >>> empirical_tail_threshold([0.3, 0.1, 0.9, 0.5], 0.3)   # ⌈1.2⌉ = 2 clients
    0.5
    >>> empirical_tail_threshold([0.3, 0.1, 0.9, 0.5], 1.0)
    0.1
    """
    values = np.asarray(losses, dtype=np.float64)
    if values.ndim != 1 or values.size == 0 or not np.isfinite(values).all():
        raise ValueError("losses must be a non-empty 1-D array of finite numbers")
    theta = check_fraction("theta", theta, zero=False, one=True)
    # Round θm first so that 0.3·10 = 3.0000000000000004 counts 3 clients, not 4.
    count = min(values.size, max(1, math.ceil(round(theta * values.size, 9))))
    return float(np.sort(values)[values.size - count])


def tail_weights(losses: ArrayLike, weights: ArrayLike, threshold: float) -> NDArray[np.float64]:
    """Δ-FL's reweighting (Algorithm 1, line 6): αᵢ where Fᵢ ≥ Q̂, else 0.

    Examples
    --------
    >>> tail_weights([0.2, 0.7, 0.5], [3.0, 1.0, 2.0], 0.5)
    array([0., 1., 2.])
    """
    values = np.asarray(losses, dtype=np.float64)
    alpha = np.asarray(weights, dtype=np.float64)
    if values.shape != alpha.shape or values.ndim != 1:
        raise ValueError("losses and weights must be 1-D arrays of the same length")
    cut = check_real("threshold", threshold)
    return np.where(values >= cut, alpha, 0.0)


def _derived_seed(seed: int | None, label: bytes) -> int | None:
    if seed is None:
        return None
    root = KeystreamRandom(seed, label=_DOMAIN)
    return root.derive_seed(label)


def _local_dropouts(
    dropouts: Mapping[str, Iterable[int]] | None, local_of: Mapping[int, int]
) -> dict[str, list[int]] | None:
    """The caller's dropouts in the participants' numbering (rejected clients are gone already)."""
    if dropouts is None:
        return None
    if not isinstance(dropouts, Mapping):
        raise TypeError("dropouts must map a phase name to client indices")
    mapped: dict[str, list[int]] = {}
    for phase, indices in dropouts.items():
        local = [local_of[int(i)] for i in indices if int(i) in local_of]
        if local:
            mapped[phase] = local
    return mapped


def superquantile_aggregate(
    vectors: ArrayLike,
    weights: ArrayLike,
    losses: ArrayLike,
    *,
    theta: float,
    quantile: QuantileSettings | None = None,
    settings: AverageSettings | None = None,
    weight_cap: float | None = None,
    secure: bool = True,
    seed: int | None = None,
    dropouts: Mapping[str, Iterable[int]] | None = None,
    empty_tail: EmptyTailPolicy = "all",
    budget: PrivacyBudget | None = None,
    threshold: float | None = None,
    session: SecureAverageSession | None = None,
) -> SuperquantileResult:
    """Δ-FL's aggregation: the (1 − θ)-quantile Q̂ of the losses, then a secure average of the tail.

    Parameters
    ----------
    vectors
        (m, d) client vectors wᵢ (updates or models).
    weights
        (m,) weights αᵢ ≥ 0 (usually the clients' numbers of training examples).
    losses
        (m,) losses Fᵢ at the broadcast model. A client whose loss, weight or vector is not
        finite is rejected before any secure sum.
    theta
        The tail fraction θ in (0, 1]; θ = 1 is FedAvg (no quantile, no privacy spent).
    quantile
        How Q̂ is estimated (default: exactly). With ``rho``, :func:`dpquantile.dp_quantile` runs
        with q = 1 − θ over the secure sum (or its identical-noise plain path).
    settings
        :class:`AverageSettings` of the secure average (default ``AverageSettings()``).
    weight_cap
        Public cap on αᵢ (``None``: the largest, a simulator convenience).
    secure
        Run the secure sums (``False``: plain numpy; the average is then exact unless
        ``settings`` quantises or adds noise, and the DP quantile adds the identical noise).
    seed
        The average uses ``seed`` itself (so θ = 1 reproduces FedAvg's call bit for bit); the
        quantile a seed derived from it.
    dropouts
        Phase → client indices, applied to every secure sum of the round.
    empty_tail
        When no client reaches Q̂ (the DP quantile overshot every loss): ``"all"`` (default)
        falls back to the weighted average of every client (FedAvg for this round), ``"skip"``
        releases no average (the caller keeps its model — which can deadlock a run whose losses
        are all tied, as at a zero-initialised model). Either way the round pays one secure
        average whose released weight sum was 0 (see ``superquantile_notes.md``).
    budget
        A :class:`~dpquantile.PrivacyBudget` that pays for every noisy release of the round (the
        DP quantile and, with ``settings.noise``, each noisy average, the empty tail's included),
        each spent before its noise is drawn and withheld below its planned survivors. With
        both kinds of release it must be stated for replace-one neighbours
        (``PrivacyBudget(..., neighbouring="replace_one")``).
    threshold
        A public threshold fixed before the round (e.g. :class:`QuantileTracker`'s): no quantile
        is estimated or released, the tail is the clients with loss ≥ ``threshold``.
    session
        Run the round's secure sums — the DP quantile's histogram and the tail average — as
        sums of this :class:`SecureAverageSession` of the round's clients (one key setup for
        all; a client that does not complete the histogram is out of the average). Its ring,
        graph, threat model and ``secure`` are the round's; a histogram that needs a wider ring
        than the session's runs as a secure sum of its own.

    Returns
    -------
    SuperquantileResult

    Raises
    ------
    ValueError
        θ outside (0, 1], shape mismatches, a negative weight, or every weight zero.
    secagg.TooFewSurvivorsError
        Fewer than two participating clients, or too few survivors for the DP quantile's secure
        sum (nothing was released). A failed *average* is reported in ``failure`` instead, so
        that the quantile's spent privacy stays on record.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> updates = rng.standard_normal((20, 5)); sizes = rng.integers(50, 100, 20).astype(float)
    >>> losses = rng.chisquare(3, 20)
    >>> exact = superquantile_aggregate(updates, sizes, losses, theta=0.25, secure=False)
    >>> exact.num_tail_clients, exact.events
    (5, ())
    >>> private = superquantile_aggregate(
    ...     updates, sizes, losses, theta=0.25, seed=1,
    ...     quantile=QuantileSettings(rho=2.0, upper=16.0, bins=32))
    >>> private.num_secure_sums, len(private.events), private.quantile.rho <= 2.0
    (2, 1, True)
    """
    theta = check_fraction("theta", theta, zero=False, one=True)
    settings = AverageSettings() if settings is None else settings
    if not isinstance(settings, AverageSettings):
        raise TypeError(f"settings must be AverageSettings; got {type(settings).__name__}")
    quantile = QuantileSettings() if quantile is None else quantile
    if not isinstance(quantile, QuantileSettings):
        raise TypeError(f"quantile must be QuantileSettings; got {type(quantile).__name__}")
    if empty_tail not in EMPTY_TAIL_POLICIES:
        raise ValueError(f"empty_tail must be one of {EMPTY_TAIL_POLICIES}; got {empty_tail!r}")
    if not isinstance(secure, bool):
        raise TypeError(f"secure must be a bool; got {type(secure).__name__}")
    seed = check_seed(seed)
    if threshold is not None:
        threshold = check_real("threshold", threshold)
        if quantile.rho is not None:
            raise ValueError("give a public threshold or a DP quantile, not both")
    if budget is not None:
        if not isinstance(budget, PrivacyBudget):
            raise TypeError(f"budget must be a PrivacyBudget; got {type(budget).__name__}")
        private_quantile = theta < 1.0 and quantile.rho is not None
        if not private_quantile and settings.noise is None:
            raise ValueError("a budget pays for noise: this round has none (no DP)")
        if private_quantile and settings.noise is not None and budget.neighbouring != "replace_one":
            raise ValueError(
                "the DP quantile is replace-one and the noisy averages add/remove: one budget for "
                'both must be PrivacyBudget(..., neighbouring="replace_one")'
            )
    matrix = as_matrix(vectors)
    m = matrix.shape[0]
    if session is not None:
        if not isinstance(session, SecureAverageSession):
            raise TypeError(
                f"session must be a SecureAverageSession; got {type(session).__name__}"
            )
        if session.num_clients != m or session.secure != secure:
            raise ValueError(
                f"the session has {session.num_clients} clients (secure={session.secure}); this "
                f"round has {m} (secure={secure})"
            )
    alpha = np.asarray(weights, dtype=np.float64)
    values = np.asarray(losses, dtype=np.float64)
    if alpha.shape != (m,) or values.shape != (m,):
        raise ValueError(
            f"weights and losses must have shape ({m},) to match the vectors; "
            f"got {alpha.shape} and {values.shape}"
        )
    finite = np.isfinite(values) & np.isfinite(alpha) & np.isfinite(row_norms(matrix))
    rejected = tuple(int(i) for i in np.flatnonzero(~finite))
    if rejected:
        logger.warning("rejected %d client(s) with a non-finite loss or update", len(rejected))
    participants = np.flatnonzero(finite)
    if participants.size < 2:
        raise TooFewSurvivorsError(
            f"{participants.size} of {m} clients have a finite loss and update; "
            "a secure sum needs at least 2"
        )
    if (alpha[participants] < 0).any():
        raise ValueError("weights must be non-negative")
    if not (alpha[participants] > 0).any():
        raise ValueError("every weight is zero: a weighted average needs a positive weight")
    # Without rejections the oracle sees the caller's matrix unchanged (θ = 1 ≡ FedAvg's call).
    sub_matrix = matrix if not rejected else matrix[participants]
    sub_alpha, sub_losses = alpha[participants], values[participants]
    local_of = {int(c): j for j, c in enumerate(participants)}
    local_dropouts = _local_dropouts(dropouts, local_of)

    def average(beta: NDArray[np.float64], *, plain_event_only: bool = False) -> AverageResult:
        if session is not None and not plain_event_only:
            # The session's index space is the round's: rejected clients carry no weight.
            full = np.full(m, np.nan)
            full[participants] = beta
            return session.average(
                matrix,
                full,
                settings=settings,
                weight_cap=weight_cap,
                seed=seed,
                dropouts=dropouts,
                iterate=b"secagg-dp/deltafl/tail-average",
                budget=budget if settings.noise is not None else None,
            )
        return secure_weighted_average(
            sub_matrix,
            beta,
            settings=dataclasses.replace(settings, quantize=True) if plain_event_only else settings,
            weight_cap=weight_cap,
            seed=seed,
            dropouts=local_dropouts,
            secure=secure and not plain_event_only,
            budget=budget if settings.noise is not None else None,
        )

    def to_caller(local: Iterable[int]) -> tuple[int, ...]:
        return tuple(sorted(int(participants[j]) for j in local))

    quantile_result: QuantileResult | None = None
    events: list[PrivacyEvent] = []
    if theta == 1.0:
        threshold = None
        beta = sub_alpha
    else:
        if threshold is None and quantile.rho is None:
            threshold = empirical_tail_threshold(sub_losses, theta)
        elif threshold is None and quantile.rho is not None:
            planned = None
            if quantile.min_survivors is not None:
                planned = min(quantile.min_survivors, participants.size)
            options = dict(
                lower=quantile.lower,
                upper=quantile.upper,
                bins=quantile.bins,
                rho=quantile.rho,
                mechanism=quantile.mechanism,
                consistency=quantile.consistency,
                secure=secure,
                seed=_derived_seed(seed, b"quantile"),
                min_survivors=planned,
                refuse_shortfall=planned is not None,
                dropouts=local_dropouts,
                sampler=quantile.sampler,
                budget=budget,
                reader=quantile.reader,
            )
            quantile_result = None
            if session is not None:
                in_session = session

                def histogram_sum(
                    rows: LazyInputs,
                    drops: Mapping[str, Iterable[int]] | None,
                    min_inputs: int,
                ) -> tuple[NDArray[np.int64], int]:
                    return in_session.sum_vectors(
                        rows,
                        drops,
                        min_inputs,
                        participants=participants.tolist(),
                        iterate=b"secagg-dp/deltafl/dp-quantile-histogram",
                    )

                try:
                    quantile_result = dp_quantile(
                        sub_losses,
                        1.0 - theta,
                        modulus_bits=session.settings.bits,
                        sum_runner=histogram_sum,
                        **options,  # type: ignore[arg-type]
                    )
                except HeadroomError as error:  # raised before anything is spent or drawn
                    logger.info("the histogram needs its own ring: %s", error)
            if quantile_result is None:
                quantile_result = dp_quantile(
                    sub_losses,
                    1.0 - theta,
                    neighbors=quantile.neighbors,
                    **options,  # type: ignore[arg-type]
                )
            threshold = float(quantile_result.estimate)
            events.append(quantile_result.event)
        assert threshold is not None  # a public one was given, or estimated just now
        beta = tail_weights(sub_losses, sub_alpha, threshold)

    in_tail = np.flatnonzero(beta > 0) if theta < 1.0 else np.arange(participants.size)
    tail = to_caller(in_tail)
    results: list[AverageResult] = []
    fallback: EmptyTailPolicy | None = None
    failure: str | None = None
    calls = 1
    # A fixed denominator (Δ-FL under model DP: θ·|survivors|) releases the tail's noisy sum
    # whatever the tail holds: the server cannot tell an empty tail, so there is no fallback.
    fixed = settings.denominator == "survivors"
    try:
        if fixed or (beta > 0).any():
            results.append(average(beta))
        else:
            # A deployment learns this from a released weight sum of 0: that call is paid for
            # (and, with noise, is a noisy release); the oracle refuses all-zero weights, so the
            # simulator charges it without running it. Its event depends on public settings only.
            fallback = empty_tail
            logger.info("empty tail: threshold %.6g is above every loss; %r", threshold, fallback)
            if settings.noise is not None:
                wasted = average(sub_alpha, plain_event_only=True).event
                assert wasted is not None
                events.append(wasted)
            if fallback == "all":
                calls += 1
                results.append(average(sub_alpha))
    except (TooFewSurvivorsError, ZeroWeightSumError, EffectiveWeightError) as error:
        # Nothing was released by the failed call, but the quantile's privacy is spent already.
        failure = f"{type(error).__name__}: {error}"
        logger.info("the tail average failed: %s", failure)
    events.extend(r.event for r in results if r.event is not None)
    # The DP quantile's guarantee is replace-one (the number of clients is public): the noisy
    # averages' add/remove events are stated for replace-one too, so the round's events compose.
    events = list(on_common_relation(events))
    released = results[-1] if results and failure is None else None
    return SuperquantileResult(
        average=None if released is None else released.average,
        threshold=threshold,
        theta=theta,
        num_clients=m,
        tail=tail,
        rejected=rejected,
        survivors=()
        if released is None
        # A session's averages are indexed like the caller's clients already.
        else tuple(released.survivors) if session is not None
        else to_caller(released.survivors),
        empty_tail=bool(theta < 1.0 and not (beta > 0).any()),
        fallback=fallback,
        failure=failure,
        quantile=quantile_result,
        averages=tuple(results),
        num_secure_averages=calls,
        events=tuple(events),
        secure=secure,
        seed=seed,
    )


@dataclass(frozen=True, slots=True)
class TrackingStep:
    """One update of a :class:`QuantileTracker`.

    Attributes
    ----------
    threshold
        The threshold the round used (public before the round).
    below
        The released fraction of survivors whose loss was below it (noisy with noise).
    next_threshold
        The threshold of the next round.
    result
        The secure average that released ``below`` (its ``event`` is the release's privacy).
    """

    threshold: float
    below: float
    next_threshold: float
    result: AverageResult


class QuantileTracker:
    """Private quantile tracking: a threshold that follows the (1 − θ)-quantile across rounds.

    Each round releases one noisy count — the fraction b̃ of clients whose loss is below the
    current threshold C, a one-coordinate secure average — and updates C ← C·exp(−η·(b̃ − γ))
    with γ = 1 − θ (Andrew et al. 2021, "Differentially private learning with adaptive
    clipping", Alg. 1's clip update). A count has sensitivity 1 where a histogram tree has one
    per level, and the geometric update averages its noise over rounds.

    Parameters
    ----------
    theta
        The tail fraction θ in (0, 1): the tracker aims at the (1 − θ)-quantile.
    initial
        The first threshold C₀ > 0 (public: e.g. the loss of a uniform prediction).
    rate
        The step η > 0 of the geometric update.

    Examples
    --------
    >>> tracker = QuantileTracker(theta=0.5, initial=1.0, rate=0.5)
    >>> losses = np.linspace(0.0, 4.0, 9)          # median 2.0
    >>> for _ in range(30):
    ...     step = tracker.update(losses, settings=AverageSettings(clip=1.0), secure=False)
    >>> 1.5 < tracker.threshold < 2.5
    True
    """

    def __init__(self, *, theta: float, initial: float, rate: float = 0.2) -> None:
        self.theta = check_fraction("theta", theta, zero=False, one=False)
        self.threshold = check_positive("initial", initial)
        self.rate = check_positive("rate", rate)

    @property
    def target(self) -> float:
        """γ = 1 − θ, the fraction of clients the threshold should have below it."""
        return 1.0 - self.theta

    def update(
        self,
        losses: ArrayLike,
        *,
        settings: AverageSettings,
        secure: bool = True,
        seed: int | None = None,
        dropouts: Mapping[str, Iterable[int]] | None = None,
        budget: PrivacyBudget | None = None,
        session: SecureAverageSession | None = None,
    ) -> TrackingStep:
        """Release this round's noisy count of losses below the threshold; step the threshold.

        Parameters
        ----------
        losses
            The round's (n,) client losses (non-finite ones are rejected before the sum).
        settings
            The count's secure average (its ``noise`` is the release's; the clip is set to 1
            and the denominator to the public number of survivors).
        secure, seed, dropouts, budget
            As for :func:`secure_weighted_average`.
        session
            Run the count as the next average of this :class:`SecureAverageSession` (the
            round's, shared with its tail average; its ring, graph and threat model are the
            count's, and ``secure`` must match).

        Returns
        -------
        TrackingStep

        Raises
        ------
        secagg.TooFewSurvivorsError, dpquantile.BudgetExceededError
            Nothing was released; the threshold is unchanged.
        """
        values = np.asarray(losses, dtype=np.float64)
        if values.ndim != 1:
            raise ValueError(f"losses must be 1-D; got shape {values.shape}")
        below = np.where(np.isfinite(values), (values < self.threshold).astype(np.float64), np.nan)
        counting = dataclasses.replace(
            settings, clip=1.0, denominator="survivors", denominator_share=1.0
        )
        if session is None:
            run = functools.partial(secure_weighted_average, secure=secure)
        elif session.secure != secure:
            raise ValueError(f"the session has secure={session.secure}; this count {secure}")
        else:
            iterate = b"secagg-dp/deltafl/tracking-count %r" % self.threshold
            run = functools.partial(session.average, iterate=iterate)
        result = run(
            below[:, None],
            np.ones(values.size),
            settings=counting,
            weight_cap=1.0,
            seed=seed,
            dropouts=dropouts,
            budget=budget,
        )
        fraction = float(result.average[0])
        used = self.threshold
        self.threshold = used * math.exp(-self.rate * (fraction - self.target))
        return TrackingStep(used, fraction, self.threshold, result)
