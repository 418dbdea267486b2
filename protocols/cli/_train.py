"""``secagg-dp train``: FedAvg, Δ-FL and RFA side by side on a built-in federated dataset.

With no arguments: Δ-FL (θ = 0.5, DP quantile, (5, 10⁻⁵)-DP over the whole run) and FedAvg on
Synthetic(1, 1) (FedProx's 30 users), every aggregation through the secure sum; prints a table of
per-client test errors and privacy, and writes ``train_results.json`` and ``test_errors.png`` into
the output folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from dpquantile import QUANTILE_READERS
from protocols.cli.arguments import (
    HelpFormatter,
    examples,
    positive_float,
    positive_int,
    probability,
    seed,
)
from protocols.cli.errors import CommandError
from protocols.cli.progress import ProgressBar
from protocols.training.corruption import CORRUPTION_KINDS, Corruption
from protocols.training.datasets import DATASET_NAMES, DatasetNotAvailableError, load_dataset
from protocols.training.fedplus import FedPlusConfig, FedPlusResult, train_fedplus
from protocols.training.ffgb import FFGBConfig, FFGBResult, train_ffgb
from protocols.training.privacy import DEFAULT_DP_CLIP, DP_SCOPES, DPScope
from protocols.training.trainer_config import (
    ALGORITHMS,
    MODELS,
    THRESHOLD_METHODS,
    TrainerConfig,
)
from protocols.training.trainers import TrainingResult, train

__all__ = ["register", "run"]

DEFAULT_OUT = Path("secagg-dp-results")
_DP_AUTO = "auto"
# Defaults of the options that apply to some algorithms only (an option changed from its default
# that applies to none of the chosen algorithms is refused, never silently ignored).
_DEFAULTS: dict[str, Any] = {
    "theta": 0.5,
    "epsilon": 5.0,
    "delta": 1e-5,
    "bits": 32,
    "threshold_method": "auto",
    "threshold_every": 1,
    "threshold_reader": "first",
    "model": "logreg",
    "local_steps": 10,
    "batch_size": 32,
    "lr": None,
}
# Per-dataset defaults of --rounds, --clients-per-round and --lr. The default job runs
# Synthetic-IID's 1 000 users at 100 per round: a population where user-level DP on the model
# leaves a useful model (Synthetic(1, 1)'s users each have their own labelling function).
_DATASET_DEFAULTS: dict[str, dict[str, Any]] = {
    "synthetic-iid": {"rounds": 20, "clients_per_round": 100, "lr": 0.5},
}
_OTHER_DEFAULTS: dict[str, Any] = {"rounds": 100, "clients_per_round": 10, "lr": 0.05}
_ALGORITHM_LABELS = {
    "fedavg": "FedAvg",
    "deltafl": "Δ-FL",
    "rfa": "RFA",
    "rfa1": "RFA-1",
    "fedavg+": "FedAvg+",
    "fedgeomed+": "FedGeoMed+",
    "fedcomed+": "FedCoMed+",
    "fedprox": "FedProx",
    "ffgb": "FFGB",
    "ffgb-c": "FFGB.C",
    "ffgb-l": "FFGB.L",
}
# Fed+ (personalised; FedProx is its non-personalised baseline) and FFGB run their own trainers.
_FEDPLUS = ("fedavg+", "fedgeomed+", "fedcomed+", "fedprox")
_FFGB = ("ffgb", "ffgb-c", "ffgb-l")
# Under model DP FedGeoMed+ runs the Weiszfeld iteration and FedCoMed+ the paper's alternation
# (the same minimisers; each step one noisy secure average); FFGB noises its shared Fourier basis.
_DP_METHOD = {"fedgeomed+": "weiszfeld", "fedcomed+": "moreau"}
_CHOICES = (*ALGORITHMS, *_FEDPLUS, *_FFGB)
AnyConfig = TrainerConfig | FedPlusConfig | FFGBConfig
AnyResult = TrainingResult | FedPlusResult | FFGBResult
# Dataset sizes of the command (FedProx's 30 Synthetic users; 100 + 50 unseen image clients).
_DATASET_ARGUMENTS: dict[str, dict[str, Any]] = {
    "synthetic": {"num_clients": 30, "num_test_clients": 0},
    "synthetic-iid": {"num_clients": 1000, "num_test_clients": 100},
    "fashion-mnist": {"num_clients": 100, "num_test_clients": 50},
    "mnist-5k": {},
    "digits": {},
}


def _theta(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"θ must lie in (0, 1]; got {text}")
    return value


def _corruption(text: str) -> Corruption:
    kind, _, fraction = text.partition(":")
    kind = kind.strip().replace("-", "_")
    if kind not in CORRUPTION_KINDS or not fraction:
        raise argparse.ArgumentTypeError(
            f"expected KIND:FRACTION with KIND in {', '.join(CORRUPTION_KINDS)}; got {text!r}"
        )
    try:
        return Corruption(kind, float(fraction))  # type: ignore[arg-type]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _algorithms(values: Sequence[str] | None) -> list[str]:
    """``--algo`` values (repeatable, comma lists) in order, without repeats."""
    chosen: list[str] = []
    for value in values or ["deltafl,fedavg"]:
        for raw in value.split(","):
            name = raw.strip().lower().replace("_", "-").replace(".", "-")
            if name not in _CHOICES:
                name = name.replace("-", "")  # delta-fl, rfa-1
            if name not in _CHOICES:
                raise ValueError(f"unknown --algo {raw!r}; choose from {', '.join(_CHOICES)}")
            if name not in chosen:
                chosen.append(name)
    return chosen


def register(subparsers: Any) -> None:
    """Add the ``train`` subcommand to ``subparsers`` (its ``func`` is :func:`run`).

    Examples
    --------
    >>> parser = argparse.ArgumentParser(prog="secagg-dp")
    >>> register(parser.add_subparsers())
    >>> args = parser.parse_args(["train", "--algo", "rfa", "--rounds", "3", "--no-secure"])
    >>> args.algo, args.rounds, args.secure, args.epsilon, args.delta, args.dataset
    (['rfa'], 3, False, 5.0, 1e-05, 'synthetic-iid')
    """
    parser = subparsers.add_parser(
        "train",
        formatter_class=HelpFormatter,
        epilog=examples(
            "secagg-dp train",
            "secagg-dp train --algo fedavg,deltafl --dp thresholds --dataset synthetic --no-secure",
            "secagg-dp train --dataset digits --algo fedavg,rfa --corruption label_flip:0.2 "
            "--no-secure",
        ),
        help="train FedAvg, Δ-FL (DP quantile) and RFA over the secure sum and compare them",
        description=(
            "Federated training with every aggregation through the secure sum. By default Δ-FL "
            "(θ = 0.5) and FedAvg on Synthetic-IID (1 000 users, 100 per round, 20 rounds), each "
            "(ε, δ) = (5, 1e-5)-DP for the whole run on the model and Δ-FL's thresholds "
            "(distributed discrete Gaussian noise added by the clients), each beside the same "
            "run without DP; per-client test errors, privacy and cost are printed and written "
            "(JSON and a plot) to the output folder."
        ),
    )
    parser.add_argument(
        "--algo",
        action="append",
        metavar="ALGO",
        help=f"algorithm(s), repeatable or comma-separated: {', '.join(_CHOICES)} "
        "(default: deltafl,fedavg)",
    )
    parser.add_argument(
        "--dataset",
        choices=DATASET_NAMES,
        default="synthetic-iid",
        help="synthetic-iid (FedProx's, 1 000 users; the default), synthetic (Synthetic(1, 1), "
        "30 users), or an image dataset",
    )
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=None,
        help="communication rounds (default 20 on synthetic-iid, else 100)",
    )
    parser.add_argument(
        "--clients-per-round",
        type=positive_int,
        default=None,
        help="clients m per round (default 100 on synthetic-iid, else 10)",
    )
    parser.add_argument(
        "--theta",
        type=_theta,
        default=_DEFAULTS["theta"],
        help="Δ-FL tail fraction θ in (0, 1] (1 = FedAvg)",
    )
    parser.add_argument(
        "--epsilon",
        type=positive_float,
        default=_DEFAULTS["epsilon"],
        help="the whole run's (ε, δ)-DP budget over every release --dp names (one budget, "
        "split before round 1; each release is paid before its noise is drawn)",
    )
    parser.add_argument(
        "--delta", type=probability, default=_DEFAULTS["delta"], help="δ of the (ε, δ)-DP budget"
    )
    parser.add_argument(
        "--dp",
        choices=(_DP_AUTO, "none", *DP_SCOPES),
        default=_DP_AUTO,
        help="what ε covers: 'model' (every model average carries the clients' distributed "
        "discrete Gaussian noise: user-level DP of the model; for Δ-FL with θ < 1 that needs a "
        "private threshold too, so it runs 'both'), 'thresholds' "
        "(Δ-FL's loss quantiles only: the model has NO DP), 'both' (Δ-FL; others: model), "
        "'none'; 'auto' (default) = the model for FedAvg, RFA, Fed+ (FedGeoMed+ by Weiszfeld, "
        "FedCoMed+ by the Moreau alternation) and FFGB (its Fourier coefficients, clip "
        "FFGB_DP_CLIP), both for Δ-FL with θ < 1",
    )
    parser.add_argument(
        "--dp-clip",
        type=positive_float,
        default=None,
        help="public L2 clip of each update (default under model DP: "
        f"{DEFAULT_DP_CLIP:g}; without it the round's largest norm, a simulator convenience)",
    )
    parser.add_argument(
        "--bits",
        type=int,
        default=_DEFAULTS["bits"],
        help="ring size b of the secure averages (M = 2^b)",
    )
    parser.add_argument("--no-dp", action="store_true", help="no DP at all (same as --dp none)")
    parser.add_argument(
        "--adaptive-clip",
        action="store_true",
        help="under model DP, let FedAvg's, Δ-FL's and RFA's clip follow the median update norm "
        "(Andrew et al. 2021: a noisy count per round, paid from 10 %% of the budget), starting "
        "from --dp-clip",
    )
    parser.add_argument(
        "--baseline",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run every DP run without DP (same seeds, same public clip) and print it beside",
    )
    parser.add_argument(
        "--threshold-method",
        choices=THRESHOLD_METHODS,
        default=_DEFAULTS["threshold_method"],
        help="Δ-FL's threshold: a (DP) hierarchical-histogram quantile each round, private "
        "quantile tracking (one noisy count per round, geometric update), or auto (tracking "
        "when the thresholds are private: measured closer to the exact quantile's p90)",
    )
    parser.add_argument(
        "--threshold-reader",
        choices=QUANTILE_READERS,
        default=_DEFAULTS["threshold_reader"],
        help="how the histogram threshold is read from its noisy CDF: the first bin reaching "
        "(1 − θ)·m (the paper's), or the same on the CDF's non-decreasing fit",
    )
    parser.add_argument(
        "--threshold-every",
        type=positive_int,
        default=_DEFAULTS["threshold_every"],
        metavar="K",
        help="release Δ-FL's private threshold every K rounds (the rounds between reuse it; "
        "each release gets K× the ρ)",
    )
    parser.add_argument(
        "--corruption",
        type=_corruption,
        metavar="KIND:FRACTION",
        help=f"corrupt a fraction of the training data: {', '.join(CORRUPTION_KINDS)}",
    )
    parser.add_argument(
        "--secure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="aggregate through the secure sum (default) or in plain numpy (same up to "
        "quantisation, much faster)",
    )
    parser.add_argument("--model", choices=MODELS, default=_DEFAULTS["model"])
    parser.add_argument(
        "--local-steps", type=int, default=_DEFAULTS["local_steps"], help="local SGD steps τ"
    )
    parser.add_argument("--batch-size", type=int, default=_DEFAULTS["batch_size"])
    parser.add_argument(
        "--lr",
        type=positive_float,
        default=_DEFAULTS["lr"],
        help="local learning rate (default 0.5 on synthetic-iid, else 0.05)",
    )
    parser.add_argument(
        "--dropout", type=float, default=0.0, help="probability a client drops out of a round"
    )
    parser.add_argument("--seed", type=seed, default=0, help="seed of the data and the run")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default ./{DEFAULT_OUT}/)"
    )
    parser.add_argument("--no-plot", action="store_true", help="do not write the plot")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _refuse_inapplicable(args: argparse.Namespace, algorithms: list[str]) -> None:
    """An option set away from its default that no chosen algorithm uses is an error."""
    changed = {name for name, default in _DEFAULTS.items() if getattr(args, name) != default}
    chosen = set(algorithms)
    trainers = chosen - set(_FEDPLUS) - set(_FFGB)
    others = sorted(chosen - trainers)
    if args.corruption is not None and others:
        raise CommandError(
            f"--corruption applies to fedavg, deltafl, rfa and rfa1 (RFA's corruption models), "
            f"not to {', '.join(others)}: drop them or the corruption"
        )
    if "deltafl" not in chosen:
        deltafl_only = {"theta", "threshold_method", "threshold_every", "threshold_reader"}
        for name in sorted(changed & deltafl_only):
            raise CommandError(f"{_option(name)} applies to deltafl only; it is not chosen")
    if not chosen - set(_FFGB):
        for name in sorted(changed & {"model", "local_steps", "batch_size", "lr"}):
            raise CommandError(
                f"{_option(name)} does not apply to FFGB (it fits weak learners, not SGD on a "
                "model)"
            )
    if args.dp == "thresholds" and not args.no_dp and not ("deltafl" in chosen and args.theta < 1):
        raise CommandError(
            "--dp thresholds privatises Δ-FL's loss thresholds (θ < 1): no chosen algorithm has "
            "one; use --dp model"
        )
    dp_requested = args.dp in ("model", "both") and not args.no_dp
    if args.dp == _DP_AUTO and not args.no_dp:
        # auto: model DP for every trainer (each has a noisy release of its model)
        dp_requested = bool(trainers) or bool(others)
    uses_dp = not args.no_dp and args.dp != "none" and (dp_requested or "deltafl" in chosen)
    if not uses_dp:
        for name in sorted(changed & {"epsilon", "delta"}):
            raise CommandError(
                f"{_option(name)} applies to no chosen algorithm: with --dp {args.dp} only "
                "Δ-FL's thresholds are private (use --dp model for the model)"
            )
        if args.dp_clip is not None and not dp_requested:
            raise CommandError("--dp-clip is the clip of model DP: use it with --dp model/both")
    if args.adaptive_clip and (not dp_requested or not trainers):
        raise CommandError(
            "--adaptive-clip adapts the clip of model DP for fedavg, deltafl, rfa and rfa1: "
            "choose one of them with --dp model/both/auto"
        )


def _fill_dataset_defaults(args: argparse.Namespace) -> None:
    """``--rounds``, ``--clients-per-round`` and ``--lr`` left unset take the dataset's defaults."""
    defaults = _DATASET_DEFAULTS.get(args.dataset, _OTHER_DEFAULTS)
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def _configs(args: argparse.Namespace, algorithms: list[str]) -> list[AnyConfig]:
    _refuse_inapplicable(args, algorithms)
    _fill_dataset_defaults(args)
    shared: dict[str, Any] = {
        "rounds": args.rounds,
        "clients_per_round": args.clients_per_round,
        "secure": args.secure,
        "dropout": args.dropout,
        "seed": args.seed,
        "bits": args.bits,
    }
    local = {"local_steps": args.local_steps, "batch_size": args.batch_size, "lr": args.lr}
    configs: list[AnyConfig] = []
    for name in algorithms:
        if name in _FEDPLUS:
            fedplus = FedPlusConfig(algorithm=name, model=args.model, **shared, **local)  # type: ignore[arg-type]
            scope = "none" if args.no_dp else args.dp
            if scope in (_DP_AUTO, "model", "both"):
                dp_config = fedplus.with_changes(
                    epsilon=args.epsilon,
                    delta=args.delta,
                    update_clip=args.dp_clip,
                    aggregation_method=_DP_METHOD.get(name, "weiszfeld"),
                )
                configs.append(dp_config)
                if args.baseline:
                    configs.append(
                        fedplus.with_changes(
                            update_clip=dp_config.clip,
                            aggregation_method=dp_config.aggregation_method,
                        )
                    )
            else:
                configs.append(fedplus)
        elif name in _FFGB:
            ffgb = FFGBConfig(variant=name, **shared)  # type: ignore[arg-type]
            if not args.no_dp and args.dp in (_DP_AUTO, "model", "both"):
                # FFGB clips its Fourier coefficients (FFGB_DP_CLIP), not a model update.
                private = ffgb.with_changes(epsilon=args.epsilon, delta=args.delta)
                configs.append(private)
                if args.baseline:
                    configs.append(ffgb.with_changes(coefficient_clip=private.clip))
            else:
                configs.append(ffgb)
        else:
            config = _trainer_config(args, name)
            configs.append(config)
            if args.baseline and config.epsilon is not None:
                # The same run without DP: same seeds and, for a like-for-like model, the same
                # public clip (under model DP), so the difference is the noise alone.
                clip = config.clip if config.model_dp else config.update_clip
                # (With --adaptive-clip the twin keeps the initial clip fixed.)
                configs.append(
                    dataclasses.replace(
                        config, epsilon=None, dp=None, update_clip=clip, adaptive_clip=False
                    )
                )
    return configs


