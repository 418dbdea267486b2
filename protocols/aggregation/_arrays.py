"""Array helpers shared by the aggregation modules (private)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def as_matrix(vectors: ArrayLike, name: str = "vectors") -> NDArray[np.float64]:
    """``vectors`` as a non-empty (n, d) float64 array (no copy when it already is one)."""
    try:
        matrix = np.asarray(vectors, dtype=np.float64)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{name} must form an (n, d) float array: {error}") from error
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty (n, d) array; got shape {matrix.shape}")
    return matrix


def row_norms(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    """L2 norms of the rows; non-finite exactly for the rows holding a non-finite entry."""
    norms: NDArray[np.float64] = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    for i in np.flatnonzero(~np.isfinite(norms)):
        row = matrix[i]
        if np.isfinite(row).all():  # finite entries whose squares overflow: rescale first
            top = float(np.abs(row).max())
            norms[i] = top * float(np.linalg.norm(row / top))
    return norms
