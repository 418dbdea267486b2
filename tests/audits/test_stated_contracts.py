"""What the audits read from the public surface: a sampler's stated σ², a picker's reported
secrecy and connectivity bits, a client's damaged snapshot — ours pass, planted defects fail."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import dpquantile
from audits import OurTarget, Verdict, audit_sampler_exactness
from audits.ours import _OurSampler, _OurSansIO
from audits.privacy_audits import _kls21_export_checks, kls21_renyi_reference
from audits.protocol_audits import _corrupt_snapshot_checks, _reported_bound_errors
from audits.sampler_audits import _stated_variance_problem
from dpquantile import _fast_sampler
from secagg import ClientState
from secagg.client import _SNAPSHOT_VERSION

_ROUNDED = Fraction(9) * (1 + Fraction(1, 10**12))


@pytest.mark.parametrize(
    ("exact", "target", "sampled", "words"),
    [
        (True, Fraction(9), Fraction(9), None),
        (False, Fraction(9), Fraction(9) * (1 + Fraction(1, 10**12)), None),
        (False, Fraction(9), Fraction(9) * (1 - Fraction(1, 10**12)), "below the σ² charged"),
        (False, Fraction(9), Fraction(9) * (1 + Fraction(1, 10**7)), "more than 10⁻⁹ above"),
        (True, Fraction(9), Fraction(9) * (1 + Fraction(1, 10**12)), "claims exactness"),
        (False, Fraction(8), Fraction(9), "states target σ² = 8"),
        (True, None, Fraction(9), "not exact fractions"),  # a property turned into a method
        # A sampler that rounds may state the σ̃² it samples as its target (ours does); an
        # exact one may not, and a target that is neither is wrong.
        (False, _ROUNDED, _ROUNDED, None),
        (True, _ROUNDED, _ROUNDED, "states target"),
        (False, Fraction(10), _ROUNDED, "states target σ² = 10"),
    ],
)
def test_stated_variance_rules(exact: bool, target: Any, sampled: Any, words: str | None) -> None:
    problem = _stated_variance_problem(exact, 3.0, target, sampled)
    assert (problem is None) if words is None else (problem is not None and words in problem)


def test_a_sampler_stating_less_variance_than_requested_fails() -> None:
    @dataclasses.dataclass(frozen=True)
    class Short(_OurSampler):
        def stated_sigma_squared(self, sigma: float) -> tuple[Any, Any]:
            target, sampled = super().stated_sigma_squared(sigma)
            short = Fraction(99, 100) if sigma > 100 else 1  # σ̃² and the law it targets
            return target * short, sampled * short

    class Target(OurTarget):
        def samplers(self) -> Sequence[Any]:
            return (Short("fast", "FastDiscreteGaussian", exact=False),)

    assert audit_sampler_exactness(OurTarget()).verdict is Verdict.PASS
    result = audit_sampler_exactness(Target())
    assert result.verdict is Verdict.FAIL
    assert len(result.findings) == 6  # σ = 346, 1000, 1e5, 3e7 and the two rounding-edge σ
    assert all("below the σ² charged" in finding for finding in result.findings)


@pytest.mark.parametrize(
    ("factor", "failing"),
    [
        (1e9, 7),  # held-out 9's survivor: the alias table's TV × 1/10⁻⁹ for × (1 + 10⁻⁹)
        (1 - 1e-6, 7),  # understated: less than the proof covers
        (2.0, 3),  # the one-table bound doubled from σ = 64 on: σ = 346, 1000, 1e5, 3e7 keep it
    ],
)
def test_a_sampler_stating_another_tv_than_its_proof_fails(factor: float, failing: int) -> None:
    @dataclasses.dataclass(frozen=True)
    class Loose(_OurSampler):
        def stated_tv(self, sigma: float) -> tuple[float, float]:
            stated, proved = super().stated_tv(sigma)
            if factor == 2.0:  # every σ stated at the two-table bound
                return 2 * proved if sigma < 64 else stated, proved
            return stated * factor, proved

    class Target(OurTarget):
        def samplers(self) -> Sequence[Any]:
            return (Loose("fast", "FastDiscreteGaussian", exact=False),)

    result = audit_sampler_exactness(Target())
    assert result.verdict is Verdict.FAIL
    assert len(result.findings) == failing, result.findings
    assert all("per draw; its proof gives" in finding for finding in result.findings)


@pytest.mark.parametrize("wrong", ["raises", "one value"])
def test_a_sampler_refusing_a_draw_of_size_zero_fails(wrong: str) -> None:
    # The held-out-8 survivor `count < 0` in the block path's draw: size 0 (valid) raises.
    @dataclasses.dataclass(frozen=True)
    class NoEmpty(_OurSampler):
        def prepare(self, sigma: float) -> Any:
            real = super().prepare(sigma)

            def draw(size: int, seed: int) -> Any:
                if size == 0 and sigma >= 64:
                    if wrong == "raises":
                        raise ValueError("need at least one array to concatenate")
                    return real(1, seed)
                return real(size, seed)

            return draw

    class Target(OurTarget):
        def samplers(self) -> Sequence[Any]:
            return (NoEmpty("fast", "FastDiscreteGaussian", exact=False),)

    result = audit_sampler_exactness(Target())
    assert result.verdict is Verdict.FAIL
    assert [f.partition(":")[0] for f in result.findings] == ["fast σ=64.0", "fast σ=1000.0"]
    assert all("a draw of size 0" in f for f in result.findings)


def test_reported_secrecy_and_connectivity_bits_are_checked_when_given() -> None:
    recovery, secrecy, disconnection = Fraction(1, 2**30), Fraction(1, 2**50), Fraction(1, 2**45)
    honest = (-30.0, 44.95560588, 50.0, 45.0)
    assert _reported_bound_errors(honest, recovery, secrecy, disconnection) == []
    assert _reported_bound_errors(honest[:2], recovery, secrecy, disconnection) == []
    wrong_sign = (-30.0, 44.95560588, -50.0, 45.0)
    assert _reported_bound_errors(wrong_sign, recovery, secrecy, disconnection) == [
        "reported secrecy bits -50, exact 50"
    ]


class _Lenient:
    """Our sans-IO target whose restore accepts any bytes (a parser that trusts its lengths)."""

    def __init__(self) -> None:
        self.real = _OurSansIO()
        self.protocol_error = self.real.protocol_error

    def snapshot_bytes(self, client: Any) -> bytes:
        return self.real.snapshot_bytes(client)

    def restore_bytes(self, client: Any, data: bytes) -> Any:
        return client

    def damaged_snapshots(self, data: bytes) -> dict[str, bytes]:
        return self.real.damaged_snapshots(data)


def test_damaged_snapshots_must_be_refused() -> None:
    ours = _OurSansIO()
    clients, *_ = ours.setup(n=5, degree=None, threshold=3, bits=16, dimension=3, seed=0)
    findings: list[str] = []
    assert _corrupt_snapshot_checks(ours, dict(clients), "ours", findings) == 10
    assert findings == []
    lenient = _Lenient()
    tried = _corrupt_snapshot_checks(lenient, dict(clients), "lenient", findings)  # type: ignore[arg-type]
    assert tried == 10 and len(findings) == 9
    assert any("last field claims a byte more" in finding for finding in findings)


class _VersionBlind(_Lenient):
    """Restores whatever format version the snapshot names (held-out 9's survivor: the version
    test joined to the state test by `and`), the rest of the parser intact."""

    def restore_bytes(self, client: Any, data: bytes) -> Any:
        if len(data) > 1 and data[1] < len(ClientState):
            data = bytes([_SNAPSHOT_VERSION]) + data[1:]
        return self.real.restore_bytes(client, data)


def test_a_snapshot_of_another_format_version_must_be_refused() -> None:
    ours = _OurSansIO()
    clients, *_ = ours.setup(n=5, degree=None, threshold=3, bits=16, dimension=3, seed=0)
    findings: list[str] = []
    _corrupt_snapshot_checks(_VersionBlind(), dict(clients), "blind", findings)  # type: ignore[arg-type]
    assert findings == [
        "restore (blind): a snapshot of the next format version was accepted",
        "restore (blind): a snapshot of the previous format version was accepted",
    ]


def test_a_sampler_drawing_off_zero_at_a_vanishing_sigma_fails() -> None:
    # N_ℤ(0, σ²) at σ = 2^-32 is 0 but for mass e^(−2^63), at 2^-16 but for e^(−2^31); a
    # sampler whose arithmetic breaks there (the held-out mutant's int64 overflow in the exact
    # sampler's candidates; seed 7's `**` for `*` in its 64-bit path test, which at 2^-16 let
    # products of 2^64 through) must not pass, nor one returning noise of the wrong scale.
    @dataclasses.dataclass(frozen=True)
    class Jumpy(_OurSampler):
        def prepare(self, sigma: float) -> Any:
            real = super().prepare(sigma)
            if sigma > 2.0**-16:
                return real
            return lambda size, seed: real(size, seed) + 1

    class Target(OurTarget):
        def samplers(self) -> Sequence[Any]:
            return (Jumpy("exact", "ExactDiscreteGaussian", exact=True),)

    result = audit_sampler_exactness(Target())
    assert result.verdict is Verdict.FAIL
    assert [f for f in result.findings if "non-zero" in f] == [
        "exact σ=2.32831e-10: drew 500 non-zero values, where N_ℤ(0, σ²) puts mass below "
        "2·e^(−2^63) off 0",
        "exact σ=1.52588e-05: drew 500 non-zero values, where N_ℤ(0, σ²) puts mass below "
        "2·e^(−2^31) off 0",
    ]


class _Exports:
    def __init__(self, exported: Any) -> None:
        self.exported = exported

    def kls21_exports(self) -> Any:
        return self.exported


def test_kls21_exports_must_be_the_smallest_valid_line() -> None:
    ours = OurTarget().accountant()
    findings: list[str] = []
    _kls21_export_checks(ours, findings)
    assert findings == []
    exported = ours.kls21_exports()  # type: ignore[union-attr]
    if not exported:
        pytest.skip("dp_accounting is not installed")
    (case, (rho, xi)), *_ = exported  # n = 2, σ = 0.5: τ matters, the lines differ
    # The held-out mutant's choice (smallest ξ/ρ): KLS21's third line, ξ = 0 and
    # ρ = (Δ₂/(√n σ) + τ√d)²/2 ≈ 2.56 — valid at every α, looser than (1, 0.85) at α = 1.
    tau = 10.0 * math.exp(-2.0 * math.pi**2 * 0.25 / 2.0)
    third = 0.5 * (1.0 / (math.sqrt(2.0) * 0.5) + tau) ** 2
    assert third > 2.5 and kls21_renyi_reference(2, 0.5, l1=1.0, l2=1.0, dimension=1, alpha=1.0) < 2
    _kls21_export_checks(_Exports([(case, (third, 0.0))]), findings)
    _kls21_export_checks(_Exports([(case, (rho * 0.9, xi))]), findings)
    assert len(findings) == 4
    assert "not the smallest line at α = 1" in findings[0]
    assert all("below KLS21 Thm. 1" in finding for finding in findings[1:])  # α = 1.5, 4, 32


@pytest.mark.parametrize("broken", ["raises", "jumps"])
def test_a_laplace_sampler_failing_at_a_vanishing_scale_fails(broken: str) -> None:
    # Seed-7 survivor: `and` → `or` in the discrete Laplace sampler's 64-bit path test sent a
    # float scale of 1e-5 (denominator > 2^62) into int64 arithmetic: OverflowError.
    real = OurTarget().discrete_laplace_sampler()

    class Target(OurTarget):
        def discrete_laplace_sampler(self) -> Any:
            def prepare(scale: float) -> Any:
                if scale > 1e-3:
                    return real(scale)
                if broken == "raises":
                    raise OverflowError("Python int too large to convert to C long")
                return lambda size, seed: real(scale)(size, seed) + 1

            return prepare

    result = audit_sampler_exactness(Target())
    assert result.verdict is Verdict.FAIL
    (finding,) = result.findings
    assert finding.startswith("discrete Laplace scale=1e-05: ")
    assert ("OverflowError" in finding) == (broken == "raises")
    assert audit_sampler_exactness(OurTarget()).verdict is Verdict.PASS


def test_an_alias_sampler_that_never_resolves_a_tie_fails() -> None:
    # Held-out 9's survivor `ties = np.flatnonzero(top is threshold)`: no tie is ever resolved
    # with U's next 160 bits — each draw ≈ 2^-32 off in TV, beyond any statistic or replay.
    @dataclasses.dataclass(frozen=True)
    class TieBlind(_OurSampler):
        def draw_from_words(self, sigma: float, words: Any) -> int:
            ones = words.copy()
            ones[1:] = np.uint64(2**64 - 1)  # whatever U's next bits, the alias is taken
            return super().draw_from_words(sigma, ones)

    class Target(OurTarget):
        def samplers(self) -> Sequence[Any]:
            return (TieBlind("fast", "FastDiscreteGaussian", exact=False),)

    assert audit_sampler_exactness(OurTarget()).verdict is Verdict.PASS
    result = audit_sampler_exactness(Target())
    assert result.verdict is Verdict.FAIL
    assert len(result.findings) == 12  # the "U just below τ" half at four σ, three columns
    assert all("U just below τ" in finding for finding in result.findings)


def test_an_alias_sampler_comparing_all_of_tau_on_a_tie_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 10's survivor `tau & ((1 & lower) - 1)`: a tie compared U's low 160 bits with
    # all of τ, not τ's low 160 bits — right exactly on the tail columns whose τ has zero top
    # bits, the only ones the check replayed then.
    def whole_tau(self: Any, words: Any, column: Any, top: Any) -> Any:
        threshold = self.threshold_top[column]
        keep = top < threshold
        for position in np.flatnonzero(top == threshold):
            fresh = words.take(3)
            bits = (int(fresh[0]) << 128) | (int(fresh[1]) << 64) | int(fresh[2])
            keep[position] = bits >> 32 < self.thresholds[int(column[position])]
        return np.where(keep, column, self.alias[column])

    assert audit_sampler_exactness(OurTarget()).verdict is Verdict.PASS
    monkeypatch.setattr(_fast_sampler._AliasTable, "resolve", whole_tau)
    result = audit_sampler_exactness(OurTarget())
    assert result.verdict is Verdict.FAIL
    assert len(result.findings) == 8  # "U at τ" on two columns with τ ≥ 2^160, at four σ
    assert all("U at τ" in finding for finding in result.findings)


def test_a_block_sampler_that_never_rejects_a_word_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 11's survivor `None if limit <= 1 << 64`: the block regime's Bernoulli word was
    # never rejected at or above q·2a, so ⌊d/q⌋ was not uniform on [0, 2a) — a bias of up to
    # (2^64 mod 2a)/2^64 per candidate, far beyond the stated TV and any fast statistic.
    real = _fast_sampler._block_plan

    def never_rejects(a: int, b: int) -> Any:
        return dataclasses.replace(real(a, b), limit=None)

    assert audit_sampler_exactness(OurTarget()).verdict is Verdict.PASS
    monkeypatch.setattr(_fast_sampler, "_block_plan", never_rejects)
    result = audit_sampler_exactness(OurTarget())
    assert result.verdict is Verdict.FAIL
    assert len(result.findings) == 6  # two rejected words at each of three σ
    assert all("must be rejected" in finding for finding in result.findings)


def test_a_block_sampler_that_skips_its_documented_rounding_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 12's survivor `2 | a < 1 << _DENOMINATOR_BITS`: σ² = a/b with a just below
    # 2^56 (so 2a ≥ 2^56) was sampled unrounded, against the documented layout 2a < 2^56. The
    # draws stay within 2^-52 of the law either way; only the stated rule tells.
    real = _fast_sampler._block_variance

    def unrounded(sigma_squared: Fraction) -> tuple[int, int]:
        a, b = sigma_squared.numerator, sigma_squared.denominator
        return (a, b) if (2 | a) < 1 << 56 else real(sigma_squared)

    assert audit_sampler_exactness(OurTarget()).verdict is Verdict.PASS
    monkeypatch.setattr(_fast_sampler, "_block_variance", unrounded)
    result = audit_sampler_exactness(OurTarget())
    assert result.verdict is Verdict.FAIL
    assert len(result.findings) == 1  # σ = (2^28 − 1)/2^20: 2a ≈ 2^57, a < 2^56
    assert "documented: σ² rounded up" in result.findings[0]


@pytest.mark.parametrize(
    ("sigma", "sampled", "words"),
    [
        (3.0, Fraction(9), None),
        (3.0, Fraction(9) + Fraction(1, 2**60), "σ² itself"),  # the alias regime is exact
        (100.5, Fraction(201**2, 4), None),  # 2a = 2·40401 < 2^56: σ² itself
        (100.5, Fraction(201**2 + 1, 4), "σ² itself"),
        (100.3, Fraction(100.3) ** 2, "rounded up"),  # 2a ≥ 2^56: must be rounded
        (100.3, Fraction(math.ceil(Fraction(100.3) ** 2 * 2**40), 2**40), None),
        (100.3, Fraction(math.floor(Fraction(100.3) ** 2 * 2**40), 2**40), "rounded up"),
        (100.3, Fraction(math.ceil(Fraction(100.3) ** 2 * 2**40) + 1, 2**40), "rounded up"),
        (100.3, Fraction(math.ceil(Fraction(100.3) ** 2 * 2**20), 2**20), "rounded up"),  # > 2^-52
        (100.3, Fraction(math.ceil(Fraction(100.3) ** 2 * 3**25), 3**25), "rounded up"),
    ],
)
def test_the_fast_samplers_documented_rounding_rule(
    sigma: float, sampled: Fraction, words: str | None
) -> None:
    fast = _OurSampler("fast", "FastDiscreteGaussian", exact=False)
    problem = fast.sampled_variance_problem(sigma, sampled)
    assert (problem is None) if words is None else (problem is not None and words in problem)
    stated = fast.stated_sigma_squared(sigma)[1]
    assert fast.sampled_variance_problem(sigma, stated) is None  # ours meets its rule
    exact = _OurSampler("exact", "ExactDiscreteGaussian", exact=True)
    assert exact.sampled_variance_problem(sigma, sampled) is None  # held to σ² elsewhere


def test_rejected_words_exist_only_where_something_is_rejected() -> None:
    fast = _OurSampler("fast", "FastDiscreteGaussian", exact=False)
    assert fast.rejected_words(33.0) is None  # the alias regime: no Bernoulli word
    assert fast.rejected_words(2.0**20) is None  # 2a = 2^41 divides 2^64: nothing rejected
    assert _OurSampler("exact", "ExactDiscreteGaussian", exact=True).rejected_words(100.0) is None
    cases = fast.rejected_words(100.0)
    assert cases is not None and len(cases) == 2
    limit = (2**64 // 20_000) * 20_000  # σ² = 10⁴: 2a = 2·10⁴
    assert [int(words[1]) for _, words, _ in cases] == [limit, 2**64 - 1]


def test_a_map_entry_cut_short_in_a_snapshot_must_be_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 10's survivor `len(value) > size` in the snapshot's map decoder: a map's last
    # entry one byte short (its field's length shrunk to match) was restored.
    from audits.adversary import AdversarialRound  # noqa: PLC0415
    from audits.attacks import inputs_for  # noqa: PLC0415
    from secagg import client as client_module  # noqa: PLC0415

    game = AdversarialRound(inputs_for(5), threshold=2, threat_model="semi-honest", seed=0)
    game.run()
    ours = _OurSansIO()
    findings: list[str] = []
    assert _corrupt_snapshot_checks(ours, {1: game.clients[1]}, "ours", findings) == 11
    assert findings == []
    real = client_module._decode_map

    def lenient(data: bytes, value_bytes: int) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        offset = 0
        while offset < len(data):
            key = int.from_bytes(data[offset : offset + 4], "little")
            size = int.from_bytes(data[offset + 4 : offset + 8], "little")
            out[key] = data[offset + 8 : offset + 8 + size]  # a short last value let through
            offset += 8 + size
        return out if data else real(data, value_bytes)

    monkeypatch.setattr(client_module, "_decode_map", lenient)
    _corrupt_snapshot_checks(ours, {1: game.clients[1]}, "lenient", findings)
    assert findings == [
        "restore (lenient): a snapshot whose map field's last entry is a byte short was accepted"
    ]


@pytest.mark.parametrize("stated", ["method", "float"])
def test_a_laplace_sampler_stating_another_scale_fails(stated: str) -> None:
    # Held-out 10's survivor: ExactDiscreteLaplace.scale lost its @property (a bound method);
    # a float in place of the exact Fraction is no better.
    class Target(OurTarget):
        @staticmethod
        def discrete_laplace_stated_scale(scale: float) -> Any:
            sampler = dpquantile.ExactDiscreteLaplace(scale)
            return sampler.sample if stated == "method" else float(sampler.scale)

    assert audit_sampler_exactness(OurTarget()).verdict is Verdict.PASS
    result = audit_sampler_exactness(Target())
    assert result.verdict is Verdict.FAIL and len(result.findings) == 5  # _LAPLACE_SCALES
    assert all("states its scale as" in finding for finding in result.findings)


def test_a_discrete_laplace_sampler_dividing_in_floats_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 12's survivor `// s` → `/ s` in the discrete Laplace sampler's big-integer path
    # (taken at scales near its 2^62 ceiling): Y = (U + tV)/s became a float, rounded to 53 bits
    # — an exact sampler no longer exact, invisible to any statistic.
    import inspect  # noqa: PLC0415

    from dpquantile import samplers  # noqa: PLC0415

    assert audit_sampler_exactness(OurTarget()).verdict is Verdict.PASS
    source = inspect.getsource(samplers._discrete_laplace)
    assert source.count(") // s\n") == 1
    namespace = dict(vars(samplers))  # traced as dpquantile.samplers, like the real one
    exec(compile(source.replace(") // s\n", ") / s\n"), samplers.__file__, "exec"), namespace)
    monkeypatch.setattr(samplers, "_discrete_laplace", namespace["_discrete_laplace"])
    result = audit_sampler_exactness(OurTarget())
    assert result.verdict is Verdict.FAIL and result.findings
    assert all(f.startswith("discrete Laplace scale=(2^62 − 1)/(2^22 + 1) (exact): float")
               for f in result.findings)  # fmt: skip
