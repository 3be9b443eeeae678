#!/usr/bin/env bash
# The soak run for MINUTES (default 10): a mix of compiled programs called in every memory mode,
# with 1, 2 and 4 threads, two grid sizes, external instances sharing one caller workspace, and
# now and then a compile from another process into the same cache. Checks results against the
# reference executor, allocation counters, resident memory, open file descriptors and cache
# entries after warm-up, and prints a summary (tests/soak/soak_main.cpp; docs/reliability.md).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-10}"
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target fieldflow_soak
export FIELDFLOW_CACHE_DIR="${FIELDFLOW_CACHE_DIR:-$PWD/build/release/soak-cache}"
exec build/release/tests/soak/fieldflow_soak --seconds "$(( minutes * 60 ))"
