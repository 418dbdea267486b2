"""The ``secagg-dp sum`` command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from protocols.cli import build_parser, main
from secagg import TrustStore
from secagg.identity import load_identity


def test_sum_reports_correct_result(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        [
            "sum",
            "--clients",
            "12",
            "--dim",
            "50",
            "--dropout",
            "0.2",
            "--neighbors",
            "4",
            "--threshold",
            "2",
            "--dropout-phase",
            "share_keys",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "10 survivors, 2 dropped" in out
    assert "equals the plaintext sum of the survivors: yes" in out
    for phase in ("advertise_keys", "share_keys", "masked_input", "unmask"):
        assert phase in out


def test_sum_json_and_mixed_dropouts(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        [
            "sum",
            "--clients",
            "30",
            "--dim",
            "64",
            "--dropout",
            "0.1",
            "--dropout-phase",
            "mixed",
            "--neighbors",
            "auto",
            "--bits",
            "20",
            "--json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["equals_plaintext_sum"] is True
    assert report["dropped"] + report["survivors"] == 30
    # Bit-packing: a masked input of 64 entries × 20 bits is 160 bytes plus a constant header.
    assert report["upload_bytes_per_client"]["masked_input"] == 160 + 53


def test_sum_clean_abort_and_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["sum", "--clients", "5", "--dim", "4", "--dropout", "0.6", "--threshold", "3"]) == 3
    )
    assert "aborted cleanly" in capsys.readouterr().out
    assert main(["sum", "--clients", "5", "--dim", "4", "--neighbors", "3"]) == 2
    assert "even" in capsys.readouterr().err
    assert main(["sum", "--clients", "5", "--dim", "4", "--bits", "70"]) == 2
    with pytest.raises(SystemExit):
        main(["sum", "--dropout", "1.5"])


def test_console_script_entry_point() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "protocols.cli", "sum", "--clients", "4", "--dim", "8", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr


def test_sum_reports_the_threat_model_and_its_signatures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["sum", "--clients", "12", "--dim", "8", "--json"]
    assert main(argv) == 0
    malicious = json.loads(capsys.readouterr().out)
    assert malicious["threat_model"] == "malicious" and malicious["max_colluding"] == 5  # t − 1
    # 12 advertisements + 11 consistency signatures (one client drops before masking).
    assert malicious["signatures"] == 12 + 11 and malicious["signature_verifications"] > 0
    assert "consistency_check" in malicious["upload_bytes_per_client"]
    assert main([*argv, "--threat-model", "semi-honest"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["signatures"] == plain["signature_verifications"] == 0
    assert "consistency_check" not in plain["upload_bytes_per_client"]
    assert (
        main([*argv, "--threat-model", "semi-honest", "--dropout-phase", "consistency_check"]) == 2
    )
    assert "no consistency_check phase" in capsys.readouterr().err


def test_keys_writes_identities_and_a_trust_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "--clients", "3", "--out", str(tmp_path / "keys")]) == 0
    assert "3 identity keys" in capsys.readouterr().out
    store = TrustStore.from_file(tmp_path / "keys" / "trust-store.json")
    for u in (1, 2, 3):
        key = load_identity(tmp_path / "keys" / f"identity-{u}.key")
        assert store.public_key(u) == key.public
        assert (tmp_path / "keys" / f"identity-{u}.key").stat().st_mode & 0o077 == 0


def test_sum_runs_a_session_of_several_sums(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["sum", "--clients", "8", "--dim", "20", "--dropout", "0.125", "--threshold", "3"]
    assert main([*args, "--sums", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["equals_plaintext_sum"] is True
    further = report["further_sums"]
    assert [row["sum"] for row in further] == [2, 3]
    # The client that dropped in sum 1 stays out of the session.
    assert all(row["survivors"] == 7 and row["equals_plaintext_sum"] for row in further)
    assert main([*args, "--sums", "2"]) == 0
    assert "2 sums over one key setup" in capsys.readouterr().out
    assert main([*args, "--sums", "256"]) == 2
    assert "--sums must lie in [1, 255]" in capsys.readouterr().err


def test_version_and_defaults_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_status:
        build_parser().parse_args(["--version"])
    assert exit_status.value.code == 0 and capsys.readouterr().out.startswith("secagg-dp ")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sum", "--help"])
    assert "(default: 100)" in capsys.readouterr().out  # --clients
