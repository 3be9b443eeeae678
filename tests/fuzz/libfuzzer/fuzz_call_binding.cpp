// libFuzzer target: call binding against a fixed set of compiled programs.
//
// Each input picks one built-in example (Cartesian with halos and transients, a vertical scan,
// unstructured with connectivities and skip values), a compiled instance of it (vertical_fastest
// or Layout::any) and valid arguments at small sizes, then mutates them: field views with other
// shapes, origins, strides (any order, padding, stride 0, irregular), dtypes or dimensions; scalars with other
// values or dtypes; neighbour tables with out-of-range entries, skip values, wrong widths or
// lengths, strided views; missing and unknown arguments. The compiled call must either reject
// the call like the reference executor (each with a typed error; a LayoutError only where the
// compiled layout is stricter) or give the reference's bits in every field; it must never write outside a view (every view
// sits in a buffer with guard bytes that are checked after the call) nor touch memory out of
// bounds (the library is built with ASan).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "fieldflow/compile.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "fieldflow/reference.h"
#include "fuzz/libfuzzer/fuzz_support.h"

namespace ff = fieldflow;

namespace {

constexpr std::size_t kGuardBytes = 64;
constexpr unsigned char kGuard = 0xA5;

const char* const kPrograms[] = {"lap_of_lap", "vadv", "fvm_nabla", "nabla4", "c2e2co_sum"};
constexpr int kNumPrograms = sizeof(kPrograms) / sizeof(kPrograms[0]);

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "fuzz_call_binding: %s\n", message.c_str());
  std::abort();
}

// A view in a heap buffer with guard bytes on both sides.
struct GuardedView {
  std::unique_ptr<unsigned char[]> buffer;
  std::size_t span = 0;
  std::optional<ff::Field> field;
  bool guards_intact() const {
    for (std::size_t i = 0; i < kGuardBytes; ++i) {
      if (buffer[i] != kGuard || buffer[kGuardBytes + span + i] != kGuard) return false;
    }
    return true;
  }
};

// Table rows are int32 entries; a mutated copy lives here while the call runs.
struct TableCopy {
  std::vector<std::int32_t> entries;
  ff::NeighborTable table;
};

// What an instance's last call bound, kept alive until its next call has bound anew. An instance
// re-checks arguments only when it is given different ones (a different object, data pointer or
// shape: a mesh is static, docs/memory.md); freed and reallocated at the same addresses, another
// input's tables and views would look like the same arguments with other contents (found by this
// target: a table entry past the vertex count was read unchecked), which no host does.
struct LastCall {
  std::shared_ptr<ff::examples::ExampleInstance> base;
  std::map<std::string, std::unique_ptr<GuardedView>> views;
  std::vector<std::unique_ptr<TableCopy>> tables;
};

struct Compiled {
  const ff::examples::Example* example;
  ff::CompiledProgram vertical_fastest, any;
  LastCall last_vertical_fastest, last_any;
};

std::vector<Compiled>& compiled() {
  static std::vector<Compiled> programs = [] {
    std::vector<Compiled> all;
    for (const char* name : kPrograms) {
      const auto& ex = ff::examples::example(name);
      ff::CompileOptions vf, any;
      vf.parallel_threshold = any.parallel_threshold = 0;
      vf.num_threads = any.num_threads = 2;
      any.layout = ff::Layout::any;
      all.push_back({&ex, ff::compile(ex.program, vf), ff::compile(ex.program, any)});
    }
    return all;
  }();
  return programs;
}

class Mutator {
 public:
  explicit Mutator(FuzzedDataProvider& in) : in_(in) {}

