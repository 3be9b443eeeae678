#pragma once
// The programs of the test libraries (CMakeLists.txt) with the descriptor of each, shared by the
// tests that run them with and without a toolchain.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "fieldflow/aot.h"
#include "fieldflow_aot_aot_test_any_fvm_nabla.h"
#include "fieldflow_aot_aot_test_any_vadv.h"
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
  Layout layout;        // the library's (CompileOptions::layout)
  const ff_aot_program* descriptor;
  Layout fields;        // of the arguments: layout, or either for Layout::any
};

inline std::vector<AotExampleCase> aot_example_cases() {
  constexpr Layout v = Layout::vertical_fastest, h = Layout::horizontal_fastest, any = Layout::any;
  return {{"hdiff", v, fieldflow_aot_aot_test_vertical_hdiff(), v},
          {"vadv", v, fieldflow_aot_aot_test_vertical_vadv(), v},
          {"fvm_nabla", v, fieldflow_aot_aot_test_vertical_fvm_nabla(), v},
          {"c2e2co_sum", v, fieldflow_aot_aot_test_vertical_c2e2co_sum(), v},
          {"hdiff", h, fieldflow_aot_aot_test_horizontal_hdiff(), h},
          {"c2e2co_sum", h, fieldflow_aot_aot_test_horizontal_c2e2co_sum(), h},
          {"vadv", any, fieldflow_aot_aot_test_any_vadv(), v},
          {"vadv", any, fieldflow_aot_aot_test_any_vadv(), h},
          {"fvm_nabla", any, fieldflow_aot_aot_test_any_fvm_nabla(), v},
          {"fvm_nabla", any, fieldflow_aot_aot_test_any_fvm_nabla(), h}};
}

inline std::string case_name(const AotExampleCase& c) {
  auto name = [](Layout l) { return std::string(l == Layout::vertical_fastest ? "vertical" : l == Layout::horizontal_fastest ? "horizontal" : "any"); };
  return c.example + "_" + name(c.layout) + (c.layout == Layout::any ? "_on_" + name(c.fields) : "");
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
