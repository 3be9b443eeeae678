#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each (default 60), one after the other: builds them
# (`cmake --preset fuzz`: clang, ASan + UBSan, coverage of the whole library), starts each from its
# seed corpus in tests/fuzz/libfuzzer/corpus/<target>/ plus what earlier runs found
# (build/fuzz/corpus/<target>/), and prints executions, coverage and findings per target.
# A crashing input is saved as build/fuzz/findings/<target>/crash-*; reproduce it with
#   build/fuzz/tests/fuzz/libfuzzer/<target> build/fuzz/findings/<target>/crash-...
# Extra arguments go to every target (e.g. -jobs=2); FIELDFLOW_FUZZ_TARGETS="t1 t2" runs only those.
# Exit status 1 if any target found something.
# See docs/reliability.md. (The differential program fuzzer is scripts/fuzz-programs.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=(fuzz_program_builder fuzz_call_binding fuzz_c_api fuzz_memory_options fuzz_cache_dir)
if [ -n "${FIELDFLOW_FUZZ_TARGETS:-}" ]; then read -r -a targets <<<"$FIELDFLOW_FUZZ_TARGETS"; fi
scripts/install-deps.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target "${targets[@]}"
export FIELDFLOW_CACHE_DIR="${FIELDFLOW_CACHE_DIR:-$PWD/build/fuzz/jit-cache}"
# A fuzzed size may ask for more memory than exists: that is a typed error, not an abort.
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1 ${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1 ${UBSAN_OPTIONS:-}"
status=0
summary=()
for t in "${targets[@]}"; do
  corpus="build/fuzz/corpus/$t" findings="build/fuzz/findings/$t" log="build/fuzz/logs/$t.log"
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  echo "== $t: $seconds s"
  rc=0
  "build/fuzz/tests/fuzz/libfuzzer/$t" "$corpus" "tests/fuzz/libfuzzer/corpus/$t" -max_total_time="$seconds" \
    -timeout=60 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$findings/" "$@" >"$log" 2>&1 || rc=$?
  stats=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
  crashes=$(ls "$findings" | wc -l)
  summary+=("$(printf '%-22s execs %-9s %s  findings %s (exit %s)' "$t" "${execs:-?}" \
    "$(echo "$stats" | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)" "$crashes" "$rc")")
  if [ "$rc" -ne 0 ]; then status=1; grep -E 'ERROR|fuzz_[a-z_]+:|SUMMARY' "$log" | head -5 || true; fi
done
echo "== summary ($seconds s per target; logs in build/fuzz/logs/)"
printf '%s\n' "${summary[@]}"
exit $status
