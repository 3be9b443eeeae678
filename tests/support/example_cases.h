#pragma once
// The per-example backend tests' parameter: every built-in program in both layouts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fieldflow/examples.h"

namespace fieldflow::testing_support {

// One built-in program in one layout: the parameter of the per-example backend tests.
struct ExampleCase {
  std::string name;
  Layout layout;
};
inline std::vector<ExampleCase> all_example_cases() {
  std::vector<ExampleCase> cases;
  for (const auto& ex : examples::all_examples())
    for (Layout l : {Layout::vertical_fastest, Layout::horizontal_fastest}) cases.push_back({ex.name, l});
  return cases;
}
inline std::string example_case_name(const ::testing::TestParamInfo<ExampleCase>& i) {
  return i.param.name + "_" + std::string(to_string(i.param.layout));
}

}  // namespace fieldflow::testing_support