  // A view over a guarded buffer holding `source`'s values where the boxes overlap (elsewhere
  // fuzz-chosen values), with a mutated box, strides or dtype.
  std::unique_ptr<GuardedView> mutate_field(const ff::Field& source) {
    std::vector<ff::Dimension> dims = source.dims();
    std::vector<std::int64_t> shape = source.shape(), origin = source.origin();
    ff::DType dtype = source.dtype();
    const int how = in_.ConsumeIntegralInRange(0, 15);
    if (how == 0 && !dims.empty()) {
      const std::size_t drop = in_.ConsumeIntegralInRange<std::size_t>(0, dims.size() - 1);
      dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(drop));
      shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(drop));
      origin.erase(origin.begin() + static_cast<std::ptrdiff_t>(drop));
    } else if (how == 1) {
      static constexpr ff::DType all[] = {ff::DType::boolean, ff::DType::int32, ff::DType::int64, ff::DType::float32};
      dtype = in_.PickValueInArray(all);
    } else if (how < 9) {
      for (std::size_t d = 0; d < shape.size(); ++d) {
        if (!in_.ConsumeBool()) continue;
        const std::int64_t lo = in_.ConsumeIntegralInRange<std::int64_t>(-2, 2);
        const std::int64_t hi = in_.ConsumeIntegralInRange<std::int64_t>(-2, 2);
        origin[d] += lo;
        shape[d] = std::max<std::int64_t>(0, shape[d] - lo + hi);
      }
    }
    // Strides: a permutation of the dimensions with padding, sometimes a stride 0.
    std::vector<std::size_t> order(dims.size());
    for (std::size_t d = 0; d < order.size(); ++d) order[d] = d;
    for (std::size_t d = order.size(); d > 1; --d) std::swap(order[d - 1], order[in_.ConsumeIntegralInRange<std::size_t>(0, d - 1)]);
    std::vector<std::int64_t> strides(dims.size(), 0);
    std::int64_t step = 1, last = 0;
    for (std::size_t d : order) {
      const bool zero = in_.ConsumeIntegralInRange(0, 15) == 0;
      strides[d] = zero ? 0 : step;
      if (!zero) step *= std::max<std::int64_t>(1, shape[d] + in_.ConsumeIntegralInRange<std::int64_t>(0, 2));
    }
    // Sometimes strides of no nested structure (1 to 12 in any order): distinct elements or not,
    // such a view may be an output only where no two of its indices meet (ir::internal_overlap).
    if (in_.ConsumeIntegralInRange(0, 7) == 0)
      for (std::int64_t& s : strides) s = in_.ConsumeIntegralInRange<std::int64_t>(1, 12);
    for (std::size_t d = 0; d < dims.size(); ++d) last += strides[d] * std::max<std::int64_t>(0, shape[d] - 1);
    const std::size_t element = ff::size_of(dtype);
    auto view = std::make_unique<GuardedView>();
    view->span = static_cast<std::size_t>(last + 1) * element;
    view->buffer.reset(new unsigned char[view->span + 2 * kGuardBytes]);
    std::memset(view->buffer.get(), kGuard, view->span + 2 * kGuardBytes);
    // Aligned for every dtype: the buffer from new[] is, and kGuardBytes is a multiple of 8.
    view->field.emplace(ff::Field::view(view->buffer.get() + kGuardBytes, dims, dtype, shape, strides, origin));
    ff::Field& f = *view->field;
    const double filler = in_.ConsumeFloatingPointInRange<double>(-4.0, 4.0);
    f.for_each_index([&](const std::vector<std::int64_t>& index) {
      double v = filler;
      if (dims == source.dims()) {
        try {
          v = source.get_as_double(source.offset_of(index));
        } catch (const ff::DomainError&) {
        }
      }
      f.set_from_double(f.offset_of(index), v);
    });
    return view;
  }

  std::unique_ptr<TableCopy> mutate_table(const ff::NeighborTable& source) {
    auto copy = std::make_unique<TableCopy>();
    std::int64_t n_source = source.n_source, n_target = source.n_target;
    int width = source.max_neighbors;
    switch (in_.ConsumeIntegralInRange(0, 9)) {
      case 0: width += in_.ConsumeBool() ? 1 : -1; break;
      case 1: n_source += in_.ConsumeIntegralInRange<std::int64_t>(-2, 2); break;
      case 2: n_target += in_.ConsumeIntegralInRange<std::int64_t>(-2, 2); break;
      default: break;
    }
    width = std::max(0, width);
    n_source = std::max<std::int64_t>(0, n_source);
    n_target = std::max<std::int64_t>(0, n_target);
    const bool fortran = in_.ConsumeBool();
    copy->entries.assign(static_cast<std::size_t>(std::max<std::int64_t>(1, n_source * width)), -1);
    const std::int64_t s_stride = fortran ? 1 : width, n_stride = fortran ? n_source : 1;
    for (std::int64_t i = 0; i < n_source; ++i) {
      for (int n = 0; n < width; ++n) {
        const bool inside = i < source.n_source && n < source.max_neighbors;
        copy->entries[static_cast<std::size_t>(i * s_stride + n * n_stride)] = inside ? source(i, n) : -1;
      }
    }
    for (int edits = in_.ConsumeIntegralInRange(0, 3); edits > 0 && n_source * width > 0; --edits) {
      const auto at = in_.ConsumeIntegralInRange<std::size_t>(0, static_cast<std::size_t>(n_source * width - 1));
      copy->entries[at] = in_.ConsumeIntegralInRange<std::int32_t>(-3, static_cast<std::int32_t>(n_target) + 2);
    }
    copy->table = ff::NeighborTable::view(source.name, source.source, source.target, n_source, n_target, width,
                                          copy->entries.data(), s_stride, n_stride);
    return copy;
  }

  ff::Scalar mutate_scalar(const ff::Scalar& s) {
    switch (in_.ConsumeIntegralInRange(0, 7)) {
      case 0: return ff::Scalar(static_cast<std::int64_t>(s.as_int()));
      case 1: return ff::Scalar(s.as_double());
      case 2: return ff::Scalar(static_cast<std::int32_t>(s.as_int() + in_.ConsumeIntegralInRange(-3, 3)));
      case 3: return ff::Scalar(in_.ConsumeIntegral<std::int32_t>());
      default: return s;
    }
  }

 private:
  FuzzedDataProvider& in_;
};

