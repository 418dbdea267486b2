"""The adapter interface: what an implementation exposes so that the audits can examine it.

An :class:`AuditTarget` hands out *capabilities*, each a small protocol; an audit asks for the
capability it needs and reports ``n/a`` when the target has none. The statistical audits (1–6)
use :class:`SamplerUnderTest`, :class:`AccountantUnderTest`, :class:`NeighbouringMechanism` and
:class:`DropoutNoise`; the protocol audits (7, 8) use :class:`SansIOSecureSum` (the Hypothesis
state machine drives parties that take a message and return messages), :class:`SecureSumUnderTest`
(black-box round checks), :class:`MaskPRGUnderTest`, :class:`SecretSharingUnderTest` and
:class:`GraphParametersUnderTest`; the one-run canary audit (9) uses
:class:`NoisyAverageUnderTest`. Our implementation's adapter is :class:`audits.ours.OurTarget`;
Flower's SecAgg+ is :class:`audits.flower.FlowerTarget`, OpenFL's
:class:`audits.openfl.OpenFLTarget`; both start from :class:`PartialTarget` (every capability
absent) and override what they offer.
"""

from __future__ import annotations

import hashlib
import importlib
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from audits.attacks import AttackSurface

__all__ = [
    "AccountantUnderTest",
    "AuditTarget",
    "Draw",
    "DropoutNoise",
    "FixedFieldSharing",
    "GraphParametersUnderTest",
    "KnownAnswer",
    "MaskPRGUnderTest",
    "NeighbouringMechanism",
    "NoisyAverageUnderTest",
    "OverflowProbe",
    "PartialTarget",
    "PathRelease",
    "ReleasePaths",
    "SamplerUnderTest",
    "SansIOSecureSum",
    "SecretSharingUnderTest",
    "SecureSumUnderTest",
    "load_modules",
    "refusal_findings",
]

#: ``draw(size, seed)``: ``size`` samples from a stream determined by ``seed`` (the sampling path).
Draw = Callable[[int, int], NDArray[np.generic]]


@dataclass(frozen=True)
class KnownAnswer:
    """The first outputs of a sampler from a replayed stream (``prepare(sigma)(len, seed)``):
    the values themselves, or for a long vector their ``count`` and the SHA-256 of them as
    little-endian int64 (``values`` then empty).

    Examples
    --------
    >>> KnownAnswer("exact", 1.0, 2, (0, 1)).sigma
    1.0
    >>> KnownAnswer("fast", 64.5, 16, (), count=8192, sha256="c09d…").size
    8192
    """

    sampler: str
    sigma: float
    seed: int
    values: tuple[int, ...]
    count: int = 0
    sha256: str = ""

    @property
    def size(self) -> int:
        """How many outputs the answer pins."""
        return self.count if self.sha256 else len(self.values)

    def matches(self, got: Sequence[int]) -> bool:
        """Whether ``got`` (``size`` outputs) is this answer."""
        if self.sha256:
            digest = hashlib.sha256(np.asarray(got, dtype="<i8").tobytes()).hexdigest()
            return digest == self.sha256
        return [int(v) for v in got] == list(self.values)


@runtime_checkable
class SamplerUnderTest(Protocol):
    """A discrete Gaussian sampler (audits 1–3).

    Optional methods (audit 2): ``stated_sigma_squared(σ)``, ``sampled_variance_problem(σ,
    σ̃²)`` (the stated σ̃² against the sampler's documented rounding rule: a finding or
    ``None``), ``stated_tv(σ)`` (the TV per draw it states and the bound its proof gives), and
    ``alias_ties(σ)`` and ``rejected_words(σ)`` with ``draw_from_words(σ, words)`` (crafted
    word streams that tie an alias threshold or must be rejected, and the draw replayed from
    them).

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> isinstance(OurTarget().samplers()[0], SamplerUnderTest)
    True
    """

    @property
    def name(self) -> str:
        """Short name."""
        ...

    @property
    def exact(self) -> bool:
        """Whether the sampler claims exactness with integer arithmetic only (audit 2)."""
        ...

    @property
    def constant_time(self) -> bool:
        """Whether it claims a constant-time mode (audit 3 fails only then)."""
        ...

    @property
    def tv_bound(self) -> float:
        """Claimed total-variation distance from N_ℤ(0, σ²) per draw (0 when exact)."""
        ...

    @property
    def sampling_modules(self) -> tuple[str, ...]:
        """Module prefixes whose code is on the sampling path (audit 2 reads their bytecode)."""
        ...

    def prepare(self, sigma: float) -> Draw:
        """Build the sampler for σ (setup may use floats) and return its draw function."""
        ...


