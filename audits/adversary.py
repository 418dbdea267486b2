"""The server's whole view of a secure-sum round, and an attempt to reconstruct inputs from it.

A security test of the secure sum must attack it end to end (DESIGN.md, "Threat models"): take
everything a malicious server holds — every message clients sent it, every message it sent
them, the private keys of any public keys it substituted, and the whole state of the clients
colluding with it — and try to strip the masks off an honest client's masked input. This module
is that attempt. :func:`reconstruct_inputs` tries every route to each mask:

- a self-mask seed b_u: revealed by u, or rebuilt from any t shares the server holds (shares
  revealed at unmask, and the shares inside ciphertexts it can decrypt: those addressed to
  colluders or to keys it substituted), checked against u's commitment;
- a pairwise mask key with neighbour v: revealed by u or v; derived from the pair secret when
  the server knows either endpoint's mask private key (a colluder's or a substituted one); or
  opened from either endpoint's escrow of that sum with its recovery key, rebuilt from any t
  recovery-key shares the server holds (checked against the owner's commitment).

Every client whose masks can all be removed is returned with its input; a test compares against
the honest clients' true inputs. Nothing here trusts the protocol's own bookkeeping (which
shares it "answered"); only bytes the server actually holds count.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from secagg import shamir
from secagg.config import SecAggConfig
from secagg.errors import RemoteProtocolError
from secagg.identity import sum_binding
from secagg.keys import (
    KEY_BYTES,
    KeyPair,
    decrypt_shares,
    pair_sum_key,
    seal_pair_key,
    share_encryption_key,
)
from secagg.masks import add_masks, pairwise_mask_key, self_mask_key
from secagg.messages import (
    EncryptedShares,
    ForwardedShares,
    IterationRequest,
    KeyDirectory,
    MaskedInput,
    Message,
    UnmaskResponse,
)
from secagg.transcript import (
    SHARE_BYTES,
    decode_share,
    recovery_commitment,
    seed_commitment,
    session_id,
)

__all__ = [
    "AdversarialRound",
    "ColludingClient",
    "ServerView",
    "honest_inputs_exposed",
    "reconstruct_inputs",
]


@dataclass(frozen=True, slots=True)
class ColludingClient:
    """What a client colluding with the server hands over: all its round secrets."""

    client_id: int
    encryption_key: bytes  # X25519 private key (share encryption)
    mask_keys: tuple[bytes, ...]  # X25519 private key of the session's pair secrets (or none)
    self_mask_seeds: tuple[bytes, ...] = ()  # every self-mask seed it held


@dataclass(slots=True)
class ServerView:
    """Everything the adversary holds in one round.

    Attributes
    ----------
    config
        The round's public parameters.
    received
        Every message a client sent to the server, in any order, duplicates allowed.
    sent
        Every message the server sent, each to its recipient (``message.peer``).
    substituted_keys
        Private keys of X25519 public keys the server put into directories itself.
    colluding
        The colluding clients' secrets.
    """

    config: SecAggConfig
    received: list[Message] = field(default_factory=list)
    sent: list[Message] = field(default_factory=list)
    substituted_keys: list[bytes] = field(default_factory=list)
    colluding: list[ColludingClient] = field(default_factory=list)
    _parsed: dict[bytes, KeyPair] = field(default_factory=dict, repr=False)

    def known_private_keys(self) -> dict[bytes, KeyPair]:
        """Public key → key pair for every X25519 key the adversary can use."""
        privates = list(self.substituted_keys)
        for client in self.colluding:
            privates += [client.encryption_key, *client.mask_keys]
        for private in privates:
            if private not in self._parsed:
                self._parsed[private] = KeyPair.from_private_bytes(private)
        return {self._parsed[k].public: self._parsed[k] for k in privates}


def _first_verifying(
    shares: Mapping[int, NDArray[np.int64]], threshold: int, check: object, limit: int = 200
) -> bytes | None:
    """A 32-byte secret from some t of ``shares`` that passes ``check`` (subsets tried, bounded)."""
    assert callable(check)
    holders = sorted(shares)
    if len(holders) < threshold:
        return None
    for count, subset in enumerate(itertools.combinations(holders, threshold)):
        if count >= limit:
            break
        values = np.stack([shares[h] for h in subset])
        try:
            secret = shamir.join_secret(shamir.reconstruct(list(subset), values), KEY_BYTES)
        except ValueError:
            continue
        if check(secret):
            return secret
    return None


class _Sum:
    """The share material of one sum (session id, iteration), as seen by the server."""

    def __init__(self, view: ServerView, sid: bytes, iteration: int) -> None:
        self.sid = sid
        self.iteration = iteration
        self.seed_shares: dict[int, dict[int, NDArray[np.int64]]] = {}
        self.key_shares: dict[int, dict[int, NDArray[np.int64]]] = {}
        self.revealed_seeds: dict[int, bytes] = {}
        self.revealed_pairwise: dict[frozenset[int], set[bytes]] = {}  # pair → revealed κ^r
        self.commitments: dict[int, bytes] = {}
        self.recovery_commitments: dict[int, bytes] = {}
        self.escrows: dict[int, dict[int, tuple[bytes, bytes]]] = {}
        for message in view.received:
            if message.session_id != sid:
                continue
            if isinstance(message, UnmaskResponse) and message.iteration == iteration:
                holder = message.sender
                for store, entries in (
                    (self.seed_shares, message.seed_shares),
                    (self.key_shares, message.key_shares),
                ):
                    for owner, data in entries:
                        values = decode_share(data)
                        if values is not None:
                            store.setdefault(owner, {})[holder] = values
                if message.self_mask_seed:
                    self.revealed_seeds[holder] = message.self_mask_seed
                for other, key in message.pairwise_keys:
                    self.revealed_pairwise.setdefault(frozenset((holder, other)), set()).add(key)
            elif isinstance(message, EncryptedShares):
                self.commitments.setdefault(message.sender, message.commitment_of(iteration))
                self.recovery_commitments.setdefault(
                    message.sender, message.recovery_commitment_of(iteration)
                )
                self.escrows.setdefault(message.sender, message.escrow_of(iteration))

    def sum_key(
        self,
        owner: int,
        other: int,
        mask_public: Mapping[int, bytes],
        known: Mapping[bytes, KeyPair],
        threshold: int,
    ) -> bytes | None:
        """κ^r of (owner, other) from owner's side: its mask private key if the adversary holds
        it, else owner's escrow opened with its recovery key rebuilt from t shares."""
        sid, r = self.sid, self.iteration
        pair = known.get(mask_public.get(owner, b""))
        if pair is not None and other in mask_public:
            try:
                shared = pair.agree(mask_public[other])
            except RemoteProtocolError:
                return None
            return pair_sum_key(shared, session_id=sid, first=owner, second=other, iteration=r)
        escrow = self.escrows.get(owner, {}).get(other)
        committed = self.recovery_commitments.get(owner)
        if escrow is None or committed is None:
            return None

        def recovery_ok(candidate: bytes) -> bool:
            return recovery_commitment(sid, owner, candidate, r) == committed

        recovery = _first_verifying(self.key_shares.get(owner, {}), threshold, recovery_ok)
        if recovery is None:
            return None
        return seal_pair_key(
            escrow[0], recovery, session_id=sid, owner=owner, other=other, iteration=r
        )

    def add_decrypted(self, owner: int, holder: int, plaintext: bytes) -> None:
        """A decrypted share bundle: every sum's seed shares, then every sum's key shares."""
        half = len(plaintext) // 2
        r = self.iteration
        window = slice((r - 1) * SHARE_BYTES, r * SHARE_BYTES)
        for store, chunk in (
            (self.seed_shares, plaintext[:half][window]),
            (self.key_shares, plaintext[half:][window]),
        ):
            values = decode_share(chunk)
            if values is not None:
                store.setdefault(owner, {}).setdefault(holder, values)


