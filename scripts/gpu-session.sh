#!/usr/bin/env bash
# Everything of issue 10 that needs an NVIDIA GPU, for a session that has a device for a few
# minutes (build and test everything on the CPU first). Steps, all by default, or those named:
#   build  builds build/gpu (Release, CUDA, the benchmark): the CLI and the device tests only;
#   check  scripts/gpu-check.sh on it (its last line: "N passed, M failed");
#   demo   fieldflow demo --backend cuda (every built-in program against the reference, every mode);
#   bench  fieldflow bench --device cuda (against hand-written CUDA and the device copy): the JSON
#          report and its tables.
# A device command limited to 10 minutes can run `scripts/gpu-session.sh build check`, then
# `scripts/gpu-session.sh demo bench` (build/gpu stays on the machine between calls).
# Logs and reports go to $OUT (a device run's output folder) or build/gpu/session. Prints a summary
# line per step; exits non-zero when a step failed. Estimated (never yet run on a device): build
# 2-3 min on 16 cores, check 3-4 min, demo under 1 min, bench 2-3 min.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=build/gpu
out=${OUT:-$build/session}
mkdir -p "$out" "$build"
jobs=$(nproc 2>/dev/null || echo 4)
status=0
step() { echo "== $1 ($(date +%T))"; }

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(build check demo bench)
wants() { [[ " ${steps[*]} " == *" $1 "* ]]; }
for s in "${steps[@]}"; do
  case $s in build|check|demo|bench) ;; *) echo "gpu-session: unknown step '$s' (expected build, check, demo, bench)"; exit 2 ;; esac
done

if wants build; then
step "configure and build"
# Missing packages only (idempotent); bounded, since a device machine may be offline.
if [ "$(id -u)" = 0 ]; then timeout 120 scripts/install-deps.sh >"$out/install-deps.log" 2>&1; fi
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFIELDFLOW_WITH_CUDA=ON -DFIELDFLOW_BUILD_BENCH=ON \
     >"$out/configure.log" 2>&1 ||
   ! cmake --build "$build" -j "$jobs" --target fieldflow_cli test_cuda_device test_aot_cuda test_reference_cuda \
     test_cuda_codegen >"$out/build.log" 2>&1; then
  tail -n 60 "$out/configure.log" "$out/build.log" 2>/dev/null
  echo "build failed"
  exit 1
fi
fi
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | tee "$out/nvidia-smi.txt"

if wants check; then
  step "scripts/gpu-check.sh"
  FIELDFLOW_GPU_CHECK_BUILD=0 timeout 330 scripts/gpu-check.sh "$build" 2>&1 | tee "$out/gpu-check.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

export FIELDFLOW_CACHE_DIR="$PWD/$build/session-cache"
if wants demo; then
  step "fieldflow demo --backend cuda"
  timeout 180 "$build/fieldflow" demo --backend cuda 2>&1 | tee "$out/demo-cuda.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

if wants bench; then
  step "fieldflow bench --device cuda"
  timeout 300 "$build/fieldflow" bench --device cuda --wait-idle 10 --json "$out/bench-gpu.json" \
    --table "$out/bench-gpu.md" >"$out/bench-gpu.log" 2>&1
  [ $? -eq 0 ] || status=1
  tail -n 40 "$out/bench-gpu.log"
fi

echo "gpu-session: $([ $status -eq 0 ] && echo "every step passed" || echo "a step failed"); logs in $out"
exit $status
