#!/usr/bin/env bash
# Instructions per point of every benchmarked program, compiled (pool mode) and hand-written,
# counted by callgrind (repeatable on a shared machine, unlike timings; docs/performance.md).
#   scripts/where-time-goes.sh [build dir, default build/release]
# Needs valgrind and the fieldflow_bench_instructions target. Prints a Markdown table; the
# call_overhead rows are instructions per steady-state call of a 1-point program.
set -euo pipefail
build=${1:-build/release}
tool="$build/bench/fieldflow_bench_instructions"
export FIELDFLOW_CACHE_DIR=${FIELDFLOW_CACHE_DIR:-$build/test-cache}  # compiled modules are reused
[ -x "$tool" ] || { echo "where-time-goes: build $tool first (cmake --build --preset release --target fieldflow_bench_instructions)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "where-time-goes: valgrind is not installed" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# One thread: every instruction of a call runs on the calling thread, inside measured_call.
OMP_NUM_THREADS=1 valgrind --tool=callgrind --collect-atstart=no --toggle-collect=measured_call \
  --dump-after=measured_call --callgrind-out-file="$out/cg.%p" "$tool" > "$out/calls.txt" 2> "$out/valgrind.log" || {
  # The benchmark and the JIT compile for -march=native; valgrind 3.19 decodes no AVX-512.
  if grep -q "unhandled instruction bytes" "$out/valgrind.log"; then
    echo "where-time-goes: valgrind cannot decode an instruction of the -march=native build (AVX-512 on this" \
         "CPU: $(grep -q avx512f /proc/cpuinfo && echo avx512f || echo unknown)); count on a machine without it" >&2
  else
    cat "$out/valgrind.log" >&2
  fi
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
