#!/usr/bin/env bash
# Instructions per point of every benchmarked program, compiled (pool mode) and hand-written,
# counted by callgrind (repeatable on a shared machine, unlike timings; docs/performance.md).
#   scripts/where-time-goes.sh [build dir, default build/instructions]
# valgrind 3.19 decodes no AVX-512, so everything counted is built for x86-64-v3 (AVX2): the
# hand-written baselines (CMake FIELDFLOW_BASELINE_MARCH) in their own build folder, configured
# here from the release preset, and the generated modules (FIELDFLOW_JIT_MARCH). The counts are
# therefore those of an AVX2 machine wherever they are taken. Needs valgrind. Prints a Markdown
# table; the call_overhead rows are instructions per steady-state call of a 1-point program.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/instructions}
command -v valgrind >/dev/null || { echo "where-time-goes: valgrind is not installed" >&2; exit 1; }
cmake --preset release -B "$build" -DFIELDFLOW_BASELINE_MARCH=x86-64-v3 >/dev/null
cmake --build "$build" --target fieldflow_bench_instructions >&2
tool="$build/bench/fieldflow_bench_instructions"
export FIELDFLOW_JIT_MARCH=x86-64-v3
export FIELDFLOW_CACHE_DIR=${FIELDFLOW_CACHE_DIR:-$build/test-cache}  # compiled modules are reused
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# One thread: every instruction of a call runs on the calling thread, inside measured_call.
OMP_NUM_THREADS=1 valgrind --tool=callgrind --collect-atstart=no --toggle-collect=measured_call \
  --dump-after=measured_call --callgrind-out-file="$out/cg.%p" "$tool" > "$out/calls.txt" 2> "$out/valgrind.log" || {
  cat "$out/valgrind.log" >&2
  exit 1
}
# Each measured call leaves one dump, numbered in call order: cg.<pid>.1, .2, ..., holding that
# call's "summary: <instructions>".
base=$(ls "$out" | grep -E '^cg\.[0-9]+$' | head -1)
echo "| program | layout | variant | instructions / point | instructions / compulsory byte |"
echo "|---|---|---|---:|---:|"
i=1
while read -r program layout variant points bytes; do
  ir=$(awk '/^summary:/ {print $2}' "$out/$base.$i")
  awk -v p="$program" -v l="$layout" -v v="$variant" -v ir="$ir" -v n="$points" -v b="$bytes" \
    'BEGIN { printf "| %s | %s | %s | %.1f | %s |\n", p, l, v, ir / n, (b > 0 ? sprintf("%.2f", ir / b) : "–") }'
  i=$((i + 1))
done < "$out/calls.txt"