def _trainer_config(args: argparse.Namespace, name: str) -> TrainerConfig:
    common: dict[str, Any] = {
        "rounds": args.rounds,
        "clients_per_round": args.clients_per_round,
        "local_steps": args.local_steps,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "model": args.model,
        "theta": args.theta,
        "secure": args.secure,
        "dropout": args.dropout,
        "corruption": args.corruption,
        "seed": args.seed,
        "delta": args.delta,
    }
    thresholds = name == "deltafl" and args.theta < 1.0
    scope = "none" if args.no_dp else args.dp
    if scope == _DP_AUTO:
        scope = "both" if thresholds else "model"
    elif thresholds and scope == "model":
        scope = "both"  # Δ-FL's model is DP only with a private threshold (TrainerConfig.dp)
    elif not thresholds and scope != "none":
        # FedAvg beside Δ-FL has no threshold to privatise: 'thresholds' leaves it without DP.
        scope = "model" if scope in ("model", "both") else "none"
    return TrainerConfig(
        algorithm=name,  # type: ignore[arg-type]
        epsilon=None if scope == "none" else args.epsilon,
        dp=None if scope == "none" else cast("DPScope", scope),
        update_clip=args.dp_clip,
        adaptive_clip=args.adaptive_clip and scope in ("model", "both"),
        bits=args.bits,
        threshold_method=args.threshold_method,
        threshold_every=args.threshold_every,
        threshold_reader=args.threshold_reader,
        **common,
    )


