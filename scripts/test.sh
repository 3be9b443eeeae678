#!/usr/bin/env bash
# Builds fieldflow with its tests and runs all of them: first the concurrency tests of the
# transient-memory layer under ThreadSanitizer (a Debug build, which also verifies the schedule
# after every lowering pass), then generated parallel code under ThreadSanitizer (a clang build),
# then the memory-handling tests under AddressSanitizer,
# UndefinedBehaviorSanitizer and LeakSanitizer, then the whole suite (optimised) through CTest, then
# the Python package's tests.
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

# ThreadSanitizer over the generated modules too (a clang build whose modules run on libomp,
# annotated by Archer): the check that a race in a module is reported, the compiled-program tests,
# and 10 fuzzer programs at a fixed seed with 1-4 threads (scripts/race.sh; longer runs by hand).
stage "ThreadSanitizer over generated modules (clang, libomp + Archer)"
scripts/race.sh 10 --seed 1

# AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer, the library and the generated
# modules alike (the JIT compiles them with the same sanitizers into their own cache entries: the
# flags are part of the key), -O1 with assertions (CMakePresets.json), over the tests that exercise
# the most memory handling: compiled programs against the reference with exactly sized, guarded
# workspaces, column groups, the language features through the CPU generator (its loop versions:
# full-row, unit-factor and unswitched copies), views over host memory (padding checked after each
# call), the C API, the cache and toolchain under attack and fault injection, the lowering passes (their IR
# rewriting: the whole suite under ASan found a use after free in fuse_kernels), and the CUDA runner
# against an emulated CUDA runtime (its staging of descriptors and copies), and the GPU benchmark's
# hand-written CUDA kernels under their emulated grid (a read past a field's halo), and the whole language
# suite through the CPU backend against the reference (both sides under UBSan: integer overflow in
# a program's arithmetic must wrap, never be undefined), and through the CUDA generator's kernels
# under an emulated launch grid (each thread's index arithmetic, a consumer fused into a scan's
# level loop writing only inside its box, exact fenced workspaces). The two share the suite's
# objects (tests/reference/run_program.h): about 5 minutes to build, 2.5 to run. The whole suite under ASan
# (`ctest --preset asan`) builds for about an hour on 2 cores, past CI's budget: run it by hand.
# Last, 15 random programs (seeds 201-215, after the 200 the release suite's FuzzBatch checks)
# against the reference with every check in this process, so a sanitizer report ends the run: the
# shapes nobody wrote a test for (a field cut to zero levels read at a dynamic offset, a table row
# without neighbours) are where ASan and UBSan found defects (docs/reliability.md). About 2 minutes.
stage "AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer"
cmake --preset asan >/dev/null
asan_tests=(runtime/test_runtime_compiled codegen/test_column_groups codegen/test_codegen runtime/test_views capi/test_capi
            toolchain/test_toolchain runtime/test_runtime_faults passes/test_passes bench/test_cuda_baselines
            reference/test_reference_cpu reference/test_reference_cuda)
if grep -q "^FIELDFLOW_WITH_CUDA:BOOL=ON" build/asan/CMakeCache.txt; then asan_tests+=(cuda/test_cuda_runner_emulated); fi
cmake --build --preset asan --target "${asan_tests[@]##*/}" fieldflow_fuzz_programs
export ASAN_OPTIONS="detect_leaks=1 ${ASAN_OPTIONS:-}" UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1 ${UBSAN_OPTIONS:-}"
for t in "${asan_tests[@]}"; do
  FIELDFLOW_CACHE_DIR="$PWD/build/asan/test-cache" "build/asan/tests/$t" --gtest_brief=1
done
FIELDFLOW_CACHE_DIR="$PWD/build/asan/test-cache" build/asan/tests/fuzz/fieldflow_fuzz_programs \
  --seed 201 --count 15 --in-process --shrink-attempts 0
unset ASAN_OPTIONS UBSAN_OPTIONS

stage "release"
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release "$@"
stage "Python"
scripts/test-python.sh  # the Python package: pip install ./python into a venv, then pytest