@runtime_checkable
class AccountantUnderTest(Protocol):
    """The claimed ε of composed discrete Gaussian releases (audit 4).

    Audit 4 also uses these methods when an accountant has them (duck-typed; see
    :mod:`audits.ours` for ours): ``distributed_discrete_gaussian_renyi(n, σ, *, l1, l2,
    dimension, rounds, alpha)``, ``discrete_laplace_epsilon(ε₀, rounds, δ)`` and
    ``discrete_laplace_delta(ε₀, rounds, ε)``, ``zcdp_epsilon(ρ, rounds, δ)`` (with
    ``rho_for_epsilon(ε, δ)``, the ρ planned for a target: held to be its inverse), and
    ``discrete_gaussian_epsilon_with_tv(σ, Δ, rounds, δ, tv)`` (tv: the total-variation bound of
    all ``rounds`` releases' noise together) and ``discrete_gaussian_delta_with_tv(σ, Δ, rounds,
    ε, tv)`` (the profile's other side, tv = 0 included); and the attribute
    ``zcdp_conversion = "cks20"`` (ε(δ) of a Rényi curve is CKS20 Prop. 12 at the best order:
    checked to 10⁻⁹); and
    ``sampler_tv_exports(tv)`` (name and call, with its defaults, of every export of an event
    whose noise carries sampler TV ``tv``: with tv > 0 each must refuse); and
    ``kls21_sensitivities(l2_clip, granularity, dimension, beta)`` ((Δ₁, Δ₂) of a clipped
    vector randomly rounded to the grid; β = None for plain rounding), recomputed from KLS21;
    and ``invalid_parameters()`` (calls that must refuse: :func:`refusal_findings`).

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> isinstance(OurTarget().accountant(), AccountantUnderTest)
    True
    """

    def discrete_gaussian_epsilon(
        self, sigma: float, sensitivity: float, rounds: int, delta: float
    ) -> float:
        """ε(δ) the implementation claims for ``rounds`` N_ℤ(0, σ²) releases of sensitivity Δ."""
        ...


@runtime_checkable
class NeighbouringMechanism(Protocol):
    """A noisy release on two fixed neighbouring inputs D (0) and D′ (1) (audit 5).

    Optional: ``planned_rho`` (the zCDP ρ its noise was asked to be planned for) and
    ``stated_rho()`` (the ρ its release's privacy event states) — audit 5 then requires the
    statement to be within the request.

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> isinstance(OurTarget().mechanisms()[0], NeighbouringMechanism)
    True
    """

    @property
    def name(self) -> str:
        """Short name."""
        ...

    @property
    def description(self) -> str:
        """The configuration, in words (the reference configuration of the τ requirement)."""
        ...

    @property
    def releases(self) -> Mapping[str, int] | None:
        """Releases per neighbour by tier, for a costly mechanism (``None``: audit 5 decides)."""
        ...

    def release(self, neighbour: int, seed: int, *, secure: bool = False) -> NDArray[np.float64]:
        """One release on D (``neighbour=0``) or D′ (``1``) as a flat float vector.

        ``secure=False`` may skip the cryptography of a secure sum if the result is identical;
        the audit checks that on a few seeds.
        """
        ...

    def claimed_epsilon(self, delta: float) -> float:
        """The ε the implementation claims for one release at δ."""
        ...


