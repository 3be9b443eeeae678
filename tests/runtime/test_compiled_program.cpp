// CompiledProgram's call path: a rejected call leaves nothing behind that a later call could
// trust, nested calls are refused instead of deadlocking, options are checked when compiling,
// and absurd sizes are a typed error instead of a wrapped byte count.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <future>
#include <limits>
#include <omp.h>
#include <thread>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "fieldflow/reference.h"
#include "support/backend_harness.h"

namespace fieldflow {
namespace {

using testing_support::same_bits;

const Dimension I = horizontal_dim("I");

// out = t(I+1) + t(I-1) with t stored as a transient: reads `in` over [lo-1, hi+1).
ir::Program smooth_1d(DType size_type = DType::int32) {
  ProgramBuilder pb("smooth_1d");
  Expr in = pb.field("in", {I}, DType::float64);
  Expr out = pb.field("out", {I}, DType::float64);
  Expr n = pb.scalar("n", size_type);
  const Expr t = materialize("t", exp(in) * 2.0);
  pb.call("smooth", t(I + 1) + t(I - 1), {out}, {{I, 1, n}});
  return pb.build();
}

Field ramp(std::int64_t size, double scale) {
  Field f({I}, DType::float64, {size});
  for (std::int64_t i = 0; i < size; ++i) f.set_from_double(i, scale * static_cast<double>(i) - 3.0);
  return f;
}

TEST(CompiledProgram, RejectedCallLeavesNoBindingThatSkipsTheChecks) {
  const ir::Program program = smooth_1d();
  auto compiled = compile(program, testing_support::cpu_options());
  Field in = ramp(10, 0.25), out = ramp(10, -1.0);
  const Field untouched = out.clone();
  Arguments too_far;  // domain [1, 10) reads in at 10: one past its extent
  too_far.field("in", in).field("out", out).scalar("n", 10);
  for (int attempt = 0; attempt < 3; ++attempt) {
    EXPECT_THROW(compiled(too_far), DomainError) << "attempt " << attempt;
    EXPECT_TRUE(same_bits(untouched, out, "out after a rejected call"));
  }
  // A valid call with smaller sizes afterwards runs its own domain, not the rejected one's.
  Arguments smaller;
  smaller.field("in", in).field("out", out).scalar("n", 6);
  compiled(smaller);
  Field expected = untouched.clone();
  run_reference(program, Arguments().field("in", in).field("out", expected).scalar("n", 6));
  EXPECT_TRUE(same_bits(expected, out, "out after a valid call that follows rejected ones"));
}

TEST(CompiledProgram, RejectedSizeChangeIsNotRememberedEither) {
  // The fast path for repeated calls with the same fields: only the size scalar changes.
  const ir::Program program = smooth_1d();
  auto compiled = compile(program, testing_support::cpu_options());
  Field in = ramp(10, 0.5), out = ramp(10, 2.0);
  compiled(Arguments().field("in", in).field("out", out).scalar("n", 5));
  const Field after_first = out.clone();
  EXPECT_THROW(compiled(Arguments().field("in", in).field("out", out).scalar("n", 10)), DomainError);
  EXPECT_THROW(compiled(Arguments().field("in", in).field("out", out).scalar("n", 10)), DomainError);
  EXPECT_TRUE(same_bits(after_first, out, "out after rejected calls"));
  compiled(Arguments().field("in", in).field("out", out).scalar("n", 8));
  Field expected = after_first.clone();
  run_reference(program, Arguments().field("in", in).field("out", expected).scalar("n", 8));
  EXPECT_TRUE(same_bits(expected, out, "out after the next valid call"));
}

// check() throws what the call would throw before running and runs nothing; a good check changes
// nothing either, and a rejected one leaves no binding that the next call could trust. On the
// reference backend too, for what it checks before evaluating.
TEST(CompiledProgram, CheckThrowsWhatTheCallWouldAndRunsNothing) {
  const ir::Program program = smooth_1d();
  CompileOptions reference;
  reference.backend = Backend::reference;
  for (const CompileOptions& options : {testing_support::cpu_options(), reference}) {
    SCOPED_TRACE(to_string(options.backend));
    auto compiled = compile(program, options);
    Field in = ramp(10, 0.25), out = ramp(10, -1.0);
    const Field untouched = out.clone();
    Arguments good, too_far, missing;
    good.field("in", in).field("out", out).scalar("n", 6);
    too_far.field("in", in).field("out", out).scalar("n", 11);  // out covers [0, 10) only
    missing.field("in", in).scalar("n", 6);
    EXPECT_THROW(compiled.check(too_far), DomainError);
    EXPECT_THROW(compiled.check(missing), ArgumentError);
    compiled.check(good);
    EXPECT_TRUE(same_bits(untouched, out, "out after checks"));
    EXPECT_THROW(compiled.check(too_far), DomainError);  // after a good check: checked again
    compiled(good);
    Field expected = untouched.clone();
    run_reference(program, Arguments().field("in", in).field("out", expected).scalar("n", 6));
    EXPECT_TRUE(same_bits(expected, out, "out after the call that follows the checks"));
  }
}

TEST(CompiledProgram, CallFromInsideItsOwnAllocatorIsAConcurrencyError) {
  Field in = ramp(12, 0.1), out = ramp(12, 0.0);
  Arguments args;
  args.field("in", in).field("out", out).scalar("n", 11);
  CompiledProgram* self = nullptr;
  std::string nested_error, nested_set_error;
  int allocator_calls = 0;
  CompileOptions o = testing_support::cpu_options();
  o.memory.external_memory_allocator = [&](const AllocationRequest& r) {
    ++allocator_calls;
    try {
      (*self)(args);
      nested_error = "no error";
    } catch (const ConcurrencyError& e) {
      nested_error = e.what();
    }
    try {  // the loop form's tuning state belongs to the calls too
      self->set_loop_form(LoopForm::vector);
      nested_set_error = "no error";
    } catch (const ConcurrencyError& e) {
      nested_set_error = e.what();
    }
    void* p = std::aligned_alloc(r.alignment, (r.bytes + r.alignment - 1) / r.alignment * r.alignment);
    return Workspace{p, r.bytes, r.device, [p] { std::free(p); }};
  };
  CompiledProgram compiled = compile(smooth_1d(), o);
  self = &compiled;
  // A deadlock would hang the suite: wait on another thread and give up loudly instead.
  auto done = std::async(std::launch::async, [&] { compiled(args); });
  if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "a call from inside the allocator deadlocked\n");
    std::_Exit(1);
  }
  done.get();
  EXPECT_EQ(allocator_calls, 1);
  EXPECT_NE(nested_error.find("called again from inside one of its own calls"), std::string::npos) << nested_error;
  EXPECT_NE(nested_set_error.find("called again from inside one of its own calls"), std::string::npos)
      << nested_set_error;
  EXPECT_EQ(compiled.loop_form(), LoopForm::scalar) << "the refused set_loop_form changed nothing";
  // The outer call completed with the right values, and the instance still works.
  Field expected = ramp(12, 0.0);
  run_reference(smooth_1d(), Arguments().field("in", in).field("out", expected).scalar("n", 11));
  EXPECT_TRUE(same_bits(expected, out, "out"));
  compiled(args);
  EXPECT_EQ(allocator_calls, 1);
}

