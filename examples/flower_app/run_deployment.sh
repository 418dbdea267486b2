#!/usr/bin/env bash
# Start one flower-superlink and N flower-supernodes on 127.0.0.1 (insecure mode), run this app
# with secagg-dp's secure sum, kill one SuperNode mid-round, and stop every process at the end.
# Usage: examples/flower_app/run_deployment.sh [--nodes 4] [--rounds 2] [--kill-partition 2]
set -euo pipefail
cd "$(dirname "$0")"
exec python3 deploy.py "$@"
