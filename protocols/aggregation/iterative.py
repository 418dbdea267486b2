"""Iterative secure aggregates (RFA Definition 1): a sequence of secure averages whose weights
each client recomputes from the previous release and its own vector.

Two halves, as in RFA: the *server* decides from public information only (the transcript of
releases) whether to stop and what public parameters the next call has; each *client* computes
its weight (and any extra scalars to be summed) from those public parameters and its own data. An
:class:`IterativeRule` supplies both halves; :class:`IterativeSecureAggregate` is the sans-I/O
server-side driver (it never runs a protocol itself: it takes a release and returns the next call
plan); :func:`run_iterative_aggregate` runs the loop in memory over
:func:`~protocols.aggregation.secure_weighted_average`, secure or plain.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, cast, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpquantile import ComposedEvent, PrivacyBudget, PrivacyEvent
from protocols.aggregation._arrays import as_matrix, row_norms
from protocols.aggregation.secure_average import (
    AverageResult,
    AverageSettings,
    SecureAverageSession,
    ServerView,
    secure_weighted_average,  # noqa: F401 (the doctests use it)
)
from secagg import KeystreamRandom, LocalProtocolError
from secagg.validation import check_int, check_positive, check_real, check_seed

__all__ = [
    "CallPlan",
    "Contributions",
    "IterativeResult",
    "IterativeRule",
    "IterativeSecureAggregate",
    "IterativeState",
    "clip_rows",
    "clip_rows_with_norms",
    "run_iterative_aggregate",
]

logger = logging.getLogger(__name__)

_DOMAIN = b"secagg-dp/v1/protocols/iterative-aggregate"


@dataclass(frozen=True, slots=True)
class CallPlan:
    """The public broadcast that precedes one secure average.

    Parameters
    ----------
    index
        0 for the first secure average, then 1, 2, ...
    weight_cap
        Public cap B on every client's weight in this call (``None``: the largest weight, a
        simulator convenience).
    extra_bounds
        Public bounds Eⱼ of the extra scalars the clients send in this call.
    weight_floor
        Public lower bound on every client's weight in this call (``None``: 0); under noise the
        released weight sum is clamped to [floor·|S|, cap·|S|] (post-processing).
    previous
        The previous release (``None`` for the first call).
    parameters
        Other public scalars of this call (for example the smoothing ν of Weiszfeld).

    Examples
    --------
    >>> plan = CallPlan(0, weight_cap=1.0, parameters={"smoothing": 1e-6})
    >>> plan.parameters["smoothing"], plan.previous is None
    (1e-06, True)
    """

    index: int
    weight_cap: float | None = None
    extra_bounds: tuple[float, ...] = ()
    previous: ServerView | None = None
    parameters: Mapping[str, float] = field(default_factory=dict)
    weight_floor: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", check_int("index", self.index, minimum=0))
        if self.weight_cap is not None:
            object.__setattr__(self, "weight_cap", check_positive("weight_cap", self.weight_cap))
        if self.weight_floor is not None:
            floor = check_positive("weight_floor", self.weight_floor)
            if self.weight_cap is not None and floor > self.weight_cap:
                raise ValueError(f"weight_floor {floor} exceeds weight_cap {self.weight_cap}")
            object.__setattr__(self, "weight_floor", floor)
        bounds = tuple(check_positive("extra bound", b) for b in self.extra_bounds)
        object.__setattr__(self, "extra_bounds", bounds)
        if (self.index == 0) != (self.previous is None):
            raise ValueError("exactly the first call (index 0) has no previous release")
        params = {str(k): check_real(f"parameter {k!r}", v) for k, v in self.parameters.items()}
        object.__setattr__(self, "parameters", MappingProxyType(params))

    def encode(self) -> bytes:
        """The plan's canonical bytes: what the server broadcasts, bound into the secure sum.

        Index, weight cap, extra bounds, parameters (sorted by name) and the previous release
        (average, weight sum, extras, survivors), as big-endian integers and IEEE doubles.

        Examples
        --------
        >>> a = CallPlan(0, weight_cap=1.0).encode()
        >>> a == CallPlan(0, weight_cap=1.0).encode(), a == CallPlan(0, weight_cap=2.0).encode()
        (True, False)
        """
        out = [_DOMAIN, struct.pack(">I", self.index)]
        cap = -1.0 if self.weight_cap is None else float(self.weight_cap)
        out.append(struct.pack(">dI", cap, len(self.extra_bounds)))
        out.append(np.asarray(self.extra_bounds, dtype=">f8").tobytes())
        for name in sorted(self.parameters):
            encoded = name.encode()
            out.append(struct.pack(">H", len(encoded)) + encoded)
            out.append(struct.pack(">d", float(self.parameters[name])))
        previous = self.previous
        if previous is not None:
            out.append(struct.pack(">Id", previous.average.size, previous.weight_sum))
            out.append(np.asarray(previous.average, dtype=">f8").tobytes())
            out.append(struct.pack(">I", previous.extras.size))
            out.append(np.asarray(previous.extras, dtype=">f8").tobytes())
            out.append(struct.pack(">I", len(previous.survivors)))
            out.append(np.asarray(previous.survivors, dtype=">u4").tobytes())
        return b"".join(out)


@dataclass(frozen=True, slots=True, eq=False)
class Contributions:
    """What the clients send in one call: weights βᵢ and optional extra scalars (n, k).

    Row i must depend only on the call plan (public) and client i's own data.

    Examples
    --------
    >>> Contributions(np.ones(3)).extras is None
    True
    """

    weights: NDArray[np.float64]
    extras: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        weights = np.asarray(self.weights, dtype=np.float64)
        if weights.ndim != 1:
            raise ValueError(f"weights must be 1-D; got shape {weights.shape}")
        object.__setattr__(self, "weights", weights)
        if self.extras is not None:
            extras = np.asarray(self.extras, dtype=np.float64)
            if extras.ndim == 1:
                extras = extras[:, None]
            if extras.ndim != 2 or extras.shape[0] != weights.size:
                raise ValueError(
                    f"extras must have shape ({weights.size}, k); got {np.shape(self.extras)}"
                )
            object.__setattr__(self, "extras", extras)


@runtime_checkable
class IterativeRule(Protocol):
    """The two halves of an iterative secure aggregate.

    ``plan`` is the server's half: from the public transcript alone, the next call's public plan
    (its ``index`` is ``len(transcript)``), or ``None`` to stop. ``contributions`` is the clients'
    half, batched for speed: row i of the result may use only ``plan`` and ``vectors[i]`` (and
    client i's own private data held by the rule), never another client's row.
    """

    def plan(self, transcript: tuple[ServerView, ...]) -> CallPlan | None:
        """The next call's public plan, or ``None`` when the aggregate is complete."""
        ...

    def contributions(self, plan: CallPlan, vectors: NDArray[np.float64]) -> Contributions:
        """Every client's weight (and extras) for ``plan``, one row per client."""
        ...


class IterativeState(enum.Enum):
    """States of :class:`IterativeSecureAggregate`.

    Examples
    --------
    >>> IterativeState.COMPLETED.value
    'completed'
    """

    IDLE = "idle"
    AWAITING_RELEASE = "awaiting_release"
    COMPLETED = "completed"
    ABORTED = "aborted"


# The one table of allowed (state, operation) pairs; anything else aborts the driver.
_ALLOWED = {
    (IterativeState.IDLE, "start"),
    (IterativeState.AWAITING_RELEASE, "receive"),
    (IterativeState.AWAITING_RELEASE, "abort"),
}


class IterativeSecureAggregate:
    """Sans-I/O server-side driver of an iterative secure aggregate (RFA Definition 1).

    It holds the transcript (every release the server saw, and every plan it broadcast), asks
    the rule for the next plan, and counts secure averages (the communication cost). It never
    computes a sum itself: feed it each release with :meth:`receive`.

    Parameters
    ----------
    rule
        The :class:`IterativeRule` whose server half plans the calls.
    max_calls
        Hard limit on the number of secure averages (``None``: the rule decides alone).

    Examples
    --------
    >>> class Mean:  # one call with the clients' own weights: plain FedAvg
    ...     def plan(self, transcript):
    ...         return None if transcript else CallPlan(0, weight_cap=4.0)
    ...     def contributions(self, plan, vectors):
    ...         return Contributions(np.array([1.0, 3.0]))
    >>> driver = IterativeSecureAggregate(Mean())
    >>> plan = driver.start()
    >>> weights = Mean().contributions(plan, np.zeros((2, 1))).weights
    >>> view = secure_weighted_average([[0.0], [4.0]], weights, secure=False).server_view()
    >>> driver.receive(view) is None, driver.state.name, driver.num_secure_averages
    (True, 'COMPLETED', 1)
    """

    def __init__(self, rule: IterativeRule, *, max_calls: int | None = None) -> None:
        if not isinstance(rule, IterativeRule):
            raise TypeError(f"rule must implement IterativeRule; got {type(rule).__name__}")
        self._rule = rule
        self._max_calls = (
            None if max_calls is None else check_int("max_calls", max_calls, minimum=1)
        )
        self._state = IterativeState.IDLE
        self._transcript: list[ServerView] = []
        self._plans: list[CallPlan] = []
        self._termination: str | None = None

    @property
    def state(self) -> IterativeState:
        """The driver's state."""
        return self._state

    @property
    def transcript(self) -> tuple[ServerView, ...]:
        """Every release the server saw, in order."""
        return tuple(self._transcript)

    @property
    def plans(self) -> tuple[CallPlan, ...]:
        """Every public plan broadcast, in order."""
        return tuple(self._plans)

    @property
    def num_secure_averages(self) -> int:
        """Secure averages completed so far (the communication cost in RFA's sense)."""
        return len(self._transcript)

    @property
    def termination(self) -> str | None:
        """``"rule"`` (the rule stopped), ``"max_calls"``, ``"aborted"``, or ``None`` if running."""
        return self._termination

    def _enter(self, operation: str) -> None:
        if (self._state, operation) not in _ALLOWED:
            previous = self._state
            self._state = IterativeState.ABORTED
            self._termination = "aborted"
            raise LocalProtocolError(f"{operation}() is not allowed in state {previous.name}")

    def _next(self) -> CallPlan | None:
        if self._max_calls is not None and len(self._transcript) >= self._max_calls:
            self._state, self._termination = IterativeState.COMPLETED, "max_calls"
            return None
        try:
            plan = self._rule.plan(self.transcript)
        except Exception:
            self._state, self._termination = IterativeState.ABORTED, "aborted"
            raise
        if plan is None:
            self._state, self._termination = IterativeState.COMPLETED, "rule"
            return None
        if plan.index != len(self._transcript):
            self._state, self._termination = IterativeState.ABORTED, "aborted"
            raise LocalProtocolError(
                f"the rule planned call {plan.index} but call {len(self._transcript)} is next"
            )
        self._plans.append(plan)
        self._state = IterativeState.AWAITING_RELEASE
        return plan

    def start(self) -> CallPlan | None:
        """Plan the first secure average (``None`` if the rule plans none).

        Raises
        ------
        secagg.LocalProtocolError
            If called twice or after an error.
        """
        self._enter("start")
        return self._next()

    def receive(self, release: ServerView) -> CallPlan | None:
        """Record the release of the pending call; return the next plan or ``None`` when done.

        Raises
        ------
        TypeError
            If ``release`` is not a :class:`ServerView`.
        secagg.LocalProtocolError
            If no call is pending (or after an error).
        """
        self._enter("receive")
        if not isinstance(cast(object, release), ServerView):  # runtime guard for callers
            self._state, self._termination = IterativeState.ABORTED, "aborted"
            raise TypeError(f"release must be a ServerView; got {type(release).__name__}")
        self._transcript.append(release)
        return self._next()

    def abort(self, reason: str) -> None:
        """Abandon the aggregate (for example after a failed secure average)."""
        self._enter("abort")
        logger.info("iterative aggregate aborted after %d calls: %s", len(self._transcript), reason)
        self._state, self._termination = IterativeState.ABORTED, "aborted"


@dataclass(frozen=True, slots=True, eq=False)
class IterativeResult:
    """The outcome of :func:`run_iterative_aggregate`.

    Attributes
    ----------
    aggregate
        The last released average.
    transcript
        What the server saw, call by call (averages, weight sums, extras, survivors).
    plans
        The public plans broadcast before each call.
    results
        SIMULATOR RECORD: the full :class:`AverageResult` of every call, including the true
        effective weights only the simulation knows.
    num_secure_averages
        Number of secure averages run (RFA's communication cost R).
    termination
        ``"rule"`` or ``"max_calls"``.
    event
        Composition of the calls' privacy events, or ``None`` without noise.
    secure, seed
        The path and the root seed (``None``: fresh randomness).

    Examples
    --------
    >>> class Once:
    ...     def plan(self, transcript):
    ...         return None if transcript else CallPlan(0)
    ...     def contributions(self, plan, vectors):
    ...         return Contributions(np.ones(len(vectors)))
    >>> result = run_iterative_aggregate(Once(), [[1.0], [3.0]], secure=False)
    >>> result.aggregate.tolist(), result.num_secure_averages, result.termination
    ([2.0], 1, 'rule')
    """

    aggregate: NDArray[np.float64]
    transcript: tuple[ServerView, ...]
    plans: tuple[CallPlan, ...]
    results: tuple[AverageResult, ...]
    num_secure_averages: int
    termination: str
    event: PrivacyEvent | None
    secure: bool
    seed: int | None

    def __post_init__(self) -> None:
        calls = self.num_secure_averages
        if not len(self.transcript) == len(self.plans) == len(self.results) == calls:
            raise ValueError("transcript, plans and results must have one entry per call")
        if self.termination not in ("rule", "max_calls"):
            raise ValueError(f"unknown termination {self.termination!r}")

    @property
    def max_certified_effective_weight(self) -> float:
        """The largest certified effective weight over all calls (public)."""
        return max(v.certified_max_effective_weight for v in self.transcript)

    @property
    def max_true_effective_weight(self) -> float:
        """SIMULATOR ONLY: the largest true effective weight over all calls."""
        return max(r.true_max_effective_weight for r in self.results)


def clip_rows(vectors: ArrayLike, clip: float | None) -> tuple[NDArray[np.float64], float]:
    """Clip each row to L2 norm ``clip`` (``None``: the largest finite norm, nothing clipped).

    Returns the (possibly copied) matrix and the clip used. Rows with a non-finite entry are
    left as they are (the oracle rejects them).

    Examples
    --------
    >>> matrix, clip = clip_rows([[3.0, 4.0], [0.3, 0.4]], 1.0)
    >>> np.round(matrix, 6).tolist(), clip
    ([[0.6, 0.8], [0.3, 0.4]], 1.0)
    """
    matrix, clip, _ = clip_rows_with_norms(vectors, clip)
    return matrix, clip


def clip_rows_with_norms(
    vectors: ArrayLike, clip: float | None
) -> tuple[NDArray[np.float64], float, NDArray[np.float64]]:
    """:func:`clip_rows`, also returning the row norms after clipping (non-finite rows: inf/nan).

    Examples
    --------
    >>> _, clip, norms = clip_rows_with_norms([[3.0, 4.0], [0.0, 0.5]], 1.0)
    >>> clip, norms.tolist()
    (1.0, [1.0, 0.5])
    """
    matrix = as_matrix(vectors)
    norms = row_norms(matrix)
    finite = np.isfinite(norms)
    if clip is None:
        largest = float(norms[finite].max()) if finite.any() else 0.0
        return matrix, largest if largest > 0 else 1.0, norms
    clip = check_positive("clip", clip)
    over = finite & (norms > clip)
    if over.any():
        matrix = matrix.copy()
        matrix[over] *= (clip / norms[over])[:, None]
        norms = norms.copy()
        norms[over] = clip
    return matrix, clip, norms


def run_iterative_aggregate(
    rule: IterativeRule,
    vectors: ArrayLike,
    *,
    settings: AverageSettings | None = None,
    secure: bool = True,
    seed: int | None = None,
    max_calls: int | None = None,
    dropouts: Mapping[int, Mapping[str, Iterable[int]]] | None = None,
    session_sums: int | None = None,
    budget: PrivacyBudget | None = None,
) -> IterativeResult:
    """Run an iterative secure aggregate in memory: plan, contribute, secure average, repeat.

    The averages run in one :class:`SecureAverageSession` (key setup once, each further average
    two or three message rounds, each plan's :meth:`CallPlan.encode` bound into its sum), so a
    client that does not complete an average is out of the later ones — on the plain path too.

    Parameters
    ----------
    rule
        Both halves of the aggregate (:class:`IterativeRule`).
    vectors
        (n, d) client vectors; each client clips its own once to ``settings.clip``.
    settings
        :class:`AverageSettings` of every secure average (``None``: the defaults).
    secure
        ``False`` runs every average in plain numpy (see :func:`secure_weighted_average`).
    seed
        Root seed; call r uses a seed derived from it (``None``: fresh randomness).
    max_calls
        Hard limit on the number of secure averages.
    dropouts
        Call index → the ``dropouts`` mapping of that call's secure sum.
    session_sums
        Averages per session (``None``: ``max_calls``, else 8; the calls may differ in
        dimension d + 1 + k). A rule that needs more calls continues in a new session (a new key
        setup, every client back in); ``1`` gives the per-sum path, one full round per average.
    budget
        With ``settings.noise``: a :class:`~dpquantile.PrivacyBudget` each average spends its
        worst-case event from before its noise is drawn (a call the budget cannot pay for raises
        :class:`~dpquantile.BudgetExceededError` and nothing further is released).

    Returns
    -------
    IterativeResult

    Raises
    ------
    secagg.TooFewSurvivorsError, EffectiveWeightError, ZeroWeightSumError
        From a failed call; the driver is aborted and nothing further is released.

    Examples
    --------
    >>> class TwoStep:  # call 0: the mean; call 1: clients near it get more weight
    ...     def plan(self, transcript):
    ...         if len(transcript) == 2:
    ...             return None
    ...         previous = transcript[-1] if transcript else None
    ...         return CallPlan(len(transcript), weight_cap=1.0, previous=previous)
    ...     def contributions(self, plan, vectors):
    ...         if plan.previous is None:
    ...             return Contributions(np.ones(len(vectors)))
    ...         distance = np.linalg.norm(vectors - plan.previous.average, axis=1)
    ...         return Contributions(1.0 / (1.0 + distance))
    >>> result = run_iterative_aggregate(TwoStep(), [[0.0], [1.0], [8.0]], seed=0)
    >>> result.num_secure_averages, np.round(result.aggregate, 4).tolist()
    (2, [2.2222])
    """
    settings = AverageSettings() if settings is None else settings
    if not isinstance(settings, AverageSettings):
        raise TypeError(f"settings must be AverageSettings; got {type(settings).__name__}")
    seed = check_seed(seed)
    matrix, clip = clip_rows(vectors, settings.clip)
    settings = dataclasses.replace(settings, clip=clip) if settings.clip is None else settings
    per_call = {} if dropouts is None else dict(dropouts)
    root = None if seed is None else KeystreamRandom(seed, label=_DOMAIN)
    driver = IterativeSecureAggregate(rule, max_calls=max_calls)
    results: list[AverageResult] = []
    if session_sums is None:
        session_sums = min(255, max_calls) if max_calls is not None else 8
    session_sums = check_int("session_sums", session_sums, minimum=1)
    session: SecureAverageSession | None = None
    sessions = 0
    plan = driver.start()
    while plan is not None:
        contributions = rule.contributions(plan, matrix)
        if contributions.weights.shape != (matrix.shape[0],):
            driver.abort("wrong number of weights")
            raise ValueError(
                f"the rule returned {contributions.weights.shape} weights for "
                f"{matrix.shape[0]} clients"
            )
        call_seed = None
        if root is not None:
            call_seed = root.derive_seed(b"call/%d" % plan.index)
        if session is None or session.remaining == 0:
            session_seed = None
            if root is not None:
                label = b"session/%d" % sessions
                session_seed = root.derive_seed(label)
            session = SecureAverageSession(
                matrix.shape[0],
                sums=session_sums,
                settings=settings,
                secure=secure,
                seed=session_seed,
            )
            sessions += 1
        try:
            result = session.average(
                matrix,
                contributions.weights,
                weight_cap=plan.weight_cap,
                seed=call_seed,
                dropouts=per_call.get(plan.index),
                extras=contributions.extras,
                extra_bounds=plan.extra_bounds,
                iterate=plan.encode(),
                budget=budget,
                weight_floor=plan.weight_floor,
            )
        except Exception as error:
            driver.abort(f"call {plan.index} failed: {error}")
            raise
        results.append(result)
        plan = driver.receive(result.server_view())
    transcript = driver.transcript
    if not transcript:
        raise ValueError("the rule planned no secure average")
    events = [view.event for view in transcript if view.event is not None]
    termination = driver.termination
    assert termination in ("rule", "max_calls")
    return IterativeResult(
        aggregate=transcript[-1].average,
        transcript=transcript,
        plans=driver.plans,
        results=tuple(results),
        num_secure_averages=len(transcript),
        termination=termination,
        event=ComposedEvent(tuple(events)) if events else None,
        secure=secure,
        seed=seed,
    )
