"""``secagg-dp account``: reference figures, formulas and citations printed, bad input exits 2."""

from __future__ import annotations

import argparse
import importlib.util
import re

import pytest

import protocols.cli as cli
from protocols.cli import _account
from protocols.cli.errors import run_guarded


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="secagg-dp")
    _account.register(parser.add_subparsers(dest="command", required=True))
    return parser


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    args = _parser().parse_args(["account", *argv])
    status = run_guarded("secagg-dp account", lambda: int(args.func(args)))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _value(output: str, label: str) -> float:
    match = re.search(rf"^{re.escape(label)}\s*=\s*([0-9.]+)", output, re.MULTILINE)
    assert match, output
    return float(match.group(1))


def test_central_gaussian_composition(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(
        ["--sigma", "2", "--sensitivity", "1", "--rounds", "100", "--delta", "1e-5"], capsys
    )
    assert status == 0
    assert _value(out, "rho") == pytest.approx(12.5)
    assert _value(out, "epsilon (tight)") == pytest.approx(35.0673, abs=5e-5)
    assert _value(out, "epsilon (simple)") == pytest.approx(36.4926, abs=5e-5)
    for citation in ("CKS20 Cor. 13", "BS16 Prop. 1.3", "CKS20 Thm. 4", "Δ₂²/(2σ²)",
                     "ρ + 2·√(ρ·log(1/δ))"):
        assert citation in out


def test_single_scalar_release_also_prints_the_exact_epsilon(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, _ = _run(
        ["--sigma", "1", "--sensitivity", "1", "--rounds", "1", "--delta", "1e-5"], capsys
    )
    assert status == 0
    assert _value(out, "epsilon (exact)") == pytest.approx(4.4302, abs=5e-5)
    assert "CKS20 Thm. 7" in out


def test_distributed_reference_case(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(
        ["--sigma", "0.1", "--sensitivity", "1", "--granularity", "1e-3", "--clients", "100",
         "--dim", "65536", "--rounds", "100", "--delta", "1e-5"],
        capsys,
    )
    assert status == 0
    assert _value(out, "epsilon (tight)") <= 97.4
    assert _value(out, "epsilon (tight)") == pytest.approx(97.32, abs=0.005)
    assert "KLS21 Thm. 1" in out


def test_fast_sampler_reports_its_tv_term(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(
        ["--sigma", "10", "--sensitivity", "1", "--dim", "1000", "--rounds", "10",
         "--delta", "1e-5", "--sampler", "fast"],
        capsys,
    )
    assert status == 0
    assert "sampler TV" in out and "(1 + e^ε)·η" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--sigma", "0", "--sensitivity", "1", "--rounds", "1", "--delta", "1e-5"],
        ["--sigma", "-1", "--sensitivity", "1", "--rounds", "1", "--delta", "1e-5"],
        ["--sigma", "nan", "--sensitivity", "1", "--rounds", "1", "--delta", "1e-5"],
        ["--sigma", "inf", "--sensitivity", "1", "--rounds", "1", "--delta", "1e-5"],
        ["--sigma", "1", "--sensitivity", "1", "--rounds", "0", "--delta", "1e-5"],
        ["--sigma", "1", "--sensitivity", "1", "--rounds", "1", "--delta", "1"],
        ["--sigma", "1", "--sensitivity", "1", "--rounds", "1", "--delta", "0"],
        ["--sigma", "1", "--sensitivity", "1", "--rounds", "1.5", "--delta", "1e-5"],
        ["--sigma", "abc", "--sensitivity", "1", "--rounds", "1", "--delta", "1e-5"],
        ["--sensitivity", "1", "--rounds", "1", "--delta", "1e-5"],
    ],
)
def test_bad_values_are_argparse_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        _parser().parse_args(["account", *argv])
    assert caught.value.code == 2
    assert "error" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--clients", "10"], "--clients needs --dim"),
        (["--granularity", "0.01"], "--granularity needs --dim"),
        (["--sigma", "0.4", "--clients", "10", "--dim", "4"], "1/2"),
        (["--l1-sensitivity", "3"], "--l1-sensitivity applies to the distributed bound"),
        (["--beta", "0.5"], "--beta is conditional rounding's"),
    ],
)
def test_inconsistent_options_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--sensitivity", "1", "--rounds", "1", "--delta", "1e-5"]
    if "--sigma" not in argv:
        base += ["--sigma", "1"]
    status, out, err = _run(base + argv, capsys)
    assert status == 2 and out == ""
    assert message in err


def test_runs_through_the_secagg_dp_entry_point(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As wired by ``protocols.cli`` once ``_account`` is in its command list."""
    modules = tuple(dict.fromkeys((*cli._COMMAND_MODULES, "protocols.cli._account")))
    available = tuple(m for m in modules if _importable(m))
    monkeypatch.setattr(cli, "_COMMAND_MODULES", available)
    argv = ["account", "--sigma", "5", "--sensitivity", "1", "--rounds", "1000", "--delta", "1e-5"]
    assert cli.main(argv) == 0
    assert _value(capsys.readouterr().out, "epsilon (tight)") == pytest.approx(48.7545, abs=5e-5)
    with pytest.raises(SystemExit) as caught:
        cli.main(["account", "--sigma", "-5", "--sensitivity", "1", "--rounds", "1",
                  "--delta", "1e-5"])
    assert caught.value.code == 2


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
