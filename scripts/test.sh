#!/usr/bin/env bash
# Builds fieldflow with its tests and runs all of them: first the concurrency tests of the
# transient-memory layer under ThreadSanitizer (a Debug build, which also verifies the schedule
# after every lowering pass), then the compiled-program tests under AddressSanitizer and
# UndefinedBehaviorSanitizer, then the whole suite through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

cmake --preset tsan -DFIELDFLOW_BUILD_BENCH=OFF >/dev/null
cmake --build --preset tsan --target test_runtime_memory test_runtime_compiled
export TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}"
FIELDFLOW_CACHE_DIR="$PWD/build/tsan/test-cache" build/tsan/tests/runtime/test_runtime_memory --gtest_brief=1
FIELDFLOW_CACHE_DIR="$PWD/build/tsan/test-cache" build/tsan/tests/runtime/test_runtime_compiled --gtest_brief=1

# AddressSanitizer + UndefinedBehaviorSanitizer over the runtime, the compiled-vs-reference tests
# that run with exactly sized, guarded workspaces (generated modules are plain -O3 code; the
# guards catch their writes past a workspace, the sanitizers everything on the library's side)
# and the views over host memory (padding around every view is checked after each call), and
# the C API.
cmake --preset asan -DFIELDFLOW_BUILD_BENCH=OFF >/dev/null
cmake --build --preset asan --target test_runtime_compiled test_column_groups test_views test_capi
export ASAN_OPTIONS="detect_leaks=1 ${ASAN_OPTIONS:-}" UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1 ${UBSAN_OPTIONS:-}"
FIELDFLOW_CACHE_DIR="$PWD/build/asan/test-cache" build/asan/tests/runtime/test_runtime_compiled --gtest_brief=1
FIELDFLOW_CACHE_DIR="$PWD/build/asan/test-cache" build/asan/tests/codegen/test_column_groups --gtest_brief=1
FIELDFLOW_CACHE_DIR="$PWD/build/asan/test-cache" build/asan/tests/runtime/test_views --gtest_brief=1
# The C API: handle registry and lifetimes, callbacks (allocators, re-entry), views from C.
FIELDFLOW_CACHE_DIR="$PWD/build/asan/test-cache" build/asan/tests/capi/test_capi --gtest_brief=1

cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release "$@"
scripts/test-python.sh  # the Python package: pip install ./python into a venv, then pytest
