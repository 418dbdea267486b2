"""The secure weighted-average oracle: Σβᵢwᵢ / Σβᵢ through one secure sum (RFA's "secure average
oracle").

Each client sends one ring vector: its quantised βᵢwᵢ, then its quantised weight βᵢ, then any
extra scalars (summed, not averaged), so the weight sum rides in the same secure sum and the server
learns nothing but the totals. The quantisation scale is the finest one whose sum over all clients
(plus the discrete Gaussian noise tail, when noise is on) cannot wrap modulo 2^bits; a scale that
does not exist raises :class:`secagg.HeadroomError` naming the bits needed. Derivations that are
ours (scale, sensitivity, the effective-weight certificate) are in ``secure_average_notes.md``.

``secure=False`` computes the same quantity in plain numpy, either exactly (the default) or with
the very same quantisation and noise (``quantize=True``, implied by noise): with one seed, the
quantised plain path reproduces the secure path's integers exactly.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpquantile import (
    NEIGHBOURING_RELATIONS,
    DistributedDiscreteGaussian,
    Neighbouring,
    PrivacyBudget,
)
from protocols.aggregation._arrays import as_matrix, row_norms
from protocols.aggregation._quantization import QuantizationPlan
from protocols.aggregation._rotation import Rotation, padded_dimension
from protocols.aggregation.encoding import ContributionLayout
from secagg import (
    InsecureSettingsWarning,
    KeystreamRandom,
    LazyInputs,
    LocalProtocolError,
    Phase,
    Ring,
    SecureSumResult,
    Session,
    TooFewSurvivorsError,
    default_threshold,
    parse_dropouts,
    plain_outcome,
    secure_sum,
    summed_clients,
)
from secagg.validation import check_fraction, check_int, check_positive, check_seed

__all__ = [
    "AverageResult",
    "AverageSettings",
    "DiscreteGaussianNoise",
    "EffectiveWeightError",
    "SecureAverageSession",
    "ServerView",
    "ZeroWeightSumError",
    "secure_weighted_average",
]

logger = logging.getLogger(__name__)

_DOMAIN = b"secagg-dp/v1/protocols/secure-average"


class EffectiveWeightError(ValueError):
    """The certified largest effective weight exceeds ``max_effective_weight``: result withheld.

    Attributes
    ----------
    certified
        The bound B / Σβ computed from public quantities only.
    limit
        The configured ``max_effective_weight`` s.

    Examples
    --------
    >>> try:
    ...     secure_weighted_average([[1.0], [2.0]], [1.0, 1.0], max_effective_weight=0.4,
    ...                             secure=False)
    ... except EffectiveWeightError as error:
    ...     print(error.certified, error.limit)
    0.5 0.4
    """

    def __init__(self, message: str, *, certified: float, limit: float) -> None:
        super().__init__(message)
        self.certified = certified
        self.limit = limit


class ZeroWeightSumError(ValueError):
    """The released weight sum is not positive: there is no average to report.

    Every surviving client had weight 0 (or noise swamped a tiny weight sum). A trainer treats
    this like :class:`secagg.TooFewSurvivorsError` and skips the round.

    Examples
    --------
    >>> secure_weighted_average([[1.0], [2.0], [3.0], [4.0]], [1.0, 0.0, 0.0, 0.0],
    ...                         secure=False, dropouts={"masked_input": [0]})
    Traceback (most recent call last):
    ...
    protocols.aggregation.secure_average.ZeroWeightSumError: the released weight sum over 3 \