@runtime_checkable
class DropoutNoise(Protocol):
    """The noise of an aggregate when clients drop, and what was charged for it (audit 6).

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> isinstance(OurTarget().dropout_noise()[0], DropoutNoise)
    True
    """

    @property
    def name(self) -> str:
        """Short name."""
        ...

    @property
    def num_clients(self) -> int:
        """Clients asked."""
        ...

    def noise(self, dropped: Sequence[int], seed: int) -> tuple[NDArray[np.float64], float]:
        """(noise of one release per coordinate, variance per coordinate the claim assumes).

        ``dropped``: the indices (in ``range(num_clients)``) of the clients that leave before
        masking, drawn at random by the audit for every release.
        """
        ...


@dataclass(frozen=True)
class PathRelease:
    """One release of an aggregate through one of its paths (audit 6).

    ``released``: what the server obtains (grid units); ``protocol_steps``: the secure-sum
    protocol's progress reports seen during the release (0: it never ran; ``None``: not
    observable); ``estimate``: the statistic the aggregate reported, and ``recomputed``: the
    same statistic recomputed by the adapter from ``released`` alone with the implementation's
    public post-processing (``None``: not offered). ``survivors`` and ``dropped``: who the
    aggregate reports as summed and as gone — client ids, or counts where it reports only
    counts (``None``: not reported). ``warned``: whether the implementation warned its user that
    fewer clients survived than its noise was planned for, so the release is less private than
    asked (``None``: it has no such warning).
    """

    released: NDArray[np.float64]
    protocol_steps: int | None
    estimate: float | None = None
    recomputed: float | None = None
    survivors: tuple[int, ...] | int | None = None
    dropped: tuple[int, ...] | int | None = None
    warned: bool | None = None


@runtime_checkable
class ReleasePaths(Protocol):
    """An aggregate released through its secure-sum protocol or through a simulator that claims
    the identical release, which may refuse a shortfall of survivors (audit 6).

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> [isinstance(a, ReleasePaths) for a in OurTarget().dropout_noise()]
    [True, True]
    """

    @property
    def name(self) -> str:
        """Short name."""
        ...

    @property
    def num_clients(self) -> int:
        """Clients asked."""
        ...

    @property
    def shortfall_error(self) -> type[Exception] | None:
        """What a refused shortfall raises; ``None``: the aggregate cannot refuse one."""
        ...

    def release(
        self, dropped: Sequence[int], seed: int, *, secure: bool, refuse_shortfall: bool
    ) -> PathRelease:
        """One release with these clients gone before masking, noise planned for all."""
        ...


@runtime_checkable
class SansIOSecureSum(Protocol):
    """Sans-I/O parties of a secure sum, for the Hypothesis state machine of audit 7.

    Optional methods: ``restore(client)`` (the client rebuilt from its snapshot) and
    ``wire(message)`` (its bytes) — audit 7 then restarts clients before every server message.

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> isinstance(OurTarget().sans_io(), SansIOSecureSum)
    True
    """

    threat_models: tuple[str, ...]
    """The threat models ``setup`` can run ("semi-honest", "malicious")."""

    def setup(
        self,
        *,
        n: int,
        degree: int | None,
        threshold: int,
        bits: int,
        dimension: int,
        seed: int,
        threat_model: str = "semi-honest",
    ) -> tuple[dict[int, Any], Any, dict[int, NDArray[np.uint64]], list[Any]]:
        """(clients by id, server, inputs by id, the first messages in flight)."""
        ...

    def client_receive(self, client: Any, message: Any) -> list[Any]:
        """Deliver to a client; raises :attr:`protocol_error` when it aborts."""
        ...

    def server_receive(self, server: Any, message: Any) -> list[Any]:
        """Deliver to the server."""
        ...

    def close_phase(self, server: Any) -> list[Any]:
        """The server's deadline for the current phase."""
        ...

    def to_server(self, message: Any) -> bool:
        """Whether the message travels to the server."""
        ...

    def peer(self, message: Any) -> int:
        """The client a message is from (to the server) or for (from the server)."""
        ...

    def hostile_unmask(self, message: Any, *, swap: bool = False) -> Any | None:
        """A malicious server's variant of an unmask request (``None`` for other messages).

        ``swap=False``: the first surviving neighbour is named dropped as well (both shares in
        one request); ``swap=True``: it is moved to the dropped list (the other share, in a
        second request).
        """
        ...

    def revealed_shares(self, reply: Any) -> tuple[frozenset[int], frozenset[int]] | None:
        """(owners of the self-mask-seed shares, owners of the key shares) in an unmask reply."""
        ...

    def server_outcome(self, server: Any) -> str:
        """``"running"``, ``"completed"`` or ``"aborted"``."""
        ...

    def server_total(self, server: Any) -> tuple[NDArray[np.uint64], tuple[int, ...]]:
        """(total, survivors) of a completed server."""
        ...

    def server_secrets(self, server: Any) -> tuple[dict[int, tuple[int, int]], set[int], set[int]]:
        """(held share counts per owner, seeds reconstructed for, keys reconstructed for)."""
        ...

    @property
    def protocol_error(self) -> type[Exception]:
        """The base of the errors a party raises on a bad message."""
        ...

    @property
    def peer_error(self) -> type[Exception]:
        """The server's error for a faulty peer (the round goes on)."""
        ...

    @property
    def abort_error(self) -> type[Exception]:
        """The error of a round that aborts cleanly (too few survivors)."""
        ...


