"""The catalogue of planted bugs (private; see :mod:`audits.mutants`)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import textwrap
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import numpy as np

import dpquantile._fast_sampler as fast_sampler
import protocols.aggregation._quantization as quantization
import secagg
from dpquantile import accounting, quantile, samplers
from protocols.aggregation import secure_average
from secagg import client, identity, masks, ring, server, shamir

__all__ = ["MUTANTS", "Mutant", "mutant_by_name"]


@dataclasses.dataclass(frozen=True)
class Mutant:
    """A planted bug: its name, what it breaks, the audits expected to see it, and its injector.

    Examples
    --------
    >>> mutant = mutant_by_name("shamir_degree_t")
    >>> mutant.expected_audits
    (8, 7)
    >>> from secagg import shamir as real
    >>> original = real.share
    >>> with mutant.inject():
    ...     real.share is original
    False
    >>> real.share is original
    True
    """

    name: str
    description: str
    expected_audits: tuple[int, ...]
    inject: Callable[[], contextlib.AbstractContextManager[None]]


def _clear_caches() -> None:
    quantization.plan_quantization.cache_clear()
    fast_sampler._direct_plan.cache_clear()
    fast_sampler._block_plan.cache_clear()


@contextlib.contextmanager
def _patched(*replacements: tuple[Any, Any, Any]) -> Iterator[None]:
    """Set ``owner.name = value`` for each triple (dict keys allowed), restore on exit."""
    saved: list[tuple[Any, str, Any]] = []
    _clear_caches()
    try:
        for owner, name, value in replacements:
            if isinstance(owner, dict):
                saved.append((owner, name, owner[name]))
                owner[name] = value
            else:
                saved.append((owner, name, owner.__dict__[name]))
                setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in reversed(saved):
            if isinstance(owner, dict):
                owner[name] = value
            else:
                setattr(owner, name, value)
        _clear_caches()


# --------------------------------------------------------------------------- samplers


def _sigma_too_small() -> contextlib.AbstractContextManager[None]:
    """Both samplers draw with 0.9σ while their events (and ``sigma``) claim σ."""
    exact_init = samplers.ExactDiscreteGaussian.__init__
    fast_init = fast_sampler.FastDiscreteGaussian.__init__

    def wrap(original: Callable[..., None]) -> Callable[..., None]:
        def __init__(self: Any, sigma: float | Fraction) -> None:
            original(self, Fraction(sigma) * Fraction(9, 10))
            self._sigma = float(sigma)

        return __init__

    return _patched(
        (samplers.ExactDiscreteGaussian, "__init__", wrap(exact_init)),
        (fast_sampler.FastDiscreteGaussian, "__init__", wrap(fast_init)),
    )


def _rounded_draw(self: Any, words: Any, count: int) -> Any:
    # Box–Muller on the stream's words, rounded: a continuous Gaussian, not N_ℤ(0, σ²).
    uniform = (words.take(2 * count) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    radius = np.sqrt(-2.0 * np.log1p(-uniform[:count]))
    normal = radius * np.cos(2.0 * math.pi * uniform[count:])
    return np.rint(normal * self._sigma).astype(np.int64)


def _rounded_gaussian() -> contextlib.AbstractContextManager[None]:
    return _patched(
        (samplers.ExactDiscreteGaussian, "_draw", _rounded_draw),
        (fast_sampler.FastDiscreteGaussian, "_draw", _rounded_draw),
    )


_FLOAT_ACCEPT_SOURCE = textwrap.dedent(
    """
    def _accept(self, words, candidates):
        magnitude = np.rint(np.abs(candidates) * 1.0).astype(np.int64)
        return _ORIGINAL_ACCEPT(self, words, np.where(candidates < 0, -magnitude, magnitude))
    """
)


def _float_in_exact_sampler() -> contextlib.AbstractContextManager[None]:
    """A float sneaks into the exact sampler's acceptance step; outputs stay bit-identical.

    The function is compiled in a copy of ``dpquantile.samplers``' namespace, as if the line had
    been written in that module, so only a check of the sampling path itself can see it.
    """
    namespace = dict(vars(samplers))
    namespace["_ORIGINAL_ACCEPT"] = samplers.ExactDiscreteGaussian._accept
    exec(compile(_FLOAT_ACCEPT_SOURCE, samplers.__file__, "exec"), namespace)
    return _patched((samplers.ExactDiscreteGaussian, "_accept", namespace["_accept"]))


# --------------------------------------------------------------------------- accounting


def _rho_quarter() -> contextlib.AbstractContextManager[None]:
    """ρ = Δ²/(4σ²): every zCDP line of the discrete Gaussian events is halved."""

    def halve(original: Callable[[Any], tuple[tuple[float, float], ...]]) -> Any:
        def renyi_bounds(self: Any) -> tuple[tuple[float, float], ...]:
            return tuple((xi, rho / 2.0) for xi, rho in original(self))

        return renyi_bounds

    return _patched(
        (
            accounting.DiscreteGaussian,
            "renyi_bounds",
            halve(accounting.DiscreteGaussian.renyi_bounds),
        ),
        (
            accounting.DistributedDiscreteGaussian,
            "renyi_bounds",
            halve(accounting.DistributedDiscreteGaussian.renyi_bounds),
        ),
    )


def _kls21_first_line_unsquared() -> contextlib.AbstractContextManager[None]:
    """KLS21's first Rényi line with Δ₂ + 2 where Δ₂² belongs (a generated mutant of the
    mutation sweep, ``ReplaceBinaryOperator_Pow_Add``): understated whenever Δ₂ > 2."""
    original = accounting.DistributedDiscreteGaussian.renyi_bounds

    def renyi_bounds(self: Any) -> tuple[tuple[float, float], ...]:
        first, *rest = original(self)
        wrong = (self.l2_sensitivity + 2) / (2.0 * self.num_clients * self.sigma**2)
        return ((first[0], wrong), *rest)

    return _patched((accounting.DistributedDiscreteGaussian, "renyi_bounds", renyi_bounds))


def _factor_two_dropped() -> contextlib.AbstractContextManager[None]:
    """The zCDP → (ε, δ) conversion ρ + 2√(ρ log 1/δ) with its factor 2 dropped."""

    def _renyi_epsilon(self: Any, delta: float) -> tuple[float, float]:
        rho = self.rho
        return rho + math.sqrt(rho * math.log(1.0 / delta)), math.nan

    return _patched((accounting.ZCDPAccountant, "_renyi_epsilon", _renyi_epsilon))


def _histogram_budget_not_split() -> contextlib.AbstractContextManager[None]:
    """The DP quantile charges one tree level: Δ₂ = s√2 instead of s√(2L)."""
    original = quantile.histogram_sensitivities

    def histogram_sensitivities(tree: Any, mechanism: Any, adjacency: Any, scale: int = 1) -> Any:
        return original(tree, "flat", adjacency, scale)

    return _patched((vars(quantile), "histogram_sensitivities", histogram_sensitivities))


def _noise_not_compensated() -> contextlib.AbstractContextManager[None]:
    """With dropouts, the released event still counts the planned clients' noise."""
    average = secure_average.secure_weighted_average
    dp_quantile = quantile.dp_quantile

    def secure_weighted_average(*args: Any, **kwargs: Any) -> Any:
        result = average(*args, **kwargs)
        if result.event is None:
            return result
        noise = kwargs.get("noise")
        planned = getattr(noise, "min_survivors", None) or (
            result.num_clients - len(result.rejected)
        )
        return dataclasses.replace(
            result, event=dataclasses.replace(result.event, num_clients=planned)
        )

    def dp_quantile_uncompensated(*args: Any, **kwargs: Any) -> Any:
        result = dp_quantile(*args, **kwargs)
        event = dataclasses.replace(result.event, num_clients=result.planned_survivors)
        return dataclasses.replace(result, event=event, rho=event.rho)

    return _patched(
        (vars(secure_average), "secure_weighted_average", secure_weighted_average),
        (vars(quantile), "dp_quantile", dp_quantile_uncompensated),
    )