def reconstruct_inputs(view: ServerView) -> dict[tuple[bytes, int, int], NDArray[np.int64]]:
    """Every input the adversary can compute from ``view``: (session id, sum, client id) →
    centred input.

    Parameters
    ----------
    view
        The adversary's whole view of the round (or session).

    Returns
    -------
    dict
        For each masked input the server holds whose every mask it can remove, the input
        (centred representatives), keyed by (session id, iteration, client id).

    Examples
    --------
    >>> from secagg import SecAggConfig
    >>> cfg = SecAggConfig(dimension=2, threshold=1, round_nonce=bytes(16),
    ...                    threat_model="semi-honest")
    >>> reconstruct_inputs(ServerView(cfg))   # a server that received nothing learns nothing
    {}
    """
    config = view.config
    ring = config.ring
    name = config.vector_name
    t = config.threshold
    known = view.known_private_keys()
    directories: dict[int, list[KeyDirectory]] = {}
    members_of: dict[tuple[bytes, int, int], tuple[int, ...]] = {}
    iterate_of: dict[tuple[bytes, int, int], bytes] = {}  # what each client was shown
    for message in view.sent:
        if isinstance(message, KeyDirectory):
            directories.setdefault(message.recipient, []).append(message)
        elif isinstance(message, ForwardedShares):
            senders = tuple(v for v, _ in message.ciphertexts)
            members_of.setdefault((message.session_id, 1, message.recipient), senders)
            iterate_of.setdefault((message.session_id, 1, message.recipient), message.iterate)
        elif isinstance(message, IterationRequest):
            slot = (message.session_id, message.iteration, message.recipient)
            members_of.setdefault(slot, message.members)
            iterate_of.setdefault(slot, message.iterate)
    # The directory each client used, by the session id it derived from it.
    directory_of: dict[tuple[bytes, int], KeyDirectory] = {}
    for recipient, listed in directories.items():
        for sent_directory in listed:
            sid = session_id(config.digest, sent_directory.entries)
            directory_of[(sid, recipient)] = sent_directory
    # Share bundles the adversary can decrypt (to colluders, or to keys it substituted).
    decrypted: list[tuple[bytes, int, int, bytes]] = []
    for message in view.received:
        if not isinstance(message, EncryptedShares):
            continue
        sid = message.session_id
        used = directory_of.get((sid, message.sender))
        if used is None:
            continue
        entries = used.keys()
        if message.sender not in entries:
            continue
        owner_public = entries[message.sender].encryption_key
        for recipient, ciphertext in message.ciphertexts:
            recipient_entry = entries.get(recipient)
            pair = None if recipient_entry is None else known.get(recipient_entry.encryption_key)
            if pair is None:
                continue  # the server cannot decrypt what the recipient's own key protects
            try:
                shared = pair.agree(owner_public)
                key = share_encryption_key(
                    shared, session_id=sid, sender=message.sender, recipient=recipient
                )
                plaintext = decrypt_shares(
                    key, ciphertext, session_id=sid, sender=message.sender, recipient=recipient
                )
            except (RemoteProtocolError, ValueError):
                continue
            decrypted.append((sid, message.sender, recipient, plaintext))
    sums: dict[tuple[bytes, int], _Sum] = {}

    def sum_of(sid: bytes, iteration: int) -> _Sum:
        if (sid, iteration) not in sums:
            material = _Sum(view, sid, iteration)
            for bundle_sid, owner, holder, plaintext in decrypted:
                if bundle_sid == sid:
                    material.add_decrypted(owner, holder, plaintext)
            sums[(sid, iteration)] = material
        return sums[(sid, iteration)]

    colluder_seeds = {
        (client.client_id, seed) for client in view.colluding for seed in client.self_mask_seeds
    }
    recovered: dict[tuple[bytes, int, int], NDArray[np.int64]] = {}
    for message in view.received:
        if not isinstance(message, MaskedInput):
            continue
        sid, u, r = message.session_id, message.sender, message.iteration
        if (sid, r, u) in recovered:
            continue
        used = directory_of.get((sid, u))
        members = members_of.get((sid, r, u))
        if used is None or members is None or message.vector.size == 0:
            continue
        material = sum_of(sid, r)
        entries = used.keys()
        mask_public = {v: keys.mask_key for v, keys in entries.items()}
        commitment = material.commitments.get(u)

        def seed_ok(
            seed: bytes,
            owner: int = u,
            com: bytes | None = commitment,
            sid: bytes = sid,
            r: int = r,
        ) -> bool:
            return com is None or seed_commitment(sid, owner, seed, r) == com

        seed = material.revealed_seeds.get(u)
        if seed is None or not seed_ok(seed):
            seed = next((s for owner, s in colluder_seeds if owner == u and seed_ok(s)), None)
        if seed is None:
            seed = _first_verifying(material.seed_shares.get(u, {}), t, seed_ok)
        if seed is None:
            continue

        shown = iterate_of.get((sid, r, u), b"")
        _, bound = sum_binding(shown, dimension=message.vector.size, configured=config.dimension)
        plus: list[bytes] = []
        minus: list[bytes] = []
        complete = True
        for v in members:
            # The mask key u used with v, from their sum key κ^r (revealed, or rebuilt here).
            mask_key = partial(
                pairwise_mask_key, session_id=sid, first=u, second=v, vector_name=name,
                iteration=r, iterate=bound,
            )  # fmt: skip
            revealed = material.revealed_pairwise.get(frozenset((u, v)), set())
            candidates = {mask_key(kappa) for kappa in revealed}
            kappa = material.sum_key(u, v, mask_public, known, t) or material.sum_key(
                v, u, mask_public, known, t
            )
            computed = None if kappa is None else mask_key(kappa)
            if computed is not None:
                key = computed
            elif len(candidates) == 1:
                key = next(iter(candidates))
            else:
                complete = False
                break
            # y_u = x_u + PRG(b_u) + Σ_{v>u} PRG(s_uv) − Σ_{v<u} PRG(s_uv): undo each.
            (minus if v > u else plus).append(key)
        if not complete:
            continue
        minus.append(self_mask_key(seed, session_id=sid, owner=u, vector_name=name, iteration=r))
        unmasked = message.vector.copy()
        add_masks(unmasked, ring, add=plus, subtract=minus)
        ring.normalize(unmasked)
        recovered[(sid, r, u)] = ring.centered(unmasked)
    return recovered


