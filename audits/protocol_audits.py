"""Audits 7 and 8: the secure sum as a state machine, Shamir, the masks and the SecAgg+ graph.

Audit 7 drives the target's sans-I/O parties with a Hypothesis ``RuleBasedStateMachine`` (any
delivery order, duplicates, replays, crashes, premature deadlines, a server asking for both
shares) and adds black-box round checks (honest rounds with dropouts are exact; no client answers
both shares; a sum that cannot fit the modulus is refused, never wrapped). Audit 8 checks Shamir
perfect secrecy exhaustively over tiny fields and correctness at the threshold, the masks'
uniformity on Z_M for small M and their binding to the seed and the session, and the SecAgg+
degree and threshold against exact hypergeometric bounds recomputed here.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from audits._quiet import quiet_library_warnings
from audits.power import stuck_fraction
from audits.records import FAMILY_ALPHA, AuditResult, Tier, Verdict, check_tier, not_applicable
from audits.targets import (
    AuditTarget,
    GraphParametersUnderTest,
    MaskPRGUnderTest,
    SansIOSecureSum,
    SecretSharingUnderTest,
    SecureSumUnderTest,
    refusal_findings,
)

if TYPE_CHECKING:
    from hypothesis.stateful import RuleBasedStateMachine

__all__ = ["audit_secure_sum", "audit_shamir_masks_graph", "secure_sum_machine"]

logger = logging.getLogger(__name__)

_EXAMPLES: dict[Tier, tuple[int, int]] = {"fast": (60, 25), "deep": (1500, 50)}


# ------------------------------------------------------------------------------- audit 7


def secure_sum_machine(sans_io: SansIOSecureSum, seed: int) -> type[RuleBasedStateMachine]:
    """A Hypothesis state machine over the target's parties (``seed`` varies the rounds).

    In-flight messages sit in one pool; rules deliver some in any order, lose, duplicate or
    replay one, crash a client (a drop at any phase), pass a (possibly premature) deadline, or act
    as a malicious server: send a client an unmask request naming a surviving neighbour dropped
    as well, or a second request naming it dropped instead. Invariants: the server never holds t
    shares of both secrets of one client nor reconstructs both; no client ever reveals both
    shares of one neighbour, over all its replies; a completed sum is exactly the survivors';
    every round terminates.

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> machine = secure_sum_machine(OurTarget().sans_io(), seed=1)
    >>> machine.__name__
    'AuditedSecureSum'
    """
    try:
        from hypothesis import strategies as st  # noqa: PLC0415
        from hypothesis.stateful import (  # noqa: PLC0415
            RuleBasedStateMachine,
            initialize,
            invariant,
            precondition,
            rule,
        )
    except ImportError as exc:  # pragma: no cover - the audit extra installs it
        raise ImportError(
            "audit 7's state machine needs hypothesis: pip install 'secagg-dp[test]'"
        ) from exc

    class AuditedSecureSum(RuleBasedStateMachine):
        @initialize(
            n=st.integers(3, 7),
            harary=st.booleans(),
            bits=st.sampled_from([5, 32, 64]),
            t_fraction=st.floats(0.0, 1.0),
            round_seed=st.integers(0, 2**32),
            honest_phases=st.integers(0, 4),
            threat_model=st.sampled_from(getattr(sans_io, "threat_models", ("semi-honest",))),
        )
        def setup(
            self,
            *,
            n: int,
            harary: bool,
            bits: int,
            t_fraction: float,
            round_seed: int,
            honest_phases: int,
            threat_model: str,
        ) -> None:
            degree = 2 if harary and n >= 4 else None
            max_t = degree if degree is not None else n - 1
            self.threshold = 1 + int(t_fraction * (max_t - 1))
            self.bits = bits
            self.clients, self.server, self.inputs, self.pool = sans_io.setup(
                n=n,
                degree=degree,
                threshold=self.threshold,
                bits=bits,
                dimension=3,
                seed=round_seed ^ seed,
                threat_model=threat_model,
            )
            self.history: list[Any] = []
            self.crashed: set[int] = set()
            self.revealed_seeds: dict[int, frozenset[int]] = {u: frozenset() for u in self.clients}
            self.revealed_keys: dict[int, frozenset[int]] = {u: frozenset() for u in self.clients}
            # An honest prefix of 0–4 phases, so that every phase is where the adversary starts.
            for _ in range(honest_phases):
                if sans_io.server_outcome(self.server) == "running":
                    self.advance(hold_unmask_requests=True)

        def _deliver(self, message: Any) -> None:
            self.history.append(message)
            peer = sans_io.peer(message)
            if sans_io.to_server(message):
                if peer in self.crashed or sans_io.server_outcome(self.server) != "running":
                    return
                try:
                    self.pool.extend(sans_io.server_receive(self.server, message))
                except sans_io.peer_error:
                    assert sans_io.server_outcome(self.server) != "aborted", "peer fault aborted"
                except sans_io.abort_error:
                    assert sans_io.server_outcome(self.server) == "aborted"
                return
            if peer in self.crashed:
                return
            self._to_client(peer, message)

        def _to_client(self, peer: int, message: Any) -> None:
            try:
                replies = sans_io.client_receive(self.clients[peer], message)
            except sans_io.protocol_error:
                self.crashed.add(peer)
                return
            for reply in replies:
                revealed = sans_io.revealed_shares(reply)
                if revealed is not None:
                    self.revealed_seeds[peer] |= revealed[0]
                    self.revealed_keys[peer] |= revealed[1]
            self.pool.extend(replies)

        @precondition(lambda self: self.pool)
        @rule(data=st.data(), count=st.integers(1, 8))
        def deliver(self, data: st.DataObject, count: int) -> None:
            for _ in range(min(count, len(self.pool))):
                self._deliver(self.pool.pop(data.draw(st.integers(0, len(self.pool) - 1))))

        @precondition(lambda self: sans_io.server_outcome(self.server) == "running")
        @rule(hold_unmask_requests=st.booleans())
        def advance(self, hold_unmask_requests: bool) -> None:
            # One honest phase (everything in flight delivered, then the deadline): lets the
            # adversarial rules reach the later phases within a short run. Unmask requests may
            # be held in flight, for the malicious-server rule to act on first.
            held = []
            while self.pool:
                message = self.pool.pop(0)
                if hold_unmask_requests and sans_io.hostile_unmask(message) is not None:
                    held.append(message)
                else:
                    self._deliver(message)
            if sans_io.server_outcome(self.server) == "running" and not held:
                self.deadline()
            self.pool.extend(held)

        @precondition(lambda self: self.pool)
        @rule(data=st.data())
        def lose(self, data: st.DataObject) -> None:
            # A lost message was still sent: it stays replayable.
            self.history.append(self.pool.pop(data.draw(st.integers(0, len(self.pool) - 1))))

        @precondition(lambda self: self.pool)
        @rule(data=st.data())
        def duplicate(self, data: st.DataObject) -> None:
            self.pool.append(data.draw(st.sampled_from(self.pool)))

        @precondition(lambda self: self.history)
        @rule(data=st.data())
        def replay(self, data: st.DataObject) -> None:
            self.pool.append(data.draw(st.sampled_from(self.history)))

        @precondition(lambda self: len(self.crashed) < len(self.clients) // 3)
        @rule(data=st.data())
        def crash(self, data: st.DataObject) -> None:
            self.crashed.add(data.draw(st.sampled_from(sorted(self.clients))))

        @precondition(lambda self: sans_io.server_outcome(self.server) == "running")
        @rule(premature=st.integers(0, 3))
        def deadline(self, premature: int = 0) -> None:
            # premature == 0 closes the phase even with answers still in flight.
            if premature and any(sans_io.to_server(m) for m in self.pool):
                return
            try:
                self.pool.extend(sans_io.close_phase(self.server))
            except sans_io.abort_error:
                assert sans_io.server_outcome(self.server) == "aborted"

        def _requests(self) -> list[Any]:
            seen = self.pool + self.history
            return [m for m in seen if sans_io.hostile_unmask(m) is not None]

        @precondition(lambda self: self._requests())
        @rule(data=st.data(), swap=st.booleans())
        def malicious_unmask_request(self, data: st.DataObject, swap: bool) -> None:
            # The server names a surviving neighbour dropped as well (both shares in one
            # request) or, in a second request, instead (the other share).
            request = data.draw(st.sampled_from(self._requests()))
            self._to_client(sans_io.peer(request), sans_io.hostile_unmask(request, swap=swap))

        @invariant()
        def no_client_reveals_both_shares_of_a_neighbour(self) -> None:
            for peer, seeds in self.revealed_seeds.items():
                both = seeds & self.revealed_keys[peer]
                assert not both, f"client {peer} revealed both shares of clients {sorted(both)}"

        @invariant()
        def server_never_holds_both_secrets(self) -> None:
            counts, seeds, keys = sans_io.server_secrets(self.server)
            for owner, (seed_shares, key_shares) in counts.items():
                assert not (seed_shares >= self.threshold and key_shares >= self.threshold), (
                    f"server holds t shares of both secrets of client {owner}"
                )
            assert not seeds & keys, f"server reconstructed both secrets of {sorted(seeds & keys)}"

        @invariant()
        def completed_sum_is_exactly_the_survivors(self) -> None:
            if sans_io.server_outcome(self.server) == "completed":
                total, survivors = sans_io.server_total(self.server)
                modulus = 2**self.bits
                expected = [
                    sum(int(self.inputs[u][j]) for u in survivors) % modulus for j in range(3)
                ]
                assert [int(v) for v in total] == expected, "completed sum is wrong"

        def teardown(self) -> None:
            for _ in range(10):
                while self.pool:
                    self._deliver(self.pool.pop(0))
                if sans_io.server_outcome(self.server) != "running":
                    break
                self.deadline()
            assert sans_io.server_outcome(self.server) != "running", "round never terminated"
            self.completed_sum_is_exactly_the_survivors()

    return AuditedSecureSum


def _run_machine(
    sans_io: SansIOSecureSum, tier: Tier, seed: int, examples: int | None
) -> tuple[int, str | None]:
    from hypothesis import HealthCheck, Phase, settings  # noqa: PLC0415
    from hypothesis.stateful import run_state_machine_as_test  # noqa: PLC0415

    default_examples, steps = _EXAMPLES[tier]
    examples = default_examples if examples is None else examples
    machine = secure_sum_machine(sans_io, seed)
    # Typed as Any: hypothesis annotates this function only in recent releases.
    run_as_test: Any = run_state_machine_as_test
    try:
        run_as_test(
            machine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=steps,
                deadline=None,
                derandomize=True,
                phases=(Phase.explicit, Phase.generate),  # no shrinking: a counterexample is enough
                database=None,
                print_blob=False,
                suppress_health_check=list(HealthCheck),
            ),
        )
    except Exception as exc:  # any failure of the machine is a finding, reported verbatim
        # The first line: under pytest's assertion rewriting the message gains a second line
        # (the rewritten expression) after the invariant's own explanation.
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return examples, f"state machine: {type(exc).__name__}: {first_line[:300]}"
    return examples, None


def _retransmission_checks(sans_io: SansIOSecureSum, seed: int) -> tuple[int, list[str]]:
    """Honest rounds in which every message to the server arrives three times while its phase is
    open: the same object again (an in-process retry) and an equal copy (a network
    retransmission, decoded anew). A retransmission is no fault: each round must complete with
    the exact total of all clients, and the server must refuse no copy. Both threat models the
    target runs; complete and SecAgg+ graphs, vectors of 3 and of 300 entries (a length beyond
    CPython's small-integer cache: one compared by identity differs there)."""
    findings: list[str] = []
    rounds = 0
    for threat_model in sans_io.threat_models:
        for n, degree, threshold, dimension in ((5, None, 3, 3), (7, 4, 3, 300)):
            rounds += 1
            clients, server, inputs, pool = sans_io.setup(
                n=n,
                degree=degree,
                threshold=threshold,
                bits=16,
                dimension=dimension,
                seed=seed + rounds,
                threat_model=threat_model,
            )
            where = f"{threat_model}, n={n}, {'complete' if degree is None else f'k={degree}'}"
            faults: list[str] = []
            for _ in range(10_000):  # a bound, never reached by a round that terminates
                if sans_io.server_outcome(server) != "running":
                    break
                if not pool:
                    pool = sans_io.close_phase(server)
                    if not pool:
                        break
                    continue
                message = pool.pop(0)
                if not sans_io.to_server(message):
                    pool.extend(sans_io.client_receive(clients[sans_io.peer(message)], message))
                    continue
                for delivered in (message, message, copy.deepcopy(message)):
                    try:
                        pool.extend(sans_io.server_receive(server, delivered))
                    except sans_io.peer_error as error:
                        faults.append(f"{type(message).__name__}: {error}")
            if faults:
                findings.append(f"retransmission ({where}) refused as a fault: {faults[0]}"[:300])
            problem = _round_problem(sans_io, server, inputs, clients)
            if problem:
                findings.append(f"retransmission ({where}): {problem}")
    return rounds, findings


#: (t, clients still answering) of :func:`_deserted_phase_checks`: none at t = 1 and t = 2, the
#: lowest id alone at t = 2 (one share reconstructs nothing).
_DESERTED: tuple[tuple[int, int], ...] = ((1, 0), (2, 0), (2, 1))


def _deserted_phase_checks(sans_io: SansIOSecureSum, seed: int) -> tuple[int, list[str]]:
    """Honest rounds (n = 5, complete graph) in which, from one phase on, no client or only the
    lowest id answers the server (:data:`_DESERTED`), for every phase the round has, both threat
    models the target runs. Whatever the phase, nothing can be summed from no answer and no
    secret reconstructed from one share at t = 2: the server must abort at that phase's
    deadline — not open the next phase for clients that can never finish it (Bonawitz et al.
    2017, Fig. 4: the server aborts when fewer than t clients remain at any round's end)."""
    findings: list[str] = []
    rounds = 0

    def who(answering: int, lone: int) -> str:
        return f"client {lone} alone" if answering else "no client"

    for threat_model in sans_io.threat_models:
        for threshold, answering in _DESERTED:
            for phase in range(12):  # a bound: a round has fewer phases (the loop breaks)
                clients, server, _, pool = sans_io.setup(
                    n=5,
                    degree=None,
                    threshold=threshold,
                    bits=16,
                    dimension=3,
                    seed=seed + 31 * phase + threshold + 7 * answering,
                    threat_model=threat_model,
                )
                lone = min(clients)
                # Phases are counted by the server's batches to clients (it opens the next one
                # on the last expected answer, or at a deadline).
                opened, checked = 0, False
                for _ in range(10_000):  # a bound, never reached by a round that terminates
                    if sans_io.server_outcome(server) != "running":
                        break
                    if opened > phase:
                        checked = True
                        findings.append(
                            f"{threat_model}, t={threshold}: phase {phase + 1} answered by "
                            f"{who(answering, lone)}, yet the server opened the next phase"
                        )
                        break
                    if not pool:
                        try:
                            pool = sans_io.close_phase(server)
                        except sans_io.abort_error:
                            pool = []
                        if opened == phase:
                            checked = True
                            outcome = sans_io.server_outcome(server)
                            if outcome != "aborted":
                                findings.append(
                                    f"{threat_model}, t={threshold}: phase {phase + 1} answered "
                                    f"by {who(answering, lone)}, yet the server did not abort at "
                                    f"its deadline ({outcome}, {len(pool)} message(s) out)"
                                )
                            break
                        opened += bool(pool)
                        if not pool:
                            break
                        continue
                    message = pool.pop(0)
                    if sans_io.to_server(message):
                        peer = sans_io.peer(message)
                        if opened >= phase and (not answering or peer != lone):
                            continue  # silent from this phase on
                        with contextlib.suppress(sans_io.peer_error):
                            replies = sans_io.server_receive(server, message)
                            opened += bool(replies)
                            pool.extend(replies)
                        continue
                    with contextlib.suppress(sans_io.protocol_error):
                        pool.extend(sans_io.client_receive(clients[sans_io.peer(message)], message))
                if not checked:
                    break  # the round ended before this phase: every phase was tried
                rounds += 1
    return rounds, findings


def _round_problem(
    sans_io: SansIOSecureSum,
    server: Any,
    inputs: Mapping[int, Any],
    required: Iterable[int],
) -> str | None:
    """What is wrong with a round's end (``None``: it completed, every ``required`` client
    among its survivors, with the exact total of its survivors mod 2^16)."""
    if sans_io.server_outcome(server) != "completed":
        return "the round did not complete"
    total, survivors = sans_io.server_total(server)
    expected = sum(inputs[u] for u in survivors) % np.uint64(1 << 16)
    if not set(required) <= set(survivors) or not np.array_equal(
        np.asarray(total, dtype=np.uint64) % np.uint64(1 << 16), expected
    ):
        return f"wrong total or survivors {survivors}"
    return None


def _drive_round(
    sans_io: SansIOSecureSum,
    clients: Mapping[int, Any],
    server: Any,
    pool: list[Any],
    before_client: Callable[[Any], None] = lambda message: None,
) -> list[Any]:
    """Deliver ``pool`` honestly until the round ends (``before_client`` sees every server
    message just before its client does); the server messages delivered, in order."""
    delivered: list[Any] = []
    for _ in range(10_000):  # a bound, never reached by a round that terminates
        if sans_io.server_outcome(server) != "running":
            break
        if not pool:
            try:
                pool = sans_io.close_phase(server)
            except sans_io.protocol_error:  # the round aborted: its outcome says so
                break
            if not pool:
                break
            continue
        message = pool.pop(0)
        if sans_io.to_server(message):
            with contextlib.suppress(sans_io.peer_error):
                pool.extend(sans_io.server_receive(server, message))
            continue
        before_client(message)
        delivered.append(message)
        with contextlib.suppress(sans_io.protocol_error):
            pool.extend(sans_io.client_receive(clients[sans_io.peer(message)], message))
    return delivered


def _restore_checks(sans_io: SansIOSecureSum, seed: int) -> tuple[int, list[str]]:
    """Honest rounds in which every client crashes before every server message and restarts
    from its snapshot (``restore(client)``), and the message is then handled twice — by the
    restored client and by a second restore of the same snapshot: the two must reply with the
    same bytes (a restart must not draw fresh secrets: two different masked inputs or shares
    for one round are an equivocation the server could combine), and the round must complete
    with the exact total of all clients. Both threat models; complete and SecAgg+ graphs; n/a
    for a target without snapshots. After each round, :func:`_corrupt_snapshot_checks`.
    Returns (rounds + snapshot restores tried, findings)."""
    restore = getattr(sans_io, "restore", None)
    wire = getattr(sans_io, "wire", None)
    if restore is None or wire is None:
        return 0, []
    findings: list[str] = []
    rounds = 0
    for threat_model in sans_io.threat_models:
        for n, degree in ((5, None), (7, 4)):
            rounds += 1
            clients, server, inputs, pool = sans_io.setup(
                n=n,
                degree=degree,
                threshold=3,
                bits=16,
                dimension=3,
                seed=seed + 50 + rounds,
                threat_model=threat_model,
            )
            clients = dict(clients)
            where = f"{threat_model}, n={n}, {'complete' if degree is None else f'k={degree}'}"
            differing: list[str] = []

            failed: list[str] = []

            def crash(
                message: Any,
                clients: dict[int, Any] = clients,
                differing: list[str] = differing,
                failed: list[str] = failed,
            ) -> None:
                u = sans_io.peer(message)
                answers: list[list[bytes]] = []
                try:
                    clients[u] = restore(clients[u])
                    for twin in (restore(clients[u]), restore(clients[u])):
                        try:
                            replies = sans_io.client_receive(twin, message)
                            answers.append([wire(m) for m in replies])
                        except sans_io.protocol_error as error:
                            answers.append([f"refused: {error}".encode()])
                except Exception as error:  # a snapshot that does not restore is a finding
                    failed.append(f"before {type(message).__name__}: {error}"[:200])
                    return
                if answers[0] != answers[1]:
                    differing.append(type(message).__name__)

            _drive_round(sans_io, clients, server, pool, crash)
            if failed:
                findings.append(f"restore ({where}): a snapshot did not restore, {failed[0]}")
            if differing:
                findings.append(
                    f"restore ({where}): a restarted client answered {sorted(set(differing))} "
                    "with other bytes"
                )
            problem = _round_problem(sans_io, server, inputs, clients)
            if problem:
                findings.append(f"restore ({where}): {problem}")
            rounds += _corrupt_snapshot_checks(sans_io, clients, where, findings)
    return rounds, findings


def _corrupt_snapshot_checks(
    sans_io: SansIOSecureSum, clients: Mapping[int, Any], where: str, findings: list[str]
) -> int:
    """A client's snapshot cut short by one byte or to half, with a byte appended, or empty
    must be refused when restored (a restart from a damaged snapshot would run with state that
    is not what the client saved); the snapshot itself must restore. Needs the adapter's
    ``snapshot_bytes(client)`` and ``restore_bytes(client, data)``, and tries the adapter's
    ``damaged_snapshots(data)`` (label → bytes) too; returns the restores tried."""
    take = getattr(sans_io, "snapshot_bytes", None)
    load = getattr(sans_io, "restore_bytes", None)
    if take is None or load is None:
        return 0
    client = clients[min(clients)]
    data = bytes(take(client))
    try:
        load(client, data)
    except Exception as error:
        findings.append(f"restore ({where}): an intact snapshot did not restore: {error}"[:200])
    damaged = {
        "one byte short": data[:-1],
        "cut to half": data[: len(data) // 2],
        "a byte appended": data + b"\x00",
        "empty": b"",
        # Format-aware damage the adapter knows how to make (e.g. a length field one too big).
        **getattr(sans_io, "damaged_snapshots", lambda _: {})(data),
    }
    for label, variant in damaged.items():
        try:
            load(client, variant)
        except (ValueError, TypeError, sans_io.protocol_error):
            continue
        except Exception as error:  # a refusal, but not a clear one
            findings.append(f"restore ({where}): a snapshot {label} failed with {error!r}"[:200])
            continue
        findings.append(f"restore ({where}): a snapshot {label} was accepted")
    return 1 + len(damaged)


def _cross_round_checks(sans_io: SansIOSecureSum, seed: int) -> tuple[int, list[str]]:
    """Two rounds of the same client ids, each with its own keys (so its own session). In a
    fresh run of one, a victim client first receives the message of one kind it received in
    the other round — a message misrouted between concurrent rounds, or replayed by the server
    from another round — then the genuine one. The stale message must be refused (the client
    raises; it may abort, as on any server misbehaviour) and the round must still complete
    with the exact total of its survivors, every other client among them. Every kind of server
    message, both directions (so either order of the two session ids), both threat models the
    target runs, complete and SecAgg+ graphs."""
    findings: list[str] = []
    rounds = 0
    victim = 2
    for threat_model in sans_io.threat_models:
        for n, degree in ((5, None), (7, 4)):
            where = f"{threat_model}, n={n}, {'complete' if degree is None else f'k={degree}'}"

            def fresh(
                offset: int, n: int = n, degree: int | None = degree, model: str = threat_model
            ) -> tuple[Any, ...]:
                return sans_io.setup(
                    n=n,
                    degree=degree,
                    threshold=3,
                    bits=16,
                    dimension=3,
                    seed=seed + offset,
                    threat_model=model,
                )

            recorded = {}
            for offset in (1, 2):
                clients, server, _, pool = fresh(offset)
                recorded[offset] = {
                    type(m).__name__: m
                    for m in reversed(_drive_round(sans_io, clients, server, pool))
                    if sans_io.peer(m) == victim
                }
            for own, other in ((1, 2), (2, 1)):
                for kind, stale in recorded[other].items():
                    rounds += 1
                    clients, server, inputs, pool = fresh(own)
                    accepted: list[bool] = []

                    def replay(
                        message: Any,
                        clients: Any = clients,
                        stale: Any = stale,
                        accepted: list[bool] = accepted,
                    ) -> None:
                        if accepted or sans_io.peer(message) != victim:
                            return
                        if type(message) is not type(stale):
                            return
                        try:
                            sans_io.client_receive(clients[victim], stale)
                        except sans_io.protocol_error:
                            accepted.append(False)
                            return
                        accepted.append(True)

                    _drive_round(sans_io, clients, server, pool, replay)
                    if any(accepted):
                        findings.append(
                            f"cross-round ({where}): client {victim} accepted another round's "
                            f"{kind}"
                        )
                    problem = _round_problem(sans_io, server, inputs, set(clients) - {victim})
                    if problem:
                        findings.append(f"cross-round ({where}, stale {kind}): {problem}")
    return rounds, findings


def _round_checks(secure_sum: SecureSumUnderTest, seed: int, rounds: int) -> list[str]:
    findings: list[str] = []
    rng = np.random.default_rng(seed)
    for r in range(rounds):
        n = int(rng.integers(4, 8))
        bits = int(rng.choice([8, 16, 32]))
        inputs = rng.integers(0, 2**bits, size=(n, 3), dtype=np.int64)
        dropped = (
            []
            if r == 0
            else sorted(rng.choice(n, size=int(rng.integers(1, 2)), replace=False).tolist())
        )
        try:
            outcome = secure_sum.run_round(inputs, bits=bits, dropped=dropped, seed=seed + r)
        except NotImplementedError:
            break
        except Exception as exc:
            findings.append(
                f"honest round {r} (n={n}, dropped {dropped}) raised {type(exc).__name__}: {exc}"[
                    :300
                ]
            )
            continue
        if outcome is None:
            findings.append(f"honest round {r} (n={n}, dropped {dropped}) halted")
            continue
        total, survivors = outcome
        expected = inputs[list(survivors)].sum(axis=0) % (2**bits)
        if sorted(survivors) != sorted(set(range(n)) - set(dropped)):
            findings.append(f"round {r}: survivors {survivors}, expected all but {dropped}")
        if not np.array_equal(np.asarray(total, dtype=np.int64) % (2**bits), expected):
            findings.append(f"round {r} (n={n}, dropped {dropped}): wrong total")
    return findings


#: Sums in audit 7's long session: past 8, where the 32·T bytes of a T-sum session's seed
#: commitments leave CPython's small-integer cache (an identity comparison held for T ≤ 8 only).
_LONG_SESSION = 12
#: Widths of audit 7's wide session: both past 256, the last small integer CPython caches.
_WIDE_SUMS = (300, 257)


def _session_checks(secure_sum: SecureSumUnderTest, seed: int, sessions: int) -> list[str]:
    """Sessions (one key setup, several sums) whose sums differ in width — as the geometric
    median's and RFA's do — with a random member dropping before its masked input in some
    sums: every sum must return the exact total of its survivors, and the survivors must be
    the members minus the dropped (a dropped client stays out of later sums). Threat model,
    graph, modulus, n and widths drawn at random, one malicious-mode session of
    :data:`_LONG_SESSION` sums; n/a for a target without sessions."""
    run_session = getattr(secure_sum, "run_session", None)
    if run_session is None:
        return []
    findings: list[str] = []
    rng = np.random.default_rng(seed + 29)
    for s in range(sessions):
        n = int(rng.integers(5, 9))
        sums = int(rng.integers(2, 5))
        if s == 1:  # one malicious-mode session as long as a trainer's (tens of rounds), so
            sums = _LONG_SESSION  # per-sum counters and lengths pass small-integer ranges
        bits = int(rng.choice([8, 16, 32]))
        threat_model = ("semi-honest", "malicious")[s % 2]
        neighbors = None if rng.random() < 0.5 else 4
        widths = [int(w) for w in rng.choice(np.arange(1, 9), size=sums, replace=sums > 8)]
        if s == 0:  # one later sum of width 1 in every run (a scalar: the geometric median's)
            widths = [*[w for w in widths if w != 1][: sums - 1], 1]
        inputs = [rng.integers(0, 2**bits, size=(n, w), dtype=np.int64) for w in widths]
        # At most 1 drop (malicious: the consistency quorum of n ≤ 8) or 2 (semi-honest: every
        # client keeps t = 2 of its 4 neighbours) in all, so no sum may legitimately abort.
        budget = 1 if threat_model == "malicious" else 2
        members = set(range(n))
        dropped: list[list[int]] = []
        expected: list[tuple[int, ...]] = []
        for r in range(sums):
            drop = r > 0 and sum(len(g) for g in dropped) < budget and rng.random() < 0.6
            gone = [int(rng.choice(sorted(members)))] if drop else []
            members -= set(gone)
            dropped.append(gone)
            expected.append(tuple(sorted(members)))
        where = (
            f"session {s} ({threat_model}, n={n}, "
            f"{'complete' if neighbors is None else f'k={neighbors}'}, widths {widths}, "
            f"dropped {dropped})"
        )
        settings = {
            "bits": bits,
            "dropped": dropped,
            "threshold": 2 if neighbors is not None else max(2, n // 2),
            "threat_model": threat_model,
            "neighbors": neighbors,
            "seed": seed + 100 + s,
        }
        findings += _session_problems(run_session, where, inputs, expected, settings)
    # Widths past CPython's small-integer cache (≤ 256), as a model's parameter vectors are:
    # a length compared by identity holds below it only. One member leaves before sum 2.
    for threat_model in ("semi-honest", "malicious"):
        inputs = [rng.integers(0, 2**16, size=(6, w), dtype=np.int64) for w in _WIDE_SUMS]
        settings = {
            "bits": 16,
            "dropped": [[], [5]],
            "threshold": 3,
            "threat_model": threat_model,
            "neighbors": None,
            "seed": seed + 300,
        }
        where = f"session ({threat_model}, n=6, complete, widths {list(_WIDE_SUMS)})"
        expected = [tuple(range(6)), tuple(range(5))]
        findings += _session_problems(run_session, where, inputs, expected, settings)
    # The member floor's edge: every member keeps exactly t neighbours (complete graph, t = 3)
    # — 4 clients throughout, or 5 of which one drops before sum 1's masked input.
    for threat_model, n in itertools.product(("semi-honest", "malicious"), (4, 5)):
        dropped = [[4] if n == 5 else [], []]
        inputs = [rng.integers(0, 2**16, size=(n, 2), dtype=np.int64) for _ in range(2)]
        kept = tuple(range(4))
        settings = {
            "bits": 16,
            "dropped": dropped,
            "threshold": 3,
            "threat_model": threat_model,
            "neighbors": None,
            "seed": seed + 200 + n,
        }
        where = f"session ({threat_model}, n={n}, complete, t = 3, dropped {dropped})"
        findings += _session_problems(run_session, where, inputs, [kept, kept], settings)
    return findings


def _session_problems(
    run_session: Callable[..., Any],
    where: str,
    inputs: Sequence[NDArray[np.int64]],
    expected: Sequence[tuple[int, ...]],
    settings: Mapping[str, Any],
) -> list[str]:
    """What is wrong with one session's sums: each must return its survivors' exact total."""
    try:
        results = run_session(inputs, **settings)
    except Exception as exc:
        return [f"{where} raised {type(exc).__name__}: {exc}"[:300]]
    if results is None or len(results) != len(inputs):
        return [f"{where} halted"]
    bits = int(settings["bits"])
    findings = []
    for r, (total, survivors) in enumerate(results):
        if tuple(sorted(survivors)) != expected[r]:
            findings.append(f"{where}: sum {r + 1} survivors {survivors}, expected {expected[r]}")
        elif not np.array_equal(
            np.asarray(total, dtype=np.int64) % (2**bits),
            inputs[r][list(survivors)].sum(axis=0) % (2**bits),
        ):
            findings.append(f"{where}: sum {r + 1} (width {inputs[r].shape[1]}) wrong total")
    return findings


def audit_secure_sum(
    target: AuditTarget, *, tier: Tier = "fast", seed: int = 0, examples: int | None = None
) -> AuditResult:
    """Audit 7: the secure sum's state machines under an adversarial network and server.

    A Hypothesis ``RuleBasedStateMachine`` over the target's sans-I/O parties (derandomised, the
    audit seed mixed into every round), then black-box checks: honest rounds with and without a
    dropout return exactly the survivors' sum; a client asked for both shares of a survivor
    refuses; a round survives one client going silent before each phase; a sum that cannot fit
    the modulus is refused rather than wrapped, and (ours) a sum at the very edge of the plan's
    headroom does not wrap; honest rounds in which every message to the server arrives again
    while its phase is open (same object, equal copy) complete exactly, no copy a fault; every
    kind of server message of another round, delivered to a client first, is refused and the
    round stays exact (:func:`_cross_round_checks`); clients that crash before every server
    message and restart from their snapshots answer byte for byte alike and the round stays
    exact (:func:`_restore_checks`); a phase answered by no client, or by one alone at t = 2,
    ends in an abort at its deadline, in every phase (:func:`_deserted_phase_checks`);
    sessions whose sums differ in width, with
    random dropouts, give every sum's exact total, and so do sessions in which every member keeps
    exactly t neighbours (:func:`_session_checks`), and (ours) a session whose unmask
    responders peel to nobody refuses its next sum when it begins; configurations
    and client ids out of range are refused (:func:`~audits.targets.refusal_findings`).
    Deterministic verdicts: a FAIL is a counterexample (error rate 0). ``examples`` overrides
    the tier's number of state-machine examples (fast 60 × 25 steps, deep 1500 × 50).

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> audit_secure_sum(OurTarget(), examples=5).verdict.value
    'pass'
    """
    tier = check_tier(tier)
    start = time.perf_counter()
    sans_io, secure_sum = target.sans_io(), target.secure_sum()
    if sans_io is None and secure_sum is None:
        return not_applicable(7, "secure-sum", target.name, "no secure-sum implementation")
    findings: list[str] = []
    details: dict[str, Any] = {}
    samples = 0
    if sans_io is not None:
        with quiet_library_warnings():
            ran, failure = _run_machine(sans_io, tier, seed, examples)
        samples += ran
        details["state_machine_examples"] = ran
        details["state_machine_steps"] = _EXAMPLES[tier][1]
        if failure:
            findings.append(failure)
        with quiet_library_warnings():
            retransmitted, retransmission_findings = _retransmission_checks(sans_io, seed)
        details["retransmission_rounds"] = retransmitted
        samples += retransmitted
        findings.extend(retransmission_findings)
        with quiet_library_warnings():
            crossed, cross_findings = _cross_round_checks(sans_io, seed)
        details["cross_round_rounds"] = crossed
        samples += crossed
        findings.extend(cross_findings)
        with quiet_library_warnings():
            deserted, deserted_findings = _deserted_phase_checks(sans_io, seed)
        details["deserted_phase_rounds"] = deserted
        samples += deserted
        findings.extend(deserted_findings)
        with quiet_library_warnings():
            restored, restore_findings = _restore_checks(sans_io, seed)
        # Restarted rounds plus restores of intact and damaged snapshots.
        details["restore_checks"] = restored or "n/a: no snapshots"
        samples += restored
        findings.extend(restore_findings)
    else:
        details["state_machine"] = "n/a: the target has no sans-I/O parties"
    if secure_sum is not None:
        rounds = 4 if tier == "fast" else 20
        sessions = 4 if tier == "fast" else 16
        with quiet_library_warnings():
            findings.extend(_round_checks(secure_sum, seed, rounds))
            findings.extend(_session_checks(secure_sum, seed, sessions))
            refused, refusal_problems = refusal_findings(secure_sum)
            findings.extend(refusal_problems)
            details["invalid_parameters_tried"] = refused or "n/a: none listed"
            dropout_rounds = {
                phase: secure_sum.survives_dropout(phase, seed + 17)
                for phase in ("keys", "shares", "masked", "unmask")
            }
            both = secure_sum.answers_both_shares(seed)
            probe = secure_sum.overflow_probe(seed)
            headroom = getattr(secure_sum, "headroom_refusal", lambda _: None)(seed)
            grid = getattr(secure_sum, "grid_rule", lambda _: None)(seed)
            scaled = getattr(secure_sum, "clip_equivariance", lambda _: None)(seed)
            floor = getattr(secure_sum, "late_member_floor", lambda _: None)(seed)
        findings.extend(p for p in (headroom, grid, scaled, floor) if p is not None)
        samples += rounds
        if hasattr(secure_sum, "run_session"):
            samples += sessions
            details["sessions"] = sessions
        else:
            details["sessions"] = "n/a: the target has no sessions"
        details["dropout_rounds"] = {k: v or "completed, exact" for k, v in dropout_rounds.items()}
        findings.extend(
            f"one client silent before {phase}: {problem}"
            for phase, problem in dropout_rounds.items()
            if problem
        )
        details["answers_both_shares"] = both
        if both:
            findings.append(
                "a client answered both shares of one neighbour (no disjointness check)"
            )
        details["overflow_probe"] = {
            "refused": probe.refused,
            "max_abs_error": probe.max_abs_error,
            "note": probe.note,
        }
        samples += 2
        if not probe.refused and probe.max_abs_error > probe.tolerance:
            findings.append(
                f"a sum beyond the modulus, or at its planned edge, wrapped silently (error "
                f"{probe.max_abs_error:.4g}; "
                f"{probe.note})"
            )
    return AuditResult(
        audit=7,
        name="secure-sum",
        target=target.name,
        statistic="counterexamples (state machine, honest rounds, both-shares request, overflow)",
        value=float(len(findings)),
        threshold="0 counterexamples",
        samples=samples,
        verdict=Verdict.FAIL if findings else Verdict.PASS,
        error_rate=0.0,
        findings=tuple(findings),
        details=details,
        seconds=time.perf_counter() - start,
        power="any counterexample its state machine and round checks reach (deterministic)",
    )


# ------------------------------------------------------------------------------- audit 8


def _shamir_exhaustive(sharing: SecretSharingUnderTest) -> tuple[int, list[str]]:
    """Perfect secrecy over tiny fields: every t−1 holders see the same law for every secret."""
    findings: list[str] = []
    checked = 0
    for prime, t, points in ((5, 2, (1, 2, 3)), (5, 3, (1, 2, 4)), (7, 3, (2, 3, 5, 6))):
        if sharing.evaluate(0, [0] * (t - 1), points, prime) is None:
            return 0, []
        for holders in itertools.combinations(range(len(points)), t - 1):
            laws = []
            for secret in range(prime):
                seen: Counter[tuple[int, ...]] = Counter()
                for coefficients in itertools.product(range(prime), repeat=t - 1):
                    shares = sharing.evaluate(secret, coefficients, points, prime)
                    assert shares is not None
                    seen[tuple(shares[h] for h in holders)] += 1
                laws.append(seen)
                checked += 1
            if any(law != laws[0] for law in laws) or set(laws[0].values()) != {1}:
                findings.append(f"Shamir over Z_{prime}, t={t}: holders {holders} learn the secret")
    return checked, findings


#: Primes of both bit-length parities, small to the largest below 2^31 (sub-secrets of a
#: b-bit prime carry b − 1 bits).
_SPLIT_PRIMES = (5, 13, 251, 65_521, 2**30 - 35, 2**31 - 1)


def _shamir_split_join(sharing: Any) -> tuple[int, list[str]]:
    """With ``split_join(secret, prime)``: a secret cut into sub-secrets for each prime of
    :data:`_SPLIT_PRIMES` has every piece in [0, prime) and joins back to itself (an all-ones
    secret, and a patterned one, of 32 bytes), in no more pieces than ⌈8·32/⌊log₂ p⌋⌉ (each
    piece can carry ⌊log₂ p⌋ bits; every extra piece is one more share per neighbour)."""
    split_join = getattr(sharing, "split_join", None)
    if split_join is None:
        return 0, []
    findings: list[str] = []
    secrets = (b"\xff" * 32, bytes(range(1, 33)))
    for prime, secret in itertools.product(_SPLIT_PRIMES, secrets):
        pieces, joined = split_join(secret, prime)
        fewest = -(-8 * len(secret) // (prime.bit_length() - 1))
        if any(not 0 <= piece < prime for piece in pieces):
            findings.append(f"Shamir: split_secret for p = {prime} gives pieces outside [0, p)")
        elif len(pieces) > fewest:
            findings.append(
                f"Shamir: split_secret for p = {prime} cuts {len(secret)} bytes into "
                f"{len(pieces)} pieces; {fewest} of ⌊log₂ p⌋ bits hold them"
            )
        elif joined != secret:
            findings.append(f"Shamir: split and joined for p = {prime}, the secret changed")
    return len(_SPLIT_PRIMES) * len(secrets), findings


def _shamir_sampled_secrecy(
    sharing: SecretSharingUnderTest, seed: int, alpha: float
) -> tuple[int, list[str], dict[str, float]]:
    """The real sharing over Z_7 (t = 3): any 2 holders see a uniform pair, whatever the secret;
    and over Z_257, where a rejection sampler of coefficients often has to draw again, one
    holder's shares are uniform.

    This checks what the exhaustive test cannot: that the coefficients are drawn uniformly.
    """
    prime, threshold, points = 7, 3, (1, 2, 3, 5)
    copies = 40 * prime * prime
    holder_sets = ((0, 1), (2, 3))
    tests = prime * len(holder_sets) + 1  # and the refill cell below
    findings: list[str] = []
    p_values: dict[str, float] = {}
    for secret in range(prime):
        rows = sharing.share_in_field(
            secret,
            copies=copies,
            threshold=threshold,
            points=points,
            prime=prime,
            seed=seed * 31 + secret,
        )
        if rows is None:
            return 0, [], {}
        rows = np.asarray(rows, dtype=np.int64)
        for first, second in holder_sets:
            cells = np.bincount(rows[first] * prime + rows[second], minlength=prime * prime)
            p = float(stats.chisquare(cells).pvalue)
            p_values[f"secret={secret} holders={first},{second}"] = p
            if p < alpha / tests:
                findings.append(
                    f"Shamir over Z_{prime}, t={threshold}: holders {first},{second} see a "
                    f"non-uniform pair for secret {secret} (χ² p = {p:.2g})"
                )
    # Z_257 keeps only 257 of every 512 draws of 9 bits: a rejection sampler drawing twice the
    # coefficients it needs (plus slack) falls short in ≈ 30 % of these calls of 1000 and must
    # draw again. At t = 2 a holder's share of the secret 0 is the one coefficient times its
    # point: uniform, whichever path drew it.
    field = _REFILL_PRIME
    shares = []
    for call in range(_REFILL_CALLS):
        rows = sharing.share_in_field(
            0, copies=1000, threshold=2, points=(1, 2), prime=field, seed=seed * 31 + 977 + call
        )
        if rows is None:
            return tests - 1, findings, p_values
        shares.append(np.asarray(rows, dtype=np.int64)[0])
    pooled = np.concatenate(shares)
    if pooled.min() < 0 or pooled.max() >= field:
        findings.append(f"Shamir over Z_{field}, t=2: shares outside [0, {field})")
        return tests, findings, p_values
    p = float(stats.chisquare(np.bincount(pooled, minlength=field)).pvalue)
    p_values[f"Z_{field} refills, holder 1"] = p
    if p < alpha / tests:
        findings.append(
            f"Shamir over Z_{field}, t=2: a holder's shares are not uniform over "
            f"{pooled.size} (calls of 1000 coefficients, which redraw often; χ² p = {p:.2g})"
        )
    return tests, findings, p_values


#: A prime just above a power of two (acceptance 257/512 for 9-bit draws) and the calls that
#: :func:`_shamir_sampled_secrecy` shares at it: P[no call redraws] ≈ 0.7^40 ≈ 6·10⁻⁷.
_REFILL_PRIME = 257
_REFILL_CALLS = 40


def _shamir_threshold(sharing: SecretSharingUnderTest, seed: int, trials: int) -> list[str]:
    findings: list[str] = []
    rng = np.random.default_rng(seed)
    # The edges first — all-zero and all-one secrets (every sub-secret 0, or its largest) —
    # then random ones: a zero chunk has chance ≈ 2^-30 in a random secret.
    edges = (b"\x00" * sharing.secret_bytes, b"\xff" * sharing.secret_bytes)
    for trial in range(trials):
        n = int(rng.integers(3, 9))
        t = int(rng.integers(2, n + 1))
        secret = (
            edges[trial]
            if trial < len(edges)
            else rng.integers(0, 256, size=sharing.secret_bytes, dtype=np.uint8).tobytes()
        )
        shares = sharing.share(secret, t, n, seed * 1000 + trial)
        chosen = sorted(rng.choice(n, size=t, replace=False).tolist())
        if sharing.reconstruct([shares[i] for i in chosen]) != secret:
            findings.append(f"t={t} of n={n} shares did not reconstruct the secret")
        if t > 1 and sharing.reconstruct([shares[i] for i in chosen[:-1]]) == secret:
            findings.append(f"t−1={t - 1} shares of n={n} reconstructed the secret")
    return sorted(set(findings))


_GARBAGE = ("random", "zeros", "another's", "one entry off by one")
"""How a dishonest holder garbles its share in audit 8's error-correction check."""


def _shamir_error_correction(
    sharing: SecretSharingUnderTest, seed: int, trials: int
) -> tuple[int, list[str]]:
    """Robust reconstruction (what a server runs on unmask shares some clients may garble):
    with up to e = ⌊(m − t)/2⌋ of m shares garbled (:data:`_GARBAGE`: random values, zeros,
    another holder's share, one entry off by one) it must return the secret and
    name exactly the garbled holders; with e + 1 random ones (while e + 1 ≤ m − t) it must
    refuse or still return the secret — a wrong secret has chance ≈ m^e/p for random garbage,
    so none is allowed; and with exactly t + 1 shares, one off by one in one entry (each holder
    in turn, 8 entries, t ∈ {2, 3, 5}), it must refuse or return the secret. n/a when the
    target offers no robust reconstruction."""
    robust = getattr(sharing, "robust_reconstruct", None)
    if robust is None:
        return 0, []
    findings: list[str] = []
    rng = np.random.default_rng(seed + 41)
    for trial in range(trials):
        m = int(rng.integers(3, 13))
        t = int(rng.integers(2, m + 1))
        correctable = (m - t) // 2
        excess = trial % 3 == 2 and correctable + 1 <= m - t
        errors = correctable + 1 if excess else int(rng.integers(0, correctable + 1))
        secret = rng.integers(0, 256, size=sharing.secret_bytes, dtype=np.uint8).tobytes()
        shares = sharing.share(secret, t, m, seed * 1000 + trial)
        garbled = sorted(rng.choice(m, size=errors, replace=False).tolist())
        # Beyond the radius only random garbage: e + 1 holders sending copies of one honest
        # share can make a constant polynomial the nearest codeword (no decoder can tell).
        pattern = "random" if excess else _GARBAGE[trial % len(_GARBAGE)]
        source = min(set(range(m)) - set(garbled))  # an honest holder whose share is copied
        honest_row = np.asarray(shares[source][1], dtype=np.int64)
        for i in garbled:
            point, row = shares[i]
            row = np.asarray(row, dtype=np.int64)
            if pattern == "random":
                noise = rng.integers(1, 2**31 - 1, size=len(row), dtype=np.int64)
            elif pattern == "zeros":  # all-zero shares (zero entries change elimination)
                noise = -row
            elif pattern == "another's":  # another holder's share, sent as one's own
                noise = honest_row - row
            else:  # "one entry off by one"
                noise = np.zeros_like(row)
                noise[int(rng.integers(len(row)))] = 1
            shares[i] = (point, (row + noise) % (2**31 - 1))
        decoded = robust(shares, t)
        where = f"m={m}, t={t}, {errors} garbled ({pattern})"
        if decoded is None:
            if not excess:
                findings.append(f"robust reconstruction ({where}) refused correctable shares")
            continue
        value, wrong = decoded
        if value != secret:
            findings.append(f"robust reconstruction ({where}) returned a wrong secret")
        elif not excess and sorted(wrong) != [shares[i][0] for i in garbled]:
            findings.append(
                f"robust reconstruction ({where}) named {sorted(wrong)} as wrong, not "
                f"{[shares[i][0] for i in garbled]}"
            )
    # Exactly t + 1 shares, one of them off by one in one entry — each holder in turn, each of
    # 8 entries: nothing can be corrected (e = 0), only detected, and the random draws above
    # rarely land here. (Small garbage: a wrong secret then often still decodes to bytes.)
    checked = 0
    for t in (2, 3, 5):
        secret = rng.integers(0, 256, size=sharing.secret_bytes, dtype=np.uint8).tobytes()
        shares = sharing.share(secret, t, t + 1, seed * 1000 + trials + t)
        for liar, entry in itertools.product(range(t + 1), range(8)):
            point, row = shares[liar]
            row = np.asarray(row, dtype=np.int64).copy()
            row[entry % len(row)] = (row[entry % len(row)] + 1) % (2**31 - 1)
            decoded = robust([*shares[:liar], (point, row), *shares[liar + 1 :]], t)
            checked += 1
            if decoded is not None and decoded[0] != secret:
                findings.append(
                    f"robust reconstruction (m={t + 1}, t={t}, holder {point} garbled) "
                    "returned a wrong secret instead of refusing"
                )
    return trials + checked, sorted(set(findings))


def _shamir_refusals(sharing: SecretSharingUnderTest) -> tuple[int, list[str]]:
    """What a sharing must refuse (over Z_7, t = 2): a point ≡ 0 (mod p), whose share is the
    secret itself; a point ≡ another point (two parties get one share); a secret outside Z_p
    (shared as its residue, reconstructed as a different secret); a composite modulus. And it
    must accept every prime field Z_p for p ≤ 37, and larger ones ≡ 1 (mod 4) where a
    Miller–Rabin test's squaring loop decides (269, the first above CPython's cached small
    integers, and 65537 = 2^16 + 1). Refusing = raising; a fixed-field target
    (``share_in_field`` returns ``None``) is not asked."""
    prime = 7
    cases: list[tuple[int, tuple[int, ...], int, str]] = [
        (3, (0, 1, 2), prime, "a share at point 0 (the secret itself)"),
        (3, (1, 2, prime), prime, f"a share at point {prime} ≡ 0 (the secret itself)"),
        (3, (1, 2, 8), prime, "shares at points 1 and 8 ≡ 1 (one share twice)"),
        (prime, (1, 2, 3), prime, f"shares of the secret {prime}, outside Z_{prime}"),
        (-1, (1, 2, 3), prime, f"shares of the secret −1, outside Z_{prime}"),
        (3, (1, 2, 3), 9, "shares over Z_9, which is not a field (no unique interpolation)"),
        # A Carmichael number with no factor ≤ 17: a Fermat test to bases 2…17 passes it.
        (3, (1, 2, 3), 252_601, "shares over Z_252601 = 41·61·101, which is not a field"),
    ]
    findings: list[str] = []
    # Every small prime field must work: the smallest (a range bound off by one refuses it)
    # and each prime a primality test treats specially (trial divisors, Miller–Rabin bases).
    for field in (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 269, 65_537):
        try:
            sharing.share_in_field(2, copies=1, threshold=2, points=(1, 2), prime=field, seed=0)
        except Exception as error:  # a refusal, whatever the target raises
            findings.append(f"Shamir over Z_{field} refused: {error}"[:200])
    for secret, points, modulus, what in cases:
        try:
            rows = sharing.share_in_field(
                secret, copies=1, threshold=2, points=points, prime=modulus, seed=0
            )
        except Exception:  # any refusal will do; what it raises is the target's
            continue
        if rows is None:
            return 0, []
        findings.append(f"Shamir over Z_{modulus}: handed out {what} instead of refusing")
    return len(cases), findings


# Ring widths of every storage class: ≤ 32 bits (uint32 words), 33–63 and 64 (uint64 words).
_MASK_BITS = (1, 2, 3, 4, 5, 31, 32, 33, 48, 63, 64)
#: An odd mask length past 2^17 (no power-of-two chunk size divides it).
_LONG_MASK = (1 << 17) + 3
_MASKED_INPUT_BITS = (2, 3, 4, 33, 64)
_SLICE = 4  # bits per slice of a wide ring: χ² over 16 cells


def _slices(bits: int) -> dict[str, int]:
    """Where to read a 4-bit slice of a Z_{2^bits} value (its shift), or the whole value."""
    if bits <= 5:
        return {"all": 0}
    places = {"low": 0, "middle": bits // 2 - _SLICE // 2, "high": bits - _SLICE}
    straddle = min(32 - _SLICE // 2, bits - _SLICE)  # across bit 32, inside the ring
    if bits > 32 and straddle not in places.values():  # a 32-bit draw would leave zeros here
        places["bit 32"] = straddle
    return places


def _uniformity(values: NDArray[np.uint64], bits: int) -> dict[str, float] | None:
    """χ² p-value per slice of entries that should be uniform on Z_{2^bits} (None: out of range).

    Narrow rings are tested whole; wider ones by 4-bit slices at the low end, the middle, the
    top and, above 32 bits, across bit 32 — a uniform value has every slice uniform, and a
    generator that fills only a word's lower half, or leaves the top bits biased, fails one.
    """
    values = np.asarray(values, dtype=np.uint64)
    if bits < 64 and values.size and int(values.max()) >= 1 << bits:
        return None
    out: dict[str, float] = {}
    for name, shift in _slices(bits).items():
        width = bits if name == "all" else _SLICE
        cells = (values >> np.uint64(shift)) & np.uint64((1 << width) - 1)
        counts = np.bincount(cells.astype(np.intp), minlength=1 << width)
        out[name] = float(stats.chisquare(counts).pvalue)
    return out


def _stuck_detected(entries: int, alpha: float, rings: Sequence[int]) -> dict[str, float]:
    """What the uniformity χ² tests catch with 95 % power: the fraction of entries stuck at one
    value, on the narrowest ring tested whole (fewest cells, least power) and per 4-bit slice."""
    narrowest = min(rings)
    cells = 1 << (narrowest if narrowest <= _SLICE + 1 else _SLICE)
    return {
        f"whole ring Z_2^{narrowest}": stuck_fraction(entries, cells, alpha),
        "per 4-bit slice": stuck_fraction(entries, 1 << _SLICE, alpha),
    }


def _mask_checks(
    masks: MaskPRGUnderTest, tier: Tier, seed: int
) -> tuple[int, list[str], dict[str, Any]]:
    findings: list[str] = []
    rng = np.random.default_rng(seed)
    entries = 1 << (16 if tier == "fast" else 20)
    trials = 3
    tests = trials * sum(len(_slices(bits)) for bits in _MASK_BITS)
    per_test = FAMILY_ALPHA / 3 / tests  # a third of α (see audit 8)
    p_values: dict[str, float] = {}
    not_offered: list[int] = []
    for bits in _MASK_BITS:
        for trial in range(trials):
            key = rng.integers(0, 256, size=masks.seed_bytes, dtype=np.uint8).tobytes()
            expanded = masks.expand(key, bits, entries, b"session-%d" % trial)
            if expanded is None:
                not_offered.append(bits)
                break
            values = np.asarray(expanded)
            uniform = _uniformity(values, bits)
            if uniform is None or values.size != entries:
                findings.append(f"M = 2^{bits}: mask entries outside Z_M (or a short mask)")
                continue
            for name, p in uniform.items():
                p_values[f"M=2^{bits}#{trial} {name}"] = p
                if p < per_test:
                    where = "" if name == "all" else f" ({name} bits)"
                    if name == "all":
                        counts = np.bincount(values.astype(np.intp), minlength=1 << bits)
                        missing = [int(v) for v in np.flatnonzero(counts == 0)]
                        where = f" (never {missing})" if missing else ""
                    findings.append(f"mask not uniform on Z_2^{bits}{where}: χ² p = {p:.2g}")
    # Binding: one seed in two sessions, and seeds differing in two bytes, give different masks.
    key = rng.integers(0, 256, size=masks.seed_bytes, dtype=np.uint8).tobytes()
    # A long vector of odd length (past any power-of-two chunking of the keystream), in each
    # width class of rings: served whole, every entry in Z_M.
    for bits in (32, 33, 64):
        try:
            long = masks.expand(key, bits, _LONG_MASK, b"session-long")
        except Exception as exc:  # a valid length refused: a finding, not a crash
            findings.append(f"M = 2^{bits}: a mask of {_LONG_MASK} entries raised {exc!r}"[:200])
            continue
        if long is not None and (
            np.asarray(long).shape != (_LONG_MASK,)
            or int(np.max(np.asarray(long, dtype=np.uint64))) >> bits
        ):
            findings.append(f"M = 2^{bits}: a mask of {_LONG_MASK} entries is short or off Z_M")

    def word_mask(seed_bytes: bytes, dimension: int, session: bytes) -> NDArray[np.uint64]:
        expanded = masks.expand(seed_bytes, 32, dimension, session)
        if expanded is None:
            raise ValueError("a mask generator must offer the 32-bit ring")
        return np.asarray(expanded, dtype=np.uint64)

    if masks.session_bound:
        first = word_mask(key, 64, b"session-A" + bytes(23))
        second = word_mask(key, 64, b"session-B" + bytes(23))
        if np.array_equal(first, second):
            findings.append(
                "the same pairwise seed gives the same mask in two sessions (mask reuse)"
            )
        binding = "checked"
    else:
        binding = "n/a: the PRG takes no session id (rounds are separated by fresh keys only)"
    # A session's sums: one seed in sums 1–3, with no iterate and with two different ones,
    # gives nine different masks (the sum and the iterate are bound into the mask key).
    in_sum = getattr(masks, "expand_in_sum", None)
    sum_binding = "n/a: the target offers no session sums"
    if in_sum is not None:
        seen: dict[bytes, str] = {}
        iterates = {"no iterate": b"", "iterate 0": bytes(32), "iterate 1": bytes(31) + b"\x01"}
        for r, (label, iterate) in itertools.product((1, 2, 3), iterates.items()):
            mask = np.asarray(in_sum(key, 64, b"session-A" + bytes(23), r, iterate), np.uint64)
            where = f"sum {r}, {label}"
            if mask.tobytes() in seen:
                findings.append(
                    f"the same pairwise seed gives the same mask in {seen[mask.tobytes()]} and "
                    f"in {where} (mask reuse across a session's sums)"
                )
            seen.setdefault(mask.tobytes(), where)
        sum_binding = "checked"
    collisions = 0
    base = bytearray(key)
    for i, j in itertools.combinations(range(masks.seed_bytes), 2):
        flipped = bytearray(base)
        flipped[i] ^= 0x5A
        flipped[j] ^= 0x5A
        if np.array_equal(word_mask(bytes(flipped), 16, b"s"), word_mask(bytes(base), 16, b"s")):
            collisions += 1
    if collisions:
        findings.append(
            f"{collisions} pairs of distinct seeds (two bytes flipped) expand to the same mask"
        )
    unique = list(dict.fromkeys(findings))
    details = {
        "chi2_p": p_values,
        "seed_collisions": collisions,
        "session_binding": binding,
        "sum_binding": sum_binding,
        "ring_bits_not_offered": not_offered,
        "stuck_fraction_detected": _stuck_detected(entries, per_test, _MASK_BITS),
    }
    return tests + 2 + (in_sum is not None), unique, details


def _masked_input_checks(
    secure_sum: SecureSumUnderTest, tier: Tier, seed: int
) -> tuple[int, list[str], dict[str, Any]]:
    """χ² uniformity on Z_M of what the server receives from clients with constant inputs.

    One test per (M, client, slice): a bias that depends on a client's mask signs would cancel
    in a pooled count. Rings of every width class the target offers (``None``: not offered).
    """
    findings: list[str] = []
    dimension = 1 << (15 if tier == "fast" else 18)
    p_values: dict[str, float] = {}
    offered: list[int] = []
    per_client: list[tuple[int, int, NDArray[np.uint64]]] = []
    for bits in _MASKED_INPUT_BITS:
        rows = secure_sum.masked_inputs(bits, dimension, seed + bits)
        if rows is None:
            continue
        offered.append(bits)
        for client, row in enumerate(np.asarray(rows, dtype=np.uint64)):
            per_client.append((bits, client, row))
    if not per_client:
        return 0, [], {"masked_inputs": "n/a: not offered by the target"}
    per_test = FAMILY_ALPHA / 3 / sum(len(_slices(bits)) for bits, _, _ in per_client)
    tests = 0
    for bits, client, row in per_client:
        uniform = _uniformity(row, bits)
        if uniform is None:
            findings.append(f"M = 2^{bits}: masked-input entries outside Z_M")
            continue
        for name, p in uniform.items():
            tests += 1
            p_values[f"M=2^{bits} client {client} {name}"] = p
            if p < per_test:
                where = "" if name == "all" else f" ({name} bits)"
                findings.append(
                    f"masked input of client {client} not uniform on Z_2^{bits}{where}: "
                    f"χ² p = {p:.2g} over {row.size} entries"
                )
    seeded, seed_findings = _seed_checks(secure_sum, offered[-1], seed)
    findings.extend(seed_findings)
    details = {
        "masked_input_chi2_p": p_values,
        "seed_checks": seeded,
        "entries_per_client": dimension,
        "ring_bits": offered,
        "ring_bits_not_offered": [b for b in _MASKED_INPUT_BITS if b not in offered],
        "stuck_fraction_detected": _stuck_detected(dimension, per_test, offered),
    }
    return tests, findings, details


def _seed_checks(secure_sum: SecureSumUnderTest, bits: int, seed: int) -> tuple[str, list[str]]:
    """The masked inputs depend on the round's randomness (two seeds give different vectors)
    and, when the target claims seeded rounds (``seeded``), one seed gives the same vectors
    twice: a client that ignores the random source it is given (fresh OS randomness, or none)
    fails one of the two."""
    first = secure_sum.masked_inputs(bits, 64, seed)
    again = secure_sum.masked_inputs(bits, 64, seed)
    other = secure_sum.masked_inputs(bits, 64, seed + 1)
    if first is None or again is None or other is None:
        return "n/a: not offered", []
    findings = []
    if np.array_equal(first, other):
        findings.append(
            f"M = 2^{bits}: two seeds gave the same masked inputs (the masks ignore the round's "
            "randomness)"
        )
    claims = bool(getattr(secure_sum, "seeded", False))
    if claims and not np.array_equal(first, again):
        findings.append(
            f"M = 2^{bits}: one seed gave two different masked inputs, though the target claims "
            "seeded (reproducible) rounds: a client ignores the random source it is given"
        )
    return ("seeded: repeats, and differs across seeds" if claims else "differs across seeds"), (
        findings
    )


def _count(n: int, rate: float) -> int:
    """The expected count ⌊n·rate + 1/2⌋ of dropped or corrupt clients (Bell et al. 2020)."""
    return math.floor(n * Fraction(repr(rate)) + Fraction(1, 2))


def _hypergeometric_tail(population: int, marked: int, draws: int, at_least: int) -> Fraction:
    """P[Hypergeometric ≥ at_least], exactly (binomial sums in integers)."""
    if at_least <= 0:
        return Fraction(1)
    top = min(marked, draws)
    total = sum(
        math.comb(marked, x) * math.comb(population - marked, draws - x)
        for x in range(at_least, top + 1)
    )
    return Fraction(total, math.comb(population, draws))


def _harary_bounds(
    n: int, dropped: int, corrupt: int, k: int, t: int
) -> tuple[Fraction, Fraction, Fraction]:
    """Exact (recovery failure, secrecy failure, disconnection) bounds of a SecAgg+ Harary
    graph of degree k with threshold t (Bell et al. 2020's events, union bounds over clients)."""
    recovery = n * _hypergeometric_tail(n - 1, dropped, k, k - t + 1)
    secrecy = n * _hypergeometric_tail(n - 1, corrupt, k, t)
    bad = corrupt + dropped
    pairs = Fraction(n * (n - k - 1), 2) * Fraction(math.comb(bad, k), math.comb(n, k))
    one = Fraction(n * math.comb(bad, k // 2), math.comb(n, k // 2))
    return recovery, secrecy, min(pairs, one)


def _feasible_threshold(
    n: int,
    dropped: int,
    corrupt: int,
    k: int,
    *,
    failure: Fraction | float,
    security: Fraction | float,
) -> int | None:
    """A threshold t for which degree k meets both bounds, or ``None``. Secrecy falls and the
    recovery failure grows with t, so only the smallest t meeting security can work."""
    low = _smallest_secure_threshold(n, dropped, corrupt, k, security=security)
    if low is None:
        return None
    recovery = n * _hypergeometric_tail(n - 1, dropped, k, k - low + 1)
    return low if recovery <= failure else None


def _roughly_feasible(
    n: int, dropped: int, corrupt: int, k: int, *, failure_log2: float, security_bits: float
) -> bool:
    """A floating-point pre-check of :func:`_feasible_threshold` with 2 bits of slack (never
    stricter in practice): lets a scan over many degrees skip the exact rational sums."""
    thresholds = np.arange(1, k + 1)
    log2_n = math.log2(n)
    secrecy = log2_n + stats.hypergeom.logsf(thresholds - 1, n - 1, corrupt, k) / math.log(2)
    bad = min(n, dropped + corrupt)
    if bad < k:
        disconnection = -math.inf
    else:
        lg = math.lgamma

        def log2_ratio(m: int) -> float:  # log2 C(bad, m)/C(n, m)
            return (lg(bad + 1) - lg(bad - m + 1) - lg(n + 1) + lg(n - m + 1)) / math.log(2)

        two = math.log2(n) + math.log2(n - k - 1) - 1 + log2_ratio(k)
        disconnection = min(two, log2_n + log2_ratio(k // 2))
    total = np.logaddexp2(secrecy, disconnection)
    recovery = log2_n + stats.hypergeom.logsf(k - thresholds, n - 1, dropped, k) / math.log(2)
    ok = (total <= -security_bits + 2) & (recovery <= failure_log2 + 2)
    return bool(ok.any())


def _smallest_secure_threshold(
    n: int, dropped: int, corrupt: int, k: int, *, security: Fraction | float
) -> int | None:
    """The smallest t with secrecy + disconnection ≤ ``security`` at degree k (secrecy falls as
    t grows), or ``None``."""
    _, _, disconnection = _harary_bounds(n, dropped, corrupt, k, 1)
    if disconnection > security:
        return None
    low, high = 1, k
    if n * _hypergeometric_tail(n - 1, corrupt, k, high) + disconnection > security:
        return None
    while low < high:
        middle = (low + high) // 2
        if n * _hypergeometric_tail(n - 1, corrupt, k, middle) + disconnection <= security:
            high = middle
        else:
            low = middle + 1
    return low


def _threshold_claim(
    n: int,
    dropped: int,
    corrupt: int,
    k: int,
    t: int,
    *,
    failure: Fraction | float,
    security: Fraction | float,
) -> str | None:
    """What is wrong with t against the claim "the smallest threshold meeting both bounds, but
    2 rather than 1 when 2 also meets them" (``claims_smallest_threshold``), or ``None``."""
    if k >= n - 1:  # complete graph: t must exceed the corrupt, at most the surviving neighbours
        low, high = corrupt + 1, n - 1 - dropped
    else:
        found = _smallest_secure_threshold(n, dropped, corrupt, k, security=security)
        if found is None:
            return None  # the bound checks report it
        low = found
        # Recovery failure grows with t: 2 is valid when its recovery bound holds.
        high = 2 if n * _hypergeometric_tail(n - 1, dropped, k, k - 1) <= failure else 1
    expected = 2 if low == 1 and high >= 2 else low
    if t != expected:
        return f"t={t} is not the claimed threshold (smallest valid, 2 over 1): t={expected}"
    return None


def _log2(value: Fraction) -> float:
    """log2 of a non-negative rational, exactly enough for any size (−inf at 0)."""
    if value == 0:
        return -math.inf
    shift = value.numerator.bit_length() - value.denominator.bit_length()
    scaled = value / Fraction(2) ** shift  # in (1/2, 2): a float loses nothing that matters
    return shift + math.log2(float(scaled))


def _reported_bound_errors(
    reported: tuple[float, ...], recovery: Fraction, secrecy: Fraction, disconnection: Fraction
) -> list[str]:
    """A picker's reported (log2 recovery failure, security bits[, secrecy bits, connectivity
    bits]) against the exact bounds of its choice: log2 min(1, recovery),
    −log2(min(1, secrecy) + min(1, disconnection)), −log2 min(1, secrecy) and
    −log2 min(1, disconnection)."""
    one = Fraction(1)
    exact = (
        _log2(min(one, recovery)),
        -_log2(min(one, secrecy) + min(one, disconnection)),
        -_log2(min(one, secrecy)),
        -_log2(min(one, disconnection)),
    )
    names = ("log2 recovery failure", "security bits", "secrecy bits", "connectivity bits")
    errors = []
    for name, claimed, truth in zip(names, reported, exact[: len(reported)], strict=False):
        if math.isinf(truth) or math.isinf(claimed):
            close = claimed == truth
        else:
            close = abs(claimed - truth) <= 1e-6 * max(1.0, abs(truth))
        if not close:
            errors.append(f"reported {name} {claimed:.6g}, exact {truth:.6g}")
    return errors


# Audit 8: the (log2 failure, security bits) pairs a retargetable picker is also checked at.
_OTHER_TARGETS: tuple[tuple[float, float], ...] = (
    (-10.0, 16.0),
    (-40.0, 80.0),
    (-1.0, 1.0),
    (-1.0, 0.3),  # below one bit: where the degree-2 pre-screen decides alone
)


def _graph_grid(tier: Tier) -> tuple[tuple[int, ...], tuple[tuple[float, float], ...]]:
    """Audit 8's (n, δ, γ) grid: n = 3, 4 and sizes spread geometrically from 5 to 5 000
    (fast; 30 000 deep), so that complete graphs (of odd degree too), thresholds 1 and 2, the
    smallest Harary graphs and large sparse graphs are all met, and cells no graph can serve
    (the picker must refuse exactly those); rate pairs from none to heavy, several making n·rate
    non-integer (the ⌊n·rate + 1/2⌋ rounding). The exact checks cost ≈ 1 ms a cell."""
    top, count = (5000, 32) if tier == "fast" else (30_000, 64)
    # n = 3 and 4 as well: the smallest sessions, where only a complete graph (k = 2, k = 3:
    # an odd degree) is possible.
    sizes = tuple(
        sorted({3, 4} | {round(5 * (top / 5) ** (i / (count - 1))) for i in range(count)})
    )
    rates = (
        (0.1, 0.05),
        (0.2, 0.1),
        (0.05, 0.0),
        (0.123, 0.037),
        (0.0333, 0.0171),
        (0.3, 0.2),
        (0.01, 0.01),
        (0.25, 0.0),
        (0.0, 0.15),
        # Heavy corruption: the hypergeometric tails then start above 0 (draws ≥ N − K + 3),
        # a range the milder pairs never reach.
        (0.1, 0.5),
        # Near the top of the documented [0, 1): supports starting far above 0 (an off-by-some
        # lower end of the tail sum inflated tails there, or indexed past its table).
        (0.0, 0.7),
        (0.02, 0.75),
    )
    return sizes, rates


# Cells beside the grid: nearly every client corrupt (n − 1 − c = 2 honest neighbours at most),
# where the hypergeometric tails have supports of two or three points and a floating-point
# pre-screen that misweights them rejects degrees the exact bounds accept (at loose targets:
# k = 990 instead of 980 at 1 bit).
_EDGE_CELLS: tuple[tuple[int, float, float], ...] = ((1000, 0.0, 0.997),)


# Audit 8: tails beside the small exhaustive grid — degenerate and near-degenerate supports of
# a large population (every item marked, none, every item drawn, all but a few marked), each
# read at both ends of its support and just outside.
_LARGE_TAILS: tuple[tuple[int, int, int, tuple[int, ...]], ...] = (
    (999, 999, 20, (0, 1, 20, 21)),
    (999, 0, 20, (0, 1)),
    (999, 500, 999, (0, 1, 499, 500, 501, 1000)),
    (999, 997, 20, (1, 2, 18, 19, 20, 21)),
    (999, 990, 40, (30, 31, 32, 39, 40, 41)),
)


def _tail_errors(log2_tail: Callable[[int, int, int, int], float]) -> tuple[int, list[str]]:
    """A target's log2 P[X ≥ x], X ~ Hypergeometric(N, K, m) (the primitive its SecAgg+ bounds
    are built from), against the exact tail in rationals: every N ≤ 10, K, m ≤ N and
    x = 0 … m + 1 — supports of one point (K = 0 or N, m = 0 or N) included — and the large
    cells of :data:`_LARGE_TAILS` at the ends of their supports. A bound may round up by 10⁻⁹
    relative, never down; −inf exactly when the tail is empty."""
    cells = [
        (population, marked, draws, tuple(range(draws + 2)))
        for population in range(1, 11)
        for marked in range(population + 1)
        for draws in range(population + 1)
    ] + list(_LARGE_TAILS)
    errors: list[str] = []
    checked = 0
    for population, marked, draws, points in cells:
        for at_least in points:
            exact = _log2(_hypergeometric_tail(population, marked, draws, at_least))
            checked += 1
            try:
                claimed = float(log2_tail(population, marked, draws, at_least))
            except Exception as error:  # every argument here is in the documented range
                errors.append(f"raised {type(error).__name__} ({error})"[:200])
            else:
                if math.isinf(exact) or math.isinf(claimed):
                    wrong = claimed != exact
                else:
                    wrong = not exact <= claimed <= exact + 1e-9 * max(1.0, abs(exact))
                if not wrong:
                    continue
                errors.append(f"log2 P[X ≥ {at_least}] = {claimed:.6g}, exact {exact:.6g}")
            errors[-1] = f"Hypergeometric(N={population}, K={marked}, m={draws}): {errors[-1]}"
            if len(errors) >= 3:
                return checked, errors
    return checked, errors


def _graph_checks(
    graph: GraphParametersUnderTest, tier: Tier
) -> tuple[int, list[str], list[dict[str, Any]]]:
    findings: list[str] = []
    rows: list[dict[str, Any]] = []
    sizes, rates = _graph_grid(tier)
    cells = [(n, *rate) for n in sizes for rate in rates] + list(_EDGE_CELLS)
    failure_limit = Fraction(2) ** Fraction(graph.failure_log2).limit_denominator(1000)
    security_limit = Fraction(2) ** -Fraction(graph.security_bits).limit_denominator(1000)
    for n, dropout, corruption in cells:
        d, c = _count(n, dropout), _count(n, corruption)
        try:
            k, t = graph.parameters(n, dropout, corruption)
        except ValueError as error:
            # Refusing is right only where even the complete graph has no t: c < t ≤ n−1−d.
            rows.append({"n": n, "dropout": dropout, "corruption": corruption, "refused": True})
            if c + 1 <= n - 1 - d:
                findings.append(
                    f"n={n}, δ={dropout}, γ={corruption}: refused, but the complete graph "
                    f"with t={c + 1} meets both targets ({error})"[:300]
                )
            continue
        except Exception as error:  # a refusal is documented as ValueError; anything else
            rows.append({"n": n, "dropout": dropout, "corruption": corruption, "raised": True})
            findings.append(
                f"n={n}, δ={dropout}, γ={corruption}: raised {type(error).__name__} "
                f"({error}); a refusal is a ValueError"[:300]
            )
            continue
        row: dict[str, Any] = {
            "n": n,
            "dropout": dropout,
            "corruption": corruption,
            "k": k,
            "t": t,
        }
        if getattr(graph, "claims_smallest_threshold", False):
            wrong = _threshold_claim(n, d, c, k, t, failure=failure_limit, security=security_limit)
            if wrong is not None:
                findings.append(f"n={n}, δ={dropout}, γ={corruption}, k={k}: {wrong}")
        if k >= n - 1:
            # Complete graph: deterministic (t above the corrupt, at most the survivors).
            ok = c < t <= n - 1 - d
            row.update({"graph": "complete", "ok": ok})
            if not ok:
                findings.append(f"n={n}: complete graph with t={t} but c={c}, d={d}")
            if getattr(graph, "claims_smallest_degree", False):
                # The smallest even degree claim covers the complete graph too: no sparse
                # degree may meet both bounds (scanned upwards; stops at the first).
                sparse = next(
                    (
                        (small, found)
                        for small in range(2, n - 1, 2)
                        if _roughly_feasible(
                            n,
                            d,
                            c,
                            small,
                            failure_log2=graph.failure_log2,
                            security_bits=graph.security_bits,
                        )
                        and (
                            found := _feasible_threshold(
                                n, d, c, small, failure=failure_limit, security=security_limit
                            )
                        )
                        is not None
                    ),
                    None,
                )
                if sparse is not None:
                    findings.append(
                        f"n={n}, δ={dropout}, γ={corruption}: the complete graph, but k="
                        f"{sparse[0]}, t={sparse[1]} meets both bounds"
                    )
        else:
            recovery, secrecy, disconnection = _harary_bounds(n, d, c, k, t)
            if getattr(graph, "claims_smallest_degree", False) and k > 2:
                smaller = _feasible_threshold(
                    n, d, c, k - 2, failure=failure_limit, security=security_limit
                )
                row["smaller_degree_feasible_t"] = smaller
                if smaller is not None:
                    findings.append(
                        f"n={n}, δ={dropout}, γ={corruption}: k={k} is not the smallest even "
                        f"degree (k={k - 2}, t={smaller} meets both bounds)"
                    )
            row.update(
                {
                    "graph": "harary",
                    # Exact: a bound below 2^-1074 would round to 0.0 as a float.
                    "log2_recovery": _log2(recovery),
                    "log2_security": _log2(secrecy + disconnection),
                }
            )
            reported = getattr(graph, "reported_bounds", None)
            if reported is not None:
                findings.extend(
                    f"n={n}, δ={dropout}, γ={corruption}, k={k}, t={t}: {wrong}"
                    for wrong in _reported_bound_errors(
                        reported(n, dropout, corruption), recovery, secrecy, disconnection
                    )
                )
            if recovery > failure_limit:
                findings.append(
                    f"n={n}, k={k}, t={t}: recovery failure 2^{row['log2_recovery']:.1f} > "
                    f"2^{graph.failure_log2:g}"
                )
            if secrecy + disconnection > security_limit:
                findings.append(
                    f"n={n}, k={k}, t={t}: security 2^{row['log2_security']:.1f} > "
                    f"2^-{graph.security_bits:g}"
                )
        rows.append(row)
    return len(rows), findings, rows


def audit_shamir_masks_graph(
    target: AuditTarget, *, tier: Tier = "fast", seed: int = 0
) -> AuditResult:
    """Audit 8: Shamir secrecy and threshold, mask uniformity and binding, SecAgg+ parameters.

    * Shamir perfect secrecy, exhaustively over Z_5 and Z_7 (every polynomial, every secret,
      every set of t − 1 holders); the real sharing over Z_7 gives t − 1 holders a uniform view
      whatever the secret (χ², so the coefficients are drawn uniformly); correctness: any t
      shares reconstruct, t − 1 do not; and refusals: no share at a point ≡ 0 (mod p) — it is
      the secret — nor two at congruent points, a secret outside Z_p or a composite modulus,
      while every prime field up to Z_37, and Z_269 and Z_65537, is accepted. Robust
      reconstruction (when offered): with up to ⌊(m − t)/2⌋ of m shares garbled, the secret
      and exactly the garbled holders;
      with one more, a refusal or the secret — never a wrong secret.
    * Masks: χ² uniformity on Z_M for rings of every width class, M = 2^b with b ∈ {1, …, 5,
      31, 32, 33, 48, 63, 64} (2^16 entries each; above 5 bits per 4-bit slice: low, middle,
      top, and across bit 32 of a 64-bit word); one seed in two sessions gives two masks,
      and (``expand_in_sum``) in a session's sums 1–3 at no iterate and two iterates, nine;
      seeds differing in two bytes give different masks (a folded 32-bit seed does not).
    * Masked inputs: χ² uniformity on Z_M (b ∈ {2, 3, 4, 33, 64}, those the target offers) of
      the vectors an honest round's server receives from clients whose inputs are all the same
      constant; two seeds give different masked inputs, and one seed gives the same twice
      when the target claims seeded rounds (a client that ignores its random source fails).
      The χ² tests share
      the family-wise α = 1e-6 (Bonferroni: a third each to the sampled Shamir views, the masks
      and the masked inputs).
    * SecAgg+ (k, t) against exact hypergeometric bounds recomputed here in rationals (Bell et
      al. 2020 events: recovery failure, secrecy, disconnection), on 409 (n, δ, γ) cells
      (fast; 793 deep; from n = 3, and n = 1000 with all but three clients corrupt),
      refusing only cells even the complete graph cannot serve;
      a picker that claims the smallest even degree must leave none at
      k − 2 (no t meets both bounds there), one that claims the smallest threshold (2 rather
      than 1 when both are valid) must choose exactly it, and the bounds a picker reports
      (log2 recovery failure, security bits) must be the exact ones of its choice, and so must
      the tail primitive they are built from (``log2_tail``: every N ≤ 10, supports of one
      point included, :func:`_tail_errors`); a picker
      that takes other targets is checked at (2^-10, 16 bits), (2^-40, 80) and (2^-1, 1) too;
      rates, failure and security targets out of range must be refused
      (:func:`~audits.targets.refusal_findings`).

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> audit_shamir_masks_graph(OurTarget()).verdict.value
    'pass'
    """
    tier = check_tier(tier)
    start = time.perf_counter()
    sharing, masks, graph = target.secret_sharing(), target.mask_prg(), target.graph_parameters()
    secure_sum = target.secure_sum()
    if sharing is None and masks is None and graph is None and secure_sum is None:
        return not_applicable(8, "shamir-masks-graph", target.name, "no sharing, masks or graph")
    findings: list[str] = []
    details: dict[str, Any] = {}
    samples = 0
    if sharing is not None:
        checked, secrecy = _shamir_exhaustive(sharing)
        details["shamir_exhaustive_secrets"] = checked or "n/a: fixed field"
        findings.extend(secrecy)
        sampled, sampled_findings, sampled_p = _shamir_sampled_secrecy(
            sharing, seed, FAMILY_ALPHA / 3
        )
        findings.extend(sampled_findings)
        details["shamir_sampled_secrecy_p"] = sampled_p or "n/a: fixed field"
        samples += sampled
        threshold = _shamir_threshold(sharing, seed, 20 if tier == "fast" else 200)
        findings.extend(threshold)
        refusals, shamir_refused = _shamir_refusals(sharing)
        findings.extend(shamir_refused)
        split, split_findings = _shamir_split_join(sharing)
        findings.extend(split_findings)
        details["shamir_split_join_checked"] = split or "n/a"
        samples += split
        tried, sharing_refused = refusal_findings(sharing)
        findings.extend(f"Shamir: {finding}" for finding in sharing_refused)
        refusals += tried
        details["shamir_refusals_checked"] = refusals or "n/a: fixed field"
        decodings, decoding_findings = _shamir_error_correction(
            sharing, seed, 60 if tier == "fast" else 600
        )
        findings.extend(decoding_findings)
        details["shamir_robust_decodings"] = decodings or "n/a: no robust reconstruction"
        samples += checked + (20 if tier == "fast" else 200) + refusals + decodings
    if masks is not None:
        count, mask_findings, mask_details = _mask_checks(masks, tier, seed)
        findings.extend(mask_findings)
        tried, mask_refused = refusal_findings(masks)
        findings.extend(f"masks: {finding}" for finding in mask_refused)
        details["masks"] = {**mask_details, "refusals_checked": tried}
        samples += count + tried
    if secure_sum is not None:
        with quiet_library_warnings():
            count, masked_findings, masked_details = _masked_input_checks(secure_sum, tier, seed)
        findings.extend(masked_findings)
        details["masked_inputs"] = masked_details
        samples += count
    if graph is not None:
        count, graph_findings, rows = _graph_checks(graph, tier)
        findings.extend(graph_findings)
        refused, refusal_problems = refusal_findings(graph)
        findings.extend(refusal_problems)
        details["graph_invalid_parameters_tried"] = refused or "n/a: none listed"
        details["graph"] = rows
        samples += count
        log2_tail = getattr(graph, "log2_tail", None)
        if log2_tail is None:
            details["hypergeometric_tails_checked"] = "n/a: the target exposes no tail"
        else:
            tails, tail_errors = _tail_errors(log2_tail)
            findings.extend(f"SecAgg+ bounds' primitive: {e}" for e in tail_errors)
            details["hypergeometric_tails_checked"] = tails
            samples += tails
        # A picker that takes other targets is also checked at a loose, a tight and a very
        # loose pair (every bound and claim alike; targets in the finding).
        retarget = getattr(graph, "at_targets", None)
        if retarget is not None:
            for failure_log2, security_bits in _OTHER_TARGETS:
                count, other, _ = _graph_checks(retarget(failure_log2, security_bits), tier)
                where = f"[targets 2^{failure_log2:g}, {security_bits:g} bits]"
                findings.extend(f"{where} {f}" for f in other)
                samples += count
    return AuditResult(
        audit=8,
        name="shamir-masks-graph",
        target=target.name,
        statistic="failed checks (exhaustive secrecy, threshold, mask χ² and binding, "
        "hypergeometric bounds)",
        value=float(len(findings)),
        threshold="0 failures (mask χ² at α/m, family-wise 1e-6)",
        samples=samples,
        verdict=Verdict.FAIL if findings else Verdict.PASS,
        error_rate=FAMILY_ALPHA,
        findings=tuple(findings),
        details=details,
        seconds=time.perf_counter() - start,
        power=_power_statement(details),
    )


def _power_statement(details: Mapping[str, Any]) -> str:
    """Audit 8's power column: deterministic parts catch any defect; the χ² tests a fraction
    of entries stuck at one value (``_stuck_detected``)."""
    parts = ["exhaustive secrecy and thresholds: any"]
    for key, label in (("masks", "masks"), ("masked_inputs", "masked inputs")):
        stuck = details.get(key, {}).get("stuck_fraction_detected")
        if stuck:
            text = ", ".join(f"{100 * v:.1f} % {where}" for where, v in stuck.items())
            parts.append(f"{label}: entries stuck at one value ≥ {text}")
    return "; ".join(parts)
