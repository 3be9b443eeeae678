#!/usr/bin/env bash
# Everything of the CUDA backend that needs an NVIDIA GPU, for a session that has a device for a
# few minutes (build and test everything on the CPU first). Steps, all by default, or those named:
#   build  without a bundle: builds build/gpu (Release, CUDA, the benchmark), the CLI and the
#          device tests (needs the Debian packages of scripts/install-deps.sh);
#   check  scripts/gpu-check.sh (its last line: "N passed, M failed");
#   demo   fieldflow demo --backend cuda (every built-in program against the reference, every mode);
#   bench  fieldflow bench --device cuda (against hand-written CUDA and the device copy): the JSON
#          report and its tables;
#   python (only when named) the Python package, built against the bundle's library with the
#          machine's Python, nanobind and scikit-build-core (FIELDFLOW_PYTHON, default python3),
#          and its tests: CuPy arrays handed to the cuda backend among them. A minute or two;
#   sanitize  (only when named) the device tests' kernels under compute-sanitizer's memcheck: every
#          built-in program in every mode, device fields, in-kernel failures, the hand-written
#          baselines and the whole language suite, any out-of-bounds or misaligned device access
#          an error. Works where the machine's runtime lets it (Firecracker, not gVisor: the tool
#          library's device notes); a few minutes.
# A lent device machine has no such packages and cannot fetch them: there, run the binaries that
# scripts/gpu-bundle.sh prepared on this side. With .gpu-bundle/ in the tree, every step uses it
# (build only checks it): it must match the sources here (sources.sha256), and its libraries must
# resolve (ldd), both found out in seconds, before any test runs. For the device tool:
#   run(command="scripts/gpu-session.sh check", carry=[".gpu-bundle"], timeout_s=420)
#   run(command="scripts/gpu-session.sh demo bench", carry=[".gpu-bundle"], timeout_s=480)
# What comes back from $OUT (at most 8 files): session.log (all that is printed), logs.tar.gz (each
# test's and step's log), bench-gpu.json and bench-gpu.md. Without $OUT: build/gpu/session.
# Prints a line per step; exits non-zero when a step failed. Estimated (never yet run on a device):
# check 3-4 min, demo under 1 min, bench 2-3 min; a build there 2-3 min on 16 cores. A third
# device command, when time is left: run(command="scripts/gpu-session.sh sanitize", ...).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-build/gpu/session}
mkdir -p "$out"
exec > >(tee -a "$out/session.log") 2>&1
jobs=$(nproc 2>/dev/null || echo 4)
status=0
step() { echo "== $1 ($(date +%T))"; }

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(build check demo bench)
wants() { [[ " ${steps[*]} " == *" $1 "* ]]; }
for s in "${steps[@]}"; do
  case $s in build|check|demo|bench|python|sanitize) ;; *) echo "gpu-session: unknown step '$s' (expected build, check, demo, bench, python, sanitize)"; exit 2 ;; esac
done

