#!/usr/bin/env bash
# Builds fieldflow with its tests and runs all of them through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release "$@"
