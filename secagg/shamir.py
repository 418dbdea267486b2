"""Shamir t-of-n secret sharing over a prime field, vectorised over many sub-secrets.

A byte secret (a 32-byte self-mask seed or X25519 private key) is cut into sub-secrets of
``prime.bit_length() − 1`` bits, each strictly below the prime, and every sub-secret is shared
with its own random polynomial of degree t − 1 (Shamir 1979). With the default prime 2^31 − 1 a
sub-secret holds 30 bits (9 per 32-byte secret) and every product of two field elements fits in
63 bits, so sharing and reconstruction are native numpy integer arithmetic. Lagrange coefficients
at zero are cached per set of share holders.

Shamir shares are Reed–Solomon codewords (McEliece and Sarwate 1981): with m shares of a degree
t − 1 polynomial, :func:`robust_reconstruct` corrects up to ⌊(m − t)/2⌋ wrong shares by the
Berlekamp–Welch decoder (Welch and Berlekamp, US patent 4,633,470, 1986) and names their holders.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from secagg.randomness import RandomSource

__all__ = [
    "DEFAULT_PRIME",
    "evaluate_shares",
    "join_secret",
    "lagrange_coefficients",
    "reconstruct",
    "robust_reconstruct",
    "share",
    "split_secret",
    "sub_secret_bits",
    "sub_secret_count",
]

DEFAULT_PRIME = 2**31 - 1


@lru_cache(maxsize=64)
def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in (2, 3, 5, 7, 11, 13, 17):  # every base below: a base ≡ 0 mod n proves nothing
        if n % p == 0:
            return n == p
    # Deterministic Miller–Rabin for n < 3.4·10^14 with these bases (Jaeschke 1993).
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in (2, 3, 5, 7, 11, 13, 17):
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _check_prime(prime: int) -> int:
    if isinstance(prime, bool) or not isinstance(prime, int):
        raise TypeError(f"prime must be an int; got {type(prime).__name__}")
    if not 3 <= prime < 2**31 or not _is_prime(prime):
        raise ValueError(f"prime must be a prime in [3, 2^31); got {prime}")
    return prime


def sub_secret_bits(prime: int = DEFAULT_PRIME) -> int:
    """Bits per sub-secret: every value of that many bits lies below ``prime``.

    Examples
    --------
    >>> sub_secret_bits()
    30
    """
    return _check_prime(prime).bit_length() - 1


def sub_secret_count(secret_bytes: int, prime: int = DEFAULT_PRIME) -> int:
    """Number of sub-secrets a secret of ``secret_bytes`` bytes is cut into.

    Examples
    --------
    >>> sub_secret_count(32)
    9
    """
    bits = sub_secret_bits(prime)
    return -(-8 * secret_bytes // bits)


def split_secret(secret: bytes, prime: int = DEFAULT_PRIME) -> NDArray[np.int64]:
    """Cut a byte string into sub-secrets (least significant first), each below ``prime``.

    Examples
    --------
    >>> split_secret(b"\\x01\\x02", prime=7).tolist()[:4]
    [2, 0, 0, 0]
    """
    bits = sub_secret_bits(prime)
    value = int.from_bytes(secret, "big")
    count = sub_secret_count(len(secret), prime)
    mask = (1 << bits) - 1
    return np.array([(value >> (bits * i)) & mask for i in range(count)], dtype=np.int64)


def join_secret(sub_secrets: ArrayLike, secret_bytes: int, prime: int = DEFAULT_PRIME) -> bytes:
    """Inverse of :func:`split_secret`.

    Raises
    ------
    ValueError
        If a sub-secret is out of range or bits beyond ``secret_bytes`` are set — which is how
        inconsistent shares usually show.

    Examples
    --------
    >>> join_secret(split_secret(b"key!"), 4)
    b'key!'
    """
    bits = sub_secret_bits(prime)
    value = 0
    for i, chunk in enumerate(np.asarray(sub_secrets, dtype=np.int64).tolist()):
        if not 0 <= chunk < 1 << bits:
            raise ValueError("reconstructed sub-secret out of range: inconsistent shares")
        value |= chunk << (bits * i)
    if value >> (8 * secret_bytes):
        raise ValueError("reconstructed secret has excess bits: inconsistent shares")
    return value.to_bytes(secret_bytes, "big")


def _uniform_field_elements(source: RandomSource, count: int, prime: int) -> NDArray[np.int64]:
    """``count`` uniform elements of Z_prime by rejection sampling (exactly uniform)."""
    width = prime.bit_length()
    mask = np.uint32((1 << width) - 1)
    out = np.empty(count, dtype=np.int64)
    filled = 0
    while filled < count:
        # Acceptance ≥ 1/2, so twice the remainder plus slack nearly always suffices.
        draw = np.empty(2 * (count - filled) + 16, dtype="<u4")
        source.fill(draw)
        candidates = draw & mask
        accepted = candidates[candidates < prime][: count - filled]
        out[filled : filled + accepted.size] = accepted
        filled += accepted.size
    return out


def _check_points(points: Sequence[int], prime: int) -> tuple[int, ...]:
    xs = tuple(int(x) for x in points)
    if len(set(xs)) != len(xs):
        raise ValueError("evaluation points must be distinct")
    if any(not 1 <= x < prime for x in xs):
        raise ValueError(f"evaluation points must lie in [1, {prime}); got {xs}")
    return xs


def share(
    sub_secrets: ArrayLike,
    points: Sequence[int],
    threshold: int,
    source: RandomSource,
    prime: int = DEFAULT_PRIME,
) -> NDArray[np.int64]:
    """Shamir-share every sub-secret at every point: returns an array (len(points), S).

    Row i holds the shares for the party with evaluation point ``points[i]``; any ``threshold``
    rows recover all sub-secrets and fewer reveal nothing about them.

    Parameters
    ----------
    sub_secrets
        S values in [0, prime).
    points
        Distinct non-zero evaluation points (party ids).
    threshold
        t: the polynomial degree is t − 1.
    source
        Cryptographic randomness for the coefficients.
    prime
        The field modulus, a prime below 2^31.

    Examples
    --------
    >>> from secagg.randomness import KeystreamRandom
    >>> secrets = split_secret(b"\\x07" * 32)
    >>> shares = share(secrets, [1, 2, 3, 4, 5], 3, KeystreamRandom(seed=9))
    >>> shares.shape
    (5, 9)
    >>> bool((reconstruct([2, 4, 5], shares[[1, 3, 4]]) == secrets).all())
    True
    """
    prime = _check_prime(prime)
    xs = _check_points(points, prime)
    secrets = np.asarray(sub_secrets, dtype=np.int64)
    if secrets.ndim != 1 or ((secrets < 0) | (secrets >= prime)).any():
        raise ValueError(f"sub-secrets must be a 1-D array of values in [0, {prime})")
    if isinstance(threshold, bool) or not isinstance(threshold, int):
        raise TypeError("threshold must be an int")
    if not 1 <= threshold <= len(xs):
        raise ValueError(f"threshold must lie in [1, {len(xs)}] (the number of points)")
    coefficients = _uniform_field_elements(source, (threshold - 1) * secrets.size, prime)
    return evaluate_shares(secrets, xs, coefficients.reshape(threshold - 1, secrets.size), prime)


def evaluate_shares(
    sub_secrets: ArrayLike,
    points: Sequence[int],
    coefficients: ArrayLike,
    prime: int = DEFAULT_PRIME,
) -> NDArray[np.int64]:
    """Evaluate f_j(x) = s_j + Σ_i c_ij x^i at every point: the deterministic core of :func:`share`.

    ``coefficients`` has shape (t − 1, S): row i − 1 holds the degree-i coefficients. Exposed so
    that audits can enumerate every polynomial (perfect secrecy over a tiny field).

    Examples
    --------
    >>> evaluate_shares([1], [1, 2], [[2]], prime=7).tolist()  # f(x) = 1 + 2x
    [[3], [5]]
    """
    secrets = np.asarray(sub_secrets, dtype=np.int64)
    coeffs = np.asarray(coefficients, dtype=np.int64).reshape(-1, secrets.size)
    x = np.array(points, dtype=np.int64)[:, None]
    # Horner's rule from the leading coefficient down; every intermediate stays below 2^63.
    acc = np.zeros((x.shape[0], secrets.size), dtype=np.int64)
    for row in coeffs[::-1]:
        acc = (acc + row) * x % prime
    result: NDArray[np.int64] = (acc + secrets) % prime
    return result


@lru_cache(maxsize=4096)
def lagrange_coefficients(points: tuple[int, ...], prime: int = DEFAULT_PRIME) -> NDArray[np.int64]:
    """Lagrange coefficients λ_i of the interpolating polynomial at 0, cached per point set.

    Examples
    --------
    >>> lagrange_coefficients((1, 2), prime=7).tolist()  # f(0) = 2·f(1) − f(2)
    [2, 6]
    """
    prime = _check_prime(prime)
    xs = np.array(_check_points(points, prime), dtype=np.int64)
    # λ_i = Π_{j≠i} x_j / (x_j − x_i): products column by column, reduced at every step.
    numerators = np.tile(xs, (xs.size, 1))
    differences = (xs[None, :] - xs[:, None]) % prime
    np.fill_diagonal(numerators, 1)
    np.fill_diagonal(differences, 1)
    numerator = np.ones(xs.size, dtype=np.int64)
    denominator = np.ones(xs.size, dtype=np.int64)
    for j in range(xs.size):
        numerator = numerator * numerators[:, j] % prime
        denominator = denominator * differences[:, j] % prime
    inverses = np.array([pow(int(d), prime - 2, prime) for d in denominator], dtype=np.int64)
    out = numerator * inverses % prime
    out.setflags(write=False)
    return out


def reconstruct(
    points: Sequence[int], shares: ArrayLike, prime: int = DEFAULT_PRIME
) -> NDArray[np.int64]:
    """Interpolate at 0: the sub-secrets from shares (rows) held at ``points``.

    Exactly the given shares are used; pass at least ``threshold`` of them.

    Examples
    --------
    >>> reconstruct([1, 2], [[3], [5]], prime=7).tolist()  # f(x) = 1 + 2x
    [1]
    """
    xs = _check_points(points, _check_prime(prime))
    values = np.asarray(shares, dtype=np.int64)
    if values.ndim != 2 or values.shape[0] != len(xs):
        raise ValueError(f"expected one share row per point: shape ({len(xs)}, S)")
    if ((values < 0) | (values >= prime)).any():
        raise ValueError(f"shares must lie in [0, {prime})")
    weights = lagrange_coefficients(xs, prime)[:, None]
    result: NDArray[np.int64] = (weights * values % prime).sum(axis=0) % prime
    return result


def _solve_mod(matrix: NDArray[np.int64], rhs: NDArray[np.int64], prime: int) -> list[int] | None:
    """One solution x of matrix · x = rhs over GF(prime) (free variables 0), or None."""
    work = np.concatenate([matrix % prime, (rhs % prime)[:, None]], axis=1)
    rows, columns = work.shape
    pivots: list[int] = []
    row = 0
    for column in range(columns - 1):
        if row == rows:
            break
        candidates = np.nonzero(work[row:, column])[0]
        if candidates.size == 0:
            continue
        pivot = row + int(candidates[0])
        if pivot != row:
            work[[row, pivot]] = work[[pivot, row]]
        inverse = pow(int(work[row, column]), prime - 2, prime)
        work[row] = work[row] * inverse % prime
        factors = work[:, column].copy()
        factors[row] = 0
        # Every product stays below 2^62: field elements are below 2^31.
        work = (work - factors[:, None] * work[row][None, :] % prime) % prime
        pivots.append(column)
        row += 1
    if work[row:, -1].any():
        return None
    solution = [0] * (columns - 1)
    for index, column in enumerate(pivots):
        solution[column] = int(work[index, -1])
    return solution


def _divide(numerator: list[int], denominator: list[int], prime: int) -> list[int] | None:
    """numerator / denominator over GF(prime) (coefficients lowest first), or None if the
    division leaves a remainder."""
    remainder = list(numerator)
    degree = len(denominator) - 1
    lead_inverse = pow(denominator[-1], prime - 2, prime)
    quotient = [0] * max(1, len(remainder) - degree)
    for shift in range(len(remainder) - 1 - degree, -1, -1):
        factor = remainder[shift + degree] * lead_inverse % prime
        quotient[shift] = factor
        if factor:
            for i, coefficient in enumerate(denominator):
                remainder[shift + i] = (remainder[shift + i] - factor * coefficient) % prime
    if any(remainder[:degree]):
        return None
    return quotient


def _correctable(shares: int, threshold: int) -> int:
    """Wrong shares Berlekamp–Welch corrects among ``shares`` of a degree < ``threshold``
    polynomial: ⌊(m − t)/2⌋ (the decoder's count and what its refusal states)."""
    return (shares - threshold) // 2


def _decode_column(
    xs: tuple[int, ...], ys: list[int], threshold: int, prime: int
) -> tuple[int, set[int]] | None:
    """Berlekamp–Welch for one sub-secret: (f(0), indices of wrong shares) or None."""
    m = len(xs)
    errors = _correctable(m, threshold)
    if errors == 0:
        coefficients = None
    else:
        # Q(x_i) = y_i · E(x_i), deg Q < t + e, E monic of degree e: t + 2e unknowns.
        powers = np.array(
            [[pow(x, j, prime) for j in range(threshold + errors)] for x in xs], dtype=np.int64
        )
        y = np.array(ys, dtype=np.int64)
        error_part = (-(y[:, None] * powers[:, :errors]) % prime).astype(np.int64)
        matrix = np.concatenate([powers, error_part], axis=1)
        rhs = np.array(
            [y_i * pow(x, errors, prime) % prime for x, y_i in zip(xs, ys, strict=True)],
            dtype=np.int64,
        )
        solution = _solve_mod(matrix, rhs, prime)
        if solution is None:
            return None
        q = solution[: threshold + errors]
        e = [*solution[threshold + errors :], 1]
        coefficients = _divide(q, e, prime)
        if coefficients is None or any(coefficients[threshold:]):
            return None
        coefficients = coefficients[:threshold]
    if coefficients is None:
        # Nothing to correct: interpolate from the first t shares and compare the rest.
        weights = lagrange_coefficients(xs[:threshold], prime)
        secret = int(sum(int(w) * v for w, v in zip(weights.tolist(), ys, strict=False)) % prime)
        wrong = set()
        if m > threshold:
            values = reconstruct_polynomial(xs[:threshold], ys[:threshold], prime)
            wrong = {i for i in range(m) if _evaluate(values, xs[i], prime) != ys[i]}
        return (secret, wrong) if not wrong else None
    wrong = {i for i in range(m) if _evaluate(coefficients, xs[i], prime) != ys[i]}
    if len(wrong) > errors:
        return None
    return coefficients[0], wrong


def _evaluate(coefficients: list[int], x: int, prime: int) -> int:
    value = 0
    for coefficient in reversed(coefficients):
        value = (value * x + coefficient) % prime
    return value


def reconstruct_polynomial(points: Sequence[int], values: Sequence[int], prime: int) -> list[int]:
    """The coefficients (lowest first) of the polynomial of degree < len(points) through the
    given points over GF(prime): Lagrange interpolation in Python integers.

    Examples
    --------
    >>> reconstruct_polynomial([1, 2], [3, 5], 7)  # f(x) = 1 + 2x
    [1, 2]
    """
    xs = [int(x) for x in points]
    result = [0] * len(xs)
    for i, (x_i, y_i) in enumerate(zip(xs, values, strict=True)):
        basis = [1]
        denominator = 1
        for j, x_j in enumerate(xs):
            if j == i:
                continue
            basis = [(a - x_j * b) % prime for a, b in zip([0, *basis], [*basis, 0], strict=True)]
            denominator = denominator * (x_i - x_j) % prime
        factor = int(y_i) * pow(denominator, prime - 2, prime) % prime
        result = [(r + factor * b) % prime for r, b in zip(result, basis, strict=True)]
    return result


def robust_reconstruct(
    points: Sequence[int],
    shares: ArrayLike,
    threshold: int,
    prime: int = DEFAULT_PRIME,
) -> tuple[NDArray[np.int64], tuple[int, ...]]:
    """Sub-secrets from shares of which up to ⌊(m − t)/2⌋ may be wrong (Berlekamp–Welch).

    Each sub-secret is decoded on its own; a holder whose share is wrong in any of them is
    reported.

    Parameters
    ----------
    points
        The m share holders' evaluation points.
    shares
        (m, S) share values, row i held at ``points[i]``.
    threshold
        t: the polynomials have degree t − 1.

    Returns
    -------
    (sub-secrets, wrong)
        The decoded sub-secrets and the points whose shares disagree with them, ascending.

    Raises
    ------
    ValueError
        If more shares are wrong than the code can correct (or fewer than t are given).

    Examples
    --------
    >>> from secagg.randomness import KeystreamRandom
    >>> secrets = split_secret(b"\x05" * 32)
    >>> rows = share(secrets, [1, 2, 3, 4, 5, 6, 7], 3, KeystreamRandom(seed=1))
    >>> rows[[1, 5]] = (rows[[1, 5]] + 1) % DEFAULT_PRIME        # two liars
    >>> decoded, wrong = robust_reconstruct([1, 2, 3, 4, 5, 6, 7], rows, 3)
    >>> bool((decoded == secrets).all()), wrong
    (True, (2, 6))
    """
    prime = _check_prime(prime)
    xs = _check_points(points, prime)
    values = np.asarray(shares, dtype=np.int64)
    if values.ndim != 2 or values.shape[0] != len(xs):
        raise ValueError(f"expected one share row per point: shape ({len(xs)}, S)")
    if ((values < 0) | (values >= prime)).any():
        raise ValueError(f"shares must lie in [0, {prime})")
    if len(xs) < threshold:
        raise ValueError(f"{len(xs)} shares cannot reconstruct a threshold-{threshold} secret")
    secrets = np.empty(values.shape[1], dtype=np.int64)
    wrong: set[int] = set()
    for column in range(values.shape[1]):
        decoded = _decode_column(xs, values[:, column].tolist(), threshold, prime)
        if decoded is None:
            raise ValueError(
                f"more than {_correctable(len(xs), threshold)} of {len(xs)} shares are wrong: "
                "cannot decode"
            )
        secrets[column], bad = decoded
        wrong |= bad
    return secrets, tuple(sorted(xs[i] for i in wrong))