bool same_bits(const ff::Field& a, const ff::Field& b, std::string* where) {
  bool same = true;
  a.for_each_index([&](const std::vector<std::int64_t>& index) {
    if (!same) return;
    const double x = a.get_as_double(a.offset_of(index)), y = b.get_as_double(b.offset_of(index));
    if (std::memcmp(&x, &y, sizeof x) != 0 && !(x != x && y != y)) {
      same = false;
      *where = a.describe();
    }
  });
  return same;
}

}  // namespace

// The modules are compiled before the first input (it would otherwise run into -timeout).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ff::fuzz::keep_jit_openmp_runtime_loaded();
  (void)compiled();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  Compiled& program = compiled()[in.ConsumeIntegralInRange(0, kNumPrograms - 1)];
  const bool any_layout = in.ConsumeBool();
  ff::CompiledProgram& callee = any_layout ? program.any : program.vertical_fastest;
  ff::examples::ExampleSize sizes;
  sizes.nx = in.ConsumeIntegralInRange(3, 6);
  sizes.ny = in.ConsumeIntegralInRange(3, 5);
  sizes.nk = in.ConsumeIntegralInRange(1, 4);
  sizes.bounded = in.ConsumeBool();
  auto base_owner = std::make_shared<ff::examples::ExampleInstance>(
      program.example->make_instance(sizes, ff::Layout::vertical_fastest, in.ConsumeIntegral<std::uint8_t>()));
  ff::examples::ExampleInstance& base = *base_owner;

  Mutator mutate(in);
  std::map<std::string, std::unique_ptr<GuardedView>> views;
  std::vector<std::unique_ptr<TableCopy>> tables;
  std::vector<ff::Field*> compared;  // compiled side
  std::vector<std::unique_ptr<unsigned char[]>> reference_buffers;
  std::vector<ff::Field> reference_fields;
  reference_fields.reserve(base.fields.size());
  ff::Arguments compiled_args, reference_args;
  try {
    for (auto& [name, field] : base.fields) {
      if (in.ConsumeIntegralInRange(0, 31) == 0) continue;  // a missing argument
      ff::Field* f = &field;
      if (in.ConsumeBool()) {
        auto view = mutate.mutate_field(field);
        f = &*view->field;
        views[name] = std::move(view);
      }
      // The reference sees the same strides (a copy of the view's buffer), not a dense clone:
      // a stride-0 output must be refused by both.
      if (auto found = views.find(name); found != views.end() && f == &*found->second->field) {
        GuardedView& v = *found->second;
        reference_buffers.emplace_back(new unsigned char[v.span + 2 * kGuardBytes]);
        std::memcpy(reference_buffers.back().get(), v.buffer.get(), v.span + 2 * kGuardBytes);
        reference_fields.push_back(ff::Field::view(reference_buffers.back().get() + kGuardBytes, f->dims(), f->dtype(),
                                                   f->shape(), f->strides(), f->origin()));
      } else {
        reference_fields.push_back(f->clone());
      }
      compiled_args.field(name, *f);
      reference_args.field(name, reference_fields.back());
      compared.push_back(f);
    }
    for (auto& [name, value] : base.scalars) {
      if (in.ConsumeIntegralInRange(0, 31) == 0) continue;
      const ff::Scalar v = in.ConsumeBool() ? mutate.mutate_scalar(value) : value;
      compiled_args.scalar(name, v);
      reference_args.scalar(name, v);
    }
    for (const std::string& name : base.connectivities) {
      if (in.ConsumeIntegralInRange(0, 31) == 0) continue;
      const ff::NeighborTable* table = &base.mesh->table(name);
      if (in.ConsumeBool()) {
        tables.push_back(mutate.mutate_table(*table));
        table = &tables.back()->table;
      }
      compiled_args.connectivity(name, *table);
      reference_args.connectivity(name, *table);
    }
    if (in.ConsumeIntegralInRange(0, 31) == 0) {
      compiled_args.scalar("unknown", ff::Scalar(1));
      reference_args.scalar("unknown", ff::Scalar(1));
    }
  } catch (const ff::InternalError& e) {
    fail(std::string("internal error while building arguments: ") + e.what());
  } catch (const ff::Error&) {
    return 0;  // a view the Field API itself refuses (its own checks are typed)
  }

  std::string reference_error, compiled_error;
  const std::type_info* reference_type = nullptr;
  const std::type_info* compiled_type = nullptr;
  try {
    ff::run_reference(program.example->program, reference_args);
  } catch (const ff::Error& e) {
    reference_type = &typeid(e);
    reference_error = e.what();
  }
  std::vector<ff::Field> before;
  for (ff::Field* f : compared) before.push_back(f->clone());
  try {
    callee(compiled_args);
  } catch (const ff::InternalError& e) {
    fail(std::string("internal error: ") + e.what());
  } catch (const ff::Error& e) {
    compiled_type = &typeid(e);
    compiled_error = e.what();
  } catch (const std::exception& e) {
    fail(std::string("untyped exception: ") + e.what());
  }
  LastCall& last = any_layout ? program.last_any : program.last_vertical_fastest;
  for (auto& [name, view] : views) {
    if (!view->guards_intact()) fail("the compiled call wrote outside the view of '" + name + "'");
  }
  last.base = base_owner;
  last.views = std::move(views);
  last.tables = std::move(tables);
  if (compiled_type != nullptr && *compiled_type == typeid(ff::LayoutError) && !any_layout) return 0;
  // Both must accept or both reject. The error types are not compared: with several faults in one
  // call (a bad table and an overlapping output) each side may report a different one first.
  if ((reference_type == nullptr) != (compiled_type == nullptr)) {
    fail("reference and compiled disagree: reference " +
         (reference_type ? std::string(reference_type->name()) + " (" + reference_error + ")" : std::string("accepted")) +
         ", compiled " +
         (compiled_type ? std::string(compiled_type->name()) + " (" + compiled_error + ")" : std::string("accepted")));
  }
  std::string where;
  for (std::size_t i = 0; i < compared.size(); ++i) {
    // Rejected: every field as it was. Accepted: every field equal to the reference's.
    const ff::Field& expected = compiled_type != nullptr ? before[i] : reference_fields[i];
    if (!same_bits(expected, *compared[i], &where)) {
      fail(std::string(compiled_type != nullptr ? "a rejected call changed " : "values differ in ") + where);
    }
  }
  return 0;
}
