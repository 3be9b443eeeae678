#pragma once
// Runs a check in a child process, so that a crash, a sanitizer's exit or a hang of generated code
// becomes a Failure the fuzzer can report and shrink, and the campaign goes on. The process that
// calls this (the fuzzer's supervisor) only generates and shrinks programs: it must not have run
// OpenMP code or started threads, because a forked child keeps only the calling thread.
#include <chrono>
#include <functional>
#include <optional>

#include "fuzz/differential.h"

namespace fieldflow::fuzz {

struct IsolationOptions {
  std::chrono::seconds timeout{600};     // a child still running after this is killed: "hung"
  bool quiet = false;                    // the child's stdout and stderr go to /dev/null (shrink tries)
  std::function<void()> in_child;        // runs first in the child (restoring signal handlers, say)
};

// Runs `check` in a forked child and returns what it returned, with the child's RunStats added to
// `stats`. A child that does not report (killed by a signal, exited without a result, as a
// sanitizer does after its report, or ran past the timeout) is a Failure of kind "crashed",
// "died" or "hung", whose path, mode, threads and layout are unknown (left at their defaults):
// the caller must shrink it against every variant. Its counts are lost.
std::optional<Failure> run_isolated(const std::function<std::optional<Failure>(RunStats&)>& check,
                                    RunStats& stats, const IsolationOptions& options = {});

// The kinds run_isolated gives a child that did not report.
bool is_process_failure(const Failure& f);

}  // namespace fieldflow::fuzz
