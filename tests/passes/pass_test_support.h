#pragma once
// Small programs for pass tests (the passes are tested on IR alone: no compiler is invoked).
#include "fieldflow/dsl.h"
#include "ir/schedule.h"

namespace fieldflow::pass_tests {

inline const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");

inline ir::Schedule schedule_of(const ir::Program& p) {
  ir::Schedule s;
  s.program = p;
  return s;
}

inline int count_kernels(const ir::Schedule& s, ir::KernelKind kind) {
  int n = 0;
  for (const auto& k : s.kernels) n += k.kind == kind;
  return n;
}

}  // namespace fieldflow::pass_tests
