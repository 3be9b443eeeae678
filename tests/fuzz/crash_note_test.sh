#!/usr/bin/env bash
# With --in-process, the fuzzer must name the seed it was running when a fatal signal ends it (a
# generated module that crashes kills the whole campaign there, and progress lines come only every
# 10 s). A real SIGSEGV is sent once the first seed is compiling (a file appears in the fresh
# compile cache), so the fuzzer carries no hook for this test.
#   crash_note_test.sh FUZZER SEED
set -u
fuzzer=$1 seed=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$fuzzer" --seed "$seed" --count 1000 --no-cuda-emulation --in-process --cache-dir "$work/cache" >"$work/out" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do  # up to 120 s: a loaded machine, or a sanitized build
  [ -n "$(find "$work/cache" -type f 2>/dev/null | head -n 1)" ] && break
  sleep 0.1
done
kill -SEGV "$pid"
wait "$pid"
status=$?
cat "$work/out"
# 128 + 11: the handler re-raised the signal with its default action, as an uncaught crash would.
[ "$status" -eq 139 ] || { echo "expected exit status 139 (SIGSEGV), got $status"; exit 1; }
grep -q "^CRASH in seed $seed " "$work/out" || { echo "expected 'CRASH in seed $seed' in the output"; exit 1; }
