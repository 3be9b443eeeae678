#!/usr/bin/env bash
# Installs fieldflow from the build tree into a temporary prefix, builds separate CMake projects
# against it with find_package(fieldflow) and runs them: tests/install/consumer (the library, and
# ahead-of-time libraries from fieldflow_add_library and from `fieldflow aot`) and the AOT project
# shown in docs/host.md (docs/snippets/aot). The ahead-of-time programs run with no usable compiler
# or cache directory.
set -euo pipefail
build_dir=$1
source_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
for project in consumer:"$source_dir/consumer" column_model:"$source_dir/../../docs/snippets/aot"; do
  name=${project%%:*}
  dir=${project#*:}
  log="$work/$name.log"
  { cmake -S "$dir" -B "$work/build-$name" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" &&
    cmake --build "$work/build-$name"; } >"$log" 2>&1 || { cat "$log"; exit 1; }
  FIELDFLOW_CXX=/bin/false FIELDFLOW_CACHE_DIR=/dev/null/fieldflow-cache LD_LIBRARY_PATH="$work/prefix/lib" \
    "$work/build-$name/$name"
  echo "find_package(fieldflow) project $name built and ran"
done