@dataclass(frozen=True)
class OverflowProbe:
    """Outcome of summing values whose total exceeds the modulus' centred range.

    ``refused``: the implementation raised instead of summing; otherwise ``max_abs_error`` is the
    distance of the result from the true sum and ``tolerance`` what quantisation explains.

    Examples
    --------
    >>> OverflowProbe(refused=True, max_abs_error=0.0, tolerance=0.0, note="").refused
    True
    """

    refused: bool
    max_abs_error: float
    tolerance: float
    note: str


@runtime_checkable
class SecureSumUnderTest(Protocol):
    """Black-box round checks (audit 7).

    An optional class attribute ``seeded = True`` claims that a seeded round repeats (every
    client's randomness comes from ``seed``); audit 8 then checks it on the masked inputs.
    Optional methods: ``run_session(inputs, *, bits, dropped, threshold, threat_model,
    neighbors, seed)`` runs one key setup and ``len(inputs)`` sums, sum r over the (n, d_r)
    rows ``inputs[r]`` with ``dropped[r]`` vanishing before their masked input, and returns
    each sum's (total, survivors) or ``None`` (audit 7's session checks);
    ``invalid_parameters()`` lists calls that must refuse (:func:`refusal_findings`).

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> isinstance(OurTarget().secure_sum(), SecureSumUnderTest)
    True
    """

    def run_round(
        self, inputs: NDArray[np.int64], *, bits: int, dropped: Sequence[int], seed: int
    ) -> tuple[NDArray[np.int64], tuple[int, ...]] | None:
        """Sum integer rows mod 2^bits; ``dropped`` vanish after sharing keys.

        Returns (total mod 2^bits, survivors) or ``None`` when the round halts.
        """
        ...

    def survives_dropout(self, phase: str, seed: int) -> str | None:
        """An honest round in which one client goes silent before ``phase``.

        ``phase`` is ``"keys"``, ``"shares"``, ``"masked"`` or ``"unmask"``. Returns ``None`` when
        the round completes with exactly the survivors' sum, else what went wrong.
        """
        ...

    def answers_both_shares(self, seed: int) -> bool:
        """Run a round to the unmask phase, ask one client for both shares of a survivor."""
        ...

    def overflow_probe(self, seed: int) -> OverflowProbe:
        """Sum values whose total cannot fit the modulus."""
        ...

    def masked_inputs(self, bits: int, dimension: int, seed: int) -> NDArray[np.uint64] | None:
        """The masked input vectors (rows, entries in Z_{2^bits}) an honest round's server
        receives from clients whose inputs are all the same constant (``None``: not offered)."""
        ...


