#!/usr/bin/env bash
# Installs the Debian packages fieldflow builds with, only those missing (idempotent, needs root).
set -euo pipefail
packages=(g++ gfortran cmake ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev
          nlohmann-json3-dev libcli11-dev libxxhash-dev ccache python3-venv python3-dev
          libopenmpi-dev openmpi-bin libmetis-dev
          clang-14 libclang-rt-14-dev libomp-14-dev)  # clang: the libFuzzer targets (scripts/fuzz.sh), the race preset (libomp, Archer)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
