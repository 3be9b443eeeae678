#!/usr/bin/env bash
# Everything of issue 10 that needs an NVIDIA GPU, in one go, for a session that has a device for a
# few minutes (build and test everything on the CPU first):
#   1. builds build/gpu (Release, CUDA, the benchmark): the CLI and the device tests only;
#   2. scripts/gpu-check.sh on it (its last line: "N passed, M failed");
#   3. fieldflow demo --backend cuda (every built-in program against the reference, every mode);
#   4. fieldflow bench --device cuda (GPU benchmark against hand-written CUDA and the device copy),
#      the JSON report and its tables.
# Logs and reports go to $OUT (a device run's output folder) or build/gpu/session. Prints a summary
# line per step; exits non-zero when a step failed. About 6-8 minutes on an H200 with 16 cores.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=build/gpu
out=${OUT:-$build/session}
mkdir -p "$out" "$build"
jobs=$(nproc 2>/dev/null || echo 4)
status=0
step() { echo "== $1 ($(date +%T))"; }

step "configure and build"
if [ "$(id -u)" = 0 ]; then scripts/install-deps.sh >"$out/install-deps.log" 2>&1; fi
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFIELDFLOW_WITH_CUDA=ON -DFIELDFLOW_BUILD_BENCH=ON \
     >"$out/configure.log" 2>&1 ||
   ! cmake --build "$build" -j "$jobs" --target fieldflow_cli test_cuda_device test_aot_cuda test_reference_cuda \
     test_cuda_codegen >"$out/build.log" 2>&1; then
  tail -n 60 "$out/configure.log" "$out/build.log" 2>/dev/null
  echo "build failed"
  exit 1
fi
nvidia-smi -L 2>&1 | tee "$out/nvidia-smi.txt"

step "scripts/gpu-check.sh"
FIELDFLOW_GPU_CHECK_BUILD=0 timeout 330 scripts/gpu-check.sh "$build" 2>&1 | tee "$out/gpu-check.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

export FIELDFLOW_CACHE_DIR="$PWD/$build/session-cache"
step "fieldflow demo --backend cuda"
timeout 180 "$build/fieldflow" demo --backend cuda 2>&1 | tee "$out/demo-cuda.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

step "fieldflow bench --device cuda"
timeout 300 "$build/fieldflow" bench --device cuda --wait-idle 10 --json "$out/bench-gpu.json" \
  --table "$out/bench-gpu.md" >"$out/bench-gpu.log" 2>&1
[ $? -eq 0 ] || status=1
tail -n 40 "$out/bench-gpu.log"

echo "gpu-session: $([ $status -eq 0 ] && echo "every step passed" || echo "a step failed"); logs in $out"
exit $status
