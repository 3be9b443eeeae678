// Call-time errors are thrown before anything is written: the outputs keep their values.
#include <string>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/reference.h"

using namespace fieldflow;

std::string call_with_a_short_input(Field& out) {
  const Dimension I = horizontal_dim("I");
  ProgramBuilder p("diff");
  Expr a = p.field("a", {I}, DType::float64), o = p.field("out", {I}, DType::float64);
  p.call("forward_difference", a(I + 1) - a, {o}, {{I, 0, 10}});
  Field short_a({I}, DType::float64, {10});  // covers [0, 10) but the call reads a(10)
  try {
    run_reference(p.build(), Arguments().field("a", short_a).field("out", out));
  } catch (const DomainError& e) {
    // "program 'diff', call 'forward_difference': reads field 'a' at I=10, outside its extent [0, 10); ..."
    return e.what();
  }
  return "no error";
}
