"""Audit 10: the attack family against our two threat models, and that it can fail."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from audits.attacks import (
    ATTACKS,
    AttackKind,
    AttackSpec,
    OurAttackSurface,
    _malformed_approvals,
    audit_attacks,
    outcome_table,
)
from audits.ours import OurTarget
from audits.records import Verdict
from audits.suite import audit_by_number

SERVER_ATTACKS_THAT_BREAK_SEMI_HONEST = {
    "substituted-keys",
    "inconsistent-unmask-views",
    "drop-claimed-in-a-later-sum",
}


@pytest.fixture(scope="module")
def ours() -> object:
    return audit_attacks(OurTarget())


def test_every_attack_fails_against_the_malicious_mode_and_every_client_attack_against_both(
    ours: object,
) -> None:
    result = ours
    assert result.verdict is Verdict.PASS and result.value == 0  # type: ignore[attr-defined]
    outcomes = result.details["outcomes"]  # type: ignore[attr-defined]
    assert {o["attack"] for o in outcomes} == {spec.name for spec in ATTACKS}
    for o in outcomes:
        if o["threat_model"] == "malicious" or o["kind"] == "client":
            assert not o["succeeded"], o
            assert o["stopped_by"], o  # something named refused it
    assert result.details["control"]  # type: ignore[attr-defined]


def test_the_semi_honest_mode_falls_to_the_server_attacks_it_does_not_claim_to_resist(
    ours: object,
) -> None:
    # The positive control that the attacks are real: a malicious server does reconstruct the
    # victim's input from its view when nothing authenticates the keys or the survivor set.
    outcomes = ours.details["outcomes"]  # type: ignore[attr-defined]
    broken = {
        o["attack"] for o in outcomes if o["threat_model"] == "semi-honest" and o["succeeded"]
    }
    assert broken == SERVER_ATTACKS_THAT_BREAK_SEMI_HONEST
    for o in outcomes:
        if o["attack"] in broken and o["threat_model"] == "semi-honest":
            assert o["exposed"] and not o["claimed_resistant"]
    table = outcome_table(outcomes)
    assert (
        "| substituted-keys | succeeds (not claimed) | succeeds (not claimed) | refused |" in table
    )
    assert "**SUCCEEDS**" not in table


class _OverclaimingSurface(OurAttackSurface):
    """Claims the semi-honest mode resists a malicious server: the audit must fail it."""

    def resists(self, threat_model: str, kind: AttackKind) -> bool:
        return True


class _BlindSurface(OurAttackSurface):
    """A reconstruction that cannot see even a colluder's input decides nothing."""

    def control(self, seed: int) -> bool:
        return False

    def attacks(self) -> Sequence[AttackSpec]:
        return ATTACKS[:1]


class _Target(OurTarget):
    def __init__(self, surface: OurAttackSurface | None) -> None:
        super().__init__()
        self._surface = surface

    def attack_surface(self) -> OurAttackSurface | None:  # type: ignore[override]
        return self._surface


def test_an_attack_that_succeeds_where_resistance_is_claimed_fails_the_audit() -> None:
    result = audit_attacks(_Target(_OverclaimingSurface()))
    assert result.verdict is Verdict.FAIL and result.value == 6  # 3 attacks × 2 graphs
    assert any("semi-honest (complete): substituted-keys exposed" in f for f in result.findings)
    assert "**SUCCEEDS**" in outcome_table(result.details["outcomes"])


def test_a_blind_reconstruction_fails_the_audit_and_no_surface_is_not_applicable() -> None:
    blind = audit_attacks(_Target(_BlindSurface()))
    assert blind.verdict is Verdict.FAIL and "positive control failed" in blind.findings[0]
    assert audit_attacks(_Target(None)).verdict is Verdict.NOT_APPLICABLE
    assert audit_by_number(10).name == "attacks"


