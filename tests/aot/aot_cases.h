#pragma once
// The programs of the test libraries (CMakeLists.txt) with the descriptor of each, shared by the
// tests that run them with and without a toolchain.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "fieldflow/aot.h"
#include "fieldflow_aot_aot_test_horizontal_c2e2co_sum.h"
#include "fieldflow_aot_aot_test_horizontal_hdiff.h"
#include "fieldflow_aot_aot_test_vertical_c2e2co_sum.h"
#include "fieldflow_aot_aot_test_vertical_clipped_scale.h"
#include "fieldflow_aot_aot_test_vertical_fvm_nabla.h"
#include "fieldflow_aot_aot_test_vertical_hdiff.h"
#include "fieldflow_aot_aot_test_vertical_vadv.h"

namespace fieldflow::testing_support {

struct AotExampleCase {
  std::string example;  // built-in example, also the registered name
  Layout layout;
  const ff_aot_program* descriptor;
};

inline std::vector<AotExampleCase> aot_example_cases() {
  return {{"hdiff", Layout::vertical_fastest, fieldflow_aot_aot_test_vertical_hdiff()},
          {"vadv", Layout::vertical_fastest, fieldflow_aot_aot_test_vertical_vadv()},
          {"fvm_nabla", Layout::vertical_fastest, fieldflow_aot_aot_test_vertical_fvm_nabla()},
          {"c2e2co_sum", Layout::vertical_fastest, fieldflow_aot_aot_test_vertical_c2e2co_sum()},
          {"hdiff", Layout::horizontal_fastest, fieldflow_aot_aot_test_horizontal_hdiff()},
          {"c2e2co_sum", Layout::horizontal_fastest, fieldflow_aot_aot_test_horizontal_c2e2co_sum()}};
}

inline std::string case_name(const AotExampleCase& c) {
  return c.example + (c.layout == Layout::vertical_fastest ? "_vertical" : "_horizontal");
}

// Memory options of every mode; external memory from an allocator over a vector the options own.
inline MemoryOptions memory_options(TransientMemoryMode mode) {
  MemoryOptions m;
  m.mode = mode;
  if (mode == TransientMemoryMode::external)
    m.external_memory_allocator = [](const AllocationRequest& r) {
      auto* block = new std::vector<std::byte>(r.bytes + r.alignment);
      void* p = block->data();
      std::size_t space = block->size();
      std::align(r.alignment, r.bytes, p, space);
      return Workspace{p, r.bytes, r.device, [block] { delete block; }};
    };
  return m;
}

}  // namespace fieldflow::testing_support
