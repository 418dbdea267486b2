"""What the audits find on Flower 1.42's SecAgg+ and LocalDpMod (REFERENCES §1), through Flower's
own code. Skipped, with the reason, when flwr is not installed (optional extra)."""

from __future__ import annotations

import pytest

from audits import Verdict, run_audits

pytest.importorskip("flwr", reason="the Flower adapter needs flwr==1.42.0 (extra 'bench')")

from audits.attacks import audit_attacks
from audits.flower import (
    LOCAL_DP_EPSILON,
    FlowerTarget,
    colluder_unmasks,
    known_defects,
)


@pytest.fixture(scope="module")
def flower() -> FlowerTarget:
    return FlowerTarget()


def test_no_disjointness_check(flower: FlowerTarget) -> None:
    assert flower.secure_sum().answers_both_shares(seed=0) is True  # type: ignore[union-attr]


def test_masks_never_take_m_minus_1_and_fold_seeds_to_32_bits(flower: FlowerTarget) -> None:
    masks = flower.mask_prg()
    assert masks is not None and not masks.session_bound
    values = masks.expand(bytes(range(32)), 2, 50_000, b"s")
    assert set(values.tolist()) == {0, 1, 2}
    seed = bytearray(range(32))
    other = bytearray(seed)
    other[0] ^= 1
    other[4] ^= 1  # the XOR fold of 4-byte words cancels the two flips
    assert (masks.expand(bytes(seed), 32, 8, b"s") == masks.expand(bytes(other), 32, 8, b"s")).all()


def test_dropout_before_share_keys_halts_the_round(flower: FlowerTarget) -> None:
    problem = flower.secure_sum().survives_dropout("shares", seed=0)  # type: ignore[union-attr]
    assert problem is not None and "stopped" in problem
    assert flower.secure_sum().survives_dropout("masked", seed=0) is None  # type: ignore[union-attr]


def test_shamir_reconstructs_at_the_threshold(flower: FlowerTarget) -> None:
    sharing = flower.secret_sharing()
    assert sharing is not None
    shares = sharing.share(bytes(range(32)), 3, 5, seed=0)
    assert sharing.reconstruct(shares[1:4]) == bytes(range(32))
    assert sharing.reconstruct(shares[:2]) != bytes(range(32))


def test_audit_8_finds_the_mask_defects(flower: FlowerTarget) -> None:
    [result] = run_audits(flower, only=[8])
    assert result.verdict is Verdict.FAIL
    text = " ".join(result.findings)
    assert "never [3]" in text  # masks never equal M − 1
    assert "expand to the same mask" in text  # 32-bit seeds
    assert "masked input of client" in text  # what the server receives is not uniform on Z_4
    assert result.details["masks"]["session_binding"].startswith("n/a")


def test_audits_without_a_flower_counterpart_are_not_applicable(flower: FlowerTarget) -> None:
    results = run_audits(flower, only=[1, 2, 3, 4, 6, 9])
    assert {r.verdict for r in results} == {Verdict.NOT_APPLICABLE}


@pytest.mark.slow
def test_sum_wraps_silently(flower: FlowerTarget) -> None:
    probe = flower.secure_sum().overflow_probe(seed=0)  # type: ignore[union-attr]
    assert not probe.refused and probe.max_abs_error > 1.0


@pytest.mark.slow
def test_local_dp_mod_understates_epsilon(flower: FlowerTarget) -> None:
    # Dwork–Roth's σ = Δ√(2 ln 1.25/δ)/ε assumes ε < 1: at ε = 50 the true ε(1e-10) is ≈ 73.
    [result] = run_audits(flower, only=[5])
    assert result.verdict is Verdict.FAIL
    mechanism = result.details["mechanisms"][0]
    assert mechanism["fit_epsilon_lower"] > LOCAL_DP_EPSILON


def test_a_malicious_server_recovers_a_clients_update_from_flowers_secagg_plus(
    flower: FlowerTarget,
) -> None:
    # Audit 10 on Flower: nothing authenticates the server's key lists or unmask lists, so both
    # attacks reconstruct the victim's update (to the quantisation step) on both graphs.
    result = audit_attacks(flower)
    assert result.verdict is Verdict.PASS  # Flower claims no protection against this
    outcomes = [o for o in result.details["outcomes"] if o["kind"] == "server"]
    assert {(o["attack"], o["graph"]) for o in outcomes if o["succeeded"]} == {
        ("substituted-keys", "complete"),
        ("substituted-keys", "secagg+ k=6"),
        ("inconsistent-unmask-views", "complete"),
        ("inconsistent-unmask-views", "secagg+ k=6"),
    }
    assert all(o["exposed"] and not o["claimed_resistant"] for o in outcomes)
    assert result.details["control"]
    server_row, client_row = [r for r in known_defects([result]) if r["audit"] == "10"]
    assert server_row["status"] == client_row["status"] == "confirmed"


def test_the_flower_unmasking_fails_with_a_wrong_secret(flower: FlowerTarget) -> None:
    # The verdict can fail: the node's own secrets unmask it, a wrong seed does not.
    assert colluder_unmasks(flower._f, 3, index=2)
    assert not colluder_unmasks(flower._f, 3, index=2, rd_seed=bytes(32))


def test_one_node_sinks_a_flower_secagg_plus_round(flower: FlowerTarget) -> None:
    # Audit 10's client attacks on Flower: one node rewriting its own replies. Random bytes as
    # its share ciphertexts make every recipient's mod raise (an error reply, as Flower's
    # ClientApp runtime sends) and the round stops short of nodes; a masked vector one entry too
    # long makes the server's workflow raise. Our semi-honest mode survives both (test_attacks).
    result = audit_attacks(flower)
    client = [o for o in result.details["outcomes"] if o["kind"] == "client"]
    assert {(o["attack"], o["graph"]) for o in client} == {
        (attack, graph)
        for attack in ("unauthentic-ciphertexts", "malformed-masked-input")
        for graph in ("complete", "secagg+ k=6")
    }
    assert all(o["succeeded"] and not o["correct"] and not o["exposed"] for o in client)
    stops = {o["attack"]: o["stopped_by"] for o in client}
    assert "Insufficient available nodes" in stops["unauthentic-ciphertexts"]
    assert "could not be broadcast" in stops["malformed-masked-input"]