def _writable_folder(path: Path) -> Path:
    """``path`` created if need be, and proven writable, before any training runs."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".secagg-dp-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise CommandError(f"--out {path} is not a writable folder: {error}") from None
    return path


def _algorithm(config: AnyConfig) -> str:
    return config.variant if isinstance(config, FFGBConfig) else config.algorithm


def _label(result: AnyResult) -> str:
    config = result.config
    label = _ALGORITHM_LABELS[_algorithm(config)]
    if isinstance(config, FedPlusConfig | FFGBConfig):
        return label + (" no DP" if config.epsilon is None else f" ε={config.epsilon:g} model")
    if config.algorithm == "deltafl":
        label += f" θ={config.theta:g}"
    if config.epsilon is not None:
        label += f" ε={config.epsilon:g} {config.dp_scope}"
    elif config.algorithm == "deltafl" and config.theta < 1.0:
        label += " exact-q, no DP"
    else:
        label += " no DP"
    return label


def _arguments_record(args: argparse.Namespace) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for name, value in sorted(vars(args).items()):
        if callable(value):
            continue
        if isinstance(value, Corruption):
            record[name] = {"kind": value.kind, "fraction": value.fraction}
        else:
            record[name] = str(value) if isinstance(value, Path) else value
    return record


def _evaluation_text(result: AnyResult) -> str:
    if isinstance(result, FedPlusResult):
        return (
            f"personalised error (each party's own model) on the held-out splits of the "
            f"{result.errors.num_clients} training parties"
        )
    if result.evaluation == "heldout":
        return (
            f"error on the held-out splits of the {result.errors.num_clients} training clients "
            "(FedProx's convention: Synthetic's unseen users are unpredictable)"
        )
    return f"error on {result.errors.num_clients} unseen test clients"


def _table(results: list[AnyResult]) -> str:
    header = (
        f"{'algorithm':<27s} {'mean':>6s} {'p10':>6s} {'p50':>6s} {'p90':>6s} "
        f"{'ρ zCDP':>7s} {'ε (δ)':>6s} {'DP covers':<30s} {'sec avgs':>8s} {'skipped':>7s} "
        f"{'empty':>5s} {'time':>7s}"
    )
    lines = [header, "-" * len(header)]
    for result in results:
        errors = result.errors
        empty, rho, epsilon, covers = "—", "no DP", "—", "nothing (no DP)"
        if isinstance(result, TrainingResult | FedPlusResult | FFGBResult):
            if result.rho_spent is not None and result.epsilon_spent is not None:
                rho, epsilon = f"{result.rho_spent:.3g}", f"{result.epsilon_spent:.3g}"
            covers = result.dp_covers
        if isinstance(result, TrainingResult) and result.config.algorithm == "deltafl":
            empty = str(result.empty_tail_rounds)
        lines.append(
            f"{_label(result):<27s} {errors.mean:>6.3f} {errors.p10:>6.3f} {errors.p50:>6.3f} "
            f"{errors.p90:>6.3f} {rho:>7s} {epsilon:>6s} {covers:<30s} "
            f"{result.num_secure_averages:>8d} {result.rounds_skipped:>7d} "
            f"{empty:>5s} {result.wall_time:>6.1f}s"
        )
    return "\n".join(lines)


_LINE_STYLES = ("-", "--", "-.", ":")


def _privacy_title(results: list[AnyResult], args: argparse.Namespace) -> str:
    """What the plot's runs are private for, in a few words."""
    covered = sorted(
        {
            r.dp_covers
            for r in results
            if isinstance(r, TrainingResult | FedPlusResult | FFGBResult) and r.privacy is not None
        }
    )
    if not covered:
        return "no DP"
    return f"(ε, δ) = ({args.epsilon:g}, {args.delta:g}) on " + " / ".join(covered)


