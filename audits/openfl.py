"""The adapter for Intel OpenFL 1.9's secure aggregation (``openfl==1.9``).

Every step calls OpenFL's own code: each collaborator's ``SecAggBootstrapping`` callback (key
pairs, Shamir shares of its private seed and key, the share ciphertexts, decryption, the masks),
the aggregator's ``SecAggSetup`` (which receives every setup message), the collaborator's
``Collaborator._apply_masks`` (what it adds to a tensor before sending it) and the aggregator's
``SecureWeightedAverage`` (the unmasked aggregate). The glue is ours: an in-memory tensor store
for each party and a loopback client that hands each message to the aggregator the way its gRPC
client and ``Aggregator.send_local_task_results`` / ``get_aggregated_tensor`` do. The callback's
setup steps run in lockstep over the collaborators (in OpenFL each step blocks until every
collaborator has sent the previous one; here the loop does the waiting).

What the audits find there (``secagg-dp-audit --target openfl``; :func:`known_defects`):

- **The aggregator can unmask every collaborator.** Collaborators send the Shamir shares they
  decrypted back to the aggregator, and ``SecAggSetup`` reconstructs every private seed and every
  private key during setup (before any masked input exists) and keeps them with every pairwise
  key in its tensor store. An aggregator that follows the protocol and reads its own store
  recovers each collaborator's update exactly (audit 10, ``honest-aggregator-reads-its-store``).
- **One scalar mask per collaborator for the whole experiment.** The mask is a float in [0, 1)
  from Python's ``random`` (Mersenne Twister) seeded with the private seed and the pairwise keys,
  added to every coordinate of every tensor in every round: without any secret the aggregator
  learns every coordinate difference of an update and every change between rounds exactly.
- **The weighted average is wrong with unequal weights:** the pairwise masks cancel in the plain
  sum, not in Σ wᵤ·maskᵤ, which ``SecureWeightedAverage`` never removes; and **silently wrong
  when a collaborator drops** after setup (there is no dropout recovery).

OpenFL 1.9 pins ``protobuf < 6`` and ``grpcio < 1.66``, which Flower 1.42 cannot run with, so it is
installed without its dependencies next to the few its secure-aggregation path imports::

    pip install -e ".[openfl]" && pip install --no-deps "openfl==1.9"
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import json
import logging
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from audits.attacks import AttackOutcome, AttackSpec, AttackSurface
from audits.records import AuditResult, Verdict
from audits.targets import (
    FixedFieldSharing,
    PartialTarget,
    SecretSharingUnderTest,
    load_modules,
)

__all__ = ["OPENFL_VERSION", "OpenFLRound", "OpenFLTarget", "known_defects", "load_openfl"]

logger = logging.getLogger(__name__)

#: The OpenFL release this adapter was written against.
OPENFL_VERSION = "1.9"
_AGGREGATOR = "aggregator"
_MODULES = {
    "secagg": "openfl.utilities.secagg",
    "bootstrap": "openfl.utilities.secagg.bootstrap",
    "callback": "openfl.callbacks.secure_aggregation",
    "collaborator": "openfl.component.collaborator.collaborator",
    "average": "openfl.interface.aggregation_functions.secure_weighted_average",
    "utilities": "openfl.utilities",
    "protocols": "openfl.protocols.utils",
}


def load_openfl() -> SimpleNamespace:
    """OpenFL's secure-aggregation modules, or ``ImportError`` with the install command.

    Examples
    --------
    >>> f = load_openfl()  # doctest: +SKIP
    >>> f.secagg.calculate_mask  # doctest: +SKIP
    <function calculate_mask at ...>
    """
    return load_modules(
        _MODULES,
        f'openfl=={OPENFL_VERSION}: pip install -e ".[openfl]" && '
        'pip install --no-deps "openfl==1.9"',
    )


@contextlib.contextmanager
def _global_rngs_restored() -> Iterator[None]:
    """OpenFL seeds Python's global ``random`` (its mask PRG) and draws its private seeds from
    numpy's global generator; restore both so that auditing it leaves the caller's state alone."""
    python_state, numpy_state = random.getstate(), np.random.get_state()  # noqa: NPY002
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)  # noqa: NPY002 (OpenFL uses the legacy global)


class _Store:
    """An in-memory tensor store with the two methods OpenFL's secagg code calls."""

    def __init__(self) -> None:
        self.tensors: dict[Any, Any] = {}

    def cache_tensor(self, tensors: Mapping[Any, Any]) -> None:
        self.tensors.update(tensors)

    def get_tensor_from_cache(self, key: Any) -> Any:
        return self.tensors.get(key)

    def rows(self) -> list[dict[str, Any]]:
        """The store as the rows ``SecureWeightedAverage`` iterates over."""
        return [
            {"tensor_name": key[0], "tags": tuple(key[4]), "nparray": value}
            for key, value in self.tensors.items()
        ]


