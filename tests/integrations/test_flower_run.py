"""``flwr run .`` from the example app, as its README says: Flower's managed local SuperLink
with 4 simulated SuperNodes, the app running in the current environment. Slow tier (about 20 s
plus Ray's start); the SuperLink Flower leaves running is stopped by its process id."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("flwr", reason="the Flower tests need flwr (pip install 'secagg-dp[flower]')")
if shutil.which("flwr") is None:
    pytest.skip("the flwr command is not on PATH", allow_module_level=True)

pytestmark = pytest.mark.slow

APP_DIR = Path(__file__).resolve().parents[2] / "examples" / "flower_app"


def _processes_under(marker: str) -> list[int]:
    """Ids of the processes whose command line names ``marker`` (our private FLWR_HOME)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in command:
            found.append(int(entry.name))
    return found


@pytest.fixture
def flwr_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "flwr-home"
    try:
        yield home
    finally:
        for pid in _processes_under(str(home)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def test_flwr_run_dot_in_simulation_sums_every_round(tmp_path: Path, flwr_home: Path) -> None:
    app = tmp_path / "app"
    shutil.copytree(APP_DIR, app, ignore=shutil.ignore_patterns("__pycache__"))
    env = {
        **os.environ,
        "FLWR_HOME": str(flwr_home),
        "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
    }
    done = subprocess.run(
        [
            "flwr",
            "run",
            ".",
            "--federation-config",
            "num-supernodes=4",
            "--run-config",
            "num-server-rounds=2",
            "--stream",
        ],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = done.stdout + done.stderr
    assert "round 1: 4 of 4 nodes summed" in output, output[-3000:]
    assert "round 2: 4 of 4 nodes summed" in output, output[-3000:]
