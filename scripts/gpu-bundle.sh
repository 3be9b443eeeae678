#!/usr/bin/env bash
# Prepares here, on a machine without a GPU, everything scripts/gpu-session.sh runs on a lent GPU
# machine, so that its few minutes go to the device tests and the benchmark. That machine has the
# CUDA toolkit, CMake, ninja and a C++ compiler, but none of the Debian packages fieldflow builds
# with (fmt, GoogleTest, Google Benchmark, nlohmann-json, CLI11, xxHash, gfortran), and it cannot
# fetch any (.library/device/KINDS.md): a build there would not even configure.
#
# Builds build/gpu-bundle (Release, CUDA, the benchmark) for any x86-64-v3 processor (the
# benchmark's CPU baselines and the AOT libraries' host code; the JIT compiles for the machine it
# runs on) and fills .gpu-bundle/ (ignored by git) like a build folder:
#   fieldflow, tests/<test>       the CLI and the device tests of scripts/gpu-check.sh, stripped
#   lib/                          libfieldflow, the AOT test libraries, and the shared libraries
#                                 they need from Debian packages (fmt, xxHash, ...)
#   include/fmt/                  fmt's headers, for the Python package built there against lib/
#                                 (gpu-session.sh python: python/CMakeLists.txt, FIELDFLOW_PREBUILT)
#   lib/compiler-runtime/         GCC's runtime (libstdc++, libgcc_s, libgomp), used there only if
#                                 that machine lacks it: its own is newer, and the modules its
#                                 compiler builds for the JIT need that one
#   sources.sha256                the sources it was built from: gpu-session.sh refuses a bundle
#                                 that does not match the tree it runs in
# CUDA's own libraries (cudart, NVRTC) come from the toolkit there (the same major version, 13).
# Then a device run carries the folder:  run(command="scripts/gpu-session.sh check",
# carry=[".gpu-bundle"]), and "scripts/gpu-session.sh demo bench" in a second call.
# Last, as root, the bundle is tried as that machine would run it: from a copy of the committed
# tree, in a mount namespace where this checkout (its build folders) and the Debian libraries the
# bundle brings are hidden; without a GPU the device tests skip, the NVRTC and AOT tests run, and
# the Python package builds against the bundle's library (in a venv made for the trial) and passes.
# Usage: scripts/gpu-bundle.sh [--no-try]   (about 20 minutes on 2 cores the first time, then
# seconds with ccache; needs a committed tree)
set -euo pipefail
cd "$(dirname "$0")/.."
try=1
[ "${1:-}" = --no-try ] && try=0
build=build/gpu-bundle
bundle=.gpu-bundle
tests=(test_cuda_device test_aot_cuda test_reference_cuda test_cuda_codegen)

if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "gpu-bundle: the tree has uncommitted changes; commit first, so that the bundle names the commit it is" >&2
  exit 1
fi
if [ "$(id -u)" = 0 ]; then scripts/install-deps.sh; fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFIELDFLOW_WITH_CUDA=ON -DFIELDFLOW_BUILD_BENCH=ON \
  -DFIELDFLOW_BENCH_NATIVE=ON -DFIELDFLOW_BASELINE_MARCH=x86-64-v3 -DFIELDFLOW_AOT_MARCH=x86-64-v3 >/dev/null
cmake --build "$build" -j "$(nproc)" --target fieldflow_cli "${tests[@]}"

rm -rf "$bundle"
mkdir -p "$bundle/tests" "$bundle/lib/compiler-runtime" "$bundle/include"
cp "$build/fieldflow" "$bundle/"
cp -r "$(dirname "$(find /usr/include -path '*/fmt/format.h' | head -n 1)")" "$bundle/include/fmt"
for t in "${tests[@]}"; do cp "$(find "$build/tests" -type f -name "$t" -perm -u+x | head -n 1)" "$bundle/tests/"; done
binaries=("$bundle/fieldflow" "${tests[@]/#/$bundle/tests/}")

# Every shared library the binaries load, but glibc's, the CUDA toolkit's and the driver's.
# -L: the files themselves, under the names the binaries ask for.
ldd "${binaries[@]}" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
  while read -r name path; do
    case $name in
      libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | linux-vdso*) ;;
      libcudart.so* | libnvrtc* | libcuda.so*) ;;
      libstdc++.so* | libgcc_s.so* | libgomp.so*) cp -L "$path" "$bundle/lib/compiler-runtime/$name" ;;
      *) cp -L "$path" "$bundle/lib/$name" ;;
    esac
  done
strip --strip-unneeded "${binaries[@]}" "$bundle"/lib/*.so* 2>/dev/null || true

git ls-files -z -- CMakeLists.txt cmake include src tests bench scripts python | xargs -0 sha256sum >"$bundle/sources.sha256"
git rev-parse HEAD >"$bundle/commit"
echo "gpu-bundle: $(git rev-parse --short HEAD), $(du -sh "$bundle" | cut -f1) in $bundle (a device run carries at most 64 MiB)"
ls -l "$bundle" "$bundle/tests" "$bundle/lib" "$bundle/lib/compiler-runtime"

[ $try = 1 ] || exit 0
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null; then
  echo "gpu-bundle: not tried (needs root and unshare for a mount namespace)"
  exit 0
fi
trial=$(mktemp -d)
trap 'rm -rf "$trial"' EXIT
mkdir -p "$trial/repo" "$trial/out"
git archive HEAD | tar -x -C "$trial/repo"
cp -r "$bundle" "$trial/repo/"
hide=$(find "$bundle/lib" -maxdepth 1 -name 'lib*.so*' -printf '%f\n' | grep -v '^libfieldflow' |
       while read -r name; do ldconfig -p | awk -v n="$name" '$1 == n { print $NF }'; done | xargs -r readlink -f | sort -u)
# The device's Python has nanobind, scikit-build-core, numpy and pytest; the trial's own venv stands in.
python3 -m venv "$trial/venv"
"$trial/venv/bin/python" -m pip install --quiet --disable-pip-version-check "scikit-build-core>=0.10" "nanobind>=2.0" \
  numpy pytest
echo "gpu-bundle: trying it with $PWD and $(echo $hide | wc -w) Debian libraries hidden"
unshare --mount bash -c "set -e; for f in $(echo $hide); do mount --bind /dev/null \$f; done
  mount -t tmpfs none '$PWD'; cd '$trial/repo'
  OUT='$trial/out' FIELDFLOW_PYTHON='$trial/venv/bin/python' scripts/gpu-session.sh check python" | tail -n 16