class _LoopbackClient:
    """One collaborator's aggregator client: setup messages go to ``SecAggSetup`` as
    ``Aggregator.send_local_task_results`` routes them; fetches are served from the aggregator's
    store encoded as ``Aggregator.get_aggregated_tensor`` encodes secagg tensors (JSON)."""

    def __init__(self, round_: OpenFLRound) -> None:
        self.round = round_

    def send_local_task_results(
        self, round_number: int, task_name: str, data_size: int, named_tensors: Sequence[Any]
    ) -> None:
        self.round.received.extend(named_tensors)
        self.round.setup.process_secagg_setup_tensors(named_tensors)

    def get_aggregated_tensor(
        self, name: str, round_number: int, report: bool, tags: Sequence[str], lossless: bool
    ) -> Any:
        f = self.round.f
        key = f.utilities.TensorKey(name, _AGGREGATOR, round_number, report, tuple(tags))
        value = self.round.aggregator_store.get_tensor_from_cache(key)
        if value is None:
            raise RuntimeError(f"the aggregator holds no {name!r} yet")
        return f.protocols.construct_named_tensor(key, json.dumps(value).encode(), {}, True)


class OpenFLRound:
    """``n`` collaborators and one aggregator through OpenFL 1.9's secure-aggregation setup,
    then one masked round of update vectors.

    Examples
    --------
    >>> round_ = OpenFLRound(load_openfl(), 3, seed=0)  # doctest: +SKIP
    >>> np.allclose(round_.aggregate(), round_.updates.mean(axis=0))  # doctest: +SKIP
    True
    """

    def __init__(
        self, f: SimpleNamespace, n: int, *, seed: int, dimension: int = 6, weights: Any = None
    ) -> None:
        self.f = f
        self.names = [f"collaborator{i}" for i in range(n)]
        self.updates = np.random.default_rng(seed).normal(size=(n, dimension))
        self.weights = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
        self.aggregator_store = _Store()
        self.setup = f.bootstrap.SecAggSetup(_AGGREGATOR, self.names, self.aggregator_store)
        self.received: list[Any] = []  # every setup message the aggregator received
        self.stores = {name: _Store() for name in self.names}
        client = _LoopbackClient(self)
        self.callbacks = []
        for name in self.names:
            callback = f.callback.SecAggBootstrapping()
            callback.set_params({"origin": name, "client": client})
            callback.set_tensor_db(self.stores[name])
            callback.name, callback.client = name, client
            self.callbacks.append(callback)
        with _global_rngs_restored():
            # SecAggBootstrapping.on_experiment_begin's steps, each for every collaborator.
            for callback in self.callbacks:
                callback._generate_keys()
            keys = [callback._fetch_public_keys() for callback in self.callbacks]
            for callback, public in zip(self.callbacks, keys, strict=True):
                callback._generate_ciphertexts(public)
            for callback, public in zip(self.callbacks, keys, strict=True):
                callback._decrypt_ciphertexts(public)
            for callback in self.callbacks:
                callback._save_mask_tensors()
            self.masked = np.stack([self._masked(i) for i in range(n)])

    def _masked(self, index: int) -> NDArray[np.float64]:
        """What collaborator ``index`` sends: ``Collaborator._apply_masks`` on its update."""
        name = self.names[index]
        party = SimpleNamespace(
            _private_mask=None,
            _shared_mask=None,
            tensor_db=self.stores[name],
            collaborator_name=name,
        )
        key = self.f.utilities.TensorKey("update", name, 0, False, ("trained",))
        tensors = {key: self.updates[index].copy()}
        self.f.collaborator.Collaborator._apply_masks(party, tensors)
        return np.asarray(tensors[key], dtype=np.float64)

    def aggregate(self, members: Sequence[int] | None = None) -> NDArray[np.float64]:
        """``SecureWeightedAverage`` over the masked updates of ``members`` (default: all)."""
        chosen = range(len(self.names)) if members is None else members
        local = [
            self.f.utilities.LocalTensor(self.names[i], self.masked[i], float(self.weights[i]))
            for i in chosen
        ]
        # OpenFL's aggregation functions are process-wide singletons that keep the first
        # experiment's masks; a fresh one plays a fresh aggregator process.
        cls = self.f.average.SecureWeightedAverage
        self.f.utilities.SingletonABCMeta._instances.pop(cls, None)
        with _global_rngs_restored():
            total = cls().call(local, self.aggregator_store.rows())
        return np.asarray(total, dtype=np.float64)

    def expected(self, members: Sequence[int] | None = None) -> NDArray[np.float64]:
        """The true weighted average of ``members`` (default: all)."""
        chosen = list(range(len(self.names)) if members is None else members)
        return np.asarray(
            np.average(self.updates[chosen], axis=0, weights=self.weights[chosen]),
            dtype=np.float64,
        )

    def unmask_from(self, store: _Store, index: int) -> NDArray[np.float64] | None:
        """Collaborator ``index``'s update from what ``store`` holds and its masked vector: the
        seed and pairwise keys the aggregator stored, or the collaborator's own masks."""
        secagg = self.f.secagg
        rows = {row["tensor_name"]: row["nparray"] for row in store.rows()}
        name = self.names[index]
        if "private_mask" in rows and "shared_mask" in rows:  # a collaborator's own store
            mask = float(rows["private_mask"][0]) + float(rows["shared_mask"][0])
            return np.asarray(self.masked[index] - mask, dtype=np.float64)
        if not {"indices", "private_seeds", "agreed_keys"} <= rows.keys():
            return None
        position = {str(c): int(i) for c, i in rows["indices"]}[name]
        seed = {int(i): s for i, s in rows["private_seeds"]}[position]
        own = [k for k in rows["agreed_keys"] if int(k[0]) == position]
        with _global_rngs_restored():
            mask = float(secagg.pseudo_random_generator(seed) + secagg.calculate_shared_mask(own))
        return np.asarray(self.masked[index] - mask, dtype=np.float64)


