// A static scalar parameter: its value is folded in at compile time, so the where below compiles to
// minimum(f, 1.0) alone. Each value is its own module; a call passing another value is refused.
#include <string>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"

using namespace fieldflow;

std::string static_limiter(Field& f, Field& out) {
  const Dimension I = horizontal_dim("I");
  ProgramBuilder p("limiter");
  Expr in = p.field("f", {I}, DType::float64), o = p.field("out", {I}, DType::float64);
  Expr limit = p.scalar("limit", DType::boolean);
  p.call("apply", where(limit, minimum(in, 1.0), in), {o}, {{I, 0, 8}});
  CompileOptions options;
  options.static_scalars = {{"limit", Scalar(true)}};
  CompiledProgram limiter = compile(p.build(), options);
  limiter(Arguments().field("f", f).field("out", out).scalar("limit", true));
  try {
    limiter(Arguments().field("f", f).field("out", out).scalar("limit", false));
  } catch (const ArgumentError& e) {
    // "program 'limiter': scalar 'limit' is static, compiled for the value true, given false; ..."
    return e.what();
  }
  return "no error";
}
