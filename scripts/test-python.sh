#!/usr/bin/env bash
# The Python package (python/): installs it with pip into a virtual environment and runs its tests
# with pytest. Idempotent: the venv (build/python-venv), the package's CMake build directory
# (build/python; the library's objects come from ccache after a release build) and the compile
# cache of the tests (build/python-test-cache) persist between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/python-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "scikit-build-core>=0.10" "nanobind>=2.0" numpy pytest
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation \
  -C build-dir="$PWD/build/python" ./python
# pytest exits 5 when it collected no tests: set -e fails the script on it like on any failure.
FIELDFLOW_CACHE_DIR="$PWD/build/python-test-cache" "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