def _recovers(round_: OpenFLRound, value: NDArray[np.float64] | None, index: int) -> bool:
    return value is not None and bool(np.allclose(value, round_.updates[index], atol=1e-9))


def _honest_aggregator(
    f: SimpleNamespace, neighbors: int | None, seed: int
) -> AttackOutcome | None:
    """The aggregator follows the protocol, then reads its own tensor store."""
    if neighbors is not None:
        return None  # OpenFL has no sparse graph
    round_ = OpenFLRound(f, 4, seed=seed)
    exposed = tuple(
        i for i in range(4) if _recovers(round_, round_.unmask_from(round_.aggregator_store, i), i)
    )
    return AttackOutcome(
        "honest-aggregator-reads-its-store",
        "server",
        "semi-honest",
        "complete",
        exposed,
        True,
        "" if exposed else "the aggregator's store does not unmask anyone",
    )


class _OpenFLAttackSurface:
    """OpenFL 1.9's secure aggregation (one mode: an honest-but-curious aggregator, the
    setting secure aggregation exists for) under the passive aggregator."""

    threat_models: tuple[str, ...] = ("semi-honest",)

    def __init__(self, f: SimpleNamespace) -> None:
        self.f = f

    def resists(self, threat_model: str, kind: str) -> bool:
        """Secure aggregation claims to hide each input from an aggregator that follows it."""
        return True

    def attacks(self) -> Sequence[AttackSpec]:
        """The aggregator reading what it stored during setup."""
        f = self.f
        return (
            AttackSpec(
                "honest-aggregator-reads-its-store",
                "server",
                "the aggregator follows the protocol and unmasks with the secrets it stored",
                lambda _mode, k, seed: _honest_aggregator(f, k, seed),
            ),
        )

    def control(self, seed: int) -> bool:
        """A collaborator's own masks (its store) unmask its vector; another's store does not."""
        round_ = OpenFLRound(self.f, 3, seed=seed)
        own = round_.unmask_from(round_.stores[round_.names[1]], 1)
        other = round_.unmask_from(round_.stores[round_.names[2]], 1)
        return _recovers(round_, own, 1) and not _recovers(round_, other, 1)