def _noise_skipped() -> contextlib.AbstractContextManager[None]:
    """Secure-average clients skip their noise share; the event still claims the noise."""
    original = secure_average._client_row

    def _client_row(clients: Any, index: int, plan: Any, root: Any, **options: Any) -> Any:
        quiet = dataclasses.replace(plan, mechanism=None)
        return original(clients, index, quiet, root, **options)

    return _patched((vars(secure_average), "_client_row", _client_row))


# --------------------------------------------------------------------------- protocol


def _shamir_degree_t() -> contextlib.AbstractContextManager[None]:
    """Shamir polynomials of degree t instead of t − 1: t shares no longer reconstruct."""

    def share(
        sub_secrets: Any,
        points: Any,
        threshold: int,
        source: Any,
        prime: int = shamir.DEFAULT_PRIME,
    ) -> Any:
        secrets = np.asarray(sub_secrets, dtype=np.int64)
        coefficients = shamir._uniform_field_elements(source, threshold * secrets.size, prime)
        return shamir.evaluate_shares(
            secrets, [int(p) for p in points], coefficients.reshape(threshold, secrets.size), prime
        )

    return _patched((vars(shamir), "share", share))


def _mask_reused() -> contextlib.AbstractContextManager[None]:
    """The pairwise mask key ignores the session id: one seed, the same mask in every session."""
    original = masks.pairwise_mask_key

    def pairwise_mask_key(shared_secret: bytes, **kwargs: Any) -> bytes:
        kwargs["session_id"] = b"\0" * 32
        return original(shared_secret, **kwargs)

    return _patched(
        (vars(masks), "pairwise_mask_key", pairwise_mask_key),
        (vars(client), "pairwise_mask_key", pairwise_mask_key),
        (vars(server), "pairwise_mask_key", pairwise_mask_key),
    )