def _plot(results: list[AnyResult], path: Path, title: str) -> str | None:
    """Write the per-client error CDFs and the training-loss curves; return a message if
    matplotlib is missing. Colours and line styles cycle separately, so seven runs stay apart."""
    try:
        import matplotlib  # noqa: PLC0415 (the plot extra is optional)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return "matplotlib is not installed (pip install 'secagg-dp[plot]'): no plot written"
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    for position, result in enumerate(results):
        style = {"linestyle": _LINE_STYLES[position // 10 % len(_LINE_STYLES)], "linewidth": 1.6}
        errors = np.sort(result.client_errors[np.isfinite(result.client_errors)])
        # The CDF starts at (0, 0) and steps up by 1/n at each client's error.
        xs = np.concatenate([[0.0], errors, [1.0]])
        share = np.concatenate([[0.0], np.arange(1, errors.size + 1) / errors.size, [1.0]])
        (line,) = left.step(xs, share, where="post", label=_label(result), **style)
        left.axvline(result.errors.p90, color=line.get_color(), linestyle=":", linewidth=0.8)
        rounds = [r.index + 1 for r in result.history]
        losses = [r.train_loss for r in result.history]
        right.plot(rounds, losses, color=line.get_color(), label=_label(result), **style)
    left.set_xlim(0.0, 1.02)  # the last step (clients at error 1) stays visible
    left.set_ylim(0.0, 1.02)
    left.set_xlabel("per-client test error")
    left.set_ylabel("fraction of clients with error ≤ x")
    left.set_title("empirical CDF of per-client error (dotted: p90)")
    right.set_xlabel("round")
    right.set_ylabel("training loss of the round's clients")
    right.set_title("training curve")
    for axis in (left, right):
        axis.grid(alpha=0.3)
    handles, labels = left.get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout(rect=(0.0, 0.08 + 0.04 * ((len(labels) - 1) // 4), 1.0, 1.0))
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return None


def run(args: argparse.Namespace) -> int:
    """Execute ``secagg-dp train``: train, print the table, write the JSON and the plot.

    Returns the exit status: 0, or 2 after printing ``error: ...`` for a bad argument, a missing
    dataset or a failed run.

    Examples
    --------
    >>> import contextlib, io, tempfile
    >>> parser = argparse.ArgumentParser(prog="secagg-dp")
    >>> register(parser.add_subparsers())
    >>> with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()) as log:
    ...     argv = ["train", "--rounds", "2", "--no-secure", "--quiet", "--no-plot", "--out", out]
    ...     status = run(parser.parse_args(argv))
    >>> status, "Δ-FL θ=0.5 ε=5" in log.getvalue()
    (0, True)
    """
    algorithms = _algorithms(args.algo)
    configs = _configs(args, algorithms)
    out = _writable_folder(args.out)  # checked before any work: nothing is lost at the end
    start = time.perf_counter()
    try:
        data = load_dataset(args.dataset, seed=args.seed, **_DATASET_ARGUMENTS[args.dataset])
    except DatasetNotAvailableError as error:
        raise CommandError(str(error)) from None
    bar = ProgressBar()
    bar.enabled = bar.enabled and not args.quiet
    results: list[AnyResult] = []
    for config in configs:
        label = _ALGORITHM_LABELS[_algorithm(config)]
        if (
            isinstance(config, TrainerConfig | FedPlusConfig | FFGBConfig)
            and config.epsilon is None
        ):
            label += " (no DP)"

        def progress(done: int, total: int, label: str = label) -> None:
            bar.update(label, done, total)

        try:
            result: AnyResult
            if isinstance(config, FedPlusConfig):
                result = train_fedplus(config, data, progress=progress)
            elif isinstance(config, FFGBConfig):
                result = train_ffgb(config, data, progress=progress)
            else:
                result = train(data, config, progress=progress)
        finally:
            bar.close()
        results.append(result)
    elapsed = time.perf_counter() - start

    path = "secure sum (SecAgg+)" if args.secure else "plain numpy (no cryptography)"
    corruption = (
        "none"
        if args.corruption is None
        else f"{args.corruption.kind} on {args.corruption.fraction:g} of the data"
    )
    print(
        f"{data.name}: {len(data.train_clients)} training clients, {args.rounds} rounds × "
        f"{args.clients_per_round} clients, {path}, corruption {corruption}, seed {args.seed}"
    )
    for text in dict.fromkeys(_evaluation_text(result) for result in results):
        print(text)
    print(_table(results))
    model_dp = [
        isinstance(r, TrainingResult | FedPlusResult | FFGBResult) and r.config.model_dp
        for r in results
    ]
    if all(model_dp):
        model_note = "every model here is DP (user-level, add/remove or replace-one as planned)"
    elif any(model_dp):
        model_note = "only the runs whose 'DP covers' names the model have a DP model"
    else:
        model_note = "no run here adds noise to the model, so no trained model has a DP guarantee"
    print(
        "ρ zCDP: what the run's one budget spent (each release's worst case, paid before its "
        f"noise); ε (δ): the (ε, δ)-DP it certifies at δ = {args.delta:g} for the whole run, for "
        f"what 'DP covers' names — {model_note}; sec avgs: secure averages "
        "(RFA's communication cost); "
        "empty: Δ-FL rounds whose threshold was above every loss (a FedAvg fallback without "
        "model DP; under model DP the tail's noisy sum is released all the same)"
    )

    record = {
        "arguments": _arguments_record(args),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "python": platform.python_version(),
        "dataset": {"name": data.name, "seed": data.seed, **data.statistics()},
        "secure": args.secure,
        "seconds": elapsed,
        "runs": [result.to_dict() for result in results],
    }
    json_path = out / "train_results.json"
    json_path.write_text(json.dumps(record, indent=1))
    print(f"wrote {json_path}")
    if not args.no_plot:
        plot_path = out / "test_errors.png"
        message = _plot(
            results,
            plot_path,
            f"{data.name}, {args.rounds} rounds × {args.clients_per_round} clients, {path}, "
            f"corruption {corruption}, seed {args.seed}; {_privacy_title(results, args)}\n"
            f"{_evaluation_text(results[0]).split(' (')[0]}",
        )
        print(message if message is not None else f"wrote {plot_path}")
    print(f"total time {elapsed:.1f} s")
    return 0
