"""Audits 4, 7 and 8 ask every parameter that would void a guarantee to be refused with a clear
error: ours refuses all of them, and a lenient or crashing validation is caught."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest

import dpquantile
from audits.ours import OurTarget
from audits.targets import refusal_findings


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_ours_refuses_every_listed_parameter() -> None:
    target = OurTarget()
    assert refusal_findings(target.accountant()) == (74, [])
    assert refusal_findings(target.graph_parameters()) == (39, [])
    assert refusal_findings(target.secure_sum()) == (19, [])
    assert refusal_findings(target.secret_sharing()) == (13, [])
    assert refusal_findings(target.mask_prg()) == (10, [])


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_rho_budget_failing_on_an_infinite_spend_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 12's survivor `math.isinf(would_spend) or self._delta is not None` in
    # PrivacyBudget.spend: a ρ budget asked to spend ρ = ∞ asked for a certificate at δ = None
    # and raised TypeError instead of BudgetExceededError.
    budget_class = dpquantile.accounting.PrivacyBudget
    real = budget_class.spend

    def asks_for_a_certificate(self: Any, event: Any, count: int = 1) -> None:
        trial, would_spend = self._prospective(event, count)
        if math.isinf(would_spend):
            trial.certificate(self._delta)
        real(self, event, count)

    monkeypatch.setattr(budget_class, "spend", asks_for_a_certificate)
    calls, findings = refusal_findings(OurTarget().accountant())
    assert calls == 74 and len(findings) == 1
    assert findings[0].startswith("PrivacyBudget(rho=1).spend(ZCDP(1e308), count=10**6)")
    assert "failed with TypeError, not BudgetExceededError" in findings[0]


def test_a_parameter_record_misstating_its_degree_limit_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 12's survivor `n - 1 = {n ** 1}`: a SecAggPlusParameters record refusing an
    # edited degree stated its limit as n instead of n − 1.
    from secagg.graph_parameters import SecAggPlusParameters  # noqa: PLC0415

    real = SecAggPlusParameters.__post_init__

    def misstated(self: Any) -> None:
        try:
            real(self)
        except ValueError as error:
            n = self.num_clients
            raise ValueError(str(error).replace(f"n - 1 = {n - 1}", f"n - 1 = {n}")) from None

    monkeypatch.setattr(SecAggPlusParameters, "__post_init__", misstated)
    calls, findings = refusal_findings(OurTarget().graph_parameters())
    assert calls == 39 and len(findings) == 2
    assert all("its message does not say 'n - 1 = 99; got 1" in f for f in findings)


def test_a_fast_sampler_ceiling_past_its_proof_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 9's survivor MAX_FAST_SIGMA = 2 << 25: σ up to 2^26 accepted, the TV bound being
    # proved for σ ≤ 2^25 only (dpquantile/fast_sampler_proof.md §1).
    from dpquantile import _fast_sampler  # noqa: PLC0415

    monkeypatch.setattr(_fast_sampler, "MAX_FAST_SIGMA", float(2 << 25))
    _, findings = refusal_findings(OurTarget().accountant())
    assert findings == [
        "FastDiscreteGaussian(sigma=1.01·2^25) accepted (returned a FastDiscreteGaussian)"
    ]


@pytest.mark.parametrize(
    ("right", "wrong", "phrase"),
    [
        ("{n - 2}", "{n ** 2}", "n - 2 = 8, got 10"),  # held-out 11's survivor (four earlier)
        ("{corrupt + dropped}", "{corrupt - dropped}", "n - 2 = 8, got 10"),
        ("at most n - 1 = {k}", "at most n - 1 = {n}", "at most n - 1 = 9"),
        ("t >= {t_lo}", "t >= {corrupt}", "t >= 6 (one more"),
    ],
)
def test_a_refusal_stating_the_wrong_limit_is_caught(
    monkeypatch: pytest.MonkeyPatch, right: str, wrong: str, phrase: str
) -> None:
    # The picker's complete-graph refusals quote the limit they enforce; arithmetic mutated in
    # the message alone changes no choice, so only the message can show it.
    import inspect  # noqa: PLC0415
    import textwrap  # noqa: PLC0415

    from secagg import graph_parameters  # noqa: PLC0415

    source = textwrap.dedent(inspect.getsource(graph_parameters._complete_graph_parameters))
    assert source.count(right) == 1
    namespace = dict(vars(graph_parameters))
    exec(compile(source.replace(right, wrong), "<mutated>", "exec"), namespace)
    monkeypatch.setattr(
        graph_parameters, "_complete_graph_parameters", namespace["_complete_graph_parameters"]
    )
    _, findings = refusal_findings(OurTarget().graph_parameters())
    assert len(findings) == 1 and phrase in findings[0] and "does not say" in findings[0], findings


def test_share_arrays_of_the_wrong_rank_must_be_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 9's survivor `values.ndim > 2` for `!= 2` in robust_reconstruct: 1-D shares got
    # past the shape check and failed later with an IndexError.
    from secagg import shamir  # noqa: PLC0415

    real = shamir.robust_reconstruct

    def rank_blind(points: Any, shares: Any, threshold: int, **kwargs: Any) -> Any:
        if np.ndim(shares) == 1:
            return np.asarray(shares, dtype=np.int64)[:, 0]  # what reading column 0 raises
        return real(points, shares, threshold, **kwargs)

    monkeypatch.setattr(shamir, "robust_reconstruct", rank_blind)
    _, findings = refusal_findings(OurTarget().secret_sharing())
    assert findings == [
        "robust_reconstruct(1-D shares) failed with IndexError, not ValueError or TypeError: "
        "too many indices for array: array is 1-dimensional, but 2 were indexed"
    ]


def test_a_tv_of_one_accepted_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpquantile import accounting  # noqa: PLC0415

    real = accounting.DiscreteGaussian.__post_init__

    def lenient(self: Any) -> None:  # a TV of exactly 1 let through
        if self.sampler_tv_bound == 1.0:
            object.__setattr__(self, "sampler_tv_bound", 0.5)
        real(self)
        if self.sampler_tv_bound == 0.5:
            object.__setattr__(self, "sampler_tv_bound", 1.0)

    monkeypatch.setattr(accounting.DiscreteGaussian, "__post_init__", lenient)
    _, findings = refusal_findings(OurTarget().accountant())
    assert findings == [
        "DiscreteGaussian(sampler_tv_bound=1.0) accepted (returned a DiscreteGaussian)"
    ]


def test_a_client_id_check_by_identity_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # The held-out-8 survivor `1 <= client_id is not MAX_ID`: ids past the wire format are
    # accepted and the largest valid one (passed as the very object MAX_ID) refused.
    import secagg.client as client_module  # noqa: PLC0415

    real = client_module.Client.__init__
    largest = client_module.MAX_ID

    def by_identity(self: Any, config: Any, client_id: int, **kwargs: Any) -> None:
        if client_id is largest:
            raise ValueError(f"client_id must lie in [1, {largest}]; got {client_id}")
        if client_id > largest:
            client_id = 1  # accepted: built as a valid client
        real(self, config, client_id, **kwargs)

    monkeypatch.setattr(client_module.Client, "__init__", by_identity)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        _, findings = refusal_findings(OurTarget().secure_sum())
    assert findings == [
        f"Client(client_id={largest + 1}) accepted (returned a Client)",
        f"Client(client_id={2**64}) accepted (returned a Client)",
        f"Client(client_id={largest}) not served, though documented as valid (ValueError: "
        f"client_id must lie in [1, {largest}]; got {largest})",
    ]


def test_a_refusal_by_an_unclear_error_is_a_finding() -> None:
    class Crashes:
        def invalid_parameters(self) -> tuple[tuple[str, Any], ...]:
            return (("log(0)", lambda: math.log(0)), ("1/0", lambda: 1 / 0))

    count, findings = refusal_findings(Crashes())
    # math.log(0) raises ValueError (clear); 1/0 a ZeroDivisionError (not a refusal by contract).
    assert count == 2 and len(findings) == 1 and "ZeroDivisionError" in findings[0]
    assert refusal_findings(object()) == (0, [])


class _Listed:
    """A capability listing one case of each kind refusal_findings knows."""

    def __init__(self, **calls: Any) -> None:
        self.calls = calls

    def invalid_parameters(self) -> tuple[tuple[Any, ...], ...]:
        return tuple(self.calls.get("invalid", ()))

    def boundary_parameters(self) -> tuple[tuple[Any, ...], ...]:
        return tuple(self.calls.get("boundary", ()))


def _warns(message: str) -> None:
    warnings.warn(message, UserWarning, stacklevel=2)


def test_a_named_error_must_be_that_error() -> None:
    # HeadroomError names the bits a ring needs; a plain ValueError would not.
    typed = ("65 bits", lambda: int("x"), LookupError)
    assert refusal_findings(_Listed(invalid=[typed]))[1] == [
        "65 bits failed with ValueError, not LookupError: invalid literal for int() with base "
        "10: 'x'"
    ]
    empty: dict[str, int] = {}
    right: tuple[Any, ...] = ("65 bits", lambda: empty["x"], LookupError)
    assert refusal_findings(_Listed(invalid=[right])) == (1, [])


def test_a_named_warning_must_be_issued_with_its_phrase() -> None:
    cases = [
        ("silent", lambda: None, UserWarning),
        ("other warning", lambda: _warns("t = 1"), UserWarning, "2-client"),
        ("warned", lambda: _warns("a 2-client sum"), UserWarning, "2-client"),
        ("fails", lambda: 1 / 0, UserWarning),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the check sees warnings whatever the filters say
        calls, findings = refusal_findings(_Listed(invalid=cases))
    assert calls == 4
    assert findings == [
        "silent: no UserWarning issued",
        "other warning: no UserWarning saying '2-client' issued",
        "fails failed with ZeroDivisionError: division by zero",
    ]


def test_a_documented_end_of_range_must_be_served() -> None:
    calls, findings = refusal_findings(
        _Listed(boundary=[("int('0')", lambda: int("0")), ("-200", lambda: int("-200.0"))])
    )
    assert calls == 2 and len(findings) == 1
    assert findings[0].startswith("-200 not served, though documented as valid (ValueError")


def test_a_profile_search_that_cannot_answer_zero_and_a_robust_decoder_taking_any_share_are_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Seed-6 survivors: `profile(-1.0) <= delta` sent ε = 0 answers into brentq (ValueError);
    # `(values < 0) // (values >= prime)` let robust_reconstruct take shares ≥ p.
    import dpquantile.accounting as accounting  # noqa: PLC0415
    import secagg.shamir as shamir  # noqa: PLC0415

    real_search = accounting._smallest_epsilon

    def no_zero(profile: Any, delta: float, *, upper: float) -> float:
        if profile(0.0) <= delta:
            raise ValueError("f(a) and f(b) must have different signs")
        return real_search(profile, delta, upper=upper)

    monkeypatch.setattr(accounting, "_smallest_epsilon", no_zero)
    _, findings = refusal_findings(OurTarget().accountant())
    assert len(findings) == 2 and all("not served" in f and "ε(δ" in f for f in findings)
    real_robust = shamir.robust_reconstruct

    def unchecked(points: Any, shares: Any, threshold: int, prime: int = 2**31 - 1) -> Any:
        return real_robust(points, np.mod(np.asarray(shares), prime), threshold, prime)

    monkeypatch.setattr(shamir, "robust_reconstruct", unchecked)
    _, findings = refusal_findings(OurTarget().secret_sharing())
    assert findings == ["robust_reconstruct(a share = p) accepted (returned a tuple)"]


def test_a_quantile_refusing_two_clients_and_serving_one_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Seed-7 survivor: `if n == 2:` for `if n < 2:` refused the fewest clients it documents and
    # released a "quantile" of one client's value (or of none).
    import dpquantile  # noqa: PLC0415

    real = dpquantile.dp_quantile

    def off_by_one(values: Any, q: float, **kwargs: Any) -> Any:
        values = np.asarray(values, dtype=np.float64)
        if values.size == 2:
            raise ValueError("a distributed quantile needs at least 2 clients; got 2")
        padded = np.concatenate([values, np.full(2, 0.5)]) if values.size < 2 else values
        return real(padded, q, **kwargs)

    monkeypatch.setattr(dpquantile, "dp_quantile", off_by_one)
    _, findings = refusal_findings(OurTarget().accountant())
    assert sorted(f.split(" (")[0] for f in findings) == [
        "dp_quantile of 0 client(s) accepted",
        "dp_quantile of 1 client(s) accepted",
        "dp_quantile of 2 clients",
    ]


def test_a_picker_record_whose_complete_graph_flag_lies_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Seed-7 survivor: `complete_graph > (k == n - 1)` for `!=` let a record of degree n − 1
    # say it is not the complete graph (the complete graph's deterministic rule then skipped).
    from secagg import graph_parameters  # noqa: PLC0415

    record = graph_parameters.SecAggPlusParameters
    real = record.__post_init__

    def one_way(self: Any) -> None:
        claimed = self.complete_graph
        if not claimed and self.degree == self.num_clients - 1:
            object.__setattr__(self, "complete_graph", True)  # checked as if it told the truth
            real(self)
            object.__setattr__(self, "complete_graph", claimed)
            return
        real(self)

    monkeypatch.setattr(record, "__post_init__", one_way)
    _, findings = refusal_findings(OurTarget().graph_parameters())
    assert findings == [
        "SecAggPlusParameters(degree=99, n=100) accepted (returned a SecAggPlusParameters)"
    ]


def test_mask_keys_of_other_lengths_and_mixed_relations_in_one_event_are_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Seed-7 survivors: `len(key) < 16` for `!= 16` let 24- and 32-byte keys drive AES-192/256
    # mask streams; `len(found) < 1` for `> 1` let one ComposedEvent mix add/remove and
    # replace-one events (its ρ understated against a replace-one history).
    import dpquantile.accounting as accounting  # noqa: PLC0415
    import secagg.masks as masks  # noqa: PLC0415

    real_add = masks.add_masks

    def any_long_key(accumulator: Any, ring: Any, *, add: Any = (), subtract: Any = ()) -> None:
        short = [k for k in (*add, *subtract) if len(k) < 16]
        if short:
            raise ValueError(f"mask keys are 16 bytes; got {len(short[0])}")
        return real_add(accumulator, ring)  # its accumulator checks, no key used

    monkeypatch.setattr(masks, "add_masks", any_long_key)
    _, findings = refusal_findings(OurTarget().mask_prg())
    assert findings == [
        "add_masks(a 24-byte key) accepted (returned a NoneType)",
        "add_masks(a 32-byte key) accepted (returned a NoneType)",
    ]
    monkeypatch.setattr(masks, "add_masks", real_add)
    def first_of_any(relations: Any) -> Any:  # the mutant: refuses none, mixed or not
        found = set(relations)
        if len(found) < 1:
            raise accounting.NeighbouringMismatchError("no relation")
        return found.pop()

    monkeypatch.setattr(accounting, "_common_relation", first_of_any)
    _, findings = refusal_findings(OurTarget().accountant())
    assert findings == [
        "a ComposedEvent of an add/remove and a replace-one event accepted (returned a "
        "ComposedEvent)"
    ]


def test_a_quantile_that_knows_auto_only_by_identity_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 10's survivor `neighbors is "auto"`: the literal default worked (an interned
    # string), the same value read at run time fell through to the graph as a degree.
    import dpquantile.quantile as quantile  # noqa: PLC0415

    real = quantile.dp_quantile
    literal = "auto"

    def by_identity(*args: Any, neighbors: Any = literal, **kwargs: Any) -> Any:
        if neighbors == literal and id(neighbors) != id(literal):
            raise TypeError("'<' not supported between instances of 'str' and 'int'")
        return real(*args, neighbors=neighbors, **kwargs)

    assert refusal_findings(OurTarget().accountant())[1] == []
    monkeypatch.setattr(quantile, "dp_quantile", by_identity)
    monkeypatch.setattr(dpquantile, "dp_quantile", by_identity)
    _, findings = refusal_findings(OurTarget().accountant())
    assert len(findings) == 1 and "neighbors='auto' read at run time) not served" in findings[0]


def test_a_picker_accepting_a_failure_target_above_zero_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 10's survivor `-200.0 <= failure_target != 0.0`: failure_log2 > 0 (a failure
    # "probability" above 1) was accepted; only 0 itself was listed.
    import secagg.graph_parameters as graph  # noqa: PLC0415

    real = graph.secagg_plus_parameters

    def lenient(num_clients: int, **kwargs: Any) -> Any:
        if kwargs.get("failure_log2", -20.0) > 0:
            kwargs["failure_log2"] = -1.0
        return real(num_clients, **kwargs)

    monkeypatch.setattr(graph, "secagg_plus_parameters", lenient)
    _, findings = refusal_findings(OurTarget().graph_parameters())
    assert findings == [
        f"secagg_plus_parameters(failure_log2={v}) accepted (returned a SecAggPlusParameters)"
        for v in ("1.0", "inf")
    ]
