#!/usr/bin/env bash
# Data races in generated parallel code, under ThreadSanitizer (docs/reliability.md, "Races in
# generated modules"). The race preset builds fieldflow with clang-14 and TSan; its JIT compiles
# the modules with the same clang and -fsanitize=thread, and they run on libomp, whose barriers and
# reductions Archer (libarcher.so) annotates for TSan. Runs, in that build:
#   1. the toolchain's check that a race in a module is reported and a reduction is not (it also
#      fails if Archer is not loaded: libomp's own synchronisation would read as races);
#   2. the compiled-program tests (every memory mode, thread counts 1-4, concurrent calls);
#   3. the differential fuzzer over PROGRAMS programs (default 20) from SEED (default a fresh one
#      per run), every check in this process (TSan and fork mix badly), CPU paths only.
# A race ends the run with TSan's report (halt_on_error).
#   scripts/race.sh [PROGRAMS] [fuzzer arguments, e.g. --seed 1000 or --minutes 10]
set -euo pipefail
cd "$(dirname "$0")/.."
programs="${1:-20}"
shift || true
case "$programs" in
  ''|*[!0-9]*) echo "scripts/race.sh: the first argument is the number of programs, got '$programs'" >&2; exit 2 ;;
esac
scripts/install-deps.sh
cmake --preset race >/dev/null
cmake --build --preset race --target test_toolchain test_runtime_compiled fieldflow_fuzz_programs
export OMP_TOOL_LIBRARIES=/usr/lib/llvm-14/lib/libarcher.so
export TSAN_OPTIONS="halt_on_error=1 ignore_noninstrumented_modules=1 ${TSAN_OPTIONS:-}"
export FIELDFLOW_CACHE_DIR="${FIELDFLOW_CACHE_DIR:-$PWD/build/race/test-cache}"
build/race/tests/toolchain/test_toolchain --gtest_brief=1 --gtest_filter='CompilerConfigTest.SanitizedLibraryCompilesSanitizedModules'
build/race/tests/runtime/test_runtime_compiled --gtest_brief=1
case " $* " in
  *" --seed"*) seed_args=() ;;
  *) seed_args=(--seed "$(( $(date +%s) % 1000000 * 1000 ))") ;;
esac
exec build/race/tests/fuzz/fieldflow_fuzz_programs --count "$programs" --no-cuda-emulation --in-process "${seed_args[@]}" "$@"