@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
def test_garbage_in_unmask_responses_is_refused_and_unchecked_seeds_would_corrupt_the_total(
    threat_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audits.attacks import _garbage_unmask_shares  # noqa: PLC0415
    from secagg.server import Server  # noqa: PLC0415

    for neighbors in (None, 4):
        outcome = _garbage_unmask_shares(threat_model, neighbors, 0)
        assert outcome.correct and "does not match its commitment" in outcome.stopped_by
    # A server that takes any revealed or rebuilt seed for the committed one: the garbage lands
    # in the total (the control that the attack is real).
    monkeypatch.setattr(Server, "_seed_check", lambda self, owner: lambda seed: True)
    outcomes = [_garbage_unmask_shares(threat_model, k, 0) for k in (None, 4)]
    assert not all(o.correct for o in outcomes)


@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
def test_one_lying_holder_of_t_plus_one_is_found_and_a_server_without_subsets_is_sunk(
    threat_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audits.attacks import _one_garbage_share_of_t_plus_one  # noqa: PLC0415
    from secagg import server  # noqa: PLC0415

    outcome = _one_garbage_share_of_t_plus_one(threat_model, None, 0)
    assert outcome.correct and not outcome.succeeded
    # Only sliding windows, no leave-one-out subsets: a liar among the first t sinks the round.
    real = server._candidate_subsets

    def windows_only(holders: list[int], t: int, limit: int = 64) -> Any:
        return (s for s in real(holders, t, limit) if s == holders[len(holders) - t :])

    monkeypatch.setattr(server, "_candidate_subsets", windows_only)
    assert _one_garbage_share_of_t_plus_one(threat_model, None, 0).succeeded


def test_every_culprit_the_server_can_tell_is_named_and_the_rest_have_none(
    ours: object,
) -> None:
    outcomes = ours.details["outcomes"]  # type: ignore[attr-defined]
    unnamed_by_design = {"wrong-shares-then-silent", "replay-from-an-earlier-sum"}
    for o in outcomes:
        if o["kind"] == "server" or o["attack"] in unnamed_by_design:
            assert o["named"] is None, o
        else:
            assert o["named"] is True, o
    assert not [o for o in outcomes if o["wrongly_named"]]  # no one is blamed for nothing
    equivocations = [o for o in outcomes if o["attack"] == "equivocating-consistency"]
    assert {o["threat_model"] for o in equivocations} == {"malicious"}  # n/a semi-honest
    assert all("conflicting second consistency" in o["stopped_by"] for o in equivocations)
    malformed = [o for o in outcomes if o["attack"] == "malformed-approvals"]
    assert {o["threat_model"] for o in malformed} == {"malicious"}  # n/a semi-honest
    assert all("one 32-byte tag per other survivor" in o["stopped_by"] for o in malformed)


def test_a_server_that_takes_approvals_of_any_shape_leaves_the_culprit_unnamed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 13's survivor `recipients is sorted(set(recipients))`: a session's approvals with
    # a recipient listed twice (the last tag kept) or out of order were taken, not refused.
    from secagg import server  # noqa: PLC0415

    real = server.Server._on_approvals

    def any_shape(self: Any, message: Any) -> bool:
        canonical = tuple(sorted(dict(message.approvals).items()))
        return bool(real(self, dataclasses.replace(message, approvals=canonical)))

    monkeypatch.setattr(server.Server, "_on_approvals", any_shape)
    outcome = _malformed_approvals("malicious", None, 0)
    assert outcome is not None and not outcome.succeeded and outcome.named is False


def test_a_server_that_ignores_a_second_answer_sorting_low_leaves_the_culprit_unnamed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The held-out survivor: a conflicting second signature or approval reported only when it
    # sorts above the first; otherwise silently dropped (the round itself is unchanged).
    from secagg import server  # noqa: PLC0415

    real = server.Server._on_consistency_signature

    def lenient(self: Any, message: Any) -> bool:
        kept = self._signatures.get(message.sender)
        if kept is not None and (message.signature or b"") < kept:
            return False
        tags = self._approvals.get(message.sender)
        if tags is not None and sorted(dict(message.approvals).values()) < sorted(tags.values()):
            return False
        return bool(real(self, message))

    for key, handler in list(server._TRANSITIONS.items()):
        if handler is real:
            monkeypatch.setitem(server._TRANSITIONS, key, lenient)
    result = audit_attacks(OurTarget())
    assert result.verdict is Verdict.FAIL and result.value == 2  # complete and SecAgg+
    assert all(
        "equivocating-consistency refused, but its culprit is not named" in f
        for f in result.findings
        if "expected" not in f
    )


def test_a_server_that_records_no_faults_fails_the_naming_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from secagg.server import Server  # noqa: PLC0415

    def silent(self: Any, reason: str, peer: int | None) -> Any:
        from secagg import RemoteProtocolError  # noqa: PLC0415

        return RemoteProtocolError(reason, peer_id=peer)  # raised as before, never recorded

    monkeypatch.setattr(Server, "_fault", silent)
    result = audit_attacks(OurTarget())
    assert result.verdict is Verdict.FAIL
    # Unauthentic ciphertexts are blamed from the recipients' complaints, not through _fault.
    unnamed = {f.split(": ")[1].split(" ")[0] for f in result.findings if "not named" in f}
    assert unnamed == {
        "spoofed-sender",
        "duplicate-in-open-phase",
        "garbage-unmask-shares",
        "garbled-held-shares",
        "one-garbage-share-of-t+1",
        "well-formed-wrong-share",
        "wrong-pairwise-key",
        "malformed-escrows",
        "malformed-masked-input",
        "replay-from-another-round",
        "equivocating-consistency",
        "malformed-approvals",
    }


def test_a_server_that_blames_an_earlier_sums_retransmission_names_a_client_who_did_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The held-out survivor (seed 4): a message of an earlier sum treated as a fault instead of
    # ignored as late — the round is unchanged, but an honest, slow client is blamed, which the
    # README rules out ("an earlier sum's retransmitted input name[s] no one").
    from secagg.server import Server  # noqa: PLC0415

    def blame(self: Any, message: Any) -> bool:
        raise self._fault(f"late {type(message).__name__}", message.peer)

    monkeypatch.setattr(Server, "_late", blame)
    result = audit_attacks(OurTarget())
    assert result.verdict is Verdict.FAIL and result.value == 4  # 2 modes x 2 graphs
    wrong = [f for f in result.findings if "who did nothing wrong" in f]
    assert len(wrong) == 4 and all("replay-from-an-earlier-sum" in f for f in wrong)
    assert all("[2]" in f for f in wrong)


def test_a_server_that_ignores_its_decoder_fails_on_garbled_held_shares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The held-out mutant `if not secret and verify(secret)`: the Berlekamp–Welch result is
    # dropped, a fallback t-subset still recovers the seed, and the liars go unnamed.
    import secagg.server as server_module  # noqa: PLC0415

    def undecodable(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("decoding skipped")

    monkeypatch.setattr(server_module.shamir, "robust_reconstruct", undecodable)
    result = audit_attacks(OurTarget())
    assert result.verdict is Verdict.FAIL
    failing = {f.split(": ")[1].split(" ")[0] for f in result.findings if "not named" in f}
    assert "garbled-held-shares" in failing
    rows = [o for o in result.details["outcomes"] if o["attack"] == "garbled-held-shares"]
    assert len(rows) == 4 and all(o["correct"] and not o["named"] for o in rows)


class _OneAttackSurface(OurAttackSurface):
    def attacks(self) -> Sequence[AttackSpec]:
        return ATTACKS[:1]


def test_a_malicious_client_answering_unmask_lists_off_its_approved_set_fails_the_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The held-out survivor (seed 5) `survivors is expected_survivors`: only the dropped list is
    # compared, so a reordered or shortened survivor list is answered — against the documented
    # rule (secagg/malicious_security.md §1, step 4). No attack exposes anyone through it.
    import dataclasses  # noqa: PLC0415

    from audits.attacks import unmask_rule_findings  # noqa: PLC0415
    from secagg.client import Client  # noqa: PLC0415

    assert unmask_rule_findings(4, 0) == (6, [])
    strict = audit_attacks(_Target(_OneAttackSurface()))
    assert strict.verdict is Verdict.PASS
    # 6 deviations in malicious mode, the 3 malformed requests in semi-honest mode; both graphs.
    assert strict.details["unmask_rule_deviations_tried"] == 18
    original = Client._check_unmask_lists

    def lenient(self: Any, message: Any) -> None:
        if not self.config.malicious:  # the mutant's test sits in the malicious branch
            return original(self, message)
        signed = set(self._survivor_view)
        exact = tuple(v for v in self._members if v in signed)
        return original(self, dataclasses.replace(message, survivors=exact))

    monkeypatch.setattr(Client, "_check_unmask_lists", lenient)
    tried, findings = unmask_rule_findings(None, 0)
    assert tried == 6 and len(findings) == 4  # the dropped list is still compared
    assert "survivors reversed" in findings[0] and "survivor 8 left out" in findings[1]
    # The lenient check drops the repeat and the stranger too.
    assert "survivor 8 listed twice" in findings[2] and "client 99" in findings[3]
    result = audit_attacks(_Target(_OneAttackSurface()))
    # 4 per graph, all in malicious mode
    assert result.verdict is Verdict.FAIL and result.value == 8
    ruled = [f for f in result.findings if "must refuse" in f]
    assert len(ruled) == 8 and all(f.startswith("malicious (") for f in ruled)


def test_a_client_that_takes_an_earlier_sums_request_again_exposes_its_next_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The seed-6 survivor `message.iteration > self._iteration + 1`: a replayed request for the
    # sum just finished is taken, the next input masked under that sum's masks, and the server
    # — knowing the sum-2 input and the revealed sum-2 seed — recovers the sum-3 input.
    import secagg.client as client_module  # noqa: PLC0415
    from audits.attacks import _replayed_iteration_request  # noqa: PLC0415

    for threat_model in ("semi-honest", "malicious"):
        outcome = _replayed_iteration_request(threat_model, None, 0)
        assert not outcome.exposed and "sum 2 requested after sum 2" in outcome.stopped_by
    key = (client_module.ClientState.AWAITING_ITERATION, client_module.IterationRequest)
    real = client_module._TRANSITIONS[key]

    def any_later_or_earlier(self: Any, message: Any) -> Any:
        self._iteration = message.iteration - 1  # as if the check were `>` instead of `!=`
        return real(self, message)

    monkeypatch.setitem(client_module._TRANSITIONS, key, any_later_or_earlier)
    for threat_model in ("semi-honest", "malicious"):
        for neighbors in (None, 4):
            outcome = _replayed_iteration_request(threat_model, neighbors, 0)
            assert outcome.exposed == (3,), outcome


def test_a_malicious_client_comparing_the_dropped_list_by_order_fails_the_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The seed-6 survivor `dropped > expected_dropped`: a dropped list with a neighbour left out
    # sorts below the exact one and is answered.
    import dataclasses  # noqa: PLC0415

    from audits.attacks import unmask_rule_findings  # noqa: PLC0415
    from secagg.client import Client  # noqa: PLC0415

    original = Client._check_unmask_lists

    def prefix_ok(self: Any, message: Any) -> None:
        signed = set(self._survivor_view)
        exact = tuple(v for v in self._members if v not in signed)
        if exact[: len(message.dropped)] == message.dropped:
            message = dataclasses.replace(message, dropped=exact)
        original(self, message)

    monkeypatch.setattr(Client, "_check_unmask_lists", prefix_ok)
    for neighbors in (None, 4):
        tried, findings = unmask_rule_findings(neighbors, 0)
        assert tried == 6 and len(findings) == 1 and "dropped neighbour 8 left" in findings[0]


@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
def test_a_client_answering_a_request_that_lists_a_dropped_neighbour_twice_fails_the_rule(
    monkeypatch: pytest.MonkeyPatch, threat_model: str
) -> None:
    # The held-out-7 survivor `len(set(dropped)) > len(dropped)`: the repeat test on the dropped
    # list never fires; in semi-honest mode the client answers the malformed request (sending
    # that neighbour's key share twice). Malicious mode still refuses it on exactness, so the
    # planted defect removes the repeat before the exactness rule too.
    import dataclasses  # noqa: PLC0415

    from audits.attacks import unmask_rule_findings  # noqa: PLC0415
    from secagg.client import Client  # noqa: PLC0415

    original = Client._check_unmask_lists

    def repeats_ok(self: Any, message: Any) -> None:
        once = tuple(dict.fromkeys(message.dropped))
        original(self, dataclasses.replace(message, dropped=once))

    monkeypatch.setattr(Client, "_check_unmask_lists", repeats_ok)
    for neighbors in (None, 4):
        tried, findings = unmask_rule_findings(neighbors, 0, threat_model)
        assert tried == (3 if threat_model == "semi-honest" else 6)
        assert len(findings) == 1 and "dropped neighbour 8 listed twice" in findings[0]
        assert findings[0].startswith(f"{threat_model} (")


def test_a_client_answering_a_request_that_names_a_stranger_fails_the_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The held-out-8 survivor `(set(survivors) & set(dropped)) - members`: ids outside the
    # client's neighbourhood are no longer refused; semi-honest clients answer such a request.
    import dataclasses  # noqa: PLC0415

    from audits.attacks import unmask_rule_findings  # noqa: PLC0415
    from secagg.client import Client  # noqa: PLC0415

    original = Client._check_unmask_lists

    def strangers_ok(self: Any, message: Any) -> None:
        known = set(self._members)
        original(
            self,
            dataclasses.replace(
                message, survivors=tuple(v for v in message.survivors if v in known)
            ),
        )

    monkeypatch.setattr(Client, "_check_unmask_lists", strangers_ok)
    for neighbors in (None, 4):
        tried, findings = unmask_rule_findings(neighbors, 0, "semi-honest")
        assert tried == 3 and len(findings) == 1 and "client 99, not a neighbour" in findings[0]


def test_a_client_masking_for_fewer_than_t_members_exposes_its_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 9's survivor `len(members) == t` for `< t` in the iteration request's check: a
    # victim told that only the server's colluder remains masks with that colluder alone.
    import dataclasses  # noqa: PLC0415

    import secagg.client as client_module  # noqa: PLC0415
    from audits.attacks import _members_below_threshold  # noqa: PLC0415

    for threat_model in ("semi-honest", "malicious"):
        outcome = _members_below_threshold(threat_model, None, 0)
        assert not outcome.exposed and "threshold t=3" in outcome.stopped_by
    key = (client_module.ClientState.AWAITING_ITERATION, client_module.IterationRequest)
    real = client_module._TRANSITIONS[key]

    def any_member_count(self: Any, message: Any) -> Any:
        config = self.config  # as if the floor were not checked: t lowered for this step only
        self.config = dataclasses.replace(config, threshold=1)
        try:
            return real(self, message)
        finally:
            self.config = config

    monkeypatch.setitem(client_module._TRANSITIONS, key, any_member_count)
    for threat_model in ("semi-honest", "malicious"):
        for neighbors in (None, 4):
            outcome = _members_below_threshold(threat_model, neighbors, 0)
            assert len(outcome.exposed) == 1, outcome


@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
def test_a_server_trusting_revealed_pair_keys_is_sunk_by_one_wrong_key(
    monkeypatch: pytest.MonkeyPatch, threat_model: str
) -> None:
    # Found from held-out 10's survivor `len(key) < MASK_KEY_BYTES`: the server used a dropped
    # client's revealed pairwise keys unchecked, so one survivor revealing a wrong one made the
    # total wrong, silently, in both modes. It now reveals κ^r, checked against its commitment.
    from audits.attacks import _wrong_pairwise_key  # noqa: PLC0415
    from secagg.server import Server  # noqa: PLC0415

    assert not _wrong_pairwise_key(threat_model, None, 0).succeeded

    def unchecked(self: Any, dropped: int, alive: list[int]) -> dict[int, bytes]:
        revealed = self._revealed_pairwise.get(dropped, {})
        return {u: revealed[u] for u in alive if u in revealed}

    monkeypatch.setattr(Server, "_verified_pair_keys", unchecked)
    outcome = _wrong_pairwise_key(threat_model, None, 0)
    assert outcome.succeeded and not outcome.correct and not outcome.named


@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
def test_a_server_trusting_well_formed_shares_is_sunk_by_one_shifted_share(
    monkeypatch: pytest.MonkeyPatch, threat_model: str
) -> None:
    # Held-out 11's survivor `if secret or verify(secret)`: a secret rebuilt from the first t
    # shares was used unchecked whenever it was well-formed; garbage shares almost never are
    # (every sub-secret must be in range), a share shifted by its Lagrange weight's inverse is.
    import inspect  # noqa: PLC0415
    import textwrap  # noqa: PLC0415

    from audits.attacks import _well_formed_wrong_share  # noqa: PLC0415
    from secagg import server as server_module  # noqa: PLC0415

    for neighbors in (None, 4):
        outcome = _well_formed_wrong_share(threat_model, neighbors, 0)
        assert not outcome.succeeded and outcome.correct and outcome.named, outcome
    source = textwrap.dedent(inspect.getsource(server_module.Server._reconstruct))
    first = "    if secret and verify(secret):\n        return secret\n    if len(holders) > t:"
    assert source.count(first) == 1
    source = source.replace(first, first.replace("secret and verify(secret)", "secret"))
    namespace = dict(vars(server_module))
    exec(compile(source, "<planted>", "exec"), namespace)
    monkeypatch.setattr(server_module.Server, "_reconstruct", namespace["_reconstruct"])
    outcome = _well_formed_wrong_share(threat_model, None, 0)
    assert outcome.succeeded and not outcome.correct, outcome


@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
def test_a_server_that_takes_any_recovery_key_is_sunk_by_one_shifted_key_share(
    monkeypatch: pytest.MonkeyPatch, threat_model: str
) -> None:
    # Held-out 13's survivor `... is not commitment`: the rebuilt recovery key of a client gone
    # before its masked input was never held to its commitment. A holder that reveals a wrong
    # pair key (so the escrows must be opened) and shifts its key share then sinks the round.
    from audits.attacks import _well_formed_wrong_share  # noqa: PLC0415
    from secagg import server as server_module  # noqa: PLC0415

    monkeypatch.setattr(
        server_module.Server, "_recovery_key_check", lambda self, owner: lambda key: True
    )
    outcome = _well_formed_wrong_share(threat_model, None, 0)
    assert outcome.succeeded and not outcome.correct, outcome
    assert "escrowed pair key" in outcome.stopped_by, outcome
