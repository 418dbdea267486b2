"""Hierarchical histograms (tree aggregation) over b bins: encoding, consistency, CDF, quantile.

A client's value falls in one of b = k^L bins over [lower, upper]. Its *hierarchical* encoding
holds one count per tree level r = 0 … L − 1 (leaves first): a 1 at the level-r node containing
its bin, zeros elsewhere. The root is skipped because its count, the number of clients, is public
(Pillutla et al., Δ-FL, §4.2). The *flat* encoding is the one-hot vector of its bin.

The server reads the cumulative count H(j) of bins 1 … j through the maximal k-adic partition of
[1, j] — at most (k − 1)·L nodes instead of j leaves (Δ-FL §4.2 for k = 2) — and returns the
smallest j with H(j) ≥ q·m. :func:`make_consistent` is the least-squares projection of a noisy
tree onto consistent trees (each parent equals the sum of its children; Hay, Rastogi, Miklau,
Suciu 2010, Thm. 3), after which every partition gives the same CDF: the running sum of leaves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["QUANTILE_READERS", "HistogramTree", "QuantileReader", "isotonic_cdf"]

QuantileReader = Literal["first", "isotonic"]
QUANTILE_READERS: tuple[str, ...] = get_args(QuantileReader)
"""How a quantile is read from a (noisy) CDF: the first crossing of q·m, or the first crossing
of its non-decreasing least-squares fit."""


@dataclass(frozen=True, slots=True)
class HistogramTree:
    """The layout of a k-ary hierarchical histogram with ``bins`` leaves over [lower, upper].

    Parameters
    ----------
    bins
        b, a power of ``branching`` (at least ``branching``).
    lower, upper
        The value range; values outside are clipped to it.
    branching
        k ≥ 2 (the paper uses 2).

    Examples
    --------
    >>> tree = HistogramTree(bins=8, lower=0.0, upper=1.0)
    >>> tree.levels, tree.dimension, tree.level_sizes
    (3, 14, (8, 4, 2))
    >>> tree.encode([0.0, 0.3, 0.99]).sum(axis=0).tolist()
    [1, 0, 1, 0, 0, 0, 0, 1, 1, 1, 0, 1, 2, 1]
    """

    bins: int
    lower: float
    upper: float
    branching: int = 2

    def __post_init__(self) -> None:
        for name in ("bins", "branching"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise TypeError(f"{name} must be an int; got {type(value).__name__}")
        if self.branching < 2:
            raise ValueError(f"branching must be ≥ 2; got {self.branching}")
        levels, size = 0, 1
        while size < self.bins:
            size *= self.branching
            levels += 1
        if size != self.bins or self.bins < self.branching:
            raise ValueError(
                f"bins must be a power of the branching factor {self.branching} "
                f"(e.g. {self.branching ** max(levels, 1)}); got {self.bins}"
            )
        lower, upper = float(self.lower), float(self.upper)
        if not (np.isfinite(lower) and np.isfinite(upper)) or lower >= upper:
            raise ValueError(f"need finite lower < upper; got [{self.lower}, {self.upper}]")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "bins", int(self.bins))
        object.__setattr__(self, "branching", int(self.branching))

    @property
    def levels(self) -> int:
        """L = log_k b: the levels below the (skipped) root."""
        levels, size = 0, 1
        while size < self.bins:
            size *= self.branching
            levels += 1
        return levels

    @property
    def level_sizes(self) -> tuple[int, ...]:
        """Number of nodes at each level, leaves first (b, b/k, …, k)."""
        return tuple(self.bins // self.branching**r for r in range(self.levels))

    @property
    def dimension(self) -> int:
        """Length of a client's hierarchical vector: Σ_r b/k^r = k(b − 1)/(k − 1)."""
        return sum(self.level_sizes)

    @property
    def edges(self) -> NDArray[np.float64]:
        """The b + 1 bin edges l_0 < … < l_b."""
        return np.linspace(self.lower, self.upper, self.bins + 1)

    def bin_index(self, values: ArrayLike) -> tuple[NDArray[np.int64], int]:
        """The bin of each value (after clipping to [lower, upper]) and how many were clipped.

        Bins are half-open [l_j, l_{j+1}) except the last, which includes ``upper``.

        Raises
        ------
        ValueError
            On NaN values or a non 1-D input.

        Examples
        --------
        >>> HistogramTree(4, 0.0, 1.0).bin_index([-1.0, 0.25, 1.0, 7.0])
        (array([0, 1, 3, 3]), 2)
        """
        x = np.asarray(values, dtype=np.float64)
        if x.ndim != 1:
            raise ValueError(f"expected one value per client (1-D); got shape {x.shape}")
        if np.isnan(x).any():
            raise ValueError(f"NaN value at index {int(np.flatnonzero(np.isnan(x))[0])}")
        clipped = int(((x < self.lower) | (x > self.upper)).sum())
        scaled = (np.clip(x, self.lower, self.upper) - self.lower) / (self.upper - self.lower)
        return np.minimum((scaled * self.bins).astype(np.int64), self.bins - 1), clipped

    def encode(self, values: ArrayLike) -> NDArray[np.int64]:
        """Each value's hierarchical vector: an (n, dimension) 0/1 matrix, one 1 per level.

        Examples
        --------
        >>> HistogramTree(4, 0.0, 1.0).encode([0.6]).tolist()
        [[0, 0, 1, 0, 0, 1]]
        """
        index, _ = self.bin_index(values)
        out = np.zeros((index.size, self.dimension), dtype=np.int64)
        rows = np.arange(index.size)
        offset = 0
        for size in self.level_sizes:
            out[rows, offset + index // (self.bins // size)] = 1
            offset += size
        return out

    def encode_flat(self, values: ArrayLike) -> NDArray[np.int64]:
        """Each value's one-hot bin vector: an (n, bins) 0/1 matrix.

        Examples
        --------
        >>> HistogramTree(4, 0.0, 1.0).encode_flat([0.6]).tolist()
        [[0, 0, 1, 0]]
        """
        index, _ = self.bin_index(values)
        out = np.zeros((index.size, self.bins), dtype=np.int64)
        out[np.arange(index.size), index] = 1
        return out

    def counts(self, values: ArrayLike, *, flat: bool = False) -> NDArray[np.int64]:
        """The exact (noise-free) summed histogram: ``encode(values).sum(axis=0)`` in O(n + d).

        Examples
        --------
        >>> tree = HistogramTree(4, 0.0, 1.0)
        >>> tree.counts([0.1, 0.6, 0.7]).tolist(), tree.counts([0.1, 0.6, 0.7], flat=True).tolist()
        ([1, 0, 2, 0, 1, 2], [1, 0, 2, 0])
        """
        index, _ = self.bin_index(values)
        leaves = np.bincount(index, minlength=self.bins).astype(np.int64)
        if flat:
            return leaves
        k = self.branching
        levels = [leaves]
        for _ in range(self.levels - 1):
            levels.append(levels[-1].reshape(-1, k).sum(axis=1))
        return np.concatenate(levels)

    def split_levels(self, tree: ArrayLike) -> list[NDArray[np.float64]]:
        """Cut a hierarchical vector into its levels, leaves first."""
        flat = np.asarray(tree, dtype=np.float64)
        if flat.shape != (self.dimension,):
            raise ValueError(f"expected a tree vector of length {self.dimension}; got {flat.shape}")
        bounds = np.cumsum((0, *self.level_sizes))
        return [flat[bounds[r] : bounds[r + 1]] for r in range(self.levels)]

    def make_consistent(self, tree: ArrayLike, total: float) -> NDArray[np.float64]:
        """Least-squares consistent tree (Hay et al. 2010, Thm. 3), the root fixed at ``total``.

        All nodes are assumed to carry noise of equal variance (true for the sum of every
        client's N_ℤ(0, σ²) noise). Returns the consistent *leaf* counts: every parent of the
        projected tree is the sum of its children and the root equals ``total``.

        Examples
        --------
        >>> tree = HistogramTree(2, 0.0, 1.0)
        >>> tree.make_consistent([3.0, 5.0], total=10.0).tolist()  # split the surplus evenly
        [4.0, 6.0]
        """
        k = self.branching
        levels = self.split_levels(tree)
        # Bottom-up (Hay et al. 2010, Thm. 3): z = ((k^ℓ − k^(ℓ−1)) h + (k^(ℓ−1) − 1) Σ z_children)
        # / (k^ℓ − 1), where ℓ is the height of the node (leaves have height 1).
        z = [levels[0]]
        for height in range(2, self.levels + 1):
            children = z[-1].reshape(-1, k).sum(axis=1)
            own = levels[height - 1]
            z.append(
                ((k**height - k ** (height - 1)) * own + (k ** (height - 1) - 1) * children)
                / (k**height - 1)
            )
        # Top-down: each child gets its estimate plus an equal share of its parent's residual.
        parent = np.array([float(total)])
        for estimate in reversed(z):
            residual = parent - estimate.reshape(-1, k).sum(axis=1)
            parent = estimate + np.repeat(residual / k, k)
        return parent

    def prefix_counts(self, tree: ArrayLike) -> NDArray[np.float64]:
        """H(j) for j = 1 … b from the maximal k-adic partition of [1, j] (Δ-FL §4.2).

        Examples
        --------
        >>> tree = HistogramTree(4, 0.0, 1.0)
        >>> tree.prefix_counts(tree.encode([0.1, 0.6, 0.7]).sum(axis=0)).tolist()
        [1.0, 1.0, 3.0, 3.0]
        """
        k = self.branching
        j = np.arange(1, self.bins + 1)
        out = np.zeros(self.bins, dtype=np.float64)
        for r, counts in enumerate(self.split_levels(tree)):
            width = k**r
            running = np.concatenate(([0.0], np.cumsum(counts)))
            # Level r contributes the whole level-r nodes between what the levels above cover,
            # ⌊j/k^(r+1)⌋·k nodes (none above the top level), and ⌊j/k^r⌋ nodes.
            end = j // width
            start = (j // (width * k)) * k if r < self.levels - 1 else np.zeros_like(j)
            out += running[end] - running[start]
        return out

    def quantile_from_cdf(
        self,
        cumulative: ArrayLike,
        q: float,
        total: float,
        *,
        interpolate: bool = True,
        reader: QuantileReader = "first",
    ) -> float:
        """The q-quantile of the histogram with cumulative counts H(1 … b) and total m.

        The bin is the smallest j with H(j) ≥ q·m (the quantile function of the induced
        variable; Δ-FL §4.2). Without interpolation the estimate is that bin's right edge; with
        it, the point inside the bin where the CDF, linear within the bin, reaches q·m.

        ``reader="isotonic"`` first replaces a noisy H by its least-squares non-decreasing fit
        within [0, m] (pool adjacent violators, :func:`isotonic_cdf`): a noise spike can no
        longer cross q·m early, which biases the first-crossing reader low. The fit's crossing
        is never earlier than the raw one (``histogram_notes.md``).

        Examples
        --------
        >>> tree = HistogramTree(4, 0.0, 4.0)
        >>> tree.quantile_from_cdf([1.0, 2.0, 3.0, 4.0], 0.5, 4.0, interpolate=False)
        2.0
        >>> tree.quantile_from_cdf([0.0, 4.0, 4.0, 4.0], 0.5, 4.0)
        1.5
        >>> noisy = [2.5, 0.5, 2.5, 4.0]          # a spike in bin 0 crosses q·m = 2 early
        >>> tree.quantile_from_cdf(noisy, 0.5, 4.0, interpolate=False)
        1.0
        >>> tree.quantile_from_cdf(noisy, 0.5, 4.0, interpolate=False, reader="isotonic")
        3.0
        """
        if reader not in QUANTILE_READERS:
            raise ValueError(f"reader must be one of {', '.join(QUANTILE_READERS)}; got {reader!r}")
        cdf = np.asarray(cumulative, dtype=np.float64)
        if reader == "isotonic":
            cdf = isotonic_cdf(cdf, total)
        target = q * total
        hits = np.flatnonzero(cdf >= target)
        if hits.size == 0:
            return self.upper
        j = int(hits[0])
        edges = self.edges
        if not interpolate:
            return float(edges[j + 1])
        below = cdf[j - 1] if j > 0 else 0.0
        mass = cdf[j] - below
        fraction = 1.0 if mass <= 0 else float(np.clip((target - below) / mass, 0.0, 1.0))
        return float(edges[j] + fraction * (edges[j + 1] - edges[j]))

    def estimate(
        self,
        released: ArrayLike,
        total: float,
        q: float,
        *,
        mechanism: str = "tree",
        consistency: bool = True,
        interpolate: bool = True,
        reader: QuantileReader = "first",
    ) -> tuple[float, NDArray[np.float64]]:
        """The q-quantile read from a released (noisy) sum, and the CDF it was read from.

        Parameters
        ----------
        released
            The summed vectors: tree counts (leaves first) for ``"tree"``, bin counts for
            ``"flat"``.
        total
            The number of clients in the sum (public).
        q
            Quantile level in (0, 1).
        mechanism, consistency, interpolate, reader
            As for :func:`dpquantile.dp_quantile`.

        Examples
        --------
        >>> tree = HistogramTree(4, 0.0, 4.0)
        >>> counts = tree.encode([0.5, 1.5, 2.5, 3.5]).sum(axis=0)
        >>> tree.estimate(counts, 4.0, 0.5, interpolate=False)[0]
        2.0
        """
        if mechanism == "flat":
            cdf = np.cumsum(np.asarray(released, dtype=np.float64))
        elif mechanism != "tree":
            raise ValueError(f"mechanism must be 'tree' or 'flat'; got {mechanism!r}")
        elif consistency:
            cdf = np.cumsum(self.make_consistent(released, total=total))
        else:
            cdf = self.prefix_counts(released)
        estimate = self.quantile_from_cdf(cdf, q, total, interpolate=interpolate, reader=reader)
        return estimate, cdf


def isotonic_cdf(cumulative: ArrayLike, total: float | None = None) -> NDArray[np.float64]:
    """The least-squares non-decreasing fit of a noisy CDF, then clipped to [0, ``total``].

    Pool adjacent violators (Barlow et al. 1972): adjacent blocks that decrease are merged into
    their mean until the sequence is non-decreasing; the clip keeps it a CDF of ``total`` counts
    (``None``: the fit unclipped). Post-processing of a released CDF only (no privacy cost).

    Examples
    --------
    >>> isotonic_cdf([1.0, 3.0, 2.0, 4.0], 4.0).tolist()
    [1.0, 2.5, 2.5, 4.0]
    >>> isotonic_cdf([-1.0, 0.5, 9.0], 5.0).tolist()
    [0.0, 0.5, 5.0]
    """
    values = np.asarray(cumulative, dtype=np.float64)
    means: list[float] = []
    sizes: list[int] = []
    for value in values.tolist():
        means.append(value)
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            size = sizes[-2] + sizes[-1]
            mean = (means[-2] * sizes[-2] + means[-1] * sizes[-1]) / size
            means[-2:], sizes[-2:] = [mean], [size]
    fit = np.repeat(np.array(means), np.array(sizes, dtype=np.intp))
    if total is None:
        return fit
    clipped: NDArray[np.float64] = np.clip(fit, 0.0, float(total))
    return clipped
