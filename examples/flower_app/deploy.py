"""Run the app on Flower's deployment engine: real processes on 127.0.0.1, then stop them.

One ``flower-superlink`` and ``--nodes`` ``flower-supernode`` processes (insecure mode, loopback
only), ``flwr run`` of this app, the ServerApp's progress followed through its results file;
``--kill-partition P`` kills that SuperNode (SIGKILL, by pid) as soon as the first round's
``--kill-at`` phase starts, and the round must still complete. Every process is started in its
own session and its whole group is stopped at the end, whatever happens; a ``--deadline`` bounds
the run.

    python examples/flower_app/deploy.py --nodes 4 --rounds 2 --kill-partition 2

TLS: drop ``--insecure``; start the SuperLink with ``--ssl-ca-certfile``, ``--ssl-certfile``
and ``--ssl-keyfile``, each SuperNode with ``--root-certificates <ca.crt>``, and give the
connection in ``$FLWR_HOME/config.toml`` ``root-certificates = "<ca.crt>"`` instead of
``insecure = true`` (Flower's "Enable TLS connections" guide).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from secagg.identity import write_identities

APP_DIR = Path(__file__).resolve().parent
HOST = "127.0.0.1"
CONNECTION = "secagg-local"


@dataclass
class Deployment:
    """The processes of one local deployment and where their logs go."""

    workdir: Path
    port: int
    env: dict[str, str]
    superlink: subprocess.Popen[bytes] | None = None
    supernodes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    killed: list[int] = field(default_factory=list)

    @property
    def results_file(self) -> Path:
        return self.workdir / "results.jsonl"

    def events(self) -> list[dict[str, Any]]:
        """The ServerApp's JSON lines so far."""
        if not self.results_file.exists():
            return []
        lines = self.results_file.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, deadline: float) -> None:
    stop = time.monotonic() + deadline
    while time.monotonic() < stop:
        with socket.socket() as probe, contextlib.suppress(OSError):
            probe.settimeout(0.5)
            probe.connect((HOST, port))
            return
        time.sleep(0.3)
    raise TimeoutError(f"nothing listens on {HOST}:{port} after {deadline} s")


def _start(deployment: Deployment, name: str, command: list[str]) -> subprocess.Popen[bytes]:
    log = open(deployment.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=deployment.env,
        cwd=deployment.workdir,
        start_new_session=True,  # its own process group: stopping it stops its children too
    )