def _advertisement_omits_keys() -> contextlib.AbstractContextManager[None]:
    """The signed advertisement covers the round and the id but not the two public keys, so a
    server can list its own keys under a neighbour's valid signature (clients and server agree
    on the shortened bytes: honest rounds still pass)."""
    original = identity.advertisement_message

    def shortened(config_digest: bytes, client_id: int, *_keys: bytes) -> bytes:
        return original(config_digest, client_id, b"", b"")

    return _patched(
        (client, "advertisement_message", shortened),
        (server, "advertisement_message", shortened),
    )


def _answers_both_shares() -> contextlib.AbstractContextManager[None]:
    """The client's unmask handler lacks the disjointness check and answers both shares."""
    key = (client.ClientState.AWAITING_UNMASK_REQUEST, secagg.UnmaskRequest)
    original = client._TRANSITIONS[key]

    def handler(self: Any, message: Any) -> list[Any]:
        both = set(message.survivors) & set(message.dropped)
        if not both:
            return original(self, message)
        held = dict(self._held_key_shares)
        cleaned = dataclasses.replace(
            message, dropped=tuple(v for v in message.dropped if v not in both)
        )
        [response] = original(self, cleaned)
        assert isinstance(response, secagg.UnmaskResponse)
        extra = tuple((v, held[v]) for v in sorted(both) if v in held)
        return [dataclasses.replace(response, key_shares=response.key_shares + extra)]

    table: Any = client._TRANSITIONS
    return _patched((table, key, handler))


def _random_source_ignored() -> contextlib.AbstractContextManager[None]:
    """The client ignores the random source it is given and draws fresh OS randomness (a
    generated mutant of ``Client.__init__``): rounds stay correct and masks uniform, but a
    seeded round no longer repeats."""
    original = client.Client.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._random = secagg.KeystreamRandom()

    return _patched((client.Client, "__init__", __init__))


