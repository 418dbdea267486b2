"""Distributed DP quantile of client values: hierarchical histogram, discrete Gaussian, secure sum.

Each client encodes its (clipped) value as a hierarchical histogram vector (or a one-hot bin
vector), adds N_ℤ(0, σ²) to every coordinate, and the noisy vectors are summed with
:func:`secagg.secure_sum` (Pillutla et al., Δ-FL, Alg. 2). The server sees only the noisy sum;
it reads the CDF through the tree (or after least-squares consistency, Hay et al. 2010) and
returns the quantile. Privacy is the distributed discrete Gaussian of Kairouz, Liu, Steinke 2021
(Thm. 1) over the clients whose noise reached the sum — see ``quantile.md`` beside this module.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpquantile.accounting import DistributedDiscreteGaussian, Neighbouring, PrivacyBudget
from dpquantile.histogram import QUANTILE_READERS, HistogramTree, QuantileReader
from dpquantile.mechanisms import DistributedDiscreteGaussianMechanism
from secagg import (
    HeadroomError,
    KeystreamRandom,
    LazyInputs,
    Session,
    TooFewSurvivorsError,
    check_headroom,
    parse_dropouts,
    required_bits,
)
from secagg.graph_parameters import secagg_plus_parameters
from secagg.runner import summed_clients

__all__ = [
    "QuantileResult",
    "SumRunner",
    "dp_quantile",
    "histogram_sensitivities",
    "quantile_mechanism",
    "quantile_noise_sigma",
    "quantile_scale",
]

logger = logging.getLogger(__name__)

Mechanism = Literal["tree", "flat"]
Adjacency = Neighbouring  # the neighbouring relation of the histogram's guarantee
Sampler = Literal["fast", "exact"]

_MIN_GRID_SIGMA = 2.0  # per-client σ in grid units where KLS21's τ is negligible (τ < 1e-7)

SumRunner = Callable[
    [LazyInputs, Mapping[str, Iterable[int]] | None, int], tuple[NDArray[np.int64], int]
]
"""Runs the histogram's sum elsewhere — for example as one sum of a longer session
(:meth:`protocols.aggregation.SecureAverageSession.sum_vectors`): called with the clients' lazy
ring vectors, the dropouts and the least number of inputs to release (fewer must raise
:class:`secagg.TooFewSurvivorsError` with nothing released); returns the total modulo 2^b as
centred integers and the number of clients in it."""


@dataclass(frozen=True, slots=True)
class QuantileResult:
    """A DP quantile estimate with the privacy it cost.

    Attributes
    ----------
    estimate
        The q-quantile estimate.
    q
        The quantile level asked for.
    rho
        ρ actually delivered: the zCDP parameter of ``event`` (the noise of the clients that
        survived). Below or equal to ``rho_target`` unless fewer clients than planned survived.
    rho_target
        The ρ the noise was calibrated for, with ``planned_survivors`` clients.
    event
        The privacy event of the release (KLS21 distributed discrete Gaussian).
    sigma
        Each client's noise σ, in grid units (counts × ``scale``).
    scale
        The integer each client's count was multiplied by before noise was added.
    survivors, dropped, planned_survivors
        Clients in the sum, clients not in it, and the minimum the noise was calibrated for.
    secure
        Whether the sum ran through the real secure-sum protocol (``False``: plain sum of the
        identical noisy vectors, no cryptography).
    released
        The noisy sum the server saw, in grid units (scaled counts per tree node, leaves first,
        or per bin).
    cdf
        The cumulative counts H(1 … b) the estimate was read from.
    clipped
        Values outside [lower, upper], clipped before encoding (a simulation diagnostic: the
        protocol itself does not reveal it).
    """

    estimate: float
    q: float
    rho: float
    rho_target: float
    event: DistributedDiscreteGaussian
    sigma: float
    scale: int
    mechanism: str
    consistency: bool
    bins: int
    branching: int
    survivors: int
    dropped: int
    planned_survivors: int
    secure: bool
    modulus_bits: int
    clipped: int
    released: NDArray[np.int64]
    cdf: NDArray[np.float64]
    seed: int | None

    @property
    def privacy_shortfall(self) -> bool:
        """Whether fewer clients than planned survived, so ρ exceeds the target."""
        return self.rho > self.rho_target * (1 + 1e-12)


def histogram_sensitivities(
    tree: HistogramTree, mechanism: Mechanism, adjacency: Adjacency, scale: int = 1
) -> tuple[float, float]:
    """(Δ₁, Δ₂) of one client's histogram vector, in grid units.

    A client's vector has ``scale`` at one node per level (L levels; flat: one level). Removing
    a client changes L coordinates by s: Δ₁ = sL, Δ₂ = s√L; replacing it changes up to 2L
    coordinates (REFERENCES §2, with s = 1).

    Examples
    --------
    >>> tree = HistogramTree(8, 0.0, 1.0)  # levels of 8, 4 and 2 nodes
    >>> histogram_sensitivities(tree, "tree", "add_remove"), tree.levels
    ((3.0, 1.7320508075688772), 3)
    """
    levels = tree.levels if mechanism == "tree" else 1
    changed = levels if adjacency == "add_remove" else 2 * levels
    return float(scale * changed), scale * math.sqrt(changed)


def quantile_scale(
    rho: float,
    *,
    num_clients: int,
    bins: int,
    mechanism: Mechanism = "tree",
    branching: int = 2,
    adjacency: Adjacency = "replace_one",
) -> int:
    """The integer scale s of the counts that keeps each client's noise σ at ≥ 2 grid units.

    KLS21's bound for a sum of discrete Gaussians needs the per-client σ (in grid units) well
    above 1/2: below ≈ 1 its τ term dominates and forces more noise than the privacy target
    needs. Scaling every count by s (the integer analogue of KLS21's granularity 1/γ) scales
    the sensitivity by s, so the ideal per-client σ is s·Δ₂/√(2nρ) while the noise *relative to
    the counts* stays Δ₂/√(2nρ), the central-DP level. s is the smallest integer making that
    ideal σ at least 2.

    Examples
    --------
    >>> quantile_scale(0.125, num_clients=10_000, bins=64)  # ⌈2·√(2·10⁴·0.125)/√12⌉
    29
    >>> quantile_scale(0.01, num_clients=10, bins=64)  # already ≥ 2 grid units: no scaling
    1
    """
    tree = HistogramTree(bins, 0.0, 1.0, branching)
    _, l2 = histogram_sensitivities(tree, mechanism, adjacency)
    return max(1, math.ceil(_MIN_GRID_SIGMA * math.sqrt(2 * num_clients * rho) / l2))


def quantile_noise_sigma(
    rho: float,
    *,
    num_clients: int,
    bins: int,
    mechanism: Mechanism = "tree",
    branching: int = 2,
    adjacency: Adjacency = "replace_one",
    scale: int = 1,
) -> float:
    """The smallest per-client σ (in grid units: counts × ``scale``) giving ρ-zCDP.

    Uses the KLS21 Thm. 1 bound (with its τ term) for ``num_clients`` clients each adding
    N_ℤ(0, σ²); σ ≥ 1/2 as that bound requires.

    Examples
    --------
    >>> round(quantile_noise_sigma(0.5, num_clients=100, bins=64), 3)  # τ keeps σ above ~0.75
    0.752
    >>> round(quantile_noise_sigma(0.5, num_clients=100, bins=64, scale=10), 3)  # 10·√(12/100)
    3.464
    """
    return quantile_mechanism(
        rho,
        num_clients=num_clients,
        bins=bins,
        mechanism=mechanism,
        branching=branching,
        adjacency=adjacency,
        scale=scale,
    ).sigma


def quantile_mechanism(
    rho: float,
    *,
    num_clients: int,
    bins: int,
    mechanism: Mechanism = "tree",
    branching: int = 2,
    adjacency: Adjacency = "replace_one",
    scale: int = 1,
    sampler: Sampler = "fast",
) -> DistributedDiscreteGaussianMechanism:
    """The distributed discrete Gaussian of a DP histogram of ``num_clients`` clients at ρ.

    The one calibration of the DP quantile (:func:`dp_quantile` and the Flower strategy use it):
    sensitivities :func:`histogram_sensitivities` for the counts × ``scale``, σ the smallest
    meeting ρ-zCDP under KLS21 Thm. 1 (with its τ term) if ``num_clients`` contribute.

    Examples
    --------
    >>> noise = quantile_mechanism(0.5, num_clients=100, bins=64, scale=10)
    >>> round(noise.sigma, 3), noise.neighbouring, noise.dimension
    (3.464, 'replace_one', 126)
    """
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ValueError(f"scale must be a positive integer; got {scale!r}")
    tree = HistogramTree(bins, 0.0, 1.0, branching)
    l1, l2 = histogram_sensitivities(tree, mechanism, adjacency, scale)
    return DistributedDiscreteGaussianMechanism.calibrated(
        rho,
        planned_survivors=num_clients,
        l1_sensitivity=l1,
        l2_sensitivity=l2,
        dimension=tree.dimension if mechanism == "tree" else tree.bins,
        neighbouring=adjacency,
        sampler=sampler,
    )


class _NoisyVectors(LazyInputs):
    """Client i's encoding plus its noise, built when read (O(d) memory for any n)."""

    def __init__(
        self,
        bin_index: NDArray[np.int64],
        tree: HistogramTree,
        mechanism: Mechanism,
        noise: DistributedDiscreteGaussianMechanism,
        *,
        root: KeystreamRandom,
        scale: int,
    ) -> None:
        super().__init__(int(bin_index.size), tree.dimension if mechanism == "tree" else tree.bins)
        self.bin_index, self.tree, self.mechanism = bin_index, tree, mechanism
        self.noise, self.root, self.scale = noise, root, scale

    def row(self, index: int) -> NDArray[np.int64]:
        vector = self.noise.noise(self.root.spawn(b"noise/%d" % index))
        j = int(self.bin_index[index])
        if self.mechanism == "flat":
            vector[j] += self.scale
            return vector
        level_offset = 0
        for size in self.tree.level_sizes:
            vector[level_offset + j // (self.tree.bins // size)] += self.scale
            level_offset += size
        return vector


def dp_quantile(
    values: ArrayLike,
    q: float,
    *,
    lower: float,
    upper: float,
    bins: int = 64,
    rho: float,
    mechanism: Mechanism = "tree",
    consistency: bool = True,
    branching: int = 2,
    interpolate: bool = True,
    secure: bool = True,
    seed: int | None = None,
    min_survivors: int | None = None,
    refuse_shortfall: bool = False,
    dropouts: Mapping[str, Iterable[int]] | None = None,
    neighbors: int | Literal["auto"] | None = "auto",
    threshold: int | None = None,
    modulus_bits: int | None = None,
    adjacency: Adjacency = "replace_one",
    sampler: Sampler = "fast",
    scale: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    budget: PrivacyBudget | None = None,
    reader: QuantileReader = "first",
    sum_runner: SumRunner | None = None,
) -> QuantileResult:
    """The q-quantile of the clients' values under ρ-zCDP, through the secure sum.

    Parameters
    ----------
    values
        One value per client.
    q
        Quantile level in (0, 1) (Δ-FL uses 1 − θ).
    lower, upper
        The histogram range; values outside are clipped to it (and counted in the result).
    bins
        b, a power of ``branching``.
    rho
        Target ρ (zCDP) of the release, for ``min_survivors`` clients.
    mechanism
        ``"tree"`` (hierarchical histogram, the paper's) or ``"flat"`` (one-hot bins).
    consistency
        For the tree: least-squares consistency post-processing (Hay et al. 2010) before reading
        the CDF; ``False`` reads it through the dyadic partition as the paper does.
    branching
        k of the tree (2 in the paper).
    interpolate
        Interpolate inside the selected bin (``False``: return its right edge, as the paper).
    reader
        ``"first"``: the first bin whose noisy CDF reaches q·m (the paper's); ``"isotonic"``:
        the same on the CDF's non-decreasing least-squares fit, which a noise spike cannot
        cross early (:meth:`HistogramTree.quantile_from_cdf`). Post-processing: no cost.
    secure
        Run the real secure-sum protocol; ``False`` adds the identical noise and sums in plain
        numpy (for fast experiments; the result says so).
    seed
        Seed of all randomness (noise, protocol); ``None`` for fresh cryptographic randomness.
    min_survivors
        The number of surviving clients the noise is calibrated for (default: all). If fewer
        survive, the result reports the larger ρ actually delivered — unless
        ``refuse_shortfall``.
    refuse_shortfall
        With fewer survivors than ``min_survivors``, release nothing: the server refuses to
        unmask (:class:`secagg.TooFewSurvivorsError`), so the release never exceeds ``rho``.
    dropouts
        As in :func:`secagg.secure_sum`: phase → client indices that drop before that phase.
    neighbors, threshold
        Secure-sum graph: ``"auto"`` picks SecAgg+ parameters with
        :func:`secagg.graph_parameters.secagg_plus_parameters`; ``None`` is the complete graph.
    modulus_bits
        b of M = 2^b; default the smallest for which the noisy sum wraps with probability
        ≤ 2^-40 (:data:`dpquantile.TAIL_FAILURE_PROBABILITY`). A smaller value raises
        :class:`secagg.HeadroomError`.
    adjacency
        ``"replace_one"`` (the number of clients is public; default) or ``"add_remove"``.
    sampler
        ``"fast"`` (alias-table sampler, its TV distance charged in the event) or ``"exact"``.
    scale
        Each client contributes ``scale`` (not 1) per level, so its noise can stay ≥ 2 grid
        units where KLS21's bound is tight; default :func:`quantile_scale`. ``1`` is the paper's.
    progress
        Optional callback ``(phase, done, total)`` for the secure sum.
    budget
        A :class:`~dpquantile.PrivacyBudget` to spend the release from, before any noise is
        drawn (:class:`~dpquantile.BudgetExceededError` leaves it and the clients untouched).
        It is charged the planned survivors' event, and the release is then withheld below
        them (``refuse_shortfall`` is implied), so what is charged bounds what is released.
    sum_runner
        Run the histogram's sum with this :data:`SumRunner` (one sum of a caller's session,
        which fixes the ring: give its ``modulus_bits``) instead of a secure sum of its own;
        ``secure``, ``neighbors``, ``threshold`` and ``progress`` are then the session's.

    Returns
    -------
    QuantileResult

    Raises
    ------
    ValueError
        q outside (0, 1), lower ≥ upper, NaN values, b not a power of the branching factor,
        ρ ≤ 0, unknown mechanism, fewer than 2 values (clients).
    secagg.TooFewSurvivorsError
        If too few clients survive for the secure sum's threshold.

    Examples
    --------
    >>> import numpy as np
    >>> losses = np.random.default_rng(0).chisquare(3, size=200)
    >>> result = dp_quantile(losses, 0.9, lower=0.0, upper=16.0, bins=32, rho=0.5, seed=1,
    ...                      secure=False)
    >>> round(float(np.mean(losses <= result.estimate)), 2), result.secure, result.rho <= 0.5
    (0.92, False, True)
    """
    if not (isinstance(q, int | float) and 0.0 < q < 1.0):
        raise ValueError(f"q must lie in (0, 1); got {q!r}")
    if not (isinstance(rho, int | float) and math.isfinite(rho) and rho > 0):
        raise ValueError(f"rho must be a positive finite float; got {rho!r}")
    if reader not in QUANTILE_READERS:
        raise ValueError(f"reader must be one of {', '.join(QUANTILE_READERS)}; got {reader!r}")
    if mechanism not in ("tree", "flat"):
        raise ValueError(f"mechanism must be 'tree' or 'flat'; got {mechanism!r}")
    if adjacency not in ("replace_one", "add_remove"):
        raise ValueError(f"adjacency must be 'replace_one' or 'add_remove'; got {adjacency!r}")
    if sampler not in ("fast", "exact"):
        raise ValueError(f"sampler must be 'fast' or 'exact'; got {sampler!r}")
    tree = HistogramTree(bins, lower, upper, branching)
    bin_index, clipped = tree.bin_index(values)
    n = int(bin_index.size)
    if n < 2:
        raise ValueError(f"a distributed quantile needs at least 2 clients; got {n}")
    planned = n if min_survivors is None else int(min_survivors)
    if not 1 <= planned <= n:
        raise ValueError(f"min_survivors must lie in [1, {n}]; got {min_survivors}")

    shape = {"bins": bins, "mechanism": mechanism, "branching": branching, "adjacency": adjacency}
    if scale is None:
        scale = quantile_scale(rho, num_clients=planned, **shape)  # type: ignore[arg-type]
    noise = quantile_mechanism(
        rho,
        num_clients=planned,
        scale=scale,
        sampler=sampler,
        **shape,  # type: ignore[arg-type]
    )
    sigma, dimension = noise.sigma, noise.dimension
    noise_bound = noise.tail_bound(n)  # the sum wraps with probability ≤ 2^-40
    if budget is not None:
        if not isinstance(budget, PrivacyBudget):
            raise TypeError(f"budget must be a PrivacyBudget; got {type(budget).__name__}")
        refuse_shortfall = True
    needed = required_bits(n, scale, noise_bound)
    if needed > 64 and modulus_bits is None:
        raise HeadroomError(
            f"rho = {rho:.4g} asks for a grid {float(scale):.3g} times finer than one count, with "
            f"{n} clients a {needed}-bit ring; the secure sum has at most 64 bits: "
            "use a smaller rho (epsilon)",
            required_bits=needed,
        )
    if sum_runner is not None and modulus_bits is None:
        raise ValueError("a sum_runner sums in its session's ring: give its modulus_bits")
    bits = needed if modulus_bits is None else int(modulus_bits)
    check_headroom(n, scale, bits, noise_bound)

    root = KeystreamRandom(seed, label=b"dpquantile/quantile")
    vectors = _NoisyVectors(bin_index, tree, mechanism, noise, root=root, scale=scale)
    session: Session | None = None
    if secure and sum_runner is None:
        if neighbors == "auto":
            try:
                params = secagg_plus_parameters(n)
                graph_degree: int | None = None if params.complete_graph else params.degree
                threshold = threshold if threshold is not None else params.threshold
            except ValueError:
                graph_degree = None
        else:
            graph_degree = neighbors
        session = Session(  # validates the sum's parameters before the budget is charged
            n,
            dimension,
            iterations=1,
            modulus_bits=bits,
            threshold=threshold,
            neighbors=graph_degree,
            seed=None if seed is None else _derived_seed(root),
            progress=progress,
            min_inputs=planned if refuse_shortfall else 1,
        )
    parse_dropouts(dropouts, n)  # validated now: a bad dropout spec must cost no budget
    if budget is not None:
        budget.spend(noise.worst_case_event(n))  # before any client draws its noise
    if sum_runner is not None:
        released, survivors = sum_runner(vectors, dropouts, planned if refuse_shortfall else 1)
    elif session is not None:
        summed = session.sum(vectors, dropouts=dropouts)
        released = summed.centered()
        survivors = len(summed.survivors)
    else:
        members = summed_clients(dropouts, n)
        if refuse_shortfall and len(members) < planned:
            raise TooFewSurvivorsError(
                f"only {len(members)} of the {planned} planned clients survived: nothing released"
            )
        total = np.zeros(dimension, dtype=np.int64)
        for i in members:
            total += vectors[i]
        released = _centered_modulo(total, bits)  # what the secure sum would return
        survivors = len(members)

    event = noise.event(survivors)
    if event.rho > rho:
        logger.warning(
            "only %d of the %d planned clients survived: the release is %.4g-zCDP, not %.4g",
            survivors,
            planned,
            event.rho,
            rho,
        )
    estimate, cdf = tree.estimate(
        released / scale,
        float(survivors),
        q,
        mechanism=mechanism,
        consistency=consistency,
        interpolate=interpolate,
        reader=reader,
    )
    return QuantileResult(
        estimate=estimate,
        q=float(q),
        rho=event.rho,
        rho_target=float(rho),
        event=event,
        sigma=sigma,
        scale=scale,
        mechanism=mechanism,
        consistency=consistency and mechanism == "tree",
        bins=bins,
        branching=branching,
        survivors=survivors,
        dropped=n - survivors,
        planned_survivors=planned,
        secure=secure,
        modulus_bits=bits,
        clipped=clipped,
        released=released,
        cdf=cdf,
        seed=seed,
    )


def _derived_seed(root: KeystreamRandom) -> int:
    """A reproducible seed for the secure sum, domain-separated from the noise streams."""
    return root.derive_seed(b"secagg", size=8)


def _centered_modulo(total: NDArray[np.int64], bits: int) -> NDArray[np.int64]:
    """Residues modulo 2^b as centred representatives in [−2^(b−1), 2^(b−1))."""
    if bits >= 63:  # an int64 sum of counts and noise cannot reach 2^62
        return total
    half = 1 << (bits - 1)
    return ((total + half) % (2 * half)) - half