@runtime_checkable
class MaskPRGUnderTest(Protocol):
    """The mask generator (audit 8).

    An optional ``expand_in_sum(seed, dimension, session, iteration, iterate)`` returns the
    mask on Z_2^32 that pairwise seed ``seed`` gives in sum ``iteration`` (1, 2, …) of a
    session, bound to the 32-byte digest ``iterate`` of the model or centre that sum averages
    at (``b""``: none): audit 8 then requires a different mask in every sum and for every
    iterate.

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> isinstance(OurTarget().mask_prg(), MaskPRGUnderTest)
    True
    """

    @property
    def seed_bytes(self) -> int:
        """Length of a pairwise seed."""
        ...

    @property
    def session_bound(self) -> bool:
        """Whether the expansion takes a session id (``False``: it has no such input, so the
        audit's session-binding check does not apply; fresh keys per round must separate them)."""
        ...

    def expand(
        self, seed: bytes, bits: int, dimension: int, session: bytes
    ) -> NDArray[np.uint64] | None:
        """The mask of pairwise seed ``seed`` in session ``session``, entries in Z_{2^bits}
        (``None``: the implementation has no ring of that width)."""
        ...


@runtime_checkable
class SecretSharingUnderTest(Protocol):
    """Shamir sharing (audit 8).

    An optional ``robust_reconstruct(shares, threshold)`` returns (secret, points of the shares
    found wrong) or ``None`` when it cannot decode (audit 8's error-correction check).

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> isinstance(OurTarget().secret_sharing(), SecretSharingUnderTest)
    True
    """

    @property
    def secret_bytes(self) -> int:
        """Length of the secrets shared in the protocol."""
        ...

    def share(self, secret: bytes, threshold: int, num_shares: int, seed: int) -> list[Any]:
        """``num_shares`` shares of ``secret``; any ``threshold`` of them reconstruct."""
        ...

    def reconstruct(self, shares: Sequence[Any]) -> bytes | None:
        """The secret from shares (``None`` if the implementation refuses)."""
        ...

    def evaluate(
        self, secret: int, coefficients: Sequence[int], points: Sequence[int], prime: int
    ) -> list[int] | None:
        """Shares of ``secret`` under a given polynomial over a tiny field (``None``: fixed)."""
        ...

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
        """``copies`` independent sharings of ``secret`` over Z_prime, (len(points), copies)
        (``None``: the field is fixed)."""
        ...


@runtime_checkable
class GraphParametersUnderTest(Protocol):
    """The SecAgg+ degree and threshold choice (audit 8).

    An optional class attribute ``claims_smallest_degree = True`` claims that the degree is the
    smallest even one meeting both bounds; audit 8 then checks that k − 2 meets them with no t.
    ``claims_smallest_threshold = True`` claims that t is the smallest threshold meeting both
    bounds at that degree, but 2 rather than 1 when 2 also meets them; audit 8 recomputes it.
    An optional method ``at_targets(failure_log2, security_bits)`` returns the same picker for
    other targets: audit 8 then checks it at three more pairs too. An optional method
    ``reported_bounds(n, dropout_rate, corruption_rate)`` returns the
    (log2 recovery failure, security bits[, secrecy bits, connectivity bits]) the picker
    reports for its choice; audit 8 checks them against the exact bounds. An optional method
    ``log2_tail(population, successes, draws, at_least)`` exposes the hypergeometric tail the
    bounds are built from (log2, rounded up); audit 8 checks it against the exact tail, supports
    of one point included. ``invalid_parameters()``: calls that must refuse,
    ``boundary_parameters()``: calls that must be served (:func:`refusal_findings`).

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> isinstance(OurTarget().graph_parameters(), GraphParametersUnderTest)
    True
    """

    @property
    def failure_log2(self) -> float:
        """Claimed log2 bound on the recovery failure probability."""
        ...

    @property
    def security_bits(self) -> float:
        """Claimed statistical security in bits (secrecy + disconnection)."""
        ...

    def parameters(
        self, num_clients: int, dropout_rate: float, corruption_rate: float
    ) -> tuple[int, int]:
        """(degree k, threshold t) chosen for n clients; k ≥ n − 1 means the complete graph."""
        ...


@runtime_checkable
class NoisyAverageUnderTest(Protocol):
    """One noisy (secure) average per round, for a DP training loop (audit 9).

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> isinstance(OurTarget().noisy_average(), NoisyAverageUnderTest)
    True
    """

    def noisy_average(
        self, vectors: NDArray[np.float64], *, clip: float, rho: float, seed: int
    ) -> tuple[NDArray[np.float64], Any]:
        """The released average of the clipped vectors and the release's privacy event."""
        ...

    def epsilon(self, events: Sequence[Any], delta: float) -> float:
        """The ε claimed for all the releases together."""
        ...