def _approval_tags_unchecked() -> contextlib.AbstractContextManager[None]:
    """A client counts a session's approval tags without checking them: any id of its survivor
    set in the certificate counts (a server can then forge the quorum of a split view)."""

    def count(self: Any, message: Any, signed: bytes, members: set[int], quorum: int) -> set[int]:
        return {a for a, _ in message.signatures if a in members} | {self.client_id}

    return _patched((client.Client, "_count_approvals", count))


def _headroom_dropped() -> contextlib.AbstractContextManager[None]:
    """The headroom check is a no-op: a sum that cannot fit the modulus wraps silently."""

    def check_headroom(num_clients: int, max_abs: int, bits: int, noise_bound: int = 0) -> None:
        return None

    return _patched(
        (vars(ring), "check_headroom", check_headroom),
        (vars(quantile), "check_headroom", check_headroom),
    )


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "sigma_10pct_small",
        "samplers draw with σ 10 % too small (events claim σ)",
        (1, 6, 5),
        _sigma_too_small,
    ),
    Mutant(
        "rounded_continuous_gaussian",
        "a rounded continuous Gaussian (floats, Box–Muller) in place of the discrete one",
        (2, 1),
        _rounded_gaussian,
    ),
    Mutant(
        "float_in_exact_sampler",
        "a float sneaks into the exact sampler's acceptance step (outputs bit-identical)",
        (2,),
        _float_in_exact_sampler,
    ),
    Mutant(
        "rho_quarter",
        "ρ computed as Δ²/(4σ²) for the discrete Gaussian events",
        (4, 5),
        _rho_quarter,
    ),
    Mutant(
        "kls21_sensitivity_not_squared",
        "KLS21's first Rényi line uses Δ₂ + 2 instead of Δ₂² (a generated mutant)",
        (4,),
        _kls21_first_line_unsquared,
    ),
    Mutant(
        "conversion_factor_2_dropped",
        "zCDP → (ε, δ) as ρ + √(ρ log 1/δ) (factor 2 dropped)",
        (4, 5),
        _factor_two_dropped,
    ),
    Mutant(
        "shamir_degree_t",
        "Shamir polynomial of degree t instead of t − 1",
        (8, 7),
        _shamir_degree_t,
    ),
    Mutant(
        "mask_reused_across_sessions",
        "pairwise mask key not bound to the session id",
        (8,),
        _mask_reused,
    ),
    Mutant(
        "client_answers_both_shares",
        "a client answers both shares for one peer",
        (7,),
        _answers_both_shares,
    ),
    Mutant(
        "advertisement_signature_omits_keys",
        "the signed key advertisement does not cover the keys (substitution goes unnoticed)",
        (10,),
        _advertisement_omits_keys,
    ),
    Mutant(
        "approval_tags_unchecked",
        "in a session, a client counts the consistency approvals' MAC tags without checking them",
        (10,),
        _approval_tags_unchecked,
    ),
    Mutant(
        "client_ignores_random_source",
        "a client ignores the random source it is given (a generated mutant): seeds do not repeat",
        (8,),
        _random_source_ignored,
    ),
    Mutant(
        "headroom_check_dropped",
        "the DP quantile's clients encode without the headroom check",
        (7,),
        _headroom_dropped,
    ),
    Mutant(
        "noise_not_compensated_for_dropouts",
        "with dropouts, the event still counts every planned client's noise",
        (6,),
        _noise_not_compensated,
    ),
    Mutant(
        "histogram_budget_not_split",
        "the DP quantile charges one tree level instead of all L",
        (5,),
        _histogram_budget_not_split,
    ),
    Mutant(
        "noise_skipped",
        "secure-average clients skip their noise share (event unchanged)",
        (6, 9, 5),
        _noise_skipped,
    ),
)


def mutant_by_name(name: str) -> Mutant:
    """Look a mutant up by name.

    Examples
    --------
    >>> mutant_by_name("rho_quarter").expected_audits
    (4, 5)
    """
    for mutant in MUTANTS:
        if mutant.name == name:
            return mutant
    raise KeyError(f"no mutant named {name!r}; known: {', '.join(m.name for m in MUTANTS)}")