# The logs of the steps and tests, in one file of $OUT whatever happens next.
logs=()
pack_logs() { [ ${#logs[@]} -eq 0 ] || tar -czf "$out/logs.tar.gz" --ignore-failed-read "${logs[@]}" 2>/dev/null; }
trap pack_logs EXIT

# The CUDA toolkit's libraries where the binaries did not find them.
cuda_library_dirs() {
  local nvcc d
  nvcc=$(command -v nvcc 2>/dev/null || true)
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
           ${nvcc:+$(dirname "$nvcc")/../lib64} ${nvcc:+$(dirname "$nvcc")/../targets/x86_64-linux/lib}; do
    [ -d "$d" ] && printf '%s:' "$(cd "$d" && pwd)"
  done
}
unresolved() { ldd "$@" 2>&1 | grep 'not found' | sort -u; }

if [ -f .gpu-bundle/sources.sha256 ]; then
  build=.gpu-bundle
  step "the bundle of scripts/gpu-bundle.sh ($(cat $build/commit 2>/dev/null))"
  if ! sha256sum --quiet -c "$build/sources.sha256"; then
    echo "gpu-session: .gpu-bundle was built from other sources than these (files above); run scripts/gpu-bundle.sh again"
    exit 1
  fi
  binaries=("$build/fieldflow" "$build"/tests/*)
  export LD_LIBRARY_PATH="$PWD/$build/lib:$(cuda_library_dirs)${LD_LIBRARY_PATH:-}"
  if [ -n "$(unresolved "${binaries[@]}")" ]; then
    echo "this machine lacks $(unresolved "${binaries[@]}" | awk '{print $1}' | sort -u | xargs); GCC's runtime from the bundle"
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/$build/lib/compiler-runtime"
  fi
  if [ -n "$(unresolved "${binaries[@]}")" ]; then
    unresolved "${binaries[@]}"
    echo "gpu-session: the bundle's binaries cannot load here (libraries above)"
    exit 1
  fi
  # The JIT reads fieldflow/abi.h from this tree (the path built in is the other machine's), and
  # compiles host code with this machine's compiler.
  export FIELDFLOW_INCLUDE_DIR="$PWD/include"
  if ! command -v "${FIELDFLOW_CXX:-${CXX:-c++}}" >/dev/null; then
    command -v g++ >/dev/null && export FIELDFLOW_CXX=g++ ||
      echo "gpu-session: no C++ compiler (c++, g++) here: tests that compile for the CPU will fail"
  fi
  echo "binaries load; JIT compiler: $(${FIELDFLOW_CXX:-${CXX:-c++}} --version 2>/dev/null | head -n 1)"
elif wants build; then
  build=build/gpu
  mkdir -p "$build"
  step "configure and build"
  logs+=("$build/configure.log" "$build/build.log" "$build/install-deps.log")
  # Missing packages only (idempotent); bounded, since a device machine may be offline.
  if [ "$(id -u)" = 0 ]; then timeout 120 scripts/install-deps.sh >"$build/install-deps.log" 2>&1; fi
  if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFIELDFLOW_WITH_CUDA=ON -DFIELDFLOW_BUILD_BENCH=ON \
       >"$build/configure.log" 2>&1 ||
     ! cmake --build "$build" -j "$jobs" --target fieldflow_cli test_cuda_device test_aot_cuda test_reference_cuda \
       test_cuda_codegen >"$build/build.log" 2>&1; then
    tail -n 60 "$build/configure.log" "$build/build.log" 2>/dev/null
    echo "build failed"
    exit 1
  fi
else
  build=build/gpu
fi
command -v nvidia-smi >/dev/null && nvidia-smi -L

if wants check; then
  step "scripts/gpu-check.sh"
  FIELDFLOW_GPU_CHECK_BUILD=0 timeout 330 scripts/gpu-check.sh "$build"
  [ $? -eq 0 ] || status=1
  logs+=("$build"/test_*.log)
fi

export FIELDFLOW_CACHE_DIR="$PWD/$build/session-cache"
if wants demo; then
  step "fieldflow demo --backend cuda"
  logs+=("$build/demo-cuda.log")
  timeout 180 "$build/fieldflow" demo --backend cuda >"$build/demo-cuda.log" 2>&1
  [ $? -eq 0 ] || status=1
  tail -n 40 "$build/demo-cuda.log"
fi

if wants bench; then
  step "fieldflow bench --device cuda"
  logs+=("$build/bench-gpu.log")
  timeout 300 "$build/fieldflow" bench --device cuda --wait-idle 10 --json "$out/bench-gpu.json" \
    --table "$out/bench-gpu.md" >"$build/bench-gpu.log" 2>&1
  [ $? -eq 0 ] || status=1
  tail -n 40 "$build/bench-gpu.log"
fi

if wants python; then
  step "the Python package and its tests"
  py=${FIELDFLOW_PYTHON:-python3}
  target="$PWD/$build/python-package"
  logs+=("$build/python-build.log" "$build/python-tests.log")
  rm -rf "$target"
  # From the bundle: the module is built against its library (python/CMakeLists.txt); otherwise
  # from source, as on a machine with the Debian packages. Nothing is fetched.
  prebuilt=()
  [ "$build" = .gpu-bundle ] && prebuilt=(-C "cmake.define.FIELDFLOW_PREBUILT=$PWD/$build")
  if timeout 300 "$py" -m pip install --disable-pip-version-check --no-build-isolation --no-deps --no-index \
       --target "$target" -C "build-dir=$PWD/$build/python-build" "${prebuilt[@]}" ./python >"$build/python-build.log" 2>&1; then
    FIELDFLOW_CACHE_DIR="$PWD/$build/python-cache" PYTHONPATH="$target" \
      timeout 180 "$py" -m pytest -q -rs -p no:cacheprovider python/tests >"$build/python-tests.log" 2>&1
    rc=$?
    tail -n 15 "$build/python-tests.log"
    [ $rc -eq 0 ] || status=1
  else
    tail -n 40 "$build/python-build.log"
    echo "gpu-session: the Python package did not build"
    status=1
  fi
fi

if wants sanitize; then
  step "compute-sanitizer memcheck"
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  export FIELDFLOW_TEST_NO_EMULATION=1 FIELDFLOW_CACHE_DIR="$PWD/$build/sanitize-cache"
  memcheck() {  # name, seconds, binary, arguments
    local name=$1 seconds=$2
    shift 2
    logs+=("$build/memcheck-$name.log")
    timeout "$seconds" "$sanitizer" --tool memcheck --error-exitcode 99 "$@" --gtest_brief=1 >"$build/memcheck-$name.log" 2>&1
    local rc=$?
    grep -E '^========= (Invalid|Program hit|ERROR SUMMARY)|^\[  (PASSED|FAILED|SKIPPED) ' "$build/memcheck-$name.log" | head -n 20
    echo "memcheck $name: exit status $rc ($([ $rc -eq 0 ] && echo clean || { [ $rc -eq 99 ] && echo "errors found"; } || echo "failed or stopped"))"
    [ $rc -eq 0 ] || status=1
  }
  if [ -x "$sanitizer" ] || command -v "$sanitizer" >/dev/null; then
    memcheck device 240 "$(find "$build/tests" -type f -name test_cuda_device | head -n 1)" \
      --gtest_filter='CudaDevicePrograms.*:CudaDeviceFields.*:CudaDevice.InKernelFailure*:CudaDevice.HandWrittenBaselines*:CudaDevice.ABoxWithMoreRowsThanBlocksRunsInPieces'
    memcheck language-suite 240 "$(find "$build/tests" -type f -name test_reference_cuda | head -n 1)"
  else
    echo "gpu-session: no compute-sanitizer here"
    status=1
  fi
fi

echo "gpu-session: $([ $status -eq 0 ] && echo "every step passed" || echo "a step failed"); logs in $out"
exit $status
