"""The ``secagg-dp train`` command (its ``register`` on a fresh parser)."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import pytest

from protocols.cli import _train, main
from protocols.cli.errors import run_guarded


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="secagg-dp")
    _train.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["train", *argv])
    return run_guarded("secagg-dp train", lambda: int(args.func(args)))


def test_default_job_is_dp_on_the_model_beside_the_same_run_without_dp(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The default job (Δ-FL DP on model + thresholds, FedAvg DP on the model, each beside its
    # no-DP twin, over the secure sum on Synthetic-IID), shortened to 2 rounds of 20 clients.
    argv = ["--rounds", "2", "--clients-per-round", "20", "--out", str(tmp_path), "--quiet"]
    assert run(argv) == 0
    out = capsys.readouterr().out
    for text in ("Δ-FL θ=0.5 ε=5 both", "Δ-FL θ=0.5 exact-q, no DP", "FedAvg ε=5 model"):
        assert text in out
    for text in ("FedAvg no DP", "p90", "secure sum (SecAgg+)", "100 unseen test clients"):
        assert text in out
    record = json.loads((tmp_path / "train_results.json").read_text())
    runs = record["runs"]
    assert [(r["algorithm"], r["model_dp"]) for r in runs] == [
        ("deltafl", True),
        ("deltafl", False),
        ("fedavg", True),
        ("fedavg", False),
    ]
    assert [r["dp_covers"] for r in runs] == [
        "model + thresholds",
        "nothing (no DP)",
        "model",
        "nothing (no DP)",
    ]
    # --epsilon 5 is (5, 1e-5)-DP for the whole run; the table prints ρ and ε.
    for private in (runs[0], runs[2]):
        assert private["epsilon_spent"] <= 5.0 and private["delta"] == 1e-5
        assert private["epsilon_spent"] == pytest.approx(5.0, rel=1e-3)
    assert runs[1]["rho_spent"] is None and runs[3]["privacy"] is None
    # The twin uses the DP run's public clip, never one derived from the data.
    assert runs[1]["config"]["update_clip"] == runs[3]["config"]["update_clip"] == 1.0
    assert record["secure"] is True and record["dataset"]["name"] == "synthetic-iid"
    assert record["arguments"]["lr"] == 0.5 and runs[0]["config"]["secure"]
    plot = tmp_path / "test_errors.png"
    if importlib.util.find_spec("matplotlib") is None:  # the plot extra is optional
        assert "no plot written" in out and not plot.exists()
    else:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dataset_defaults_and_no_baseline(tmp_path: Path) -> None:
    argv = ["--dataset", "synthetic", "--algo", "fedavg", "--rounds", "2", "--no-secure"]
    assert run([*argv, "--no-baseline", "--no-plot", "--quiet", "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "train_results.json").read_text())
    (fedavg,) = record["runs"]
    assert fedavg["model_dp"] and record["arguments"]["clients_per_round"] == 10
    assert record["arguments"]["lr"] == 0.05 and len(fedavg["client_errors"]) == 30


def test_algorithms_corruption_and_plain_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--algo", "fedavg,rfa", "--algo", "rfa1", "--corruption", "omniscient:0.25"]
    argv += ["--rounds", "3", "--no-secure", "--no-plot", "--out", str(tmp_path), "--seed", "2"]
    assert run([*argv, "--dataset", "synthetic", "--no-baseline"]) == 0
    out = capsys.readouterr().out
    assert "omniscient on 0.25 of the data" in out and "plain numpy" in out
    record = json.loads((tmp_path / "train_results.json").read_text())
    assert [r["algorithm"] for r in record["runs"]] == ["fedavg", "rfa", "rfa1"]
    assert all(r["corrupted_clients"] for r in record["runs"])
    assert record["arguments"]["seed"] == 2 and not (tmp_path / "test_errors.png").exists()


def test_exact_quantile_and_theta(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--algo", "deltafl", "--no-dp", "--theta", "0.8", "--rounds", "2", "--no-secure"]
    assert run([*argv, "--no-plot", "--out", str(tmp_path)]) == 0
    assert "Δ-FL θ=0.8 exact-q" in capsys.readouterr().out


def test_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--algo", "sgd", "--out", str(tmp_path)]) == 2
    assert "unknown --algo 'sgd'" in capsys.readouterr().err
    # Image negation needs images: a clear error, not a traceback.
    argv = ["--corruption", "image_negation:0.1", "--rounds", "1", "--out", str(tmp_path)]
    assert run(argv) == 2
    assert "image negation needs an image dataset" in capsys.readouterr().err
    for bad in (["--theta", "0"], ["--epsilon", "-1"], ["--delta", "1"], ["--corruption", "x:1"]):
        with pytest.raises(SystemExit):
            run(bad)


def test_fedplus_and_ffgb_through_the_same_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--algo", "fedavg+,FedCoMed+", "--algo", "ffgb-c,FFGB.L", "--rounds", "2"]
    assert run([*argv, "--no-secure", "--no-plot", "--quiet", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for label in ("FedAvg+", "FedCoMed+", "FFGB.C", "FFGB.L", "personalised error"):
        assert label in out
    record = json.loads((tmp_path / "train_results.json").read_text())
    runs = record["runs"]
    # Every trainer has model DP under the default 'auto', each beside its no-DP twin
    # (FedCoMed+ by the Moreau alternation, its noisy iteration, in both).
    assert [r["algorithm"] for r in runs[:4]] == ["fedavg+", "fedavg+", "fedcomed+", "fedcomed+"]
    assert [r["model_dp"] for r in runs] == [True, False] * 4
    assert [r["dp_covers"] for r in runs[:2]] == ["model", "nothing (no DP)"]
    assert runs[0]["epsilon_spent"] <= 5.0 and runs[1]["config"]["update_clip"] == 1.0
    assert runs[2]["epsilon_spent"] <= 5.0
    assert {runs[k]["config"]["aggregation_method"] for k in (2, 3)} == {"moreau"}
    assert "FedAvg+ ε=5 model" in out and "FedCoMed+ ε=5 model" in out
    assert [r["config"]["variant"] for r in runs[4:]] == ["ffgb-c"] * 2 + ["ffgb-l"] * 2
    assert runs[4]["dp_covers"] == "model" and runs[5]["config"]["coefficient_clip"] == 20.0
    assert all(0.0 <= r["errors"]["mean"] <= 1.0 for r in runs)


def test_the_table_says_what_the_privacy_covers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:

    code = main(
        [
            "train",
            "--rounds",
            "2",
            "--algo",
            "deltafl,fedavg",
            "--dp",
            "thresholds",
            "--dataset",
            "synthetic",
            "--no-baseline",
            "--no-secure",
            "--out",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    deltafl = next(line for line in out.splitlines() if line.startswith("Δ-FL"))
    fedavg = next(line for line in out.splitlines() if line.startswith("FedAvg"))
    assert "thresholds only (model: no DP)" in deltafl and "nothing (no DP)" in fedavg
    assert " 0 " not in fedavg.split("nothing")[0][-12:]  # no "ε 0" that reads as perfect privacy
    assert "no trained model has a DP guarantee" in out
    record = json.loads((tmp_path / "train_results.json").read_text())
    by_algorithm = {r["algorithm"]: r for r in record["runs"]}
    assert by_algorithm["deltafl"]["dp_covers"] == "thresholds only (model: no DP)"
    assert by_algorithm["fedavg"]["dp_covers"] == "nothing (no DP)"
    assert (
        by_algorithm["fedavg"]["epsilon_spent"] is None
        and by_algorithm["fedavg"]["privacy"] is None
    )
    assert not any(r["model_dp"] for r in record["runs"])


def test_bits_reach_every_trainer(tmp_path: Path) -> None:
    argv = ["--algo", "fedavg,fedavg+,ffgb", "--bits", "16", "--rounds", "1", "--no-secure"]
    argv += ["--clients-per-round", "20", "--no-baseline", "--no-plot", "--quiet"]
    assert run([*argv, "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "train_results.json").read_text())
    assert [r["config"]["bits"] for r in record["runs"]] == [16, 16, 16]


def test_adaptive_clip_from_the_command_line(tmp_path: Path) -> None:
    argv = ["--algo", "fedavg", "--adaptive-clip", "--dp-clip", "0.2", "--rounds", "3"]
    argv += ["--clients-per-round", "20", "--no-secure", "--no-plot", "--quiet"]
    assert run([*argv, "--out", str(tmp_path)]) == 0
    private, twin = json.loads((tmp_path / "train_results.json").read_text())["runs"]
    clips = private["privacy"]["adaptive_clip"]
    assert len(clips) == 4 and clips[0] == 0.2 and private["config"]["adaptive_clip"]
    assert not twin["config"]["adaptive_clip"] and twin["config"]["update_clip"] == 0.2