class _OpenFLShamir(FixedFieldSharing):
    """``create_secret_shares`` / ``reconstruct_secret`` (pycryptodome over GF(2^128))."""

    secret_bytes = 8  # the private seed, a packed float64

    def __init__(self, f: SimpleNamespace) -> None:
        self.f = f

    def share(self, secret: bytes, threshold: int, num_shares: int, seed: int) -> list[Any]:
        shares = self.f.secagg.create_secret_shares(secret, num_shares, threshold)
        return list(shares.items())

    def reconstruct(self, shares: Sequence[Any]) -> bytes | None:
        try:
            return bytes(self.f.secagg.reconstruct_secret(dict(shares)))
        except ValueError:  # a wrong padding after combining too few shares
            return None


def scalar_mask_leaks(f: SimpleNamespace, seed: int) -> dict[str, Any]:
    """What the aggregator learns with no secret at all, and the weighted average's error.

    Returns the largest error of the coordinate differences recovered from masked vectors alone,
    whether every collaborator's mask is one scalar, and the error of ``SecureWeightedAverage``
    with equal and with unequal weights (the pairwise masks cancel only in the plain sum) and
    when one collaborator drops after setup (its pairwise masks stay in the others' vectors).

    Examples
    --------
    >>> scalar_mask_leaks(load_openfl(), 0)["one_scalar_mask"]  # doctest: +SKIP
    True
    """
    equal = OpenFLRound(f, 4, seed=seed)
    masks = equal.masked - equal.updates
    differences = equal.masked - equal.masked[:, :1]
    truth = equal.updates - equal.updates[:, :1]
    unequal = OpenFLRound(f, 4, seed=seed, weights=[1.0, 2.0, 3.0, 4.0])
    present = [0, 1, 2]  # collaborator 3 drops after setup
    return {
        "one_scalar_mask": bool(np.allclose(masks, masks[:, :1], atol=1e-12)),
        "coordinate_differences_error": float(np.abs(differences - truth).max()),
        "average_error_equal_weights": float(np.abs(equal.aggregate() - equal.expected()).max()),
        "average_error_unequal_weights": float(
            np.abs(unequal.aggregate() - unequal.expected()).max()
        ),
        "average_error_one_dropout": float(
            np.abs(equal.aggregate(present) - equal.expected(present)).max()
        ),
    }


