"""The ``secagg-dp quantile`` command."""

from __future__ import annotations

import json

import pytest

from protocols.cli import main


def test_quantile_secure_run_prints_everything(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["quantile", "--clients", "40", "--q", "0.8", "--epsilon", "2", "--bins", "16"]) == 0
    )
    out = capsys.readouterr().out
    for field in ("estimate", "true quantile", "rank error", "zCDP", "secure sum"):
        assert field in out
    # --epsilon is the (ε, δ)-DP guarantee: the report certifies at most ε at δ = 1e-5.
    certified = float(out.split("zCDP, (")[1].split(",")[0])
    assert 1.99 <= certified <= 2.0


def test_quantile_json_flat_plain(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        [
            "quantile",
            "--clients",
            "300",
            "--epsilon",
            "1",
            "--mechanism",
            "flat",
            "--distribution",
            "uniform",
            "--no-secure",
            "--json",
            "--seed",
            "4",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["secure"] is False and report["mechanism"] == "flat"
    assert report["epsilon_dp"] <= 1.0 and report["delta"] == 1e-5
    assert 0 <= report["rank_error"] < 0.5 and 0 <= report["estimate"] <= 1


def test_quantile_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["quantile", "--clients", "10", "--bins", "48", "--no-secure"]) == 2
    assert "power of the branching factor" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["quantile", "--q", "1.5"])
    with pytest.raises(SystemExit):
        main(["quantile", "--epsilon", "-1"])
    with pytest.raises(SystemExit):
        main(["quantile", "--epsilon", "1", "--rho", "0.5"])


def test_quantile_rho_sets_zcdp_directly(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["quantile", "--clients", "50", "--rho", "0.25", "--no-secure", "--json"]
    assert main(argv) == 0
    rho = json.loads(capsys.readouterr().out)["rho"]
    assert 0.25 * (1 - 1e-4) <= rho <= 0.25  # the delivered ρ, never above the request
