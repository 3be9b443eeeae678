#!/usr/bin/env bash
# Builds fieldflow (optimised) and runs the main job: `fieldflow demo`. Extra arguments go to demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target fieldflow_cli
./build/release/fieldflow demo "$@"
