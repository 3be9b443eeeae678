// libFuzzer target: program construction and verification from arbitrary operation sequences.
//
// The input drives a small stack machine over the public DSL: declare fields, scalars and tuple
// fields over a fixed set of dimensions and connectivities, combine values with every operator
// (arithmetic, comparisons, builtins, where, if_, astype, broadcast, shifts, neighbour shifts,
// local fields, reductions, concat_where, scans, tuples, labels) and add calls with outputs and
// domains. Whatever it builds is then verified, lowered with the schedule verified after every
// pass, printed and turned into C++. The promise under test: a malformed program is a typed
// fieldflow::Error (never InternalError, never another exception, a crash or a hang).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "codegen/cpu/generate_cpu.h"
#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "passes/pipeline.h"

namespace ff = fieldflow;

namespace {

struct World {
  ff::Dimension I = ff::horizontal_dim("I"), J = ff::horizontal_dim("J"), K = ff::vertical_dim("K");
  ff::Dimension Vertex = ff::horizontal_dim("Vertex"), Edge = ff::horizontal_dim("Edge");
  ff::Connectivity E2V = ff::make_connectivity("E2V", Edge, Vertex, 2);
  ff::Connectivity V2E = ff::make_connectivity("V2E", Vertex, Edge, 6);
  std::vector<ff::Dimension> dims{I, J, K, Vertex, Edge, E2V.local, V2E.local};
  std::vector<ff::Connectivity> conns{E2V, V2E};
  std::vector<std::vector<ff::Dimension>> dim_sets{{I, J, K}, {I, J}, {K}, {I, K}, {Edge, K}, {Vertex, K},
                                                   {Edge},    {Vertex}, {}, {I, J, K, Edge}, {Edge, E2V.local, K},
                                                   {K, I},    {I, I}};
  std::vector<std::string> names{"a", "b", "c", "out", "n", "tmp", "E2V", "a.0", "", "nk"};
};

const World& world() {
  static const World w;
  return w;
}

ff::DType pick_dtype(FuzzedDataProvider& in) {
  static constexpr ff::DType all[] = {ff::DType::boolean, ff::DType::int32, ff::DType::int64, ff::DType::float32,
                                      ff::DType::float64};
  return in.PickValueInArray(all);
}

ff::Scalar pick_scalar(FuzzedDataProvider& in, ff::DType dtype) {
  switch (dtype) {
    case ff::DType::boolean: return ff::Scalar(in.ConsumeBool());
    case ff::DType::int32: return ff::Scalar(in.ConsumeIntegral<std::int32_t>());
    case ff::DType::int64: return ff::Scalar(in.ConsumeIntegral<std::int64_t>());
    case ff::DType::float32: return ff::Scalar(in.ConsumeFloatingPoint<float>());
    default: return ff::Scalar(in.ConsumeFloatingPoint<double>());
  }
}

class Machine {
 public:
  explicit Machine(FuzzedDataProvider& in) : in_(in), builder_("fuzzed") {}

  void run() {
    const World& w = world();
    for (int step = 0; step < 48 && in_.remaining_bytes() > 0; ++step) {
      try {
        op(w);
      } catch (const ff::InternalError&) {
        throw;
      } catch (const ff::Error&) {
        // A rejected construction step: the builder is still usable for the next one.
      }
    }
  }

  ff::ProgramBuilder& builder() { return builder_; }

 private:
  const ff::Expr& value() { return pool_.at(in_.ConsumeIntegralInRange<std::size_t>(0, pool_.size() - 1)); }
  const ff::Dimension& dim(const World& w) { return w.dims[in_.ConsumeIntegralInRange<std::size_t>(0, w.dims.size() - 1)]; }
  const ff::Connectivity& conn(const World& w) { return w.conns[in_.ConsumeBool() ? 1 : 0]; }
  const std::string& name(const World& w) { return w.names[in_.ConsumeIntegralInRange<std::size_t>(0, w.names.size() - 1)]; }
  void push(ff::Expr e) {
    if (pool_.size() < 24) pool_.push_back(std::move(e));
    else pool_[in_.ConsumeIntegralInRange<std::size_t>(0, pool_.size() - 1)] = std::move(e);
  }
  ff::Expr bound(const World& w) {
    if (in_.ConsumeBool() || pool_.empty()) return ff::Expr(in_.ConsumeIntegralInRange<int>(-4, 12));
    (void)w;
    return value();
  }
  ff::IndexCondition condition(const World& w, int depth) {
    const int kind = in_.ConsumeIntegralInRange(0, depth > 2 ? 5 : 8);
    const ff::Dimension& d = dim(w);
    const ff::Expr b = bound(w);
    switch (kind) {
      case 0: return d == b;
      case 1: return d != b;
      case 2: return d < b;
      case 3: return d <= b;
      case 4: return d > b;
      case 5: return b <= d;
      case 6: return condition(w, depth + 1) & condition(w, depth + 1);
      case 7: return condition(w, depth + 1) | condition(w, depth + 1);
      default: return ~condition(w, depth + 1);
    }
  }