class OpenFLTarget(PartialTarget):
    """OpenFL 1.9's secure aggregation: its Shamir, whole setups and a masked round. No sampler,
    accountant, noisy release, sparse graph or sans-I/O parties; its masks are real numbers, not
    elements of a ring Z_M (no mask PRG or secure sum to test on Z_M; see the module note).

    Examples
    --------
    >>> target = OpenFLTarget()  # doctest: +SKIP
    >>> target.describe()["version"]  # doctest: +SKIP
    '1.9'
    """

    name = "openfl"

    def __init__(self) -> None:
        self._f = load_openfl()

    def describe(self) -> Mapping[str, str]:
        """OpenFL's version."""
        return {"implementation": "openfl", "version": importlib.metadata.version("openfl")}

    def secret_sharing(self) -> SecretSharingUnderTest | None:
        """``create_secret_shares`` / ``reconstruct_secret``."""
        return _OpenFLShamir(self._f)

    def attack_surface(self) -> AttackSurface | None:
        """The honest-but-curious aggregator, on OpenFL's own setup."""
        return _OpenFLAttackSurface(self._f)

    def leaks(self, seed: int = 0) -> dict[str, Any]:
        """:func:`scalar_mask_leaks` on this target."""
        return scalar_mask_leaks(self._f, seed)


Judge = Callable[[Mapping[str, Any]], bool]
Describe = Callable[[Mapping[str, Any]], str]


def known_defects(
    results: Sequence[AuditResult], leaks: Mapping[str, Any] | None = None
) -> list[dict[str, str]]:
    """What the run observed on OpenFL: audit 10's passive aggregator and :func:`scalar_mask_leaks`.

    Examples
    --------
    >>> [row["status"] for row in known_defects([])]
    ['not run', 'not run', 'not run', 'not run']
    """
    rows: list[dict[str, str]] = []
    ten = next(
        (r for r in results if r.audit == 10 and r.verdict is not Verdict.NOT_APPLICABLE), None
    )
    if ten is None or "outcomes" not in ten.details:
        rows.append(
            {
                "defect": "the aggregator reconstructs every private seed and key at setup",
                "status": "not run" if ten is None else "inconclusive",
                "audit": "10",
                "evidence": "audit 10 not run" if ten is None else "audit 10 recorded no outcome",
            }
        )
    else:
        exposed = sorted(
            {u for o in ten.details["outcomes"] if o["succeeded"] for u in o["exposed"]}
        )
        rows.append(
            {
                "defect": "the aggregator reconstructs every private seed and key at setup",
                "status": "confirmed" if exposed else "refuted",
                "audit": "10",
                "evidence": f"an aggregator following the protocol recovered the updates of "
                f"collaborators {exposed} from its own store"
                if exposed
                else "the aggregator's store unmasked no collaborator",
            }
        )
    checks: tuple[tuple[str, Judge, Describe], ...] = (
        (
            "one scalar mask per collaborator: coordinate differences leak without any secret",
            lambda v: v["one_scalar_mask"] and v["coordinate_differences_error"] < 1e-9,
            lambda v: (
                f"every mask is one scalar: {v['one_scalar_mask']}; coordinate "
                f"differences recovered to {v['coordinate_differences_error']:.2g}"
            ),
        ),
        (
            "the weighted average is wrong with unequal weights",
            lambda v: v["average_error_unequal_weights"] > 1e-6,
            lambda v: (
                f"max error {v['average_error_unequal_weights']:.3g} with weights 1–4, "
                f"{v['average_error_equal_weights']:.2g} with equal weights"
            ),
        ),
        (
            "a collaborator that drops after setup makes the average silently wrong",
            lambda v: v["average_error_one_dropout"] > 1e-6,
            lambda v: (
                f"max error {v['average_error_one_dropout']:.3g} over the 3 of 4 left "
                "(nothing raised: there is no dropout recovery)"
            ),
        ),
    )
    for defect, judge, evidence in checks:
        if leaks is None:
            rows.append({"defect": defect, "status": "not run", "audit": "—", "evidence": "—"})
        else:
            rows.append(
                {
                    "defect": defect,
                    "status": "confirmed" if judge(leaks) else "refuted",
                    "audit": "—",
                    "evidence": evidence(leaks),
                }
            )
    return rows
