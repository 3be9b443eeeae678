#!/usr/bin/env bash
# Builds and runs everything of the CUDA backend that needs a device (docs/cuda.md), on a machine
# with an NVIDIA GPU and the CUDA toolkit. Ends with the line "N passed, M failed" (tests that
# skip count as neither; their number is printed before).
#   test_cuda_device     every built-in program bitwise equal to the reference in all four
#                        transient-memory modes, the allocation API of each mode counted through
#                        the allocation route, generated source inspected, allocator once per
#                        instance (device cuda, alignment >= 256), a throwing allocator, too small /
#                        misaligned / wrong-device workspaces, the instance's stream, in-kernel failures;
#                        fields in device memory used in place (no copies), memory elsewhere than a
#                        field says refused, device outputs restored after a failure, per-call
#                        streams, the C API's cuda handles, ahead-of-time cuda programs
#   test_aot_cuda        an ahead-of-time library's embedded image loads on the device
#   test_reference_cuda  the whole language suite on the device, bitwise against the reference
#                        (the host emulation is left out here: test.sh runs it)
#   test_cuda_codegen    NVRTC for the device's own architecture, the launch grid
# Usage: scripts/gpu-check.sh [build-dir]   (default build/gpu-check; about 3-4 minutes on an H200)
# FIELDFLOW_GPU_CHECK_SECONDS (default 300): the time the test binaries have, together; one that
# runs past what is left is stopped and counted as a failure, and the others still report.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${1:-build/gpu-check}
targets=(test_cuda_device test_aot_cuda test_reference_cuda test_cuda_codegen)

gpu_visible=1
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  gpu_visible=0
  echo "gpu-check: no NVIDIA GPU visible (nvidia-smi -L fails); the device tests would only skip"
fi
# Packages only when building here (a prebuilt folder needs none; a device machine may be offline).
if [ "${FIELDFLOW_GPU_CHECK_BUILD:-1}" != 0 ] && [ "$(id -u)" = 0 ]; then scripts/install-deps.sh; fi

jobs=$(nproc 2>/dev/null || echo 4)
mkdir -p "$build"
# FIELDFLOW_GPU_CHECK_BUILD=0: use the binaries already in the build folder (e.g. build/release).
if [ "${FIELDFLOW_GPU_CHECK_BUILD:-1}" = 0 ]; then
  :
elif ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFIELDFLOW_WITH_CUDA=ON \
     -DFIELDFLOW_BUILD_BENCH=OFF >"$build/configure.log" 2>&1; then
  cat "$build/configure.log"
  echo "0 passed, 1 failed"
  exit 1
elif ! cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$build/build.log" 2>&1; then
  tail -n 60 "$build/build.log"
  echo "0 passed, 1 failed"
  exit 1
fi

export FIELDFLOW_CACHE_DIR="$PWD/$build/test-cache" FIELDFLOW_TEST_NO_EMULATION=1
# Left out here: whether the AOT library's embedded image is byte for byte what NVRTC makes now.
# The library was built where scripts/test.sh checks that; this machine's NVRTC may be another
# build of the same release, whose bytes differ.
declare -A filter=([test_aot_cuda]="-AotCuda.TheEmbeddedImageIsNvrtcsOutputForTheRegeneratedSource")
budget=${FIELDFLOW_GPU_CHECK_SECONDS:-300}
start=$SECONDS
passed=0 failed=0 skipped=0 device_passed=0
for t in "${targets[@]}"; do
  exe=$(find "$build/tests" -type f -name "$t" -perm -u+x | head -n 1)
  if [ -z "$exe" ]; then
    echo "gpu-check: $t was not built"
    failed=$((failed + 1))
    continue
  fi
  left=$((budget - (SECONDS - start)))
  if [ "$left" -lt 10 ]; then
    echo "gpu-check: $t not run: the ${budget} s of FIELDFLOW_GPU_CHECK_SECONDS are spent"
    failed=$((failed + 1))
    continue
  fi
  log="$build/$t.log"
  echo "== $t"
  timeout "$left" "$exe" --gtest_brief=1 ${filter[$t]:+--gtest_filter=${filter[$t]}} >"$log" 2>&1
  status=$?
  grep -E '^\[  (FAILED|SKIPPED) |^\[ (NVRTC|DEVICE)|Failure' "$log" | head -n 40
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
  # --gtest_brief prints no count of failed tests, only a line per failed test.
  f=$(grep -E '^\[  FAILED  \] [A-Za-z_]' "$log" | awk '{print $4}' | sort -u | wc -l)
  p=${p:-0} s=${s:-0}
  [ "$status" -eq 124 ] && echo "gpu-check: $t ran past the $left s left; stopped"
  # A crash, a timeout or a failure outside any test (the NVRTC batch at exit) counts as one failure.
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; tail -n 20 "$log"; fi
  echo "$t: $p passed, $f failed, $s skipped"
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  [ "$t" = test_cuda_device ] && device_passed=$p
done
# A GPU that the tests cannot use (a driver too old, a device they cannot see) makes every device
# test skip: with a GPU in sight that is a failure, not a pass.
if [ "$gpu_visible" = 1 ] && [ "$device_passed" -eq 0 ]; then
  echo "gpu-check: nvidia-smi sees a GPU, but no test of test_cuda_device ran on it (the skips above say why)"
  failed=$((failed + 1))
fi
echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
