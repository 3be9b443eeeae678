#!/usr/bin/env bash
# Builds fieldflow with its tests and runs all of them: first the concurrency tests of the
# transient-memory layer under ThreadSanitizer (a Debug build, which also verifies the schedule
# after every lowering pass), then the whole suite under AddressSanitizer, UndefinedBehaviorSanitizer
# and LeakSanitizer, then the whole suite (optimised) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Each stage says when it starts, so a slow CI run shows where its time went.
stage() { echo "== test.sh: $1 (at ${SECONDS} s)"; }
stage "ThreadSanitizer"

cmake --preset tsan -DFIELDFLOW_BUILD_BENCH=OFF >/dev/null
cmake --build --preset tsan --target test_runtime_memory test_runtime_compiled
export TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}"
FIELDFLOW_CACHE_DIR="$PWD/build/tsan/test-cache" build/tsan/tests/runtime/test_runtime_memory --gtest_brief=1
FIELDFLOW_CACHE_DIR="$PWD/build/tsan/test-cache" build/tsan/tests/runtime/test_runtime_compiled --gtest_brief=1

# AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer over the whole suite: the library,
# every test and the generated modules, which the JIT compiles with the same sanitizers (their own
# cache entries: the flags are part of the key). -O1 with assertions (CMakePresets.json). Not built
# under a sanitizer, each CMake file says why: the steady-state allocation tests (they replace
# malloc) and the install test (a plain consumer cannot load a sanitized library).
stage "AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer"
cmake --preset asan >/dev/null
cmake --build --preset asan
export ASAN_OPTIONS="detect_leaks=1 ${ASAN_OPTIONS:-}" UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1 ${UBSAN_OPTIONS:-}"
ctest --preset asan "$@"
unset ASAN_OPTIONS UBSAN_OPTIONS

stage "release"
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release "$@"
stage "Python"
scripts/test-python.sh  # the Python package: pip install ./python into a venv, then pytest