  void op(const World& w) {
    const int code = in_.ConsumeIntegralInRange(0, 24);
    if (pool_.empty() && code > 3) {
      push(builder_.field(name(w), w.dim_sets[0], ff::DType::float64));
      return;
    }
    switch (code) {
      case 0: {
        const auto& dims = w.dim_sets[in_.ConsumeIntegralInRange<std::size_t>(0, w.dim_sets.size() - 1)];
        push(builder_.field(name(w), dims, pick_dtype(in_)));
        break;
      }
      case 1: push(builder_.scalar(name(w), pick_dtype(in_))); break;
      case 2: push(ff::Expr::literal(pick_scalar(in_, pick_dtype(in_)))); break;
      case 3: {
        std::vector<ff::ProgramBuilder::FieldSpec> specs;
        for (int n = in_.ConsumeIntegralInRange(0, 3); n > 0; --n) {
          specs.push_back({w.dim_sets[in_.ConsumeIntegralInRange<std::size_t>(0, 3)], pick_dtype(in_)});
        }
        push(builder_.tuple_field(name(w), specs));
        break;
      }
      case 4: {
        const ff::Expr a = value(), b = value();
        switch (in_.ConsumeIntegralInRange(0, 18)) {
          case 0: push(a + b); break;
          case 1: push(a - b); break;
          case 2: push(a * b); break;
          case 3: push(a / b); break;
          case 4: push(a < b); break;
          case 5: push(a <= b); break;
          case 6: push(a == b); break;
          case 7: push(a != b); break;
          case 8: push(a & b); break;
          case 9: push(a | b); break;
          case 10: push(a ^ b); break;
          case 11: push(a % b); break;
          case 12: push(ff::floor_divide(a, b)); break;
          case 13: push(ff::minimum(a, b)); break;
          case 14: push(ff::maximum(a, b)); break;
          case 15: push(ff::fmod(a, b)); break;
          case 16: push(ff::power(a, b)); break;
          case 17: push(a > b); break;
          default: push(a >= b); break;
        }
        break;
      }
      case 5: {
        using Unary = ff::Expr (*)(const ff::Expr&);
        static constexpr Unary unary[] = {ff::abs,    ff::sqrt,  ff::exp,   ff::log,    ff::sin,    ff::cos,
                                          ff::tan,    ff::arcsin, ff::arccos, ff::arctan, ff::sinh,  ff::cosh,
                                          ff::tanh,   ff::floor, ff::ceil,  ff::trunc,  ff::isnan,  ff::isinf,
                                          ff::isfinite, ff::cbrt, ff::gamma};
        const ff::Expr a = value();
        switch (in_.ConsumeIntegralInRange(0, 3)) {
          case 0: push(-a); break;
          case 1: push(!a); break;
          case 2: push(~a); break;
          default: push(in_.PickValueInArray(unary)(a)); break;
        }
        break;
      }
      case 6: { const ff::Expr c = value(), a = value(), b = value(); push(ff::where(c, a, b)); break; }
      case 7: { const ff::Expr c = value(), a = value(), b = value(); push(ff::if_(c, a, b)); break; }
      case 8: push(ff::astype(value(), pick_dtype(in_))); break;
      case 9: {
        const ff::Expr a = value();
        push(ff::broadcast(a, w.dim_sets[in_.ConsumeIntegralInRange<std::size_t>(0, w.dim_sets.size() - 1)]));
        break;
      }
      case 10: { const ff::Expr a = value(); push(a(dim(w) + in_.ConsumeIntegralInRange<std::int64_t>(-3, 3))); break; }
      case 11: { const ff::Expr a = value(); push(a(conn(w)[in_.ConsumeIntegralInRange(-2, 7)])); break; }
      case 12: { const ff::Expr a = value(); push(a(conn(w))); break; }
      case 13: {
        const ff::Expr a = value();
        switch (in_.ConsumeIntegralInRange(0, 3)) {
          case 0: push(ff::neighbor_sum(a, conn(w))); break;
          case 1: push(ff::max_over(a, conn(w))); break;
          case 2: push(ff::min_over(a, conn(w))); break;
          default: push(ff::neighbor_sum(a, dim(w))); break;
        }
        break;
      }
      case 14: {
        const ff::IndexCondition c = condition(w, 0);
        const ff::Expr a = value(), b = value();
        push(ff::concat_where(c, a, b));
        break;
      }
      case 15: scan(w); break;
      case 16: {
        std::vector<ff::Expr> elements;
        for (int n = in_.ConsumeIntegralInRange(0, 3); n > 0; --n) elements.push_back(value());
        push(ff::make_tuple(elements));
        break;
      }
      case 17: { const ff::Expr a = value(); push(a[in_.ConsumeIntegralInRange(-1, 3)]); break; }
      case 18: {
        const ff::Expr a = value();
        push(in_.ConsumeBool() ? ff::materialize(name(w), a) : ff::named(name(w), a));
        break;
      }
      case 19: push(ff::index(dim(w))); break;
      case 20: { const ff::Expr a = value(), off = value(); push(a(dim(w) + off)); break; }
      case 21: { const ff::Expr a = value(); push(a(ff::slot(conn(w), in_.ConsumeIntegralInRange(-1, 7)))); break; }
      case 22: builder_.connectivity(conn(w)); break;
      default: call(w); break;
    }
  }

