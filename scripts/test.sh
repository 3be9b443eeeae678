#!/usr/bin/env bash
# Builds fieldflow with its tests and runs all of them: first the concurrency tests of the
# transient-memory layer under ThreadSanitizer (a Debug build, which also verifies the schedule
# after every lowering pass), then the whole suite through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

cmake --preset tsan -DFIELDFLOW_BUILD_BENCH=OFF >/dev/null
cmake --build --preset tsan --target test_runtime_memory test_runtime_compiled
export TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}"
FIELDFLOW_CACHE_DIR="$PWD/build/tsan/test-cache" build/tsan/tests/runtime/test_runtime_memory --gtest_brief=1
FIELDFLOW_CACHE_DIR="$PWD/build/tsan/test-cache" build/tsan/tests/runtime/test_runtime_compiled --gtest_brief=1

cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release "$@"