@runtime_checkable
class AuditTarget(Protocol):
    """An implementation under audit: each method returns a capability or nothing.

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> isinstance(OurTarget(), AuditTarget)
    True
    """

    @property
    def name(self) -> str:
        """Short name (``ours``, ``flower``)."""
        ...

    def describe(self) -> Mapping[str, str]:
        """Versions and configuration, for the report."""
        ...

    def samplers(self) -> Sequence[SamplerUnderTest]:
        """Discrete Gaussian samplers."""
        ...

    def known_answers(self) -> Sequence[KnownAnswer]:
        """Committed outputs from replayed streams."""
        ...

    def accountant(self) -> AccountantUnderTest | None:
        """The privacy accountant."""
        ...

    def mechanisms(self) -> Sequence[NeighbouringMechanism]:
        """Noisy releases on neighbouring inputs (the first is the reference configuration)."""
        ...

    def dropout_noise(self) -> Sequence[DropoutNoise]:
        """Aggregates whose noise is checked under dropout."""
        ...

    def sans_io(self) -> SansIOSecureSum | None:
        """Sans-I/O secure-sum parties."""
        ...

    def secure_sum(self) -> SecureSumUnderTest | None:
        """Black-box secure-sum rounds."""
        ...

    def mask_prg(self) -> MaskPRGUnderTest | None:
        """The mask PRG."""
        ...

    def secret_sharing(self) -> SecretSharingUnderTest | None:
        """Shamir sharing."""
        ...

    def graph_parameters(self) -> GraphParametersUnderTest | None:
        """SecAgg+ parameter choice."""
        ...

    def noisy_average(self) -> NoisyAverageUnderTest | None:
        """The noisy average a DP trainer uses."""
        ...

    def attack_surface(self) -> AttackSurface | None:
        """The secure sum as the attack audits drive it (:class:`audits.attacks.AttackSurface`)."""
        ...


class FixedFieldSharing:
    """Shamir over one fixed field (GF(2^128) in Flower and OpenFL): no tiny field to enumerate,
    so audit 8's exhaustive and sampled secrecy checks are ``n/a`` for it.

    Examples
    --------
    >>> FixedFieldSharing().evaluate(1, [1], [1, 2], 5) is None
    True
    """

    def evaluate(
        self, secret: int, coefficients: Sequence[int], points: Sequence[int], prime: int
    ) -> list[int] | None:
        """``None``: the field is fixed."""
        return None

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
        """``None``: the field is fixed."""
        return None


class PartialTarget:
    """A target that offers no capability; an adapter overrides the ones its implementation has
    (every audit whose capability stays absent reports ``n/a``).

    Examples
    --------
    >>> class Nothing(PartialTarget):
    ...     name = "nothing"
    >>> target = Nothing()
    >>> target.samplers(), target.secure_sum(), isinstance(target, AuditTarget)
    ((), None, True)
    """

    name = "partial"

    def describe(self) -> Mapping[str, str]:
        """No version information."""
        return {}

    def samplers(self) -> Sequence[SamplerUnderTest]:
        """None."""
        return ()

    def known_answers(self) -> Sequence[KnownAnswer]:
        """None."""
        return ()

    def accountant(self) -> AccountantUnderTest | None:
        """None."""
        return None

    def mechanisms(self) -> Sequence[NeighbouringMechanism]:
        """None."""
        return ()

    def dropout_noise(self) -> Sequence[DropoutNoise]:
        """None."""
        return ()

    def sans_io(self) -> SansIOSecureSum | None:
        """None."""
        return None

    def secure_sum(self) -> SecureSumUnderTest | None:
        """None."""
        return None

    def mask_prg(self) -> MaskPRGUnderTest | None:
        """None."""
        return None

    def secret_sharing(self) -> SecretSharingUnderTest | None:
        """None."""
        return None

    def graph_parameters(self) -> GraphParametersUnderTest | None:
        """None."""
        return None

    def noisy_average(self) -> NoisyAverageUnderTest | None:
        """None."""
        return None

    def attack_surface(self) -> AttackSurface | None:
        """None."""
        return None