TEST(CompiledProgram, EnumOptionsOutOfRangeAreRejectedAtCompileTime) {
  const ir::Program program = smooth_1d();
  auto expect_option_error = [&](const CompileOptions& o, const std::string& words) {
    try {
      compile(program, o);
      ADD_FAILURE() << "no error for " << words;
    } catch (const OptionError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  CompileOptions mode;
  mode.memory.mode = static_cast<TransientMemoryMode>(7);
  expect_option_error(mode, "transient memory mode 7 is not a mode");
  CompileOptions layout;
  layout.layout = static_cast<Layout>(9);
  expect_option_error(layout, "layout 9 is not a layout");
  CompileOptions backend;
  backend.backend = static_cast<Backend>(5);
  expect_option_error(backend, "backend 5 is not a backend");
  CompileOptions device;
  alignas(256) static char block[256];
  device.memory.external_workspace[static_cast<Device>(4)] = Workspace{block, 256, static_cast<Device>(4), {}};
  expect_option_error(device, "device 4, which is not a device");
  CompileOptions threshold;
  threshold.parallel_threshold = -1;
  expect_option_error(threshold, "parallel_threshold must be >= 0");
  CompileOptions form;
  form.loop_form = static_cast<LoopForm>(3);
  expect_option_error(form, "loop_form 3 is not a loop form: expected tuned (0), scalar (1) or vector (2)");
  form.backend = Backend::reference;  // no module to build, the same check
  expect_option_error(form, "loop_form 3 is not a loop form");
  for (const char* arch : {"compute_90", "sm90", "sm_9", "sm_90b", "sm_", "SM_90", " sm_90"}) {
    CompileOptions o;
    o.cuda_arch = arch;
    expect_option_error(o, fmt::format("cuda_arch '{}' is not a GPU architecture: expected sm_<major><minor>", arch));
  }
  for (const char* arch : {"sm_90", "sm_90a", "sm_100f", "sm_120"}) {
    CompileOptions o = testing_support::cpu_options();
    o.cuda_arch = arch;
    EXPECT_NO_THROW(compile(program, o)) << arch;
  }
}

TEST(CompiledProgram, AbsurdSizesAreATypedErrorNotAWrappedByteCount) {
  int allocator_calls = 0;
  CompileOptions o = testing_support::cpu_options();
  o.memory.external_memory_allocator = [&](const AllocationRequest& r) {
    ++allocator_calls;
    return Workspace{nullptr, r.bytes, r.device, {}};
  };
  auto compiled = compile(smooth_1d(DType::int64), o);
  const SizeMap absurd{{"n", std::int64_t(1) << 61}};  // 2^61 float64 values: 2^64 bytes
  try {
    compiled.workspace_requirements(absurd);
    ADD_FAILURE() << "workspace_requirements accepted 2^61 points";
  } catch (const DomainError& e) {
    EXPECT_NE(std::string(e.what()).find("transient 't'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compiled.memory_plan(absurd), DomainError);
  EXPECT_THROW(compiled.prepare(absurd), DomainError);
  // Found by fuzz_memory_options (UBSan: signed overflow adding a shift to INT64_MAX): sizes beyond
  // the addressable indices are refused before any index arithmetic.
  for (const std::int64_t n : {std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min()}) {
    try {
      compiled.workspace_requirements({{"n", n}});
      if (n > 0) ADD_FAILURE() << "workspace_requirements accepted n = " << n;
    } catch (const DomainError& e) {
      EXPECT_NE(std::string(e.what()).find("call 'smooth'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("2^62"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(allocator_calls, 0);
  // Sizes that fit are still planned exactly: 2^20 + 2 points of t.
  const auto req = compiled.workspace_requirements({{"n", std::int64_t(1) << 20}});
  ASSERT_EQ(req.size(), 1u);
  EXPECT_EQ(req[0].bytes, ((std::size_t(1) << 20) + 1) * 8 / 256 * 256 + 256);
}

// A host that calls fieldflow from inside its own OpenMP parallel region (a model threading over
// blocks, one instance per thread): every call's worksharing loops must bind to a team of the
// call's own, not to the host's team, both when a call is small enough to stay on the calling
// thread and when it is large enough to ask for threads (nested parallelism is off: a team of one).
TEST(CompiledProgram, CallsFromInsideAHostParallelRegionEqualTheReference) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "libgomp is not instrumented: its barriers read as races under ThreadSanitizer";
#endif
  constexpr int host_threads = 3;
  for (const auto& ex : examples::all_examples())
    for (const std::int64_t threshold : {std::int64_t(0), std::int64_t(1) << 40}) {
      SCOPED_TRACE(ex.name + ", parallel_threshold " + std::to_string(threshold));
      CompileOptions o = testing_support::cpu_options();
      o.num_threads = 2;
      o.parallel_threshold = threshold;
      const examples::ExampleSize size{9, 6, 4, ex.unstructured};
      examples::ExampleInstance expected = ex.make_instance(size, Layout::vertical_fastest, 11);
      run_reference(ex.program, expected.arguments());
      std::vector<CompiledProgram> programs;
      std::vector<examples::ExampleInstance> given;
      for (int t = 0; t < host_threads; ++t) {
        programs.push_back(compile(ex.program, o));
        given.push_back(ex.make_instance(size, Layout::vertical_fastest, 11));
      }
      std::vector<std::string> errors(host_threads);
      int team = 0;
#pragma omp parallel num_threads(host_threads)
      {
        const int t = omp_get_thread_num();
#pragma omp single
        team = omp_get_num_threads();
        try {
          programs[static_cast<std::size_t>(t)](given[static_cast<std::size_t>(t)].arguments());
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(t)] = e.what();
        }
      }
      ASSERT_EQ(team, host_threads) << "the host region did not start its threads";
      for (int t = 0; t < host_threads; ++t) {
        EXPECT_EQ(errors[static_cast<std::size_t>(t)], "") << "host thread " << t;
        for (const auto& name : expected.outputs)
          EXPECT_TRUE(same_bits(expected.fields.at(name), given[static_cast<std::size_t>(t)].fields.at(name),
                                name + " of host thread " + std::to_string(t)));
      }
    }
}

// A concat_where bound whose constant wraps (n + 2^62 + 2^62 is n - 2^63): the module evaluates it
// with the same wrapping arithmetic as the reference (no signed overflow on either side).
TEST(CompiledProgram, WrappingBoundsAgreeWithTheReference) {
  constexpr std::int64_t big = std::int64_t(1) << 62;
  ProgramBuilder pb("wrapping_bound");
  Expr a = pb.field("a", {I}, DType::float64), out = pb.field("out", {I}, DType::float64);
  Expr n = pb.scalar("n", DType::int64);
  // I >= n - 2^63 holds everywhere for n >= 0; with n = -1 the bound wraps to INT64_MAX.
  pb.call("pick", concat_where(I >= n + big + big, a, -a), {out}, {{I, 0, 10}});
  const ir::Program program = pb.build();
  auto compiled = compile(program, testing_support::cpu_options());
  for (const std::int64_t nv : {std::int64_t(3), std::int64_t(-1)}) {
    Field fa = ramp(10, 0.5), got = ramp(10, 0.0), want = ramp(10, 0.0);
    compiled(Arguments().field("a", fa).field("out", got).scalar("n", nv));
    run_reference(program, Arguments().field("a", fa).field("out", want).scalar("n", nv));
    EXPECT_TRUE(same_bits(want, got, "out with n = " + std::to_string(nv)));
    for (std::int64_t i = 0; i < 10; ++i)
      EXPECT_EQ(got.get_as_double(i), (nv >= 0 ? 1.0 : -1.0) * fa.get_as_double(i)) << "n = " << nv << ", I = " << i;
  }
}

// A call that fails a read check while running restores its outputs element by element, never
// the bytes between a strided output's elements: they belong to someone else. Here another thread
// keeps writing the other component of an array of structures while calls of a program whose
// output is the first component fail. Copying the output's whole span (as before) is a data race
// that ThreadSanitizer reports (scripts/test.sh runs this under it), and its restore can put the
// other thread's values back in time, which the writer would see.
TEST(CompiledProgram, AFailedCallRestoresOnlyItsOutputsElements) {
  const Dimension K = vertical_dim("K");
  ProgramBuilder pb("gather");
  Expr a = pb.field("a", {I, K}, DType::float64), off = pb.field("off", {I, K}, DType::int32);
  Expr out = pb.field("out", {I, K}, DType::float64);
  Expr n = pb.scalar("n", DType::int32), levels = pb.scalar("nk", DType::int32);
  pb.call("gather", a(K + off), {out}, {{I, 0, n}, {K, 0, levels}});
  const std::int64_t ni = 64, nk = 8;
  Field fa({I, K}, DType::float64, {ni, nk}), foff({I, K}, DType::int32, {ni, nk});
  fa.fill(1.5);
  foff.at<std::int32_t>({ni / 2, nk - 1}) = 1;  // reads level nk: outside a
  std::vector<double> aos(static_cast<std::size_t>(ni * 2 * nk), -1.0);  // (I, component, K)
  Field fout = Field::view(aos.data(), {I, K}, DType::float64, {ni, nk}, {2 * nk, 1});
  const auto other = [&](std::int64_t i, std::int64_t k) -> double& {
    return aos[static_cast<std::size_t>((i * 2 + 1) * nk + k)];
  };
  CompileOptions o;
  o.num_threads = 2;
  o.parallel_threshold = 0;
  CompiledProgram program = compile(pb.build(), o);
  Arguments args;
  args.field("a", fa).field("off", foff).field("out", fout).scalar("n", ni).scalar("nk", nk);
  std::atomic<bool> stop{false};
  std::atomic<int> regressions{0};
  std::thread writer([&] {
    for (double value = 1.0; !stop.load(); value += 1.0) {
      for (std::int64_t i = 0; i < ni; ++i)
        for (std::int64_t k = 0; k < nk; ++k) other(i, k) = value;
      for (std::int64_t i = 0; i < ni; ++i)
        for (std::int64_t k = 0; k < nk; ++k) regressions += other(i, k) != value;
    }
  });
  for (int c = 0; c < 300; ++c) EXPECT_THROW(program(args), DomainError);
  stop = true;
  writer.join();
  EXPECT_EQ(regressions.load(), 0) << "a failed call wrote the other component";
  for (std::int64_t i = 0; i < ni; ++i)
    for (std::int64_t k = 0; k < nk; ++k)
      ASSERT_EQ(aos[static_cast<std::size_t>(i * 2 * nk + k)], -1.0) << "out changed at " << i << ", " << k;
}

// set_loop_form from another thread while calls run (a host's control thread): it waits for the
// call in progress, every call gives the reference's bits in whatever form it ran, and
// ThreadSanitizer (scripts/test.sh runs this under it) sees the tuning state touched only under
// the call lock.
TEST(CompiledProgram, SetLoopFormWhileAnotherThreadCalls) {
  const auto& ex = examples::example("fvm_nabla");
  const examples::ExampleSize size{13, 11, 3, true};
  CompileOptions o;
  o.layout = Layout::horizontal_fastest;
  // One OpenMP thread: each call's fields are new, and GCC's libgomp hands them to its pooled
  // threads through barriers ThreadSanitizer does not see (scripts/race.sh checks modules' threads).
  o.num_threads = 1;
  CompiledProgram program = compile(ex.program, o);
  ASSERT_EQ(program.loop_form(), LoopForm::tuned) << "fvm_nabla horizontal-fastest has two loop forms";
  auto ref = ex.make_instance(size, Layout::horizontal_fastest, 3);
  run_reference(ex.program, ref.arguments());
  std::atomic<bool> stop{false};
  std::thread control([&] {
    const LoopForm forms[] = {LoopForm::scalar, LoopForm::tuned, LoopForm::vector};
    for (int i = 0; !stop.load(); ++i) {
      program.set_loop_form(forms[i % 3]);
      const LoopForm now = program.loop_form();
      EXPECT_TRUE(now == LoopForm::scalar || now == LoopForm::vector || now == LoopForm::tuned);
      std::this_thread::yield();
    }
  });
  for (int call = 0; call < 30; ++call) {
    auto mine = ex.make_instance(size, Layout::horizontal_fastest, 3);
    program(mine.arguments());
    for (auto& [name, field] : ref.fields) EXPECT_TRUE(same_bits(field, mine.fields.at(name), name)) << "call " << call;
  }
  stop = true;
  control.join();
}

}  // namespace
}  // namespace fieldflow
