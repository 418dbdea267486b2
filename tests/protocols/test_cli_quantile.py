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
    for field in ("estimate", "true quantile", "rank error", "½ε²-zCDP with ε = 2", "secure sum"):
        assert field in out


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
    assert report["rho"] <= 0.5 + 1e-12
    assert 0 <= report["rank_error"] < 0.5 and 0 <= report["estimate"] <= 1


def test_quantile_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["quantile", "--clients", "10", "--bins", "48", "--no-secure"]) == 2
    assert "power of the branching factor" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["quantile", "--q", "1.5"])
    with pytest.raises(SystemExit):
        main(["quantile", "--epsilon", "-1"])
