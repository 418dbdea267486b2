"""One error handler for both command lines: one line on stderr, documented exit codes."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from audits.cli import main as audit_main
from protocols.aggregation import secure_weighted_average
from protocols.cli import _train, main
from protocols.cli.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CommandError,
    run_guarded,
)
from secagg import InsecureSettingsWarning, secure_sum


def one_error_line(err: str, program: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{program}: error: "), err
    return lines[0]


def test_an_unwritable_out_is_refused_before_any_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    trained: list[object] = []
    monkeypatch.setattr(_train, "train", lambda *a, **k: trained.append(a))
    status = main(["train", "--out", str(blocker / "results"), "--rounds", "1", "--quiet"])
    captured = capsys.readouterr()
    assert status == EXIT_USAGE and trained == [] and captured.out == ""
    assert "is not a writable folder" in one_error_line(captured.err, "secagg-dp train")


def test_ctrl_c_ends_with_one_line_and_130(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_train, "train", interrupted)
    status = main(["train", "--out", str(tmp_path), "--rounds", "1", "--quiet", "--algo", "fedavg"])
    assert status == EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == "secagg-dp train: interrupted"


def test_a_closed_pipe_ends_quietly() -> None:
    # `secagg-dp sum ... | head -c 10`: the reader leaves early; no traceback, exit 141.
    command = [sys.executable, "-m", "protocols.cli", "sum", "--clients", "4", "--dim", "4"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.read(1)
        process.stdout.close()
        stderr = process.stderr.read().decode()
        process.wait(timeout=60)
    assert "Traceback" not in stderr
    assert process.returncode in (0, EXIT_BROKEN_PIPE)


def test_broken_pipe_and_memory_are_handled_by_the_one_handler(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def broken() -> int:
        raise BrokenPipeError

    def huge() -> int:
        raise MemoryError

    assert run_guarded("secagg-dp sum", broken) == EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""
    assert run_guarded("secagg-dp sum", huge) == EXIT_USAGE
    assert "out of memory" in one_error_line(capsys.readouterr().err, "secagg-dp sum")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["sum", "--clients", "4", "--dim", "4", "--bits", "70"], "--bits must lie in [1, 64]"),
        (["sum", "--clients", "5", "--dim", "4", "--neighbors", "x"], "even integer or 'auto'"),
        (["sum", "--clients", "3", "--dim", "1000000000000", "--quiet"], "out of memory"),
        (["quantile", "--epsilon", "1e300", "--clients", "10", "--no-secure"], "smaller rho"),
        (["train", "--algo", "sgd"], "unknown --algo 'sgd'"),
        (["train", "--algo", "ffgb", "--corruption", "gaussian:0.1"], "--corruption applies to"),
        (["train", "--algo", "fedavg", "--theta", "0.3"], "--theta applies to deltafl only"),
        (["train", "--algo", "fedavg", "--threshold-every", "5"], "--threshold-every applies"),
        (
            ["train", "--algo", "fedavg", "--threshold-reader", "isotonic"],
            "--threshold-reader applies",
        ),
        (["train", "--algo", "ffgb-c", "--lr", "0.1"], "--lr does not apply to FFGB"),
        (["train", "--algo", "fedavg", "--dp", "none", "--epsilon", "2"], "applies to no chosen"),
        (["train", "--algo", "fedavg", "--no-dp", "--adaptive-clip"], "--adaptive-clip adapts"),
        (["train", "--algo", "ffgb", "--adaptive-clip"], "--adaptive-clip adapts"),
        (["train", "--algo", "fedavg", "--no-dp", "--dp-clip", "1"], "--dp-clip is the clip of"),
        (["train", "--algo", "fedavg", "--dp", "thresholds"], "no chosen algorithm has one"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_USAGE
    captured = capsys.readouterr()
    assert needle in one_error_line(captured.err, f"secagg-dp {argv[0]}")
    assert "Traceback" not in captured.err + captured.out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["sum", "--seed", "-3"], "argument --seed: a seed is an integer"),
        (["quantile", "--seed", "-1"], "argument --seed: a seed is an integer"),
        (["sum", "--clients", "abc"], "argument --clients: expected an integer"),
    ],
)
def test_argument_errors_name_the_option(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_status:
        main(argv)
    assert exit_status.value.code == EXIT_USAGE
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--only", "99"], "argument --only: choose from 1–10; got 99"),
        (["--only", "abc"], "argument --only: expected comma-separated integers"),
        (["--false-alarms", "-1"], "argument --false-alarms: must be an integer >= 0"),
    ],
)
def test_the_audit_command_validates_its_options(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_status:
        audit_main(argv)
    assert exit_status.value.code == EXIT_USAGE
    assert needle in capsys.readouterr().err


def test_insecure_settings_warn_in_the_library_and_as_one_line_on_the_cli(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.warns(InsecureSettingsWarning, match="2-client"):
        secure_sum([[1], [2]], seed=0)
    with pytest.warns(InsecureSettingsWarning, match="t = 1"):
        secure_sum([[1], [2], [3]], threshold=1, seed=0, threat_model="semi-honest")
    with pytest.warns(InsecureSettingsWarning, match="below one quantisation step"):
        secure_weighted_average(np.full((4, 3), 5.0), np.ones(4), bits=8, clip=1e6, seed=0)
    with warnings.catch_warnings():  # the test suite ignores this warning by default
        warnings.simplefilter("always", InsecureSettingsWarning)
        assert main(["sum", "--clients", "2", "--dim", "4", "--quiet"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line]
    assert lines and all(line.startswith("secagg-dp sum: warning: ") for line in lines)


def test_command_errors_carry_their_message() -> None:
    def failing() -> int:
        raise CommandError("nothing to do")

    assert run_guarded("x", failing) == EXIT_USAGE


def test_every_help_example_parses() -> None:
    # Each subcommand's --help ends with examples; each must be a valid command line.
    from protocols.cli import build_parser  # noqa: PLC0415

    parser = build_parser()
    choices = next(a for a in parser._actions if a.dest == "command").choices
    assert choices is not None
    seen = 0
    for name, subparser in choices.items():
        epilog = subparser.epilog or ""
        assert epilog.startswith("examples:"), f"secagg-dp {name} --help has no examples"
        for line in epilog.splitlines()[1:]:
            argv = line.split()[1:]
            assert argv[0] == name
            parser.parse_args(argv)  # exits (SystemExit) on an invalid example
            seen += 1
    assert seen >= len(choices)
