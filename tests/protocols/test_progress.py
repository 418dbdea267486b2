"""The command-line progress: tqdm or the built-in bar on a terminal, log lines elsewhere."""

from __future__ import annotations

import io
import time

import pytest

from protocols.cli.progress import ProgressBar, format_seconds


def test_the_built_in_bar_shows_count_rate_and_eta() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream=stream, force=True, interval=0.0, use_tqdm=False)
    bar.update("rounds", 0, 4)
    time.sleep(0.01)
    bar.update("rounds", 2, 4)
    bar.close()
    text = stream.getvalue()
    assert "2/4" in text and "/s, ETA" in text and text.endswith("\n")


def test_off_a_terminal_a_long_task_logs_lines_and_a_short_one_stays_quiet() -> None:
    quiet = io.StringIO()
    bar = ProgressBar(stream=quiet)  # StringIO is not a terminal; log_every 30 s
    for done in range(5):
        bar.update("audit 2", done, 5)
    bar.close()
    assert quiet.getvalue() == ""
    log = io.StringIO()
    bar = ProgressBar(stream=log, log_every=0.0)
    bar.update("audit 2", 1, 5)
    bar.update("audit 2", 3, 5)
    lines = log.getvalue().splitlines()
    assert lines and all(line.startswith("audit 2: ") for line in lines)
    assert "ETA" in lines[-1]


def test_tqdm_draws_the_terminal_bar_when_installed() -> None:
    pytest.importorskip("tqdm", reason="pip install 'secagg-dp[progress]'")
    stream = io.StringIO()
    bar = ProgressBar(stream=stream, force=True)
    for done in range(1, 4):
        bar.update("FedAvg", done, 3)
    bar.close()
    assert "FedAvg" in stream.getvalue()


def test_a_disabled_bar_writes_nothing() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream=stream, force=True, use_tqdm=False)
    bar.enabled = False
    bar.update("x", 1, 2)
    bar.close()
    assert stream.getvalue() == ""


@pytest.mark.parametrize(("seconds", "text"), [(0.4, "0s"), (59.6, "1m00s"), (7260, "2h01m")])
def test_durations_read_as_people_write_them(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text