def load_modules(modules: Mapping[str, str], requirement: str) -> SimpleNamespace:
    """Import an implementation's modules for its adapter, or raise ``ImportError`` naming
    ``requirement`` (what to install) and the import that failed.

    Examples
    --------
    >>> load_modules({"json": "json"}, "nothing").json.__name__
    'json'
    >>> load_modules({"x": "no_such_module_here"}, "pip install x")
    Traceback (most recent call last):
    ...
    ImportError: this adapter needs pip install x (No module named 'no_such_module_here')
    """
    try:
        return SimpleNamespace(**{k: importlib.import_module(m) for k, m in modules.items()})
    except ImportError as error:
        raise ImportError(f"this adapter needs {requirement} ({error})") from error


def refusal_findings(offered: object) -> tuple[int, list[str]]:
    """The calls a capability lists in an optional ``invalid_parameters()`` (label → a call with
    one privacy or protocol parameter out of its range: ρ, σ, δ or a sampler TV that voids the
    guarantee, a dropout rate of 1, a threshold of 0, a client id outside the wire format). Each
    must refuse with a ``ValueError`` or ``TypeError`` — not accept the value, not fail with
    another error. A case may name what it must raise as a third element (an exception class:
    that one; a ``Warning`` class: the call must issue it, and may return), with a fourth
    element as a phrase its message contains (a refusal that states its limit states the
    right one). An optional
    ``boundary_parameters()`` lists calls documented as valid (the ends of the documented
    ranges, a sound configuration run with warnings as errors), which must be served. Returns
    (calls made, findings); (0, []) when the capability lists none.

    Examples
    --------
    >>> class Lenient:
    ...     def invalid_parameters(self):
    ...         return (("sqrt(-1)", lambda: (-1) ** 0.5), ("int('x')", lambda: int("x")))
    ...     def boundary_parameters(self):
    ...         return (("int('0')", lambda: int("0")), ("int('')", lambda: int("")))
    >>> calls, findings = refusal_findings(Lenient())
    >>> calls, [finding[:40] for finding in findings]
    (4, ['sqrt(-1) accepted (returned a complex)', "int('') not served, though documented as"])
    """
    listed = getattr(offered, "invalid_parameters", None)
    edges = getattr(offered, "boundary_parameters", None)
    if listed is None and edges is None:
        return 0, []
    findings: list[str] = []
    cases = tuple(listed()) if listed is not None else ()
    for label, call, *named in cases:
        expected: tuple[type[BaseException], ...] = (ValueError, TypeError)
        if named and issubclass(named[0], Warning):
            findings.extend(_warning_findings(label, call, named[0], *named[1:]))
            continue
        if named:
            expected = (named[0],)
        try:
            value = call()
        except expected as error:
            if len(named) > 1 and named[1] not in str(error):
                findings.append(f"{label} refused, but its message does not say {named[1]!r}: "
                                f"{error}"[:300])  # fmt: skip
            continue
        except Exception as error:  # a refusal, but not a clear one
            wanted = " or ".join(kind.__name__ for kind in expected)
            failure = f"{label} failed with {type(error).__name__}, not {wanted}: {error}"
            findings.append(failure[:200])
            continue
        findings.append(f"{label} accepted (returned a {type(value).__name__})")
    boundary = tuple(edges()) if edges is not None else ()
    for label, call in boundary:
        try:
            call()
        except Exception as error:
            findings.append(
                f"{label} not served, though documented as valid "
                f"({type(error).__name__}: {error})"[:240]
            )
    return len(cases) + len(boundary), findings


def _warning_findings(
    label: str, call: Callable[[], Any], warning: type[Warning], saying: str = ""
) -> list[str]:
    """The call must issue ``warning`` whose message contains ``saying`` (whatever filters are
    active) and must not fail."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call()
        except Exception as error:
            return [f"{label} failed with {type(error).__name__}: {error}"[:200]]
    if any(issubclass(w.category, warning) and saying in str(w.message) for w in caught):
        return []
    about = f" saying {saying!r}" if saying else ""
    return [f"{label}: no {warning.__name__}{about} issued"]