def _stop(process: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """SIGTERM the process's group, SIGKILL it after ``grace`` seconds."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # children the group leader left behind
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(grace)


def _executable(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found: pip install 'secagg-dp[flower]'")
    return found


TASK_POLL_ENV = "FLWR_SUPEREXEC_TASK_POLL_INTERVAL"  # Flower 1.42: 1 s unless set (≥ 0.01)


@contextlib.contextmanager
def deployment(
    nodes: int,
    *,
    startup_deadline: float = 60.0,
    keep_logs: bool = False,
    task_poll_interval: float | None = 0.1,
) -> Iterator[Deployment]:
    """A SuperLink and ``nodes`` SuperNodes on 127.0.0.1, stopped on exit (and their working
    directory removed unless ``keep_logs``).

    ``task_poll_interval``: seconds between a SuperExec's asks for a task to launch (Flower's
    ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``, 1 s by default; ``None`` leaves the environment's) —
    each message to a node waits for one such ask before its ClientApp process starts.
    """
    workdir = Path(tempfile.mkdtemp(prefix="secagg-flower-"))
    port = free_port()
    env = dict(os.environ, FLWR_HOME=str(workdir / "flwr-home"), PYTHONUNBUFFERED="1")
    if task_poll_interval is not None:
        env[TASK_POLL_ENV] = str(task_poll_interval)
    home = Path(env["FLWR_HOME"])
    home.mkdir()
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "{CONNECTION}"\n\n'
        f'[superlink.{CONNECTION}]\naddress = "{HOST}:{port}"\ninsecure = true\n',
        encoding="utf-8",
    )
    current = Deployment(workdir, port, env)
    # Each SuperNode's identity (client id = partition + 1) and the trust store, provisioned
    # here as an operator would: the key reaches its node through the node's own config.
    keys = workdir / "keys"
    write_identities(keys, range(1, nodes + 1))
    try:
        current.superlink = _start(
            current,
            "superlink",
            [
                _executable("flower-superlink"),
                "--insecure",
                "--host",
                HOST,
                "--port",
                str(port),
                "--database",
                str(workdir / "superlink.db"),
                "--disable-runtime-dependency-installation",
            ],
        )
        wait_for_port(port, startup_deadline)
        for partition in range(nodes):
            current.supernodes[partition] = _start(
                current,
                f"supernode-{partition}",
                [
                    _executable("flower-supernode"),
                    "--insecure",
                    "--superlink",
                    f"{HOST}:{port}",
                    "--host",
                    HOST,
                    "--port",
                    str(free_port()),
                    "--node-config",
                    f"partition-id={partition} num-partitions={nodes} "
                    f"secagg-dp-identity='{keys / f'identity-{partition + 1}.key'}' "
                    f"secagg-dp-trust-store='{keys / 'trust-store.json'}'",
                ],
            )
        yield current
    finally:
        for process in current.supernodes.values():
            _stop(process)
        if current.superlink is not None:
            _stop(current.superlink)
        if not keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)


def kill_supernode(current: Deployment, partition: int) -> None:
    """SIGKILL one SuperNode and its children (a machine that vanishes mid-round)."""
    process = current.supernodes[partition]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)
    current.killed.append(partition)


def run_app(
    current: Deployment,
    *,
    rounds: int,
    nodes: int,
    phase_timeout: float = 20.0,
    kill_partition: int | None = None,
    kill_at: str = "share_keys",
    deadline: float = 240.0,
    extra_config: str = "",
) -> list[dict[str, Any]]:
    """``flwr run`` this app on the deployment; follow it until done; return its events."""
    config = (
        f"num-server-rounds={rounds} min-nodes={nodes} phase-timeout={phase_timeout} "
        f"results-file='{current.results_file}' keys-dir='{current.workdir / 'keys'}' "
        f"{extra_config}"
    )
    started = subprocess.run(
        [_executable("flwr"), "run", str(APP_DIR), CONNECTION, "--run-config", config],
        env=current.env,
        cwd=current.workdir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if started.returncode != 0:
        raise RuntimeError(f"flwr run failed: {started.stdout}\n{started.stderr}")
    stop = time.monotonic() + deadline
    while time.monotonic() < stop:
        events = current.events()
        due = any(
            e["event"] == "phase" and e["round"] == 1 and e["phase"] == kill_at for e in events
        )
        if due and kill_partition is not None and kill_partition not in current.killed:
            kill_supernode(current, kill_partition)
        if any(e["event"] in ("done", "error") for e in events):
            return events
        time.sleep(0.2)
    raise TimeoutError(f"the run did not finish in {deadline} s; logs in {current.workdir}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kill-partition", type=int, default=None)
    parser.add_argument("--kill-at", default="share_keys")
    parser.add_argument("--phase-timeout", type=float, default=20.0)
    parser.add_argument("--deadline", type=float, default=300.0)
    args = parser.parse_args(argv)
    with deployment(args.nodes, keep_logs=True) as current:
        events = run_app(
            current,
            rounds=args.rounds,
            nodes=args.nodes,
            phase_timeout=args.phase_timeout,
            kill_partition=args.kill_partition,
            kill_at=args.kill_at,
            deadline=args.deadline,
        )
        for event in events:
            if event["event"] == "round":
                print(
                    f"round {event['round']}: survivors {event.get('survivors')}, dropped "
                    f"{event.get('dropped')}, {event['seconds']:.2f} s"
                )
            elif event["event"] in ("done", "error"):
                print(event)
        print(f"logs: {current.workdir}")
        return 0 if events and events[-1]["event"] == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