survivors is 0: no client with positive weight is in the sum
    """


@dataclass(frozen=True, slots=True)
class DiscreteGaussianNoise:
    """Distributed discrete Gaussian noise (KLS21): each client adds N_ℤ(0, σ²) per grid coordinate.

    Give exactly one of ``rho`` and ``sigma``.

    Parameters
    ----------
    rho
        Target zCDP ρ of one secure average if ``min_survivors`` clients survive; σ is then the
        smallest grid σ whose :class:`~dpquantile.DistributedDiscreteGaussian` event meets it.
    sigma
        Per-client noise standard deviation in model units (of βᵢwᵢ); the grid σ is σ·scale.
    min_survivors
        The number of surviving clients the noise is planned for (``None``: every participating
        client). With fewer survivors, less noise is in the sum: the result's event reports the ρ
        actually delivered and :attr:`AverageResult.privacy_shortfall` is true.
    neighbouring
        The relation ``rho`` and the release's event are stated for: ``"add_remove"`` (default;
        user-level DP against adding or removing one client) or ``"replace_one"`` (one client's
        vector replaced; sensitivities doubled, so it composes with the DP quantile's events).

    Examples
    --------
    >>> DiscreteGaussianNoise(rho=0.5, min_survivors=8)
    DiscreteGaussianNoise(rho=0.5, sigma=None, min_survivors=8, neighbouring='add_remove')
    >>> DiscreteGaussianNoise(rho=0.5, sigma=1.0)
    Traceback (most recent call last):
    ...
    ValueError: give exactly one of rho and sigma
    """

    rho: float | None = None
    sigma: float | None = None
    min_survivors: int | None = None
    neighbouring: Neighbouring = "add_remove"

    def __post_init__(self) -> None:
        if (self.rho is None) == (self.sigma is None):
            raise ValueError("give exactly one of rho and sigma")
        if self.neighbouring not in NEIGHBOURING_RELATIONS:
            raise ValueError(
                f"neighbouring must be one of {', '.join(NEIGHBOURING_RELATIONS)}; "
                f"got {self.neighbouring!r}"
            )
        if self.rho is not None:
            object.__setattr__(self, "rho", check_positive("rho", self.rho))
        if self.sigma is not None:
            object.__setattr__(self, "sigma", check_positive("sigma", self.sigma))
        if self.min_survivors is not None:
            object.__setattr__(
                self, "min_survivors", check_int("min_survivors", self.min_survivors, minimum=1)
            )


@dataclass(frozen=True, slots=True)
class AverageSettings:
    """How secure averages are computed (shared by the oracle, iterative aggregates and RFA).

    Parameters
    ----------
    bits
        Ring size b (M = 2^b), 1 to 64.
    clip
        Public L2 clipping norm c of each client's vector. ``None``: the largest input norm,
        a simulator convenience that a deployment cannot use (not allowed with noise).
    noise
        Distributed discrete Gaussian noise, or ``None``.
    neighbors, threshold
        SecAgg+ graph degree (``None``: complete graph) and Shamir threshold (``None``:
        :func:`secagg.default_threshold`).
    max_effective_weight
        RFA's privacy condition s in (0, 1]: an average whose certified largest effective weight
        exceeds s is withheld (:class:`EffectiveWeightError`).
    quantize
        For ``secure=False`` only: ``True`` reproduces the secure path's quantisation (and noise);
        ``None`` quantises only when noise is on; ``False`` forbids noise.
    threat_model
        Of the secure sum: ``"malicious"`` (default) or ``"semi-honest"``
        (:class:`secagg.ThreatModel`; the plain path fails exactly where that mode would).
    rotate
        KLS21's flattening: each quantised row is first rotated by a randomised Walsh–Hadamard
        transform from the average's public seed (blocks of B = 2^k coordinates, padding within
        1/16), which lets a ring of b bits hold a √B/t finer grid (``secure_average_notes.md``
        §6); the server rotates the sum back. Quantised averages only.
    rounding_beta
        KLS21's conditional rounding β in (0, 1): each client re-draws its stochastic rounding
        until the row's L2 norm meets the bound the noise is calibrated for (a smaller Δ₂ than
        plain rounding's c·s + √D). ``None``: plain rounding.
    denominator
        What the released sum Σβᵢwᵢ is divided by: ``"released"`` (default) the released
        weight sum Σβᵢ (noisy with noise; a non-positive one raises
        :class:`ZeroWeightSumError`), or ``"survivors"`` the public B·|survivors| (DP-FedAvg's
        fixed denominator, McMahan et al. 2018: exact for equal weights βᵢ = B, and free of the
        weight coordinate's noise, which at small cohorts can make Σβᵢ negative). The row then
        carries no weight coordinate (it holds 0), so Δ₂ loses its √(1 + λ²) factor and the
        noise for a given ρ is 3 % smaller (``secure_average_notes.md`` §7).
    denominator_share
        With ``denominator="survivors"``, the public expected share f ∈ (0, 1] of the weight cap
        each survivor carries: the sum is divided by f·B·|survivors| (Δ-FL's noisy tail average
        divides by θ·|survivors|, its expected tail size, never by a count read from the data).
        With a fixed denominator every weight may be zero (the release is then noise only).

    Examples
    --------
    >>> AverageSettings(bits=48, clip=1.0).bits
    48
    >>> AverageSettings(noise=DiscreteGaussianNoise(rho=1.0))
    Traceback (most recent call last):
    ...
    ValueError: noise needs a public clip (the sensitivity cannot depend on the data)
    """

    bits: int = 32
    clip: float | None = None
    noise: DiscreteGaussianNoise | None = None
    neighbors: int | None = None
    threshold: int | None = None
    max_effective_weight: float | None = None
    quantize: bool | None = None
    threat_model: str = "malicious"
    denominator: Literal["released", "survivors"] = "released"
    denominator_share: float = 1.0
    rotate: bool = False
    rounding_beta: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rotate, bool):
            raise TypeError(f"rotate must be a bool; got {type(self.rotate).__name__}")
        if self.rotate and self.max_effective_weight is not None:
            # Rotated back, the weight coordinate carries a mix of every rounding error of its
            # block; the certificate's bound (secure_average_notes.md §3) is derived unrotated.
            raise ValueError(
                "max_effective_weight's certificate is derived for unrotated rows: "
                "use rotate=False with it"
            )
        if self.rounding_beta is not None:
            object.__setattr__(
                self,
                "rounding_beta",
                check_fraction("rounding_beta", self.rounding_beta, zero=False, one=False),
            )
        if self.threat_model not in ("malicious", "semi-honest"):
            raise ValueError(
                f"threat_model must be 'malicious' or 'semi-honest'; got {self.threat_model!r}"
            )
        if self.denominator not in ("released", "survivors"):
            raise ValueError(
                f"denominator must be 'released' or 'survivors'; got {self.denominator!r}"
            )
        share = check_fraction("denominator_share", self.denominator_share, zero=False, one=True)
        if share != 1.0 and self.denominator != "survivors":
            raise ValueError(
                "denominator_share applies to the fixed denominator: use denominator='survivors'"
            )
        object.__setattr__(self, "denominator_share", share)
        bits = check_int("bits", self.bits, minimum=1)
        if bits > 64:
            raise ValueError(f"bits must lie in [1, 64]; got {bits}")
        object.__setattr__(self, "bits", bits)
        if self.clip is not None:
            object.__setattr__(self, "clip", check_positive("clip", self.clip))
        if self.noise is not None:
            if not isinstance(self.noise, DiscreteGaussianNoise):
                raise TypeError(
                    f"noise must be a DiscreteGaussianNoise; got {type(self.noise).__name__}"
                )
            if self.clip is None:
                raise ValueError(
                    "noise needs a public clip (the sensitivity cannot depend on the data)"
                )
            if self.quantize is False:
                raise ValueError("noise lives on the quantisation grid: quantize=False forbids it")
        if self.neighbors is not None:
            object.__setattr__(self, "neighbors", check_int("neighbors", self.neighbors, minimum=2))
        if self.threshold is not None:
            object.__setattr__(self, "threshold", check_int("threshold", self.threshold, minimum=1))
        if self.max_effective_weight is not None:
            object.__setattr__(
                self,
                "max_effective_weight",
                check_fraction(
                    "max_effective_weight", self.max_effective_weight, zero=False, one=True
                ),
            )
        if self.quantize is not None and not isinstance(self.quantize, bool):
            raise TypeError(f"quantize must be a bool or None; got {type(self.quantize).__name__}")


_DEFAULT_SETTINGS = AverageSettings()


@dataclass(frozen=True, slots=True, eq=False)
class ServerView:
    """Everything the server learns from one secure average (no per-client value).

    Attributes
    ----------
    average
        The released average Σβᵢwᵢ / Σβᵢ over the survivors (float64).
    weight_sum
        The released Σβᵢ over the survivors; with ``denominator="survivors"`` the public
        divisor f·B·|survivors| instead (no weight sum is released then).
    extras
        The released sums of the extra scalars (empty when there are none).
    survivors, dropped
        Who is in the sum and who is not (a rejected client looks like a dropout).
    certified_max_effective_weight
        The public bound on maxᵢ βᵢ / Σβ (see :class:`AverageResult`).
    event
        The privacy event of the release, or ``None`` without noise.

    Examples
    --------
    >>> view = ServerView(np.array([0.5]), 2.0, np.zeros(0), (0, 1), (2,), 0.5, None)
    >>> view.weight_sum, view.dropped
    (2.0, (2,))
    """

    average: NDArray[np.float64]
    weight_sum: float
    extras: NDArray[np.float64]
    survivors: tuple[int, ...]
    dropped: tuple[int, ...]
    certified_max_effective_weight: float
    event: DistributedDiscreteGaussian | None

    def __post_init__(self) -> None:
        if self.average.ndim != 1 or self.extras.ndim != 1:
            raise ValueError("average and extras must be 1-D")


@dataclass(frozen=True, slots=True, eq=False)
class AverageResult:
    """The outcome of :func:`secure_weighted_average`.

    Attributes
    ----------
    average
        Σβᵢwᵢ / Σβᵢ over the survivors, float64, after clipping (‖wᵢ‖ ≤ clip, βᵢ ≤ weight_cap);
        Σβᵢwᵢ / (B·|survivors|) with ``AverageSettings(denominator="survivors")``.
    weight_sum
        Σβᵢ over the survivors as released (quantised, and noisy with noise).
    extras
        Released sums of the extra scalars, shape (k,).
    num_clients
        How many clients were asked.
    survivors, dropped
        Client indices in the sum, and all others (rejected clients included), ascending.
    rejected
        Clients dropped before the protocol because their vector or weight was not finite.
    certified_max_effective_weight
        What the *server* can certify from public quantities: every client clipped its weight to
        the public cap B, so maxᵢ βᵢ/Σβ ≤ B / Σβ with Σβ the released weight sum, first lowered
        by its rounding (< 1 grid unit per survivor) and, with noise, its 2^-40 noise tail. The
        server never sees βᵢ.
    true_max_effective_weight
        SIMULATOR ONLY: the exact maxᵢ βᵢ/Σβ over the survivors, computed from the (clipped)
        weights that only the in-process simulation knows. Never available to a real server.
    weight_cap, clip
        The public weight cap B and L2 clip c that were used.
    event
        The :class:`~dpquantile.DistributedDiscreteGaussian` event of this release, with the
        number of clients that actually survived, or ``None`` without noise.
    planned_rho
        The ρ the noise was planned for (``min_survivors`` survivors), or ``None``.
    quantization_step
        1/scale in units of βᵢwᵢ, or ``None`` on the exact plain path.
    bits
        The ring size, or ``None`` on the exact plain path.
    secure
        Whether the secure sum ran (else plain numpy).
    seed
        The seed (``None``: fresh operating-system randomness).
    secure_sum
        The raw :class:`secagg.SecureSumResult` (timings, bytes), or ``None`` on the plain path.

    Examples
    --------
    >>> result = secure_weighted_average([[0.0, 2.0], [2.0, 0.0], [4.0, 4.0]], [1.0, 1.0, 2.0],
    ...                                  clip=8.0, seed=1)
    >>> np.round(result.average, 6).tolist(), round(result.weight_sum, 6)
    ([2.5, 2.5], 4.0)
    >>> result.true_max_effective_weight, round(result.certified_max_effective_weight, 6)
    (0.5, 0.5)
    """

    average: NDArray[np.float64]
    weight_sum: float
    extras: NDArray[np.float64]
    num_clients: int
    survivors: tuple[int, ...]
    dropped: tuple[int, ...]
    rejected: tuple[int, ...]
    certified_max_effective_weight: float
    true_max_effective_weight: float
    weight_cap: float
    clip: float
    event: DistributedDiscreteGaussian | None
    planned_rho: float | None
    quantization_step: float | None
    bits: int | None
    secure: bool
    seed: int | None
    secure_sum: SecureSumResult | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.average.ndim != 1:
            raise ValueError(f"average must be 1-D; got shape {self.average.shape}")
        if not set(self.rejected) <= set(self.dropped):
            raise ValueError("rejected clients must be among the dropped clients")
        if len(self.survivors) + len(self.dropped) != self.num_clients:
            raise ValueError("survivors and dropped must partition the clients")

    @property
    def privacy_shortfall(self) -> bool:
        """Whether fewer clients survived than the noise was planned for (ρ above plan).

        Examples
        --------
        >>> secure_weighted_average([[1.0], [2.0]], [1.0, 1.0], secure=False).privacy_shortfall
        False
        """
        if self.event is None or self.planned_rho is None:
            return False
        return self.event.rho > self.planned_rho * (1 + 1e-9)

    def server_view(self) -> ServerView:
        """The part of this result that the server sees.

        Examples
        --------
        >>> view = secure_weighted_average([[1.0], [3.0]], [1.0, 1.0], secure=False).server_view()
        >>> view.average.tolist(), view.weight_sum, view.survivors
        ([2.0], 2.0, (0, 1))
        """
        return ServerView(
            average=self.average,
            weight_sum=self.weight_sum,
            extras=self.extras,
            survivors=self.survivors,
            dropped=self.dropped,
            certified_max_effective_weight=self.certified_max_effective_weight,
            event=self.event,
        )


# --------------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Clients:
    """Validated, clipped inputs: participants are the clients with finite vector and weight."""

    matrix: NDArray[np.float64]
    factors: NDArray[np.float64]  # L2 clipping factor min(1, c/‖wᵢ‖) per client
    weights: NDArray[np.float64]  # βᵢ clipped to [0, B] (0 for rejected clients)
    extras: NDArray[np.float64]  # (n, k), clipped to ±Eⱼ
    participants: NDArray[np.intp]
    rejected: tuple[int, ...]
    # The rows' layout: under a fixed denominator, which never reads the weight sum, it carries
    # no weight coordinate (the coordinate holds 0 and adds nothing to Δ₂).
    layout: ContributionLayout

    @property
    def clip(self) -> float:
        return self.layout.clip

    @property
    def weight_cap(self) -> float:
        return self.layout.weight_cap


def _prepare(
    vectors: ArrayLike,
    weights: ArrayLike,
    *,
    extras: ArrayLike | None,
    extra_bounds: Sequence[float],
    clip: float | None,
    weight_cap: float | None,
    fixed_denominator: bool = False,
) -> _Clients:
    matrix = as_matrix(vectors)
    n = matrix.shape[0]
    beta = np.asarray(weights, dtype=np.float64)
    if beta.shape != (n,):
        raise ValueError(f"weights must have shape ({n},) to match the vectors; got {beta.shape}")
    bounds = np.array([check_positive("extra bound", b) for b in extra_bounds], dtype=np.float64)
    if extras is None:
        if bounds.size:
            raise ValueError("extra_bounds given without extras")
        extra = np.zeros((n, 0))
    else:
        extra = np.asarray(extras, dtype=np.float64)
        if extra.ndim == 1:
            extra = extra[:, None]
        if extra.shape != (n, bounds.size):
            raise ValueError(
                f"extras must have shape ({n}, {bounds.size}) to match vectors and extra_bounds; "
                f"got {extra.shape}"
            )
    norms = row_norms(matrix)
    finite = np.isfinite(norms) & np.isfinite(beta) & np.isfinite(extra).all(axis=1)
    rejected = tuple(int(i) for i in np.flatnonzero(~finite))
    if rejected:
        logger.warning("rejected %d client(s) with non-finite input: %s", len(rejected), rejected)
    participants = np.flatnonzero(finite)
    if participants.size == 0:
        raise TooFewSurvivorsError(f"all {n} clients sent non-finite vectors or weights")
    live_weights = beta[participants]
    if (live_weights < 0).any():
        bad = int(participants[np.flatnonzero(live_weights < 0)[0]])
        raise ValueError(f"weights must be non-negative; client {bad} has weight {beta[bad]}")
    if not (live_weights > 0).any() and not fixed_denominator:
        raise ValueError("every weight is zero: a weighted average needs a positive weight")
    if clip is None:
        largest = float(norms[participants].max())
        clip = largest if largest > 0 else 1.0
    cap = (
        float(live_weights.max())
        if weight_cap is None
        else check_positive("weight_cap", weight_cap)
    )
    safe_norms = np.where(finite, norms, 1.0)
    factors = np.where(finite, np.minimum(1.0, clip / np.maximum(safe_norms, 1e-300)), 0.0)
    clipped_weights = np.minimum(np.where(finite, beta, 0.0), cap)
    clipped_extras = np.where(finite[:, None], np.clip(np.nan_to_num(extra), -bounds, bounds), 0.0)
    layout = ContributionLayout(
        matrix.shape[1], clip, cap, tuple(bounds.tolist()), weight_coordinate=not fixed_denominator
    )
    return _Clients(
        matrix, factors, clipped_weights, clipped_extras, participants, rejected, layout
    )


def _warn_if_coarse(clients: _Clients, participants: NDArray[np.intp], scale: float) -> None:
    """Warn when every coordinate of every input is below one grid step (the average would be
    rounding noise): the grid is set by bits, clients and the public clip, not by the data."""
    matrix = clients.matrix[participants]
    reach = np.maximum(matrix.max(axis=1), -matrix.min(axis=1))
    largest = float(np.max(reach * clients.factors[participants] * clients.weights[participants]))
    if 0.0 < largest < 1.0 / scale:
        warnings.warn(
            f"every input coordinate (largest {largest:.3g}) is below one quantisation step "
            f"({1.0 / scale:.3g}): the average is mostly rounding noise; raise bits or lower "
            "the clip",
            InsecureSettingsWarning,
            stacklevel=4,
        )


# --------------------------------------------------------------------------------------------------
# The oracle
# --------------------------------------------------------------------------------------------------


# Conditional rounding re-draws with probability ≤ β each time; this many never all fail in practice
# (β^200 < 1e-43 at KLS21's β = e^-0.5).
_MAX_ROUNDINGS = 200


def _client_row(
    clients: _Clients,
    index: int,
    plan: QuantizationPlan,
    root: KeystreamRandom,
    *,
    rotation: Rotation | None = None,
) -> NDArray[np.int64]:
    """Client ``index``'s quantised (and noised) row (:class:`ContributionLayout`) in grid
    units (rotated and padded to the plan's wire dimension when the plan rotates)."""
    row = clients.layout.encode(
        clients.matrix[index],
        float(clients.weights[index]),
        clients.extras[index],
        factor=float(clients.factors[index]),
    )
    if rotation is not None:
        row = rotation.forward(row)
    rounding = root.spawn(b"round/%d" % index)
    values = plan.quantizer.quantize(row, rng=rounding)
    if plan.rounding_bound is not None:
        bound_squared = plan.rounding_bound**2
        for _ in range(_MAX_ROUNDINGS):
            if float(np.dot(values, values)) <= bound_squared:
                break
            values = plan.quantizer.quantize(row, rng=rounding)
        else:
            raise RuntimeError(
                f"client {index}: conditional rounding failed {_MAX_ROUNDINGS} times"
            )
    if plan.mechanism is not None:
        values += plan.mechanism.noise(root.spawn(b"noise/%d" % index))
    return values


class _ByClient(LazyInputs):
    """Rows built for some clients, indexed by the session's client index (the others are
    never read: they are gone before their masked input)."""

    def __init__(self, rows: LazyInputs, clients: Sequence[int], num_clients: int) -> None:
        super().__init__(num_clients, rows.dimension)
        self._rows = rows
        self._local = {int(c): j for j, c in enumerate(clients)}

    def row(self, index: int) -> NDArray[np.integer]:
        return self._rows[self._local[index]]


class _RingInputs(LazyInputs):
    """The participants' ring vectors, built when the runner reads them (O(d) memory, not
    O(n·d)); the runner reads each client's row once per secure sum."""

    def __init__(
        self,
        clients: _Clients,
        plan: QuantizationPlan,
        root: KeystreamRandom,
        ring: Ring,
        *,
        by_client: bool = False,
        rotation: Rotation | None = None,
    ) -> None:
        # by_client: indexed by client (a session's index space), else by participant.
        count = clients.matrix.shape[0] if by_client else clients.participants.size
        super().__init__(int(count), plan.wire_dimension)
        self._clients, self._plan, self._root = clients, plan, root
        self._rotation = rotation
        self._mask = np.uint64(ring.word_mask)
        self._dtype = ring.dtype
        self._by_client = by_client

    def row(self, index: int) -> NDArray[np.uint64]:
        client = index if self._by_client else int(self._clients.participants[index])
        values = _client_row(self._clients, client, self._plan, self._root, rotation=self._rotation)
        # Two's-complement residue modulo 2^b (the centred value is recovered after the sum).
        ring_values = values.view(np.uint64) & self._mask
        return ring_values.astype(self._dtype, copy=False)


def _plain_total(
    clients: _Clients,
    members: NDArray[np.intp],
    *,
    plan: QuantizationPlan | None,
    root: KeystreamRandom,
    rotation: Rotation | None = None,
) -> NDArray[np.float64]:
    """The plain path's total over ``members``: the secure path's integers when quantised
    (still rotated and padded when the plan rotates)."""
    if plan is not None:
        integer_total = np.zeros(plan.wire_dimension, dtype=np.int64)
        for client in members:
            integer_total += _client_row(clients, int(client), plan, root, rotation=rotation)
        return integer_total.astype(np.float64)
    coefficients = clients.weights[members] * clients.factors[members]
    if len(clients.rejected) == 0 and members.size == clients.matrix.shape[0]:
        weighted = np.dot(coefficients, clients.matrix)
    else:
        weighted = coefficients @ clients.matrix[members]
    return clients.layout.encode_sums(
        weighted, float(clients.weights[members].sum()), clients.extras[members].sum(axis=0)
    )


def _run(
    vectors: ArrayLike,
    weights: ArrayLike,
    *,
    settings: AverageSettings,
    weight_cap: float | None,
    extras: ArrayLike | None,
    extra_bounds: Sequence[float],
    secure: bool,
    seed: int | None,
    dropouts: Mapping[str, Iterable[int]] | None,
    session: SecureAverageSession | None = None,
    iterate: bytes = b"",
    budget: PrivacyBudget | None = None,
    weight_floor: float | None = None,
) -> AverageResult:
    """The oracle on validated settings (used by every public entry point)."""
    seed = check_seed(seed)
    if weight_floor is not None:
        weight_floor = check_positive("weight_floor", weight_floor)
    if budget is not None:
        if not isinstance(budget, PrivacyBudget):
            raise TypeError(f"budget must be a PrivacyBudget; got {type(budget).__name__}")
        if settings.noise is None:
            raise ValueError("a budget pays for noise: this average has none (no DP)")
    if not isinstance(secure, bool):
        raise TypeError(f"secure must be a bool; got {type(secure).__name__}")
    if secure and settings.quantize is False:
        raise ValueError("the secure path always quantises: quantize=False needs secure=False")
    if settings.noise is not None and weight_cap is None:
        raise ValueError(
            "noise needs a public weight_cap (the sensitivity cannot depend on the data)"
        )
    clients = _prepare(
        vectors,
        weights,
        extras=extras,
        extra_bounds=extra_bounds,
        clip=settings.clip,
        weight_cap=weight_cap,
        fixed_denominator=settings.denominator == "survivors",
    )
    n_all, d = clients.matrix.shape
    bounds = np.asarray(extra_bounds, dtype=np.float64)
    phase_of = parse_dropouts(dropouts, n_all)
    if session is not None:
        # A session's index space is the client's; a client out of the session (it did not
        # complete an earlier average) or rejected now counts as gone before its masked input.
        quantized_call = secure or settings.quantize is True or settings.noise is not None
        width = d + 1 + bounds.size
        session._check_call(
            n_all, width, padded_dimension(width) if settings.rotate and quantized_call else width
        )
        in_session = session._members
        clients = dataclasses.replace(
            clients,
            participants=np.array(
                [c for c in clients.participants.tolist() if c in in_session], dtype=np.intp
            ),
        )
        sum_dropouts = session._dropouts(phase_of, set(clients.participants.tolist()))
        outcome_dropouts = session._outcome_dropouts(sum_dropouts)
        n = int(clients.participants.size)
        threshold = session.threshold
        completes, why = plain_outcome(
            n_all,
            outcome_dropouts,
            threshold=threshold,
            neighbors=settings.neighbors,
            threat_model=settings.threat_model,
        )
    else:
        participants = clients.participants
        n = participants.size
        local_of = {int(c): j for j, c in enumerate(participants)}
        local_dropouts: dict[str, list[int]] = {}
        for client, phase in phase_of.items():
            if client in local_of:
                local_dropouts.setdefault(phase, []).append(local_of[client])
        threshold = settings.threshold or default_threshold(n, settings.neighbors)
        completes, why = (
            plain_outcome(
                n,
                local_dropouts,
                threshold=threshold,
                neighbors=settings.neighbors,
                threat_model=settings.threat_model,
            )
            if n >= 2
            else (False, "fewer than 2 clients")
        )
    if not completes:
        if session is not None:
            session._abort(why)
        raise TooFewSurvivorsError(
            f"{n} of {n_all} clients take part ({len(clients.rejected)} rejected): {why}"
        )
    participants = clients.participants

    quantized = secure or settings.quantize is True or settings.noise is not None
    dimension = d + 1 + bounds.size
    layout = clients.layout
    noise = settings.noise
    planned_survivors = n if noise is None or noise.min_survivors is None else noise.min_survivors
    plan: QuantizationPlan | None = None
    if quantized:
        plan = layout.plan(
            n,
            settings.bits,
            noise_rho=None if noise is None else noise.rho,
            noise_sigma=None if noise is None else noise.sigma,
            planned_survivors=planned_survivors,
            neighbouring="add_remove" if noise is None else noise.neighbouring,
            rotate=settings.rotate,
            rounding_beta=settings.rounding_beta,
        )
    if plan is not None and participants.size:
        _warn_if_coarse(clients, participants, plan.quantizer.scale)
    root = KeystreamRandom(seed, label=_DOMAIN)
    rotation = None
    if plan is not None and plan.rotate:
        # The signs are public: from the average's (the server's) seed, known to every client.
        rotation = Rotation.from_seed(dimension, root.spawn(b"rotation"))
    if budget is not None:
        assert plan is not None and plan.mechanism is not None
        # Charged before any row (and so any noise) exists; withheld below the planned survivors.
        budget.spend(plan.mechanism.worst_case_event(n))

    def plain_total(members: NDArray[np.intp]) -> NDArray[np.float64]:
        return _plain_total(
            clients,
            members,
            plan=plan,
            root=root,
            rotation=rotation,
        )

    sum_result: SecureSumResult | None = None
    if session is not None:
        ring_inputs = None
        if secure:
            assert plan is not None
            ring = Ring(settings.bits)
            ring_inputs = _RingInputs(clients, plan, root, ring, by_client=True, rotation=rotation)
        least = planned_survivors if budget is not None else 1
        summed, sum_result = session._sum(ring_inputs, sum_dropouts, iterate, least)
        members = np.asarray(summed, dtype=np.intp)
        if sum_result is not None:
            total = sum_result.centered().astype(np.float64)
        else:
            total = plain_total(members)
    elif secure:
        assert plan is not None
        sum_result = secure_sum(
            _RingInputs(clients, plan, root, Ring(settings.bits), rotation=rotation),
            modulus_bits=settings.bits,
            threshold=threshold,
            neighbors=settings.neighbors,
            dropouts=local_dropouts,
            seed=None if seed is None else root.derive_seed(b"secure-sum"),
            threat_model=settings.threat_model,
            min_inputs=planned_survivors if budget is not None else 1,
        )
        members = participants[np.asarray(sum_result.survivors, dtype=np.intp)]
        total = sum_result.centered().astype(np.float64)
    else:
        members = participants[np.array(summed_clients(local_dropouts, n), dtype=np.intp)]
        if budget is not None and members.size < planned_survivors:
            raise TooFewSurvivorsError(
                f"only {members.size} of the {planned_survivors} planned clients survived: "
                "nothing released (a budgeted release is withheld below its plan)"
            )
        total = plain_total(members)

    survivors = tuple(sorted(int(c) for c in members))
    dropped = tuple(sorted(set(range(n_all)) - set(survivors)))
    if plan is not None:
        total /= plan.quantizer.scale
    if rotation is not None:
        total = rotation.inverse(total)
    fixed = settings.denominator == "survivors"
    decoded = layout.decode(total)
    if fixed:
        # The divisor is public (f·B·|survivors|) and the row carried no weight coordinate
        # (secure_average_notes.md §7); each survivor's share of the average is ≤ 1/(f·m).
        weight_sum = settings.denominator_share * clients.weight_cap * len(survivors)
    else:
        weight_sum = decoded.weight_sum
    if weight_floor is not None and plan is not None and plan.mechanism is not None and not fixed:
        # Post-processing of the noisy release: every survivor's weight lies in the public
        # [floor, cap], so the weight sum does too (a noisy Σβᵢ ≤ 0 would end the average).
        size = len(survivors)
        weight_sum = min(max(weight_sum, weight_floor * size), clients.weight_cap * size)
    if fixed or weight_sum > 0:
        average = decoded.weighted_sum / weight_sum
    else:
        raise ZeroWeightSumError(
            f"the released weight sum over {len(survivors)} survivors is {weight_sum:.6g}: "
            "no client with positive weight is in the sum"
        )

    event: DistributedDiscreteGaussian | None = None
    planned_rho: float | None = None
    weight_lower = weight_sum
    if plan is not None and not fixed:
        # Each survivor's stochastic rounding moved its weight coordinate by < 1 grid unit.
        weight_lower -= len(survivors) * layout.weight_grid_unit(plan.quantizer.scale)
    if plan is not None and plan.mechanism is not None:
        mechanism, survived = plan.mechanism, len(survivors)
        event = mechanism.event(survived)
        planned_rho = mechanism.planned_rho
        if survived < planned_survivors:
            logger.warning(
                "noise was planned for %d survivors but only %d survived: ρ delivered %.4g "
                "instead of %.4g",
                planned_survivors,
                survived,
                event.rho,
                planned_rho,
            )
        if not fixed:
            # The weight coordinate's noise is within this many grid units except w.p. 2^-40.
            weight_noise = mechanism.tail_bound(survived)
            weight_lower -= weight_noise * layout.weight_grid_unit(plan.quantizer.scale)
    certified = 1.0 if weight_lower <= 0 else min(1.0, clients.weight_cap / weight_lower)
    true_weights = clients.weights[list(survivors)]
    true_total = float(true_weights.sum())
    true_max = float(true_weights.max()) / true_total if true_total > 0 else 1.0

    limit = settings.max_effective_weight
    if limit is not None and certified > limit:
        raise EffectiveWeightError(
            f"certified largest effective weight {certified:.4g} (public cap "
            f"{clients.weight_cap:.4g} / released weight sum {weight_lower:.4g}) exceeds "
            f"max_effective_weight {limit}: "
            "the average is withheld",
            certified=certified,
            limit=limit,
        )
    logger.debug(
        "secure average: %d/%d survivors, step %s, certified max effective weight %.4g",
        len(survivors),
        n_all,
        None if plan is None else 1.0 / plan.quantizer.scale,
        certified,
    )
    return AverageResult(
        average=average,
        weight_sum=weight_sum,
        extras=np.ascontiguousarray(decoded.extras),
        num_clients=n_all,
        survivors=survivors,
        dropped=dropped,
        rejected=clients.rejected,
        certified_max_effective_weight=certified,
        true_max_effective_weight=true_max,
        weight_cap=clients.weight_cap,
        clip=clients.clip,
        event=event,
        planned_rho=planned_rho,
        quantization_step=None if plan is None else 1.0 / plan.quantizer.scale,
        bits=settings.bits if quantized else None,
        secure=secure,
        seed=seed,
        secure_sum=sum_result,
    )


def secure_weighted_average(
    vectors: ArrayLike,
    weights: ArrayLike,
    *,
    bits: int = 32,
    clip: float | None = None,
    weight_cap: float | None = None,
    seed: int | None = None,
    noise: DiscreteGaussianNoise | None = None,
    neighbors: int | None = None,
    threshold: int | None = None,
    dropouts: Mapping[str, Iterable[int]] | None = None,
    max_effective_weight: float | None = None,
    extras: ArrayLike | None = None,
    extra_bounds: Sequence[float] = (),
    secure: bool = True,
    quantize: bool | None = None,
    threat_model: str = "malicious",
    settings: AverageSettings | None = None,
    budget: PrivacyBudget | None = None,
    weight_floor: float | None = None,
) -> AverageResult:
    """Σβᵢwᵢ / Σβᵢ over the surviving clients through one secure sum (RFA's secure average oracle).

    Client i clips ‖wᵢ‖₂ to ``clip`` and βᵢ to ``weight_cap``, quantises [βᵢwᵢ ; βᵢ ; extras]
    on one grid (stochastic rounding from its own cryptographic stream), adds its share of the
    noise, and masks the vector in a SecAgg (or SecAgg+) secure sum.

    Parameters
    ----------
    vectors
        (n, d) client vectors wᵢ. A client with a non-finite entry is rejected: it never joins
        the sum and is reported in ``rejected`` (and ``dropped``).
    weights
        (n,) weights βᵢ ≥ 0 (a non-finite weight rejects the client, like a non-finite vector).
        Zero-weight clients still send (zeros), so the server cannot tell who they are.
    bits
        Ring size b: the scale is the finest with n·⌈B·c·scale⌉ (+ noise tail) < 2^(b−1).
    clip
        Public L2 clip c (``None``: the largest input norm — simulator convenience only).
    weight_cap
        Public weight cap B (``None``: the largest weight — simulator convenience only).
    seed
        Seed of every client's rounding and noise stream and of the secure sum; ``None`` draws
        fresh operating-system randomness.
    noise
        :class:`DiscreteGaussianNoise`, or ``None``.
    neighbors, threshold, dropouts
        Passed to :func:`secagg.secure_sum` (dropouts use the caller's client indices).
    max_effective_weight
        RFA's privacy condition s: if the certified bound B/Σβ exceeds s the average is withheld
        and :class:`EffectiveWeightError` raised (guarantee and limits: see the notes, §3).
    extras, extra_bounds
        Optional (n, k) scalars summed (not averaged) in the same secure sum, each clipped to its
        public bound |eᵢⱼ| ≤ Eⱼ (e.g. a client-side objective term).
    secure
        ``False``: plain numpy, same clipping, exact unless ``quantize`` or noise asks for the
        secure path's quantisation.
    quantize, threat_model
        See :class:`AverageSettings`.
    settings
        All of ``bits``, ``clip``, ``noise``, ``neighbors``, ``threshold``,
        ``max_effective_weight``, ``quantize`` and ``threat_model`` at once, as an
        :class:`AverageSettings` (the way every aggregation built on this one passes them);
        those options must then be left at their defaults.
    budget
        With noise: a :class:`~dpquantile.PrivacyBudget` charged the planned survivors' event
        before any client builds its row (:class:`~dpquantile.BudgetExceededError` leaves the
        budget and the clients untouched); the average is then withheld below the planned
        survivors (:class:`secagg.TooFewSurvivorsError`), so the charge bounds the release.
    weight_floor
        A public lower bound on every client's weight (all clients' βᵢ ∈ [floor, cap], as the
        Weiszfeld weights 1/max(ν, ‖z − wᵢ‖) under DP). With noise, the released weight sum is
        clamped to [floor·|S|, cap·|S|] before the division — post-processing of the noisy
        release, so no privacy cost, and a noisy Σβᵢ ≤ 0 no longer withholds the average.
        Ignored without noise (the exact sum already lies in that range).

    Returns
    -------
    AverageResult

    Raises
    ------
    ValueError
        On a shape mismatch, a negative weight, or when every weight is zero.
    secagg.HeadroomError
        If ``bits`` cannot hold the sum (the message names the bits needed).
    secagg.TooFewSurvivorsError
        If too few clients remain for the threshold (the round should be skipped).
    ZeroWeightSumError, EffectiveWeightError
        When the released weight sum is not positive, or the privacy condition fails.

    Examples
    --------
    >>> vectors = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [float("nan"), 0.0]]
    >>> result = secure_weighted_average(vectors, [1.0, 1.0, 2.0, 1.0], clip=2.0, seed=3)
    >>> np.round(result.average, 6).tolist(), result.rejected, result.survivors
    ([0.75, 0.75], (3,), (0, 1, 2))
    >>> exact = secure_weighted_average(vectors, [1.0, 1.0, 2.0, 1.0], clip=2.0, secure=False)
    >>> bool(np.abs(exact.average - result.average).max() < 1e-6)
    True
    """
    options = AverageSettings(
        bits=bits,
        clip=clip,
        noise=noise,
        neighbors=neighbors,
        threshold=threshold,
        max_effective_weight=max_effective_weight,
        quantize=quantize,
        threat_model=threat_model,
    )
    if settings is None:
        settings = options
    elif not isinstance(settings, AverageSettings):
        raise TypeError(f"settings must be AverageSettings; got {type(settings).__name__}")
    elif options != _DEFAULT_SETTINGS:
        raise ValueError(
            "give settings or the individual options (bits, clip, noise, neighbors, threshold, "
            "max_effective_weight, quantize, threat_model), not both"
        )
    return _run(
        vectors,
        weights,
        settings=settings,
        weight_cap=weight_cap,
        extras=extras,
        extra_bounds=extra_bounds,
        secure=secure,
        seed=seed,
        dropouts=dropouts,
        budget=budget,
        weight_floor=weight_floor,
    )


class SecureAverageSession:
    """Several secure averages of the same n clients over one key setup (a :class:`secagg.Session`).

    Setup (identities, key agreement, Shamir shares) happens once, at the first average; each
    further average costs two or three message rounds. Membership only shrinks: a client that
    does not complete an average (dropped, or rejected for a non-finite input) is out of every
    later one. ``iterate`` — the public broadcast before an average (a model, a Weiszfeld
    centre; :meth:`protocols.aggregation.CallPlan.encode`) — is bound into that sum
    (``secagg/malicious_security.md`` §5). ``secure=False`` emulates the same membership in plain
    numpy, so both paths fail and exclude clients alike (exactly on the complete graph; on a
    SecAgg+ graph the secure server also drops members left with fewer than t neighbours, which
    the emulation does not model).

    Parameters
    ----------
    num_clients
        n.
    sums
        The most averages the session may run (1 to 255). Each adds to the setup two 32-byte
        commitments per client (seed, recovery key), two Shamir shares (72 bytes) and a
        64-byte pair-key escrow per client and neighbour, whether or not the average runs.
    settings
        :class:`AverageSettings` of every average.
    secure
        ``False``: the plain emulation.
    seed
        Seed of the session's secure sums (the rounding streams take each call's own seed).

    Examples
    --------
    >>> session = SecureAverageSession(4, sums=2, settings=AverageSettings(clip=10.0), seed=0)
    >>> first = session.average([[1.0], [2.0], [3.0], [4.0]], [1, 1, 1, 1], weight_cap=1.0,
    ...                         seed=1, dropouts={"masked_input": [3]})
    >>> round(float(first.average[0]), 4), session.members
    (2.0, (0, 1, 2))
    >>> second = session.average([[1.0], [2.0], [3.0], [4.0]], [1, 1, 1, 1], weight_cap=1.0,
    ...                          seed=2, iterate=b"centre 2")
    >>> round(float(second.average[0]), 4), second.survivors, session.remaining
    (2.0, (0, 1, 2), 0)
    """

    def __init__(
        self,
        num_clients: int,
        *,
        sums: int,
        settings: AverageSettings | None = None,
        secure: bool = True,
        seed: int | None = None,
    ) -> None:
        self.num_clients = check_int("num_clients", num_clients, minimum=2)
        self.sums = check_int("sums", sums, minimum=1)
        if self.sums > 255:
            raise ValueError(f"sums must lie in [1, 255]; got {sums}")
        self.settings = AverageSettings() if settings is None else settings
        if not isinstance(self.settings, AverageSettings):
            raise TypeError(f"settings must be AverageSettings; got {type(settings).__name__}")
        if not isinstance(secure, bool):
            raise TypeError(f"secure must be a bool; got {type(secure).__name__}")
        self.secure = secure
        self.seed = check_seed(seed)
        self.threshold = self.settings.threshold or default_threshold(
            self.num_clients, self.settings.neighbors
        )
        self._members: set[int] = set(range(self.num_clients))
        self._advertised: set[int] = set(self._members)  # set by the first average
        self._done = 0
        self._dimension: int | None = None
        self._wire: int | None = None  # the sums' dimension (padded when rotated)
        self._session: Session | None = None
        self._aborted: str | None = None

    @property
    def members(self) -> tuple[int, ...]:
        """Clients still in the session (all of them before the first average)."""
        return tuple(sorted(self._members))

    @property
    def dimension(self) -> int | None:
        """d + 1 + k of the session's latest average (``None`` before the first)."""
        return self._dimension

    @property
    def remaining(self) -> int:
        """How many more averages the session can run."""
        return 0 if self._aborted is not None else self.sums - self._done

    def average(
        self,
        vectors: ArrayLike,
        weights: ArrayLike,
        *,
        weight_cap: float | None = None,
        extras: ArrayLike | None = None,
        extra_bounds: Sequence[float] = (),
        seed: int | None = None,
        dropouts: Mapping[str, Iterable[int]] | None = None,
        iterate: bytes = b"",
        budget: PrivacyBudget | None = None,
        weight_floor: float | None = None,
        settings: AverageSettings | None = None,
    ) -> AverageResult:
        """The session's next secure average (arguments as for :func:`secure_weighted_average`).

        The averages of a session may differ in dimension d + 1 + k (a one-entry count, then a
        model) and, through ``settings`` (``None``: the session's), in clip, noise and
        denominator — not in what the key setup fixed: the ring (``bits``), the graph
        (``neighbors``, ``threshold``) and the threat model. Dropouts at a key phase
        (``advertise_keys``, ``share_keys``) after the first average mean the client is gone
        before its masked input. With ``budget`` (noise only), the average's worst-case event is
        spent before any noise is drawn, and fewer masked inputs than the noise was planned for
        abort the session with nothing released.

        Raises
        ------
        secagg.LocalProtocolError
            If the session has no average left or aborted.
        secagg.TooFewSurvivorsError
            If too few members remain; the session aborts.
        ValueError
            If ``settings`` change the ring, the graph or the threat model.
        """
        if not isinstance(iterate, bytes):
            raise TypeError(f"iterate must be bytes; got {type(iterate).__name__}")
        if settings is None:
            settings = self.settings
        elif not isinstance(settings, AverageSettings):
            raise TypeError(f"settings must be AverageSettings; got {type(settings).__name__}")
        else:
            fixed = ("bits", "neighbors", "threshold", "threat_model")
            changed = [f for f in fixed if getattr(settings, f) != getattr(self.settings, f)]
            if changed:
                raise ValueError(
                    f"an average of a session cannot change what its key setup fixed: "
                    f"{', '.join(changed)}"
                )
        return _run(
            vectors,
            weights,
            settings=settings,
            weight_cap=weight_cap,
            extras=extras,
            extra_bounds=extra_bounds,
            secure=self.secure,
            seed=seed,
            dropouts=dropouts,
            session=self,
            iterate=iterate,
            budget=budget,
            weight_floor=weight_floor,
        )

    def sum_vectors(
        self,
        vectors: LazyInputs,
        dropouts: Mapping[str, Iterable[int]] | None = None,
        min_inputs: int = 1,
        *,
        participants: Sequence[int] | None = None,
        iterate: bytes = b"",
    ) -> tuple[NDArray[np.int64], int]:
        """The session's next sum of ring vectors built elsewhere (a DP histogram): a
        :data:`dpquantile.SumRunner`, so :func:`dpquantile.dp_quantile` can run its histogram as
        one sum of this session, keys shared with the averages around it.

        Parameters
        ----------
        vectors
            One lazy integer vector per participant (their ring is the session's ``bits``).
        dropouts
            Phase → indices into ``vectors`` (as :func:`secagg.secure_sum`).
        min_inputs
            Fewer clients in the total abort the session with nothing released.
        participants
            The session's client index of each row of ``vectors`` (default: all, in order);
            the session's other members count as gone before their masked input.
        iterate
            What the server broadcasts for this sum (its public parameters).

        Returns
        -------
        (ndarray, int)
            The total modulo 2^bits as centred integers, and how many clients are in it.

        Raises
        ------
        secagg.LocalProtocolError
            If the session has no sum left or aborted.
        secagg.TooFewSurvivorsError
            If too few clients remain or fewer than ``min_inputs`` are in the total; the
            session aborts with nothing released.

        Examples
        --------
        >>> from secagg import LazyInputs
        >>> class Counts(LazyInputs):
        ...     def row(self, index):
        ...         return np.array([1, index], dtype=np.int64)
        >>> session = SecureAverageSession(4, sums=2, settings=AverageSettings(clip=1.0), seed=0)
        >>> total, count = session.sum_vectors(Counts(4, 2), {"masked_input": [3]})
        >>> total.tolist(), count, session.members
        ([3, 3], 3, (0, 1, 2))
        """
        if not isinstance(vectors, LazyInputs):
            raise TypeError(f"vectors must be LazyInputs; got {type(vectors).__name__}")
        self._check_call(self.num_clients, vectors.dimension, vectors.dimension)
        rows = list(range(self.num_clients)) if participants is None else list(participants)
        if len(rows) != len(vectors) or len(set(rows)) != len(rows):
            raise ValueError(
                f"participants must name {len(vectors)} distinct clients, one per vector"
            )
        if any(not 0 <= c < self.num_clients for c in rows):
            raise ValueError(f"participants must lie in [0, {self.num_clients})")
        local = parse_dropouts(dropouts, len(vectors))
        phase_of = {rows[j]: phase for j, phase in local.items()}
        session_dropouts = self._dropouts(phase_of, set(rows) & self._members)
        by_client = _ByClient(vectors, rows, self.num_clients)
        summed, result = self._sum(
            by_client if self.secure else None, session_dropouts, iterate, min_inputs
        )
        if result is not None:
            return result.centered(), len(summed)
        ring = Ring(self.settings.bits)
        total = ring.zeros(vectors.dimension)
        for client in summed:
            np.add(total, ring.reduce(by_client[client]), out=total)
        ring.normalize(total)
        return ring.centered(total), len(summed)

    # -- hooks used by _run -----------------------------------------------------------------

    def _check_call(self, num_clients: int, dimension: int, wire: int) -> None:
        if self._aborted is not None:
            raise LocalProtocolError(f"the session aborted: {self._aborted}")
        if self._done >= self.sums:
            raise LocalProtocolError(f"the session has run all its {self.sums} averages")
        if num_clients != self.num_clients:
            raise ValueError(
                f"the session has {self.num_clients} clients; this average has {num_clients}"
            )
        self._dimension = dimension
        self._wire = wire

    def _dropouts(
        self, phase_of: Mapping[int, str], participants: set[int]
    ) -> dict[str, list[int]]:
        """This sum's dropouts in client indices: rejected members drop before masking."""
        later = self._done > 0
        out: dict[str, list[int]] = {}
        for client, phase in phase_of.items():
            if client not in participants:
                continue
            setup = phase in (Phase.ADVERTISE_KEYS.value, Phase.SHARE_KEYS.value)
            name = Phase.MASKED_INPUT.value if later and setup else phase
            out.setdefault(name, []).append(client)
        # A client rejected at the first average never joins the session (it advertises no
        # keys, as on the per-sum path); one rejected later is gone before its masked input.
        rejected = sorted((self._members - participants) - set(phase_of))
        if rejected:
            phase = Phase.MASKED_INPUT if later else Phase.ADVERTISE_KEYS
            out.setdefault(phase.value, []).extend(rejected)
        return out

    def _outcome_dropouts(self, dropouts: Mapping[str, Iterable[int]]) -> dict[str, list[int]]:
        """The whole-session view of this sum for :func:`secagg.plain_outcome`: clients that
        never advertised drop before advertising, the others out of the session before their
        masked input."""
        out = {phase: list(indices) for phase, indices in dropouts.items()}
        if self._done == 0:
            return out
        never = set(range(self.num_clients)) - self._advertised
        left = self._advertised - self._members
        for phase, extra in ((Phase.ADVERTISE_KEYS, never), (Phase.MASKED_INPUT, left)):
            if extra:
                out[phase.value] = sorted(set(out.get(phase.value, ())) | extra)
        return out

    def _abort(self, reason: str) -> None:
        self._aborted = reason
        if self._session is not None:
            self._session.close()

    def _sum(
        self,
        inputs: LazyInputs | None,
        dropouts: Mapping[str, Iterable[int]],
        iterate: bytes,
        min_inputs: int = 1,
    ) -> tuple[tuple[int, ...], SecureSumResult | None]:
        """Run this average's sum; return who is in it (and the secure result).

        Fewer than ``min_inputs`` masked inputs abort the session with nothing released.
        """
        result: SecureSumResult | None = None
        if self._done == 0:
            setup = (Phase.ADVERTISE_KEYS.value, Phase.SHARE_KEYS.value)
            self._advertised -= set(dropouts.get(setup[0], ()))
        if self.secure:
            assert inputs is not None
            if self._session is None:
                assert self._wire is not None
                self._session = Session(
                    self.num_clients,
                    self._wire,
                    iterations=self.sums,
                    modulus_bits=self.settings.bits,
                    threshold=self.threshold,
                    neighbors=self.settings.neighbors,
                    threat_model=self.settings.threat_model,
                    seed=self.seed,
                )
            try:
                result = self._session.sum(
                    inputs, iterate=iterate, dropouts=dropouts, min_inputs=min_inputs
                )
            except TooFewSurvivorsError as error:
                self._aborted = str(error)
                raise
            summed = result.survivors
            self._members = set(self._session.members)
        else:
            gone = {i for indices in dropouts.values() for i in indices}
            summed = tuple(sorted(set(summed_clients(dropouts, self.num_clients)) & self._members))
            if len(summed) < min_inputs:
                reason = (
                    f"only {len(summed)} masked inputs arrived; the release needs at least "
                    f"min_inputs={min_inputs} (the survivors its noise was planned for)"
                )
                self._abort(reason)
                raise TooFewSurvivorsError(reason)
            completed = set(summed) - {
                i
                for phase in (Phase.CONSISTENCY_CHECK.value, Phase.UNMASK.value)
                for i in dropouts.get(phase, ())
            }
            self._members = (self._members - gone) & completed
        self._done += 1
        return summed, result
