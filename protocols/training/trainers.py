"""Reference federated trainers: FedAvg, Δ-FL, RFA and one-step RFA, over the secure path by default

Every round (Δ-FL Algorithm 1; RFA Algorithm 1):

1. sample m training clients uniformly without replacement and broadcast the model w;
2. each client computes its training loss Fᵢ(w) and runs τ local SGD steps; a client whose loss
   or update is not finite is rejected (dropped and counted, never averaged in);
3. update corruption, if configured, replaces the corrupted clients' updates (data poisoning was
   applied to their data once, before training);
4. the updates wᵢ − w are aggregated with weights αᵢ = the clients' numbers of training examples:
   FedAvg by one secure weighted average, Δ-FL by :func:`~protocols.aggregation.superquantile.
   superquantile_aggregate` (a DP or exact quantile, then a secure average of the tail), RFA by
   :func:`~protocols.aggregation.geometric_median` (one secure average per Weiszfeld step),
   one-step RFA by :func:`~protocols.aggregation.one_step_rfa`;
5. w ← w + aggregate. A round whose secure sum cannot complete (too few survivors for the
   threshold, a zero released weight sum, Δ-FL's empty tail under ``"skip"``) keeps w, is
   reported as skipped, and training continues.

Everything random is derived from ``config.seed``: client sampling, each client's SGD stream
(``SeedSequence(seed, spawn_key=(purpose, round, client))``), dropouts, corruption and every
secure sum's seed — which do not depend on the algorithm, so Δ-FL with θ = 1 repeats FedAvg's
secure averages bit for bit.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpquantile import ZCDP, PrivacyBudget, ZCDPAccountant
from protocols.aggregation.geometric_median import geometric_median, one_step_rfa
from protocols.aggregation.secure_average import (
    AverageSettings,
    DiscreteGaussianNoise,
    SecureAverageSession,
    secure_weighted_average,
)
from protocols.aggregation.superquantile import (
    QuantileSettings,
    QuantileTracker,
    superquantile_aggregate,
)
from protocols.training._round_loop import (
    ROUND_FAILURES,
    Contributions,
    ProgressCallback,
    Release,
    blas_thread_limit,
    check_trainer_inputs,
    run_round,
    run_rounds,
    run_totals,
)
from protocols.training.corruption import (
    CorruptionPlan,
    corrupt_dataset,
    corrupt_updates,
    select_corrupted_clients,
)
from protocols.training.data import ClientData, FederatedDataset
from protocols.training.models import MLP, Classifier, MultinomialLogisticRegression
from protocols.training.privacy import (
    KLS21_ROUNDING_BETA,
    RunPrivacyPlan,
    check_headroom,
    ledger_entry,
    planned_survivors,
    privacy_report,
)
from protocols.training.seeds import derived_seed, stream
from protocols.training.trainer_config import TrainerConfig
from protocols.training.trainer_results import ErrorSummary, RoundRecord, TrainingResult
from secagg import TooFewSurvivorsError
from secagg.graph_parameters import secagg_plus_parameters

__all__ = [
    "ErrorSummary",
    "FederatedTrainer",
    "RoundRecord",
    "TrainingResult",
    "blas_thread_limit",
    "train",
]

logger = logging.getLogger(__name__)


# Purposes of the derived random streams (spawn_key[0]); fixed forever so seeds stay reproducible.
_SAMPLE, _SGD, _DROPOUT, _CORRUPT, _AGGREGATE, _CORRUPT_SELECT = range(1, 7)


class FederatedTrainer:
    """Runs one algorithm of :class:`~protocols.training.TrainerConfig` on a federated dataset.

    Construction poisons the data if the corruption model says so, builds the model and picks the
    evaluation clients; :meth:`run` trains for ``config.rounds`` rounds.

    Parameters
    ----------
    dataset
        A :class:`~protocols.training.FederatedDataset` (classification).
    config
        The run's :class:`~protocols.training.TrainerConfig`.

    Raises
    ------
    ValueError
        More clients per round than training clients, or no client to evaluate on.

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> data = synthetic(1, 1, num_clients=8, num_test_clients=0, seed=0)
    >>> trainer = FederatedTrainer(data, TrainerConfig(algorithm="deltafl", theta=0.5, rounds=3,
    ...                                                clients_per_round=4, seed=1))
    >>> result = trainer.run()
    >>> result.final_train_loss < result.initial_train_loss, result.num_secure_sums
    (True, 3)
    """

    def __init__(self, dataset: FederatedDataset, config: TrainerConfig) -> None:
        check_trainer_inputs(dataset, config, TrainerConfig)
        self.config = config
        self.corruption_seed = derived_seed(config.seed, _CORRUPT_SELECT) % (1 << 63)
        self.plan: CorruptionPlan | None = None
        if config.corruption is not None:
            self.plan = select_corrupted_clients(
                dataset, config.corruption, seed=self.corruption_seed
            )
            dataset = corrupt_dataset(dataset, self.plan)
        self.dataset = dataset
        self.model = self._build_model()
        self._broadcast = self.model.get_parameters()  # the model each round starts from
        self.evaluation = self._resolve_evaluation()
        self.evaluation_clients = self._evaluation_clients()
        self.privacy = self._plan_privacy()
        self.budget: PrivacyBudget | None = None if self.privacy is None else self.privacy.budget()
        self.ledger: list[dict[str, object]] = []
        self.tracker: QuantileTracker | None = None
        self.released_threshold: float | None = None  # the last private threshold released
        self.loss_upper = (
            config.loss_upper
            if config.loss_upper is not None
            else 2.0 * math.log(dataset.num_classes)
        )
        self.clip_tracker: QuantileTracker | None = None
        self.clip_history: list[float] = []
        if config.adaptive_clip:
            assert config.clip is not None  # model DP: the public default at least
            # The γ-quantile of the update norms: a tracker of the (1 − θ)-quantile, θ = 1 − γ.
            self.clip_tracker = QuantileTracker(
                theta=1.0 - config.clip_quantile, initial=config.clip, rate=config.clip_rate
            )
        if config.tracks_threshold:
            # C₀ = ln C: the loss of a uniform prediction, public (the zero model's loss).
            self.tracker = QuantileTracker(
                theta=config.theta,
                initial=math.log(dataset.num_classes),
                rate=config.tracking_rate,
            )

    # -- setup ------------------------------------------------------------------------------------

    def _build_model(self) -> Classifier:
        config, data = self.config, self.dataset
        if data.num_classes < 2:
            raise ValueError(f"{data.name} has {data.num_classes} class: the trainers classify")
        if config.model == "mlp":
            return MLP(data.num_features, config.hidden, data.num_classes, seed=config.seed)
        return MultinomialLogisticRegression(data.num_features, data.num_classes)

    @property
    def current_clip(self) -> float | None:
        """The update clip in force this round: the adaptive clip's, else ``config.clip``.

        Examples
        --------
        >>> from protocols.training.datasets import synthetic_iid
        >>> data = synthetic_iid(num_clients=4, num_test_clients=0, seed=0)
        >>> config = TrainerConfig(clients_per_round=4, epsilon=5.0, adaptive_clip=True)
        >>> FederatedTrainer(data, config).current_clip
        1.0
        """
        tracker = getattr(self, "clip_tracker", None)  # None while the plan is checked
        return self.config.clip if tracker is None else tracker.threshold

    def _step_clip(
        self, updates: NDArray[np.float64], seed: int, dropouts: dict[str, list[int]] | None
    ) -> int:
        """The adaptive clip's noisy count of norms below the clip in force; return sums run."""
        plan, tracker = self.privacy, self.clip_tracker
        if tracker is None or plan is None or plan.clip_rho is None:
            return 0
        self.clip_history.append(tracker.threshold)
        noise = DiscreteGaussianNoise(
            rho=plan.clip_rho, min_survivors=plan.survivors, neighbouring=plan.neighbouring
        )
        try:
            tracker.update(
                np.linalg.norm(updates, axis=1),
                settings=AverageSettings(clip=1.0, noise=noise, rotate=False),
                secure=self.config.secure,
                seed=derived_seed(seed, 2),
                dropouts=dropouts,
                budget=self.budget,
            )
        except ROUND_FAILURES as error:
            logger.info("the clip's count failed (clip kept): %s", error)
        return 1

    def _averages_per_round(self) -> int:
        """The most secure averages of the model one round can release."""
        config = self.config
        if config.algorithm == "rfa":
            return config.rfa_max_iterations + 1
        if (
            config.algorithm == "deltafl"
            and config.theta < 1.0
            and config.empty_tail == "all"
            and not config.model_dp
        ):
            return 2  # an empty tail pays its zero-weight average, then averages everyone
        # Under model DP Δ-FL's tail divides by θ·|survivors|: one release, never a fallback.
        return 1

    def _plan_privacy(self) -> RunPrivacyPlan | None:
        """Split the run's (ε, δ) before round 1; refuse a schedule the ring cannot hold."""
        config = self.config
        scope = config.dp_scope
        if scope is None:
            return None
        assert config.epsilon is not None
        plan = RunPrivacyPlan.split(
            scope,
            epsilon=config.epsilon,
            delta=config.delta,
            rounds=config.rounds,
            averages_per_round=self._averages_per_round(),
            survivors=planned_survivors(config.clients_per_round, config.dropout),
            threshold_share=config.dp_threshold_share,
            clip_share=config.clip_share if config.adaptive_clip else None,
            threshold_releases=-(-config.rounds // config.threshold_every),
        )
        if plan.average_rho is not None and config.algorithm in ("fedavg", "deltafl"):
            # The ring must hold m clients plus their noise: checked now, not at round 1.
            check_headroom(
                self._settings(config.bits, plan),
                participants=config.clients_per_round,
                dimension=self.model.get_parameters().size,
            )
        return plan

    def _settings(
        self,
        bits: int,
        plan: RunPrivacyPlan | None,
        neighbors: int | None = None,
        threshold: int | None = None,
    ) -> AverageSettings:
        """The secure averages' settings, with the planned noise under model DP.

        Under model DP every row is flattened by the randomised Hadamard rotation and
        conditionally rounded (KLS21), and FedAvg's average divides by the public number of
        survivors (every weight is 1): the noisy weight coordinate of a small cohort could be
        negative. Δ-FL's tail divides by its public expected size θ·|survivors| (the noisy tail
        count's SD is tens of clients at ε = 5 over 100 rounds); RFA's Weiszfeld weights are not
        a count, so it divides by the released (noisy) weight sum.
        """
        noise = None if plan is None else plan.noise()
        config = self.config
        fixed = noise is not None and config.algorithm in ("fedavg", "deltafl")
        return AverageSettings(
            bits=bits,
            clip=self.current_clip,
            noise=noise,
            neighbors=neighbors,
            threshold=threshold,
            denominator="survivors" if fixed else "released",
            # Δ-FL's expected tail is θ of the survivors (the tracked or DP quantile aims there).
            denominator_share=config.theta if fixed and config.algorithm == "deltafl" else 1.0,
            # KLS21's client procedure: flatten, then conditional rounding (their β).
            rotate=noise is not None,
            rounding_beta=KLS21_ROUNDING_BETA if noise is not None else None,
        )

    @property
    def accountant(self) -> ZCDPAccountant:
        """What the run has spent so far (a copy; empty without DP).

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> data = synthetic(1, 1, num_clients=4, num_test_clients=0, seed=0)
        >>> FederatedTrainer(data, TrainerConfig(clients_per_round=2)).accountant.rho
        0.0
        """
        return ZCDPAccountant() if self.budget is None else self.budget.accountant

    def _resolve_evaluation(self) -> str:
        choice = self.config.evaluation
        if choice == "auto":
            unseen_ok = not self.dataset.name.startswith("synthetic(") and self.dataset.test_clients
            return "test_clients" if unseen_ok else "heldout"
        return choice

    def _evaluation_clients(self) -> tuple[ClientData, ...]:
        if self.evaluation == "test_clients":
            clients = tuple(c for c in self.dataset.test_clients if c.num_test > 0)
        else:
            clients = tuple(c for c in self.dataset.train_clients if c.num_test > 0)
        if not clients:
            raise ValueError(
                f"{self.dataset.name} has no client to evaluate on ({self.evaluation})"
            )
        return clients

    # -- evaluation -------------------------------------------------------------------------------

    def train_loss(self) -> float:
        """Data-weighted mean training loss of the current model over every training client.

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> data = synthetic(1, 1, num_clients=3, num_test_clients=0, seed=0)
        >>> round(FederatedTrainer(data, TrainerConfig(clients_per_round=2)).train_loss(), 4)
        2.3026
        """
        total, count = 0.0, 0
        with np.errstate(over="ignore", invalid="ignore"):
            for client in self.dataset.train_clients:
                if client.num_train:
                    total += self.model.loss(client.X_train, client.y_train) * client.num_train
                    count += client.num_train
        return total / count

    def client_errors(self) -> NDArray[np.float64]:
        """Error rate of the current model on each evaluation client's test split.

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> data = synthetic(1, 1, num_clients=3, num_test_clients=0, seed=0)
        >>> FederatedTrainer(data, TrainerConfig(clients_per_round=2)).client_errors().shape
        (3,)
        """
        return np.array(
            [self.model.error_rate(c.X_test, c.y_test) for c in self.evaluation_clients]
        )

    # -- one round --------------------------------------------------------------------------------

    def _graph(self, n: int) -> tuple[int | None, int | None]:
        """(neighbors, threshold) of a secure sum over n clients."""
        setting = self.config.neighbors
        if setting is None:
            return None, None
        if setting != "auto":
            return (None if setting >= n - 1 else setting), None
        rate = self.config.dropout if self.config.dropout > 0 else 0.1
        try:
            params = secagg_plus_parameters(n, dropout_rate=rate)
        except ValueError:
            return None, None
        return (None if params.complete_graph else params.degree), params.threshold

    def _quantile_settings(self) -> QuantileSettings | None:
        """The round's DP quantile at its planned share, or ``None`` (exact, or tracking)."""
        plan = self.privacy
        if plan is None or plan.threshold_rho is None or self.tracker is not None:
            return None
        return QuantileSettings(
            rho=plan.threshold_rho,
            lower=0.0,
            upper=self.loss_upper,
            bins=self.config.quantile_bins,
            min_survivors=plan.survivors,
            neighbors=self.config.neighbors,
            reader=self.config.threshold_reader,
        )

    def _aggregate(
        self,
        index: int,
        updates: NDArray[np.float64],
        alpha: NDArray[np.float64],
        losses: NDArray[np.float64],
        dropouts: dict[str, list[int]] | None,
    ) -> tuple[NDArray[np.float64] | None, Release]:
        """The round's aggregate update (``None``: nothing to apply) and what it released."""
        config, budget = self.config, self.budget
        n = updates.shape[0]
        neighbors, threshold = self._graph(n)
        root = config.seed if config.noise_seed is None else config.noise_seed
        seed = derived_seed(root, _AGGREGATE, index)
        settings = self._settings(config.bits, self.privacy, neighbors, threshold)
        # Under model DP every client counts once (weight 1, public cap 1): a client's number of
        # examples would be a private, unbounded weight.
        weight_cap = 1.0 if settings.noise is not None else None
        if settings.noise is not None:
            alpha = np.ones_like(alpha)
        if config.algorithm == "fedavg" and config.dp_noise == "central":
            return self._central_gaussian(updates, seed, dropouts)
        if config.algorithm == "fedavg":
            result = secure_weighted_average(
                updates,
                alpha,
                settings=settings,
                weight_cap=weight_cap,
                seed=seed,
                dropouts=dropouts,
                secure=config.secure,
                budget=budget,
            )
            return result.average, Release(None, len(result.survivors), 1, 1)
        if config.algorithm == "deltafl":
            # Rounds between threshold releases reuse the last released (public) threshold.
            releases = index % config.threshold_every == 0
            tracked = None if self.tracker is None else self.tracker.threshold
            quantile = self._quantile_settings()
            if not releases and quantile is not None:
                if self.released_threshold is None:  # the release round released nothing
                    return None, Release("no private threshold released yet")
                quantile, tracked = None, self.released_threshold
            noisy = settings.noise is not None or (quantile is not None and quantile.private)
            # The round's sums — the DP quantile's histogram, the tail average (and the
            # fallback of an empty tail) and the tracker's count — share one key setup. A round
            # of one sum runs it on its own (a single sum's setup is the cheaper one).
            partial = config.theta < 1.0
            histogram = partial and tracked is None and quantile is not None and quantile.private
            may_empty = (
                partial
                and (histogram or tracked is not None)
                and config.empty_tail == "all"
                and settings.denominator != "survivors"
            )
            sums = int(histogram) + 1 + int(may_empty) + int(releases and self.tracker is not None)
            session = None
            if sums > 1:
                session = SecureAverageSession(
                    n,
                    sums=sums,
                    settings=settings,
                    secure=config.secure,
                    seed=derived_seed(seed, 4),
                )
            sq = superquantile_aggregate(
                updates,
                alpha,
                losses,
                theta=config.theta,
                quantile=quantile,
                settings=settings,
                weight_cap=weight_cap,
                secure=config.secure,
                seed=seed,
                dropouts=dropouts,
                empty_tail=config.empty_tail,
                budget=budget if noisy else None,
                threshold=tracked,
                session=session,
            )
            counts = 0
            if releases:
                # A failed tail average aborted the session: the count then runs on its own.
                usable = session if session is not None and session.remaining > 0 else None
                counts = self._track(
                    losses, seed, dropouts, neighbors, threshold, session=usable
                )
            if releases and quantile is not None:
                self.released_threshold = sq.threshold
            reason = sq.failure
            if reason is None and sq.average is None:
                reason = "empty tail: the DP quantile is above every loss"
            # Completed sums only, as the other algorithms count them: a failed tail average did
            # not complete (an empty tail's revealing call did, and stays counted).
            averages = sq.num_secure_averages if sq.failure is None else len(sq.averages)
            return sq.average, Release(
                reason,
                len(sq.survivors),
                averages,
                averages + (sq.quantile is not None) + counts,
                sq.threshold,
                sq.num_tail_clients if config.theta < 1 else None,
                sq.empty_tail if config.theta < 1 else None,
            )
        rfa_settings = self._settings(64, self.privacy, neighbors, threshold)
        if config.algorithm == "rfa":
            per_call = None
            if dropouts:
                per_call = {call: dropouts for call in range(config.rfa_max_iterations + 1)}
            median = geometric_median(
                updates,
                alpha,
                smoothing=config.rfa_nu,
                ftol=config.rfa_ftol,
                max_iterations=config.rfa_max_iterations,
                secure=config.secure,
                settings=rfa_settings,
                weight_cap=weight_cap,
                seed=seed,
                dropouts=per_call,
                budget=budget,
            )
            survivors = n - sum(len(v) for v in (dropouts or {}).values())
            if median.iterative is not None:
                survivors = len(median.iterative.transcript[-1].survivors)
            calls = median.num_secure_averages
            return median.median, Release(None, survivors, calls, calls)
        result = one_step_rfa(
            updates,
            alpha,
            smoothing=config.rfa_nu,
            secure=config.secure,
            settings=rfa_settings,
            weight_cap=weight_cap,
            seed=seed,
            dropouts=dropouts,
            budget=budget,
        )
        return result.average, Release(None, len(result.survivors), 1, 1)

    def _central_gaussian(
        self,
        updates: NDArray[np.float64],
        seed: int,
        dropouts: dict[str, list[int]] | None,
    ) -> tuple[NDArray[np.float64], Release]:
        """The central-DP baseline: exact sum of the clipped updates plus N(0, σ²) per
        coordinate, σ = c/√(2ρ) (ρ = Δ²/2σ² with Δ = c, add/remove; BS16 Prop. 1.6)."""
        plan, budget, clip = self.privacy, self.budget, self.config.clip
        assert plan is not None and budget is not None and plan.average_rho is not None
        assert clip is not None
        gone = set() if dropouts is None else {i for v in dropouts.values() for i in v}
        members = [i for i in range(updates.shape[0]) if i not in gone]
        if len(members) < plan.survivors:
            raise TooFewSurvivorsError(
                f"only {len(members)} of the {plan.survivors} planned clients survived: "
                "nothing released"
            )
        kept = updates[members]
        norms = np.linalg.norm(kept, axis=1)
        clipped = kept * np.minimum(1.0, clip / np.maximum(norms, 1e-300))[:, None]
        budget.spend(ZCDP(plan.average_rho))  # before the noise is drawn
        sigma = clip / math.sqrt(2.0 * plan.average_rho)
        noise = np.random.default_rng(seed).normal(0.0, sigma, size=updates.shape[1])
        return (clipped.sum(axis=0) + noise) / len(members), Release(None, len(members), 1, 0)

    def _track(
        self,
        losses: NDArray[np.float64],
        seed: int,
        dropouts: dict[str, list[int]] | None,
        neighbors: int | None,
        threshold: int | None,
        *,
        session: SecureAverageSession | None = None,
    ) -> int:
        """Quantile tracking's count of the round (a sum of the round's ``session``, else its
        own secure sum); return sums run."""
        if self.tracker is None:
            return 0
        plan = self.privacy
        noise = None
        if plan is not None and plan.threshold_rho is not None:
            noise = DiscreteGaussianNoise(
                rho=plan.threshold_rho, min_survivors=plan.survivors, neighbouring=plan.neighbouring
            )
        settings = AverageSettings(
            clip=1.0, noise=noise, neighbors=neighbors, threshold=threshold, rotate=False
        )
        if session is not None:  # the session's ring and threat model
            settings = dataclasses.replace(
                settings, bits=session.settings.bits, threat_model=session.settings.threat_model
            )
        try:
            self.tracker.update(
                losses,
                settings=settings,
                secure=self.config.secure,
                seed=derived_seed(seed, 1),
                dropouts=dropouts,
                budget=self.budget if noise is not None else None,
                session=session,
            )
        except ROUND_FAILURES as error:
            logger.info("the threshold's count failed (threshold kept): %s", error)
        return 1

    def run_round(self, index: int) -> RoundRecord:
        """Run round ``index``: sample, train locally, reject, corrupt, aggregate, update.

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> data = synthetic(1, 1, num_clients=5, num_test_clients=0, seed=0)
        >>> trainer = FederatedTrainer(data, TrainerConfig(clients_per_round=3, secure=False))
        >>> record = trainer.run_round(0)
        >>> record.sampled, record.survivors, record.skipped
        (3, 3, False)
        """
        return run_round(self, index, sample=_SAMPLE, dropout=_DROPOUT, what="client update(s)")

    def begin_round(self, index: int) -> None:
        """Fix the broadcast model (every client's local SGD starts from it)."""
        self._broadcast = self.model.get_parameters()

    def local_update(self, client: ClientData, index: int) -> tuple[Any, float, bool]:
        """The client's loss at the broadcast model and its local-SGD update."""
        config, model = self.config, self.model
        with np.errstate(over="ignore", invalid="ignore"):
            loss = float(model.loss(client.X_train, client.y_train))
        params, stats = model.local_sgd(
            client.X_train,
            client.y_train,
            steps=config.local_steps,
            batch_size=config.batch_size,
            lr=config.lr,
            weight_decay=config.weight_decay,
            rng=stream(config.seed, _SGD, index, client.client_id),
        )
        update = params - self._broadcast
        finite = stats.finite and math.isfinite(loss) and bool(np.isfinite(update).all())
        return update, loss, finite

    def release(self, contributions: Contributions) -> Release:
        """Corrupt (if planned), aggregate, track the clip, and apply the released update."""
        config, index = self.config, contributions.index
        alpha, kept_losses, dropouts = (
            contributions.sizes,
            contributions.losses,
            contributions.dropouts,
        )
        ids = [client.client_id for client in contributions.clients]
        d = self._broadcast.size
        kept_updates = np.array(contributions.updates).reshape(contributions.count, d)
        corrupted_weight = 0.0
        if self.plan is not None and contributions.count:
            corrupted_weight = float(alpha[self.plan.mask(ids)].sum() / alpha.sum())
        if self.plan is not None and self.plan.corruption.poisons_updates and contributions.count:
            kept_updates = corrupt_updates(
                kept_updates,
                alpha,
                self.plan.mask(ids),
                self.plan.corruption,
                rng=stream(config.seed, _CORRUPT, index),
            )

        update: NDArray[np.float64] | None = None
        spent_before = 0 if self.budget is None else len(self.budget.ledger)
        planned = None if self.privacy is None else self.privacy.survivors
        n = contributions.count
        if n < 2:
            outcome = Release(f"{n} finite update(s): a sum needs 2")
        elif planned is not None and n < planned:
            outcome = Release(
                f"{n} finite update(s): the noise is planned for {planned} survivors "
                "(nothing released, nothing spent)"
            )
        else:
            try:
                update, outcome = self._aggregate(index, kept_updates, alpha, kept_losses, dropouts)
            except ROUND_FAILURES as error:
                outcome = Release(f"{type(error).__name__}: {error}")
            root = config.seed if config.noise_seed is None else config.noise_seed
            counted = self._step_clip(kept_updates, derived_seed(root, _AGGREGATE, index), dropouts)
            outcome = dataclasses.replace(outcome, secure_sums=outcome.secure_sums + counted)
        if self.budget is not None:
            self.ledger.extend(
                ledger_entry(index, event, count)
                for event, count in self.budget.ledger[spent_before:]
            )
        reason = outcome.reason
        if update is not None and reason is None:
            if np.isfinite(update).all():
                self.model.set_parameters(self._broadcast + update)
            else:
                reason = "the released aggregate is not finite"
        rho = None if self.budget is None else self.budget.accountant.rho
        return dataclasses.replace(
            outcome, reason=reason, corrupted_weight=corrupted_weight, rho_spent=rho
        )

    # -- the run ----------------------------------------------------------------------------------

    def run(self, progress: ProgressCallback | None = None) -> TrainingResult:
        """Train for ``config.rounds`` rounds and evaluate.

        Parameters
        ----------
        progress
            Optional callback ``(rounds_done, rounds)`` after each round.

        Returns
        -------
        TrainingResult

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> data = synthetic(1, 1, num_clients=4, num_test_clients=0, seed=0)
        >>> trainer = FederatedTrainer(data, TrainerConfig(rounds=2, clients_per_round=2,
        ...                                                secure=False))
        >>> done = []
        >>> result = trainer.run(progress=lambda rounds, total: done.append(rounds))
        >>> done, len(result.history)
        ([1, 2], 2)
        """
        config = self.config
        start = time.perf_counter()
        with blas_thread_limit(config.blas_threads):
            initial_loss = self.train_loss()
            history, _ = run_rounds(
                self.run_round,
                lambda done: done,
                rounds=config.rounds,
                eval_every=0,
                progress=progress,
            )
            final_loss = self.train_loss()
            errors = self.client_errors()
        privacy = privacy_report(self.privacy, self.budget, self.ledger)
        if privacy[2] is not None and self.clip_tracker is not None:
            # The clip in force in each round, then the one a next round would use.
            privacy[2]["adaptive_clip"] = [*self.clip_history, self.clip_tracker.threshold]
        return TrainingResult(
            config=config,
            evaluation=self.evaluation,
            parameters=self.model.get_parameters(),
            client_ids=tuple(c.client_id for c in self.evaluation_clients),
            client_errors=errors,
            errors=ErrorSummary.from_errors(errors),
            initial_train_loss=initial_loss,
            final_train_loss=final_loss,
            delta=config.delta,
            num_secure_sums=sum(r.secure_sums for r in history),
            corrupted_clients=tuple(sorted(self.plan.client_ids)) if self.plan else (),
            seeds={
                "seed": config.seed,
                "dataset_seed": self.dataset.seed,
                "corruption_seed": self.corruption_seed,
            },
            **run_totals(history, dataset=self.dataset, start=start, privacy=privacy),
        )


def train(
    dataset: FederatedDataset,
    config: TrainerConfig,
    *,
    progress: ProgressCallback | None = None,
) -> TrainingResult:
    """Train ``config.algorithm`` on ``dataset`` (see :class:`FederatedTrainer`).

    Parameters
    ----------
    dataset
        A classification :class:`~protocols.training.FederatedDataset`.
    config
        A :class:`~protocols.training.TrainerConfig`.
    progress
        Optional callback ``(rounds_done, rounds)``.

    Returns
    -------
    TrainingResult

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> data = synthetic(1, 1, num_clients=10, num_test_clients=0, seed=0)
    >>> base = TrainerConfig(rounds=3, clients_per_round=4, seed=2)
    >>> fedavg = train(data, base)
    >>> same = train(data, base.with_changes(algorithm="deltafl", theta=1.0))
    >>> bool(np.array_equal(fedavg.parameters, same.parameters))   # θ = 1 is FedAvg, bit for bit
    True
    >>> plain = train(data, base.with_changes(secure=False))
    >>> bool(np.abs(plain.parameters - fedavg.parameters).max() < 1e-5)   # quantisation error
    True
    """
    return FederatedTrainer(dataset, config).run(progress)
