#!/usr/bin/env bash
# Differential fuzzing of the compiled backend against the reference executor for N MINUTES
# (default 10): builds fieldflow_fuzz_programs (release) and runs it from a random first seed.
# Extra arguments go to the fuzzer, e.g. `scripts/fuzz-programs.sh 5 --seed 1000`.
# Every failure is printed with its seed and a shrunk, minimal program; exit status 1 if any.
# See docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-10}"
shift || true
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target fieldflow_fuzz_programs
# A fresh first seed per run unless one is given (runs then explore different programs).
case " $* " in
  *" --seed"*) seed_args=() ;;
  *) seed_args=(--seed "$(( $(date +%s) % 1000000 * 1000 ))") ;;
esac
export FIELDFLOW_CACHE_DIR="${FIELDFLOW_CACHE_DIR:-$PWD/build/release/fuzz-cache}"
exec build/release/tests/fuzz/fieldflow_fuzz_programs --minutes "$minutes" "${seed_args[@]}" "$@"
