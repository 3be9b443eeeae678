#pragma once
// The lowering pipeline from ir::Program to ir::Schedule (the list of passes is in pipeline.cpp).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/schedule.h"

namespace fieldflow::passes {

struct PipelineOptions {
  Layout layout = Layout::vertical_fastest;
  Device target = Device::cpu;
  std::map<std::string, Scalar> static_scalars;  // CompileOptions::static_scalars, folded first
  bool verify_each = false;  // check schedule invariants after every pass (on in debug builds and tests)
  // Called after each pass with its name, the schedule and whether the pass changed it.
  std::function<void(const std::string& pass, const ir::Schedule&, bool changed, double seconds)> after_pass;
};

// Runs every pass in order. Throws the user-facing error of the first pass that rejects the program.
ir::Schedule lower(const ir::Program& program, const PipelineOptions& options = {});

// Names of the passes in order, plus a version: part of the compile-cache key.
std::string pipeline_description();

// Schedule invariants (every read names a parameter or a transient produced earlier, ...);
// `lowered`: also those of the finished pipeline (scans only as kernel roots).
void verify_schedule(const ir::Schedule& s, bool lowered);

}  // namespace fieldflow::passes