def honest_inputs_exposed(
    view: ServerView,
    inputs: Mapping[int, Iterable[int]] | Mapping[tuple[int, int], Iterable[int]],
    honest: Iterable[int],
) -> list[int]:
    """The honest clients some true input of whom :func:`reconstruct_inputs` recovers (should
    be none). ``inputs`` maps a client id to its input, or (iteration, client id) to its input
    in that sum of a session.

    Examples
    --------
    >>> from secagg import SecAggConfig
    >>> cfg = SecAggConfig(dimension=1, threshold=1, round_nonce=bytes(16))
    >>> honest_inputs_exposed(ServerView(cfg), {1: [3]}, [1])
    []
    """
    recovered = reconstruct_inputs(view)
    ring = view.config.ring
    honest_ids = set(honest)
    out = set()
    for (_, r, u), value in recovered.items():
        if u not in honest_ids:
            continue
        truth_of = inputs.get((r, u)) if (r, u) in inputs else inputs.get(u)  # type: ignore
        if truth_of is None:
            continue
        truth = ring.centered(ring.reduce(np.asarray(list(truth_of))))
        if np.array_equal(value, truth):
            out.add(u)
    return sorted(out)


class AdversarialRound:
    """A round whose server the caller controls: honest (or colluding) clients, an honest
    :class:`~secagg.Server` the adversary uses to produce well-formed messages, and the
    adversary's :class:`ServerView`, filled as messages pass.

    Colluding clients run the real client code; the adversary reads their secrets as they
    appear (reading the clients' private state is the point of collusion).

    Parameters
    ----------
    inputs
        Client id → integer vector (the same in every sum of a session), or (sum, client id) →
        vector.
    threshold, neighbors, threat_model, modulus_bits, iterations
        The round's (or session's) parameters.
    colluding
        Ids of the clients colluding with the server.
    seed
        Seed of every party's randomness and of the identities.

    Examples
    --------
    >>> game = AdversarialRound({u: [u] for u in (1, 2, 3)}, threshold=2,
    ...                         threat_model="semi-honest")
    >>> game.run()
    >>> game.server.result.total.tolist(), honest_inputs_exposed(game.view, game.inputs, [1, 2, 3])
    ([6], [])
    """

    def __init__(
        self,
        inputs: Mapping[int, Iterable[int]] | Mapping[tuple[int, int], Iterable[int]],
        *,
        threshold: int,
        neighbors: int | None = None,
        threat_model: str = "malicious",
        modulus_bits: int = 32,
        colluding: Iterable[int] = (),
        seed: int = 0,
        max_colluding: int | None = None,
        iterations: int = 1,
    ) -> None:
        from secagg import (  # noqa: PLC0415 (audits import the package lazily elsewhere too)
            Client,
            KeystreamRandom,
            Server,
            generate_identities,
        )

        self.inputs: dict[Any, NDArray[np.int64]] = {
            key: np.asarray(list(v), dtype=np.int64) for key, v in inputs.items()
        }
        ids = sorted({key[1] if isinstance(key, tuple) else int(key) for key in self.inputs})
        dimension = len(next(iter(self.inputs.values())))
        root = KeystreamRandom(seed, label=b"secagg-dp/audits/adversarial-round")
        self.config = SecAggConfig(
            dimension=dimension,
            threshold=threshold,
            neighbors=neighbors,
            modulus_bits=modulus_bits,
            round_nonce=root.random_bytes(16),
            threat_model=threat_model,
            max_colluding=max_colluding,
            iterations=iterations,
        )
        self.identities, self.trust_store = generate_identities(ids, root.random_bytes(32))
        malicious = self.config.malicious
        self.clients = {
            u: Client(
                self.config,
                u,
                input_vector=self.input_of(1, u),
                random_source=root.spawn(b"client/%d" % u),
                identity=self.identities[u] if malicious else None,
                trust_store=self.trust_store if malicious else None,
            )
            for u in ids
        }
        self.colluding = frozenset(int(u) for u in colluding)
        self.server = Server(
            self.config,
            ids,
            trust_store=self.trust_store if malicious else None,
            random_source=root.spawn(b"server"),
        )
        self.view = ServerView(self.config)
        self._colluder_secrets: dict[int, tuple[bytes, tuple[bytes, ...], set[bytes]]] = {}
        self.aborted: dict[int, str] = {}

    def input_of(self, iteration: int, client_id: int) -> NDArray[np.int64]:
        """Client ``client_id``'s input in sum ``iteration``."""
        return self.inputs.get((iteration, client_id), self.inputs.get(client_id))  # type: ignore[return-value]

    @property
    def honest(self) -> tuple[int, ...]:
        """The ids of the honest clients."""
        return tuple(sorted(set(self.clients) - self.colluding))

    def _record_colluder(self, u: int) -> None:
        if u not in self.colluding:
            return
        client = self.clients[u]
        if u not in self._colluder_secrets:
            enc, mask = client._encryption_keys, client._mask_key
            if enc is None or mask is None:
                return
            self._colluder_secrets[u] = (enc.private, (mask.private,), set())
        _, _, seeds = self._colluder_secrets[u]
        seeds.update(seed for seed in client._self_mask_seeds if any(seed))
        self.view.colluding = [
            ColludingClient(v, e, m, tuple(sorted(s)))
            for v, (e, m, s) in sorted(self._colluder_secrets.items())
        ]

    def start(self) -> list[Message]:
        """Every client's advertisement (not yet delivered)."""
        out = [m for c in self.clients.values() for m in c.start()]
        for u in self.colluding:
            self._record_colluder(u)
        return out

    def to_client(self, message: Message) -> list[Message]:
        """Deliver one server message (as the adversary chose it) to its client."""
        from secagg import ProtocolError  # noqa: PLC0415

        self.view.sent.append(message)
        u = message.peer
        client = self.clients[u]
        if u in self.aborted:
            return []
        try:
            if isinstance(message, IterationRequest) and client.state.name == "AWAITING_ITERATION":
                client.set_input(self.input_of(message.iteration, u))
            replies = client.receive(message)
        except ProtocolError as error:
            self.aborted[u] = str(error)
            return []
        self._record_colluder(u)
        return replies

    def to_server(self, messages: Iterable[Message]) -> list[Message]:
        """Record client messages in the view and feed them to the honest server."""
        from secagg import ProtocolError, ServerState  # noqa: PLC0415

        out: list[Message] = []
        for message in messages:
            self.view.received.append(message)
            if self.server.state in (ServerState.COMPLETED, ServerState.ABORTED):
                continue
            try:
                out.extend(self.server.receive(message, peer_id=message.peer))
            except ProtocolError:
                continue
        return out

    def close(self) -> list[Message]:
        """The honest server's deadline for its current phase."""
        from secagg import ProtocolError, ServerState  # noqa: PLC0415

        if self.server.state in (ServerState.COMPLETED, ServerState.ABORTED):
            return []
        try:
            return self.server.close_phase()
        except ProtocolError:
            return []

    def step(self, outgoing: Iterable[Message], *, silent: Iterable[int] = ()) -> list[Message]:
        """Deliver ``outgoing`` (clients in ``silent`` get nothing); feed the replies back and
        close the phase; return the server's next messages."""
        quiet = set(silent)
        replies = [r for m in outgoing if m.peer not in quiet for r in self.to_client(m)]
        return self.to_server(replies) or self.close()

    def run(self, silent: Mapping[str, Iterable[int]] | None = None) -> None:
        """Run the round (a session's first sum) honestly to its end (``silent``: phase name →
        clients that vanish)."""
        silent = silent or {}
        quiet = set(silent.get("advertise_keys", ()))
        outgoing = self.to_server(m for m in self.start() if m.peer not in quiet) or self.close()
        for phase in self.config.phases[1:]:
            outgoing = self.step(outgoing, silent=silent.get(phase.value, ()))

    def run_next(
        self, iterate: bytes = b"", silent: Mapping[str, Iterable[int]] | None = None
    ) -> None:
        """Run the session's next sum honestly (the server broadcasts ``iterate``)."""
        silent = silent or {}
        outgoing = self.server.begin_iteration(iterate)
        for phase in self.config.phases[2:]:
            outgoing = self.step(outgoing, silent=silent.get(phase.value, ()))