  void scan(const World& w) {
    const auto direction = in_.ConsumeBool() ? ff::ScanDirection::forward : ff::ScanDirection::backward;
    std::vector<ff::Scalar> init;
    for (int n = in_.ConsumeIntegralInRange(0, 2); n >= 0; --n) init.push_back(pick_scalar(in_, pick_dtype(in_)));
    const int body_kind = in_.ConsumeIntegralInRange(0, 4);
    const double c = in_.ConsumeFloatingPoint<double>();
    ff::ScanBody body = [body_kind, c](const ff::Expr& carry, const std::vector<ff::Expr>& inputs) -> ff::Expr {
      switch (body_kind) {
        case 0: return carry;
        case 1: return inputs.empty() ? carry + c : carry + inputs[0];
        case 2: return carry[0];
        case 3: return ff::make_tuple({carry[1], carry[0]});
        default: return inputs.size() > 1 ? inputs[0] * inputs[1] : ff::Expr(c);
      }
    };
    if (in_.ConsumeBool()) {
      push(ff::scan(name(w), direction, init, body, dim(w)));
    } else {
      std::vector<ff::Expr> inputs;
      for (int n = in_.ConsumeIntegralInRange(0, 2); n > 0; --n) inputs.push_back(value());
      push(ff::scan(name(w), direction, init, body, inputs));
    }
  }

  void call(const World& w) {
    const ff::Expr v = value();
    std::vector<ff::Expr> outputs;
    for (int n = in_.ConsumeIntegralInRange(0, 2); n >= 0; --n) outputs.push_back(value());
    std::vector<ff::ProgramBuilder::Bound> domain;
    for (int n = in_.ConsumeIntegralInRange(0, 3); n >= 0; --n) domain.push_back({dim(w), bound(w), bound(w)});
    builder_.call(name(w), v, outputs, domain);
  }

  FuzzedDataProvider& in_;
  ff::ProgramBuilder builder_;
  std::vector<ff::Expr> pool_;
};

[[noreturn]] void fail(const char* what, const std::string& message) {
  std::fprintf(stderr, "fuzz_program_builder: %s: %s\n", what, message.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  try {
    Machine machine(in);
    machine.run();
    const ff::ir::Program program = machine.builder().build();
    (void)ff::ir::print(program);
    ff::passes::PipelineOptions options;
    options.verify_each = true;
    options.layout = in.ConsumeBool() ? ff::Layout::vertical_fastest : ff::Layout::any;
    const ff::ir::Schedule schedule = ff::passes::lower(program, options);
    (void)ff::codegen::generate_cpu_source(schedule);
  } catch (const ff::InternalError& e) {
    fail("internal error (a bug, not a typed user error)", e.what());
  } catch (const ff::Error&) {
    // The promised outcome for a malformed program.
  } catch (const std::exception& e) {
    fail("untyped exception", e.what());
  }
  return 0;
}
