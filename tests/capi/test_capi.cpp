// The C API (include/fieldflow/fieldflow.h): results equal the C++ reference executor bit for bit
// for caller arrays in C and Fortran order with padding, from C++ and from a C99 file
// (c_driver.c); every bad input of issue 9 is a status with a message and changes nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <thread>

#include "capi/capi_harness.h"
#include "capi/c_driver.h"
#include "fieldflow/capi_interop.h"
#include "fieldflow_aot_aot_test_vertical_vadv.h"  // tests/aot: an ahead-of-time library
#include "fieldflow/compile.h"
#include "fieldflow/device_errors.h"
#include "fieldflow/errors.h"
#include "fieldflow/mesh.h"

namespace fieldflow::capi_test {
namespace {

std::string message() { return ff_last_error(); }

void expect_words(const std::string& msg, std::initializer_list<const char*> words) {
  for (const char* w : words) EXPECT_NE(msg.find(w), std::string::npos) << "missing '" << w << "' in: " << msg;
}

ff_options options_for(Layout layout, int memory_mode = FF_MEMORY_DEFAULT) {
  ff_options o;
  ff_options_init(&o);
  o.layout = layout == Layout::vertical_fastest ? FF_LAYOUT_VERTICAL_FASTEST : FF_LAYOUT_HORIZONTAL_FASTEST;
  o.memory_mode = memory_mode;
  o.num_threads = 2;
  o.parallel_threshold = 0;  // exercise the threaded path on small grids
  return o;
}

// A handle destroyed at scope exit.
struct Program {
  ff_program* p = nullptr;
  Program() = default;
  Program(const char* name, const ff_options& o) {
    const int s = ff_program_create(name, &o, &p);
    EXPECT_EQ(s, FF_OK) << ff_last_error();
  }
  ~Program() { ff_program_destroy(p); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
};

const examples::ExampleSize small{6, 5, 4};

// ---- results -------------------------------------------------------------------------------

struct Case {
  const char* example;
  Layout layout;
  Order order;
  int pad;
  Order tables;
};

class CApiResults : public ::testing::TestWithParam<Case> {};

TEST_P(CApiResults, EqualTheReferenceExecutorBitwise) {
  const Case c = GetParam();
  const examples::Example& ex = examples::example(c.example);
  CallerArguments args(ex, small, c.layout, c.order, c.pad);
  const examples::ExampleInstance ref = args.reference(ex, small, c.layout, 2);
  Program p(c.example, options_for(c.layout));
  FF_ASSERT_OK(args.set_all(p.p, c.tables));
  FF_ASSERT_OK(ff_program_run(p.p));
  FF_ASSERT_OK(ff_program_run(p.p));  // the second run takes the bound fast path (masked_update: in/out fields)
  for (const auto& name : ref.outputs) expect_bitwise_equal(name, args.fields.at(name), ref.fields.at(name));
}

INSTANTIATE_TEST_SUITE_P(
    Examples, CApiResults,
    ::testing::Values(Case{"laplacian", Layout::vertical_fastest, Order::c, 3, Order::c},
                      Case{"hdiff", Layout::vertical_fastest, Order::c, 2, Order::c},
                      Case{"hdiff", Layout::horizontal_fastest, Order::fortran, 1, Order::fortran},
                      Case{"vadv", Layout::vertical_fastest, Order::c, 0, Order::c},
                      Case{"vadv", Layout::horizontal_fastest, Order::fortran, 3, Order::fortran},
                      Case{"fvm_nabla", Layout::vertical_fastest, Order::c, 1, Order::fortran},
                      Case{"fvm_nabla", Layout::horizontal_fastest, Order::fortran, 0, Order::c},
                      Case{"c2e2co_sum", Layout::horizontal_fastest, Order::fortran, 2, Order::fortran},
                      Case{"masked_update", Layout::horizontal_fastest, Order::fortran, 1, Order::c}),
    [](const auto& info) {
      return std::string(info.param.example) + (info.param.layout == Layout::vertical_fastest ? "_C" : "_Fortran");
    });

TEST(CApi, ReferenceBackendThroughTheCApi) {
  const examples::Example& ex = examples::example("vadv");
  CallerArguments args(ex, small, Layout::horizontal_fastest, Order::fortran, 1);
  const examples::ExampleInstance ref = args.reference(ex, small, Layout::horizontal_fastest);
  ff_options o = options_for(Layout::horizontal_fastest);
  o.backend = FF_BACKEND_REFERENCE;
  Program p("vadv", o);
  FF_ASSERT_OK(args.set_all(p.p, Order::fortran));
  FF_ASSERT_OK(ff_program_run(p.p));
  expect_bitwise_equal("out", args.fields.at("out"), ref.fields.at("out"));
}

TEST(CApi, LayoutAnyTakesArraysOfEveryOrderInOneRun) {
  const examples::Example& ex = examples::example("hdiff");
  CallerArguments args(ex, small, Layout::vertical_fastest, Order::c, 1);
  const examples::ExampleInstance ref = args.reference(ex, small, Layout::vertical_fastest);
  ff_options o = options_for(Layout::vertical_fastest);
  o.layout = FF_LAYOUT_ANY;
  Program p("hdiff", o);
  FF_ASSERT_OK(args.set_all(p.p, Order::c));
  Buffer coeff = copy_to_buffer(args.instance.fields.at("coeff"), Order::fortran, 2);  // I unit-stride, padded
  FF_ASSERT_OK(ff_program_set_field(p.p, "coeff", FF_DTYPE_FLOAT64, coeff.data, 3, coeff.shape.data(),
                                    coeff.strides.data(), coeff.origin.data()));
  FF_ASSERT_OK(ff_program_run(p.p));
  expect_bitwise_equal("out", args.fields.at("out"), ref.fields.at("out"));
}

// Without a layout (ff_options_init's FF_LAYOUT_DEFAULT) a host handle is vertical_fastest: C
// order arrays give the reference, Fortran order ones are a layout error naming it.
TEST(CApi, TheDefaultLayoutIsTheBackends) {
  ff_options o;
  FF_ASSERT_OK(ff_options_init(&o));
  EXPECT_EQ(o.layout, FF_LAYOUT_DEFAULT);
  const examples::Example& ex = examples::example("hdiff");
  CallerArguments args(ex, small, Layout::vertical_fastest, Order::c, 1);
  const examples::ExampleInstance ref = args.reference(ex, small, Layout::vertical_fastest);
  Program p("hdiff", o);
  FF_ASSERT_OK(args.set_all(p.p, Order::c));
  FF_ASSERT_OK(ff_program_run(p.p));
  expect_bitwise_equal("out", args.fields.at("out"), ref.fields.at("out"));
  Buffer coeff = copy_to_buffer(args.instance.fields.at("coeff"), Order::fortran, 0);
  FF_ASSERT_OK(ff_program_set_field(p.p, "coeff", FF_DTYPE_FLOAT64, coeff.data, 3, coeff.shape.data(),
                                    coeff.strides.data(), coeff.origin.data()));
  EXPECT_EQ(ff_program_run(p.p), FF_ERROR_LAYOUT);
  expect_words(message(), {"vertical_fastest", "coeff"});
  o.layout = -2;
  ff_program* bad = nullptr;
  EXPECT_EQ(ff_program_create("hdiff", &o, &bad), FF_ERROR_OPTION);
  expect_words(message(), {"ff_options.layout is -2", "FF_LAYOUT_DEFAULT (-1)"});
}

// The loop form of horizontal-fastest mesh blocks: a new handle tunes; each pinned form, and a
// tuning started again, give the reference's bits at every run (the elements the reference writes
// are overwritten with garbage before each run, so a run that wrote nothing would fail); a value
// outside FF_LOOP_FORM_* is an option error that changes nothing. At a size no block divides, on
// the bounded mesh (runs of every kind of row), at 2 threads.
TEST(CApi, LoopFormsArePinnedOrTunedAgain) {
  const examples::Example& ex = examples::example("fvm_nabla");
  const examples::ExampleSize size{21, 19, 4, true};
  CallerArguments args(ex, size, Layout::horizontal_fastest, Order::fortran, 1);
  const examples::ExampleInstance ref = args.reference(ex, size, Layout::horizontal_fastest);
  Program p("fvm_nabla", options_for(Layout::horizontal_fastest));
  FF_ASSERT_OK(args.set_all(p.p, Order::fortran));
  const auto run_and_compare = [&](const std::string& what) {
    for (const auto& name : ref.outputs) {
      Buffer& b = args.fields.at(name);
      const Field &before = args.instance.fields.at(name), &after = ref.fields.at(name);
      const std::size_t bytes = size_of(b.dtype);
      for_each_index(b.origin, b.shape, [&](const std::vector<std::int64_t>& i) {
        const auto* old_value = static_cast<const std::byte*>(before.data()) + before.offset_of(i) * bytes;
        const auto* new_value = static_cast<const std::byte*>(after.data()) + after.offset_of(i) * bytes;
        if (std::memcmp(old_value, new_value, bytes) != 0) std::memset(b.at(i), 0xA5, bytes);
      });
    }
    ASSERT_EQ(ff_program_run(p.p), FF_OK) << what << ": " << message();
    for (const auto& name : ref.outputs) expect_bitwise_equal(what + ", " + name, args.fields.at(name), ref.fields.at(name));
  };
  int form = -1;
  FF_ASSERT_OK(ff_program_loop_form(p.p, &form));
  EXPECT_EQ(form, FF_LOOP_FORM_TUNED);
  for (const int pinned : {FF_LOOP_FORM_VECTOR, FF_LOOP_FORM_SCALAR, FF_LOOP_FORM_TUNED}) {
    FF_ASSERT_OK(ff_program_set_loop_form(p.p, pinned));
    FF_ASSERT_OK(ff_program_loop_form(p.p, &form));
    EXPECT_EQ(form, pinned);
    for (int run = 0; run < 7; ++run) run_and_compare("form " + std::to_string(pinned) + ", run " + std::to_string(run));
  }
  FF_ASSERT_OK(ff_program_loop_form(p.p, &form));
  EXPECT_TRUE(form == FF_LOOP_FORM_SCALAR || form == FF_LOOP_FORM_VECTOR) << "tuned after 7 runs: " << form;
  const int decided = form;
  for (const int bad : {3, -1, 256}) {
    EXPECT_EQ(ff_program_set_loop_form(p.p, bad), FF_ERROR_OPTION) << bad;
    expect_words(message(), {"ff_program_set_loop_form", "'fvm_nabla'", ("form " + std::to_string(bad)).c_str(),
                             "FF_LOOP_FORM_TUNED (0)", "FF_LOOP_FORM_VECTOR (2)"});
    FF_ASSERT_OK(ff_program_loop_form(p.p, &form));
    EXPECT_EQ(form, decided) << "a rejected form changes nothing";
  }
  EXPECT_EQ(ff_program_loop_form(p.p, nullptr), FF_ERROR_INVALID_VALUE);
  EXPECT_EQ(ff_program_loop_form(nullptr, &form), FF_ERROR_INVALID_HANDLE);
  EXPECT_EQ(ff_program_set_loop_form(nullptr, FF_LOOP_FORM_SCALAR), FF_ERROR_INVALID_HANDLE);
  // A module with one form has nothing to tune.
  Program vertical("fvm_nabla", options_for(Layout::vertical_fastest));
  FF_ASSERT_OK(ff_program_loop_form(vertical.p, &form));
  EXPECT_EQ(form, FF_LOOP_FORM_SCALAR);
  FF_ASSERT_OK(ff_program_set_loop_form(vertical.p, FF_LOOP_FORM_TUNED));
  FF_ASSERT_OK(ff_program_loop_form(vertical.p, &form));
  EXPECT_EQ(form, FF_LOOP_FORM_SCALAR);
}

// FF_BACKEND_CUDA is unavailable exactly when the C++ API says so (no toolkit built in, or no
// device); a stream is for cuda handles only.
TEST(CApi, CudaBackendAndStreams) {
  ff_options o;
  FF_ASSERT_OK(ff_options_init(&o));
  o.backend = FF_BACKEND_CUDA;
  bool available = true;
  try {
    CompileOptions c;
    c.backend = Backend::cuda;
    (void)compile(examples::example("laplacian").program, c);
  } catch (const BackendUnavailableError&) {
    available = false;
  }
  ff_program* cuda = nullptr;
  const ff_status s = ff_program_create("laplacian", &o, &cuda);
  if (available) {
    EXPECT_EQ(s, FF_OK) << message();
    int stand_in_stream = 0;  // never used: the handle is destroyed before a run
    EXPECT_EQ(ff_program_set_cuda_stream(cuda, &stand_in_stream), FF_OK) << message();
    FF_ASSERT_OK(ff_program_destroy(cuda));
  } else {
    EXPECT_EQ(s, FF_ERROR_BACKEND_UNAVAILABLE);
    EXPECT_EQ(cuda, nullptr);
    expect_words(message(), {"laplacian", "backend cuda"});
  }
  Program host("laplacian", options_for(Layout::vertical_fastest));
  int stand_in_stream = 0;
  EXPECT_EQ(ff_program_set_cuda_stream(host.p, &stand_in_stream), FF_ERROR_OPTION);
  expect_words(message(), {"ff_program_set_cuda_stream", "laplacian", "backend cpu", "FF_BACKEND_CUDA"});
  EXPECT_EQ(ff_program_set_cuda_stream(host.p, nullptr), FF_OK);
  EXPECT_EQ(ff_program_set_cuda_stream(nullptr, nullptr), FF_ERROR_INVALID_HANDLE);
  o.backend = 3;
  EXPECT_EQ(ff_program_create("laplacian", &o, &cuda), FF_ERROR_OPTION);
  expect_words(message(), {"ff_options.backend is 3", "FF_BACKEND_CUDA (2)"});
}

// ---- from C --------------------------------------------------------------------------------

TEST(CApiFromC, HdiffOnPaddedRowMajorArrays) {
  const examples::Example& ex = examples::example("hdiff");
  const int nx = 7, ny = 5, nk = 4, pad = 3;
  const examples::ExampleSize size{nx, ny, nk};
  examples::ExampleInstance ref = ex.make_instance(size, Layout::vertical_fastest, 11);
  Buffer in = copy_to_buffer(ref.fields.at("in"), Order::c, pad);
  Buffer coeff = copy_to_buffer(ref.fields.at("coeff"), Order::c, pad);
  Field out_field({horizontal_dim("I"), horizontal_dim("J"), vertical_dim("K")}, DType::float64, {nx, ny, nk});
  out_field.fill(-7);
  Buffer out = copy_to_buffer(out_field, Order::c, pad);
  run_reference(ex.program, ref.arguments());
  ff_memory_stats stats{};
  const int s = c_hdiff(nx, ny, nk, pad, static_cast<double*>(in.data), static_cast<double*>(coeff.data),
                        static_cast<double*>(out.data), 3, &stats);
  ASSERT_EQ(s, FF_OK) << ff_status_name(s) << ": " << ff_last_error();
  const Field& want = ref.fields.at("out");
  for (int i = 0; i < nx; ++i)
    for (int j = 0; j < ny; ++j)
      for (int k = 0; k < nk; ++k)
        ASSERT_EQ(*static_cast<double*>(out.at({i, j, k})), want.at<double>({i, j, k})) << i << "," << j << "," << k;
  EXPECT_EQ(stats.calls, 3u);
  EXPECT_EQ(stats.system_allocations, 0u);
  EXPECT_EQ(stats.allocator_calls, 0u);
}

TEST(CApiFromC, MeshReductionWithTablesFromTheCApi) {
  const examples::Example& ex = examples::example("c2e2co_sum");
  const examples::ExampleSize size{4, 3, 5};
  examples::ExampleInstance ref = ex.make_instance(size, Layout::horizontal_fastest, 5);
  Buffer in = copy_to_buffer(ref.fields.at("in"), Order::fortran, 0);
  Buffer weights = copy_to_buffer(ref.fields.at("weights"), Order::fortran, 0);
  Buffer out = copy_to_buffer(ref.fields.at("out"), Order::fortran, 0);
  run_reference(ex.program, ref.arguments());
  const int s = c_c2e2co_sum(4, 3, 5, static_cast<double*>(in.data), static_cast<double*>(weights.data),
                             static_cast<double*>(out.data));
  ASSERT_EQ(s, FF_OK) << ff_status_name(s) << ": " << ff_last_error();
  expect_bitwise_equal("out", out, ref.fields.at("out"));
}

TEST(CApiFromC, DestroyedNullAndBogusHandlesAreErrorsNotCrashes) {
  int run_destroyed = -1, destroy_twice = -1, run_null = -1, run_bogus = -1, set_destroyed = -1;
  c_invalid_handles(&run_destroyed, &destroy_twice, &run_null, &run_bogus, &set_destroyed);
  EXPECT_EQ(run_destroyed, FF_ERROR_INVALID_HANDLE);
  EXPECT_EQ(set_destroyed, FF_ERROR_INVALID_HANDLE);
  EXPECT_EQ(destroy_twice, FF_ERROR_INVALID_HANDLE);
  EXPECT_EQ(run_null, FF_ERROR_INVALID_HANDLE);
  EXPECT_EQ(run_bogus, FF_ERROR_INVALID_HANDLE);
  expect_words(message(), {"not a live program", "destroyed, or never created"});
  ff_memory_stats stats;
  EXPECT_EQ(ff_program_memory_stats(nullptr, &stats), FF_ERROR_INVALID_HANDLE);
  EXPECT_EQ(ff_program_destroy(nullptr), FF_OK);  // like free(NULL)
}

TEST(CApiFromC, DestroyWhileAnotherThreadRunsTheHandle) {
  // The run in progress keeps the program alive; later runs on the handle are invalid-handle errors.
  const examples::Example& ex = examples::example("laplacian");
  CallerArguments args(ex, small, Layout::vertical_fastest, Order::c, 0);
  ff_program* p = nullptr;
  const ff_options o = options_for(Layout::vertical_fastest);
  FF_ASSERT_OK(ff_program_create("laplacian", &o, &p));
  FF_ASSERT_OK(args.set_all(p, Order::c));
  std::atomic<int> ok{0}, invalid{0}, other{0};
  std::atomic<bool> started{false};
  std::thread runner([&] {
    // Runs until the handle is gone (bounded, in case destroy never takes effect).
    for (long i = 0; i < 10'000'000 && invalid == 0; ++i) {
      const int s = ff_program_run(p);
      started = true;
      (s == FF_OK ? ok : s == FF_ERROR_INVALID_HANDLE ? invalid : other)++;
    }
  });
  while (!started) std::this_thread::yield();
  FF_ASSERT_OK(ff_program_destroy(p));
  runner.join();
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(invalid.load(), 1);
  EXPECT_EQ(other.load(), 0);
}

// ---- status codes and messages ---------------------------------------------------------------

TEST(CApi, EveryStatusHasItsOwnName) {
  std::set<std::string> names;
  for (int s = FF_OK; s <= FF_ERROR_CUDA; ++s) EXPECT_TRUE(names.insert(ff_status_name(s)).second) << s;
  EXPECT_STREQ(ff_status_name(FF_ERROR_BACKEND_UNAVAILABLE), "FF_ERROR_BACKEND_UNAVAILABLE");
  EXPECT_STREQ(ff_status_name(FF_ERROR_CUDA), "FF_ERROR_CUDA");
  EXPECT_STREQ(ff_status_name(12345), "FF_UNKNOWN_STATUS");
}

TEST(CApi, LastErrorIsPerThread) {
  ff_program* p = nullptr;
  EXPECT_EQ(ff_program_create("no_such_example", nullptr, &p), FF_ERROR_ARGUMENT);
  EXPECT_EQ(p, nullptr);
  expect_words(message(), {"unknown example 'no_such_example'", "hdiff", "vadv"});
  std::string other = "unset";
  std::thread([&] { other = ff_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(message().find("no_such_example"), std::string::npos);
}

TEST(CApi, OptionsAreCheckedAtCreation) {
  ff_program* p = nullptr;
  ff_options o = options_for(Layout::vertical_fastest);
  o.backend = 7;
  EXPECT_EQ(ff_program_create("laplacian", &o, &p), FF_ERROR_OPTION);
  expect_words(message(), {"backend is 7", "FF_BACKEND_CPU"});
  o = options_for(Layout::vertical_fastest, 9);
  EXPECT_EQ(ff_program_create("laplacian", &o, &p), FF_ERROR_OPTION);
  expect_words(message(), {"memory_mode is 9"});
  o = options_for(Layout::vertical_fastest, FF_MEMORY_POOL);
  c_allocator_state state{2, 0, 0, 0, nullptr};
  o.allocate = c_allocate;
  o.allocator_user_data = &state;
  EXPECT_EQ(ff_program_create("laplacian", &o, &p), FF_ERROR_OPTION);  // an allocator only serves 'external'
  expect_words(message(), {"pool", "external_memory_allocator"});
  o = options_for(Layout::vertical_fastest);
  o.release = c_release;
  EXPECT_EQ(ff_program_create("laplacian", &o, &p), FF_ERROR_OPTION);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(ff_program_create("laplacian", &o, nullptr), FF_ERROR_INVALID_VALUE);
  EXPECT_EQ(ff_options_init(nullptr), FF_ERROR_INVALID_VALUE);
}

TEST(CApi, ExamplesAndParametersCanBeListed) {
  int n = 0;
  FF_ASSERT_OK(ff_example_count(&n));
  EXPECT_EQ(n, static_cast<int>(examples::all_examples().size()));
  const char* name = nullptr;
  FF_ASSERT_OK(ff_example_name(2, &name));
  EXPECT_STREQ(name, examples::all_examples()[2].name.c_str());
  EXPECT_EQ(ff_example_name(n, &name), FF_ERROR_INVALID_VALUE);

  Program p("fvm_nabla", options_for(Layout::horizontal_fastest));
  const ir::Program& want = examples::example("fvm_nabla").program;
  int count = 0;
  FF_ASSERT_OK(ff_program_param_count(p.p, &count));
  ASSERT_EQ(count, static_cast<int>(want.params.size()));
  for (int i = 0; i < count; ++i) {
    ff_param_info info{};
    FF_ASSERT_OK(ff_program_param_info(p.p, i, &info));
    const ir::Param& prm = want.params[static_cast<std::size_t>(i)];
    EXPECT_EQ(info.name, prm.name);
    int index = -1;
    FF_ASSERT_OK(ff_program_param_index(p.p, prm.name.c_str(), &index));
    EXPECT_EQ(index, i);
    if (prm.kind == ir::ParamKind::field) {
      EXPECT_EQ(info.kind, FF_PARAM_FIELD);
      EXPECT_EQ(info.dtype, FF_DTYPE_FLOAT64);
      EXPECT_EQ(info.rank, static_cast<int>(prm.type.dims.size()));
      EXPECT_EQ(info.is_output != 0, prm.name == "pnabla_x" || prm.name == "pnabla_y") << prm.name;
      for (int a = 0; a < info.rank; ++a) {
        const char* dim = nullptr;
        int kind = -1;
        FF_ASSERT_OK(ff_program_param_dim(p.p, i, a, &dim, &kind));
        EXPECT_EQ(dim, prm.type.dims[static_cast<std::size_t>(a)].name);
      }
    } else if (prm.kind == ir::ParamKind::scalar) {
      EXPECT_EQ(info.kind, FF_PARAM_SCALAR);
      EXPECT_EQ(info.dtype, FF_DTYPE_INT32);
    } else {
      EXPECT_EQ(info.kind, FF_PARAM_CONNECTIVITY);
      const char* dim = nullptr;
      int kind = -1;
      FF_ASSERT_OK(ff_program_param_dim(p.p, i, 1, &dim, &kind));
      EXPECT_EQ(std::string(dim), prm.name + "Dim");
      EXPECT_EQ(kind, FF_DIM_LOCAL);
    }
  }
  int sign = -1;
  FF_ASSERT_OK(ff_program_param_index(p.p, "sign", &sign));
  const char* dim = nullptr;
  int kind = -1;
  FF_ASSERT_OK(ff_program_param_dim(p.p, sign, 0, &dim, &kind));
  EXPECT_STREQ(dim, "Vertex");
  EXPECT_EQ(kind, FF_DIM_HORIZONTAL);
  EXPECT_EQ(ff_program_param_dim(p.p, sign, 2, &dim, &kind), FF_ERROR_INVALID_VALUE);
  EXPECT_EQ(ff_program_param_info(p.p, count, nullptr), FF_ERROR_INVALID_VALUE);
  ff_param_info info;
  EXPECT_EQ(ff_program_param_info(p.p, -1, &info), FF_ERROR_INVALID_VALUE);
  expect_words(message(), {"fvm_nabla", "given index -1"});
  EXPECT_EQ(ff_program_param_index(p.p, "nope", &sign), FF_ERROR_ARGUMENT);
  expect_words(message(), {"no parameter 'nope'", "pnabla_x", "V2E"});
}

// ---- bad arguments: rejected when set, nothing changed ----------------------------------------

struct HdiffSetup {
  const examples::Example& ex = examples::example("hdiff");
  CallerArguments args{ex, small, Layout::vertical_fastest, Order::c, 0};
  Program p{"hdiff", options_for(Layout::vertical_fastest)};
  HdiffSetup() { EXPECT_EQ(args.set_all(p.p, Order::c), FF_OK) << ff_last_error(); }
  Buffer& in() { return args.fields.at("in"); }
  int set(const char* name, int dtype, void* data, const std::vector<std::int64_t>& shape,
          const std::vector<std::int64_t>& strides, const std::vector<std::int64_t>& origin) {
    return ff_program_set_field(p.p, name, dtype, data, static_cast<int>(shape.size()), shape.data(), strides.data(),
                                origin.data());
  }
};

TEST(CApiBadInput, SettersNameTheParameterAndWhatWasExpected) {
  HdiffSetup h;
  Buffer& in = h.in();
  EXPECT_EQ(h.set("nope", FF_DTYPE_FLOAT64, in.data, in.shape, in.strides, in.origin), FF_ERROR_ARGUMENT);
  expect_words(message(), {"hdiff", "no parameter 'nope'", "coeff"});
  EXPECT_EQ(h.set("in", FF_DTYPE_FLOAT32, in.data, in.shape, in.strides, in.origin), FF_ERROR_DTYPE);
  expect_words(message(), {"'in'", "float64", "float32"});
  EXPECT_EQ(h.set("in", FF_DTYPE_FLOAT64, in.data, {in.shape[0], in.shape[1]}, {in.strides[0], in.strides[1]},
                  {-2, -2}),
            FF_ERROR_ARGUMENT);
  expect_words(message(), {"'in'", "rank 3", "given rank 2"});
  EXPECT_EQ(h.set("in", 99, in.data, in.shape, in.strides, in.origin), FF_ERROR_INVALID_VALUE);
  EXPECT_EQ(h.set("nx", FF_DTYPE_INT32, in.data, {}, {}, {}), FF_ERROR_ARGUMENT);
  expect_words(message(), {"'nx'", "a scalar, not a field"});
  EXPECT_EQ(ff_program_set_int(h.p.p, "nx", std::int64_t{1} << 40), FF_ERROR_ARGUMENT);
  expect_words(message(), {"'nx'", "int32", "1099511627776"});
  EXPECT_EQ(ff_program_set_real(h.p.p, "nx", 1.5), FF_ERROR_ARGUMENT);
  EXPECT_EQ(ff_program_set_int_at(h.p.p, 99, 1), FF_ERROR_INVALID_VALUE);
  EXPECT_EQ(ff_program_set_table(h.p.p, "in", nullptr, 0, 0, 0, 0, 0), FF_ERROR_ARGUMENT);
  expect_words(message(), {"'in'", "a field, not a connectivity"});
  // None of that changed the arguments: the run computes the reference's values.
  FF_ASSERT_OK(ff_program_run(h.p.p));
  const auto ref = h.args.reference(h.ex, small, Layout::vertical_fastest);
  expect_bitwise_equal("out", h.args.fields.at("out"), ref.fields.at("out"));
}

TEST(CApiBadInput, NullAndMisalignedViewsAreRejectedWhenSet) {
  HdiffSetup h;
  Buffer& in = h.in();
  EXPECT_NE(h.set("in", FF_DTYPE_FLOAT64, nullptr, in.shape, in.strides, in.origin), FF_OK);
  expect_words(message(), {"null", "field 'in'", "hdiff"});
  void* misaligned = static_cast<std::byte*>(in.data) + 3;
  EXPECT_NE(h.set("in", FF_DTYPE_FLOAT64, misaligned, in.shape, in.strides, in.origin), FF_OK);
  expect_words(message(), {"align", "field 'in'"});
  // The rejected views left the good one in place.
  FF_ASSERT_OK(ff_program_run(h.p.p));
  const auto ref = h.args.reference(h.ex, small, Layout::vertical_fastest);
  expect_bitwise_equal("out", h.args.fields.at("out"), ref.fields.at("out"));
}

TEST(CApiBadInput, NegativeOrOverlappingOutputStrides) {
  HdiffSetup h;
  Buffer& out = h.args.fields.at("out");
  // A negative stride is refused when the view is made.
  std::vector<std::int64_t> strides = out.strides;
  strides[0] = -strides[0];
  EXPECT_EQ(h.set("out", FF_DTYPE_FLOAT64, out.data, out.shape, strides, out.origin), FF_ERROR_ARGUMENT);
  expect_words(message(), {"stride", "field 'out'", "hdiff", "ff_program_set_field"});
  // Stride 0 along J: every J index of an output would write the same element.
  strides = out.strides;
  strides[1] = 0;
  ASSERT_EQ(h.set("out", FF_DTYPE_FLOAT64, out.data, out.shape, strides, out.origin), FF_OK) << ff_last_error();
  const std::vector<std::byte> before = out.storage;
  EXPECT_EQ(ff_program_run(h.p.p), FF_ERROR_ARGUMENT);
  expect_words(message(), {"hdiff", "'out'", "share an element"});
  EXPECT_TRUE(before == out.storage);
}

// A run rejected for `status` leaves every output as it was.
void expect_rejected_unchanged(HdiffSetup& h, int status, std::initializer_list<const char*> words) {
  const std::vector<std::byte> before = h.args.fields.at("out").storage;
  EXPECT_EQ(ff_program_run(h.p.p), status) << ff_last_error();
  expect_words(message(), words);
  EXPECT_TRUE(before == h.args.fields.at("out").storage) << "a rejected run wrote to 'out'";
}

TEST(CApiBadInput, ViewSmallerThanDomainPlusHalo) {
  HdiffSetup h;
  Buffer& in = h.in();
  // One point short along I: the halo of 2 is only 1 wide at the upper end.
  ASSERT_EQ(h.set("in", FF_DTYPE_FLOAT64, in.data, {in.shape[0] - 1, in.shape[1], in.shape[2]}, in.strides, in.origin),
            FF_OK);
  expect_rejected_unchanged(h, FF_ERROR_DOMAIN, {"hdiff", "'in'", "I="});
}

TEST(CApiBadInput, WrongStrideOrderIsALayoutError) {
  HdiffSetup h;
  Buffer& in = h.in();
  // Fortran order for a program compiled vertical_fastest (K must be unit-stride).
  Buffer f = copy_to_buffer(h.args.instance.fields.at("in"), Order::fortran, 0);
  ASSERT_EQ(h.set("in", FF_DTYPE_FLOAT64, f.data, f.shape, f.strides, f.origin), FF_OK) << ff_last_error();
  expect_rejected_unchanged(h, FF_ERROR_LAYOUT, {"hdiff", "vertical_fastest", "'in'", "K"});
  (void)in;
}

TEST(CApiBadInput, OutputsAliasingEachOtherOrAnInput) {
  const examples::Example& ex = examples::example("fvm_nabla");
  CallerArguments args(ex, small, Layout::vertical_fastest, Order::c, 0);
  Program p("fvm_nabla", options_for(Layout::vertical_fastest));
  FF_ASSERT_OK(args.set_all(p.p, Order::c));
  Buffer& x = args.fields.at("pnabla_x");
  FF_ASSERT_OK(ff_program_set_field(p.p, "pnabla_y", FF_DTYPE_FLOAT64, x.data, 2, x.shape.data(), x.strides.data(),
                                    x.origin.data()));
  const std::vector<std::byte> before = x.storage;
  EXPECT_EQ(ff_program_run(p.p), FF_ERROR_ARGUMENT);
  expect_words(message(), {"fvm_nabla", "pnabla_x", "pnabla_y", "share memory"});
  EXPECT_TRUE(before == x.storage);
  // An output over an input's memory.
  Buffer& pp = args.fields.at("pp");
  Buffer& y = args.fields.at("pnabla_y");
  FF_ASSERT_OK(ff_program_set_field(p.p, "pnabla_y", FF_DTYPE_FLOAT64, y.data, 2, y.shape.data(), y.strides.data(),
                                    y.origin.data()));
  FF_ASSERT_OK(ff_program_set_field(p.p, "pnabla_x", FF_DTYPE_FLOAT64, pp.data, 2, pp.shape.data(), pp.strides.data(),
                                    pp.origin.data()));
  EXPECT_EQ(ff_program_run(p.p), FF_ERROR_ARGUMENT);
  expect_words(message(), {"pnabla_x", "pp"});
}

// Found by fuzz_c_api: an output over the entries of a neighbour table was accepted, and the
// kernels followed the neighbours it wrote out of every array (a segfault). Both the compiled
// program and the reference refuse it now; nothing is written.
TEST(CApiBadInput, AnOutputOverANeighbourTable) {
  const examples::Example& ex = examples::example("fvm_nabla");
  CallerArguments args(ex, small, Layout::vertical_fastest, Order::c, 0);
  Program p("fvm_nabla", options_for(Layout::vertical_fastest));
  FF_ASSERT_OK(args.set_all(p.p, Order::c));
  const std::vector<std::int32_t>& v2e = args.tables.at("V2E");  // C order [n_vertices][6]
  const std::int64_t n_vertices = args.instance.mesh->n_vertices, n_edges = args.instance.mesh->n_edges;
  Buffer& y = args.fields.at("pnabla_y");
  // The table's entries at the start of memory that also holds all of pnabla_y.
  std::vector<std::int32_t> shared(v2e.size() + y.storage.size() / sizeof(std::int32_t));
  std::copy(v2e.begin(), v2e.end(), shared.begin());
  FF_ASSERT_OK(ff_program_set_table(p.p, "V2E", shared.data(), n_vertices, n_edges, 6, 6, 1));
  FF_ASSERT_OK(ff_program_set_field(p.p, "pnabla_y", FF_DTYPE_FLOAT64, shared.data(), 2, y.shape.data(), y.strides.data(),
                                    y.origin.data()));
  const std::vector<std::int32_t> before = shared;
  const std::vector<std::byte> x_before = args.fields.at("pnabla_x").storage;
  EXPECT_EQ(ff_program_run(p.p), FF_ERROR_ARGUMENT);
  expect_words(message(), {"fvm_nabla", "pnabla_y", "neighbour table 'V2E'", "shares memory"});
  EXPECT_EQ(shared, before);
  EXPECT_TRUE(x_before == args.fields.at("pnabla_x").storage);
  // Past the table's last entry, the same memory is the output's own: accepted.
  FF_ASSERT_OK(ff_program_set_field(p.p, "pnabla_y", FF_DTYPE_FLOAT64, shared.data() + v2e.size(), 2, y.shape.data(),
                                    y.strides.data(), y.origin.data()));
  EXPECT_EQ(ff_program_run(p.p), FF_OK) << ff_last_error();
}

TEST(CApiBadInput, OutOfRangeTableEntriesBeforeAnythingIsWritten) {
  const examples::Example& ex = examples::example("fvm_nabla");
  CallerArguments args(ex, small, Layout::vertical_fastest, Order::c, 0);
  Program p("fvm_nabla", options_for(Layout::vertical_fastest));
  FF_ASSERT_OK(args.set_all(p.p, Order::c));
  std::vector<std::int32_t>& v2e = args.tables.at("V2E");  // C order [n_vertices][6]
  const std::int64_t n_edges = args.instance.mesh->n_edges;
  v2e[2 * 6 + 1] = static_cast<std::int32_t>(n_edges);  // vertex 2's second edge: one past the last edge
  const std::vector<std::byte> before = args.fields.at("pnabla_x").storage;
  EXPECT_EQ(ff_program_run(p.p), FF_ERROR_CONNECTIVITY) << ff_last_error();
  expect_words(message(), {"fvm_nabla", "V2E", std::to_string(n_edges).c_str()});
  EXPECT_TRUE(before == args.fields.at("pnabla_x").storage);
  // A rejected run keeps no binding: the corrected table is checked again and runs.
  v2e[2 * 6 + 1] = args.instance.mesh->table("V2E")(2, 1);
  FF_ASSERT_OK(ff_program_run(p.p));
  const auto ref = args.reference(ex, small, Layout::vertical_fastest);
  expect_bitwise_equal("pnabla_x", args.fields.at("pnabla_x"), ref.fields.at("pnabla_x"));
}

TEST(CApiBadInput, MissingArgumentsAreListed) {
  Program p("hdiff", options_for(Layout::vertical_fastest));
  EXPECT_EQ(ff_program_run(p.p), FF_ERROR_ARGUMENT);
  expect_words(message(), {"hdiff", "not set", "in (a field)", "nx (a scalar)"});
  size_t bytes = 0, alignment = 0;
  EXPECT_EQ(ff_program_workspace_for_arguments(p.p, FF_DEVICE_CPU, &bytes, &alignment), FF_ERROR_ARGUMENT);
}

// ---- transient memory --------------------------------------------------------------------------

// vadv keeps the Thomas algorithm's sweeps in transients: the only built-in program that needs a workspace.
struct VadvSetup {
  const examples::Example& ex = examples::example("vadv");
  CallerArguments args{ex, small, Layout::horizontal_fastest, Order::fortran, 0};
  Program p;
  explicit VadvSetup(const ff_options& o) : p("vadv", o) { EXPECT_EQ(args.set_all(p.p, Order::fortran), FF_OK) << ff_last_error(); }
  std::size_t required() {
    const char* names[] = {"nx", "ny", "nk"};
    const std::int64_t values[] = {small.nx, small.ny, small.nk};
    std::size_t bytes = 0, alignment = 0;
    EXPECT_EQ(ff_program_workspace_query(p.p, FF_DEVICE_CPU, 3, names, values, &bytes, &alignment), FF_OK)
        << ff_last_error();
    EXPECT_EQ(alignment, 256u);
    return bytes;
  }
  void expect_reference_results() {
    const auto ref = args.reference(ex, small, Layout::horizontal_fastest);
    expect_bitwise_equal("out", args.fields.at("out"), ref.fields.at("out"));
  }
};

struct AlignedBlock {
  void* p = nullptr;
  explicit AlignedBlock(std::size_t bytes) { p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256); }
  ~AlignedBlock() { std::free(p); }
};

TEST(CApiAot, AheadOfTimeProgramEqualsTheJitAndTheReferenceBitwise) {
  // vadv from tests/aot's vertical_fastest library, with a caller workspace, next to the JIT's.
  const examples::Example& ex = examples::example("vadv");
  const ff_options o = options_for(Layout::vertical_fastest, FF_MEMORY_EXTERNAL);
  ff_program* aot = nullptr;
  FF_ASSERT_OK(ff_program_create_aot(fieldflow_aot_aot_test_vertical_vadv(), &o, &aot));
  Program jit("vadv", o);
  CallerArguments aot_args(ex, small, Layout::vertical_fastest, Order::c, 1);
  CallerArguments jit_args(ex, small, Layout::vertical_fastest, Order::c, 1);
  FF_ASSERT_OK(aot_args.set_all(aot, Order::c));
  FF_ASSERT_OK(jit_args.set_all(jit.p, Order::c));
  std::size_t aot_bytes = 0, jit_bytes = 0, alignment = 0;
  FF_ASSERT_OK(ff_program_workspace_for_arguments(aot, FF_DEVICE_CPU, &aot_bytes, &alignment));
  FF_ASSERT_OK(ff_program_workspace_for_arguments(jit.p, FF_DEVICE_CPU, &jit_bytes, &alignment));
  EXPECT_EQ(aot_bytes, jit_bytes);
  AlignedBlock ws(aot_bytes);  // shared: the two run one after the other
  FF_ASSERT_OK(ff_program_set_workspace(aot, FF_DEVICE_CPU, ws.p, aot_bytes));
  FF_ASSERT_OK(ff_program_set_workspace(jit.p, FF_DEVICE_CPU, ws.p, jit_bytes));
  FF_ASSERT_OK(ff_program_run(aot));
  FF_ASSERT_OK(ff_program_run(jit.p));
  const auto ref = aot_args.reference(ex, small, Layout::vertical_fastest);
  expect_bitwise_equal("out (AOT)", aot_args.fields.at("out"), ref.fields.at("out"));
  expect_bitwise_equal("out (JIT)", jit_args.fields.at("out"), ref.fields.at("out"));
  FF_ASSERT_OK(ff_program_destroy(aot));
  // The library was generated for vertical_fastest: another layout is refused at creation.
  ff_options h = options_for(Layout::horizontal_fastest);
  EXPECT_EQ(ff_program_create_aot(fieldflow_aot_aot_test_vertical_vadv(), &h, &aot), FF_ERROR_OPTION);
  EXPECT_EQ(aot, nullptr);
  expect_words(message(), {"vertical_fastest", "horizontal_fastest"});
  EXPECT_EQ(ff_program_create_aot(nullptr, &o, &aot), FF_ERROR_ARGUMENT);
}

TEST(CApiMemory, WorkspaceQueryNeedsExactlyTheSizeSymbols) {
  VadvSetup v(options_for(Layout::horizontal_fastest, FF_MEMORY_EXTERNAL));
  EXPECT_GT(v.required(), 0u);
  std::size_t bytes = 0, alignment = 0;
  FF_ASSERT_OK(ff_program_workspace_for_arguments(v.p.p, FF_DEVICE_CPU, &bytes, &alignment));
  EXPECT_EQ(bytes, v.required());
  FF_ASSERT_OK(ff_program_workspace_for_arguments(v.p.p, FF_DEVICE_CUDA, &bytes, &alignment));
  EXPECT_EQ(bytes, 0u);
  const char* names[] = {"nx", "ny"};
  const std::int64_t values[] = {4, 4};
  EXPECT_EQ(ff_program_workspace_query(v.p.p, FF_DEVICE_CPU, 2, names, values, &bytes, &alignment), FF_ERROR_ARGUMENT);
  expect_words(message(), {"vadv", "missing: nk"});
  const char* wrong[] = {"nx", "ny", "nz"};
  const std::int64_t three[] = {4, 4, 4};
  EXPECT_EQ(ff_program_workspace_query(v.p.p, FF_DEVICE_CPU, 3, wrong, three, &bytes, &alignment), FF_ERROR_ARGUMENT);
  expect_words(message(), {"no size symbol 'nz'", "nk"});
  EXPECT_EQ(ff_program_workspace_query(v.p.p, 5, 3, wrong, three, &bytes, &alignment), FF_ERROR_INVALID_VALUE);
  // Mesh programs take len(<Location>) sizes.
  Program m("fvm_nabla", options_for(Layout::horizontal_fastest));
  const char* mesh_names[] = {"n_vertices", "nk", "len(Vertex)", "len(Edge)"};
  const std::int64_t mesh_values[] = {48, 4, 48, 144};
  FF_ASSERT_OK(ff_program_workspace_query(m.p, FF_DEVICE_CPU, 4, mesh_names, mesh_values, &bytes, &alignment));
}

TEST(CApiMemory, CallerWorkspaceInstalledOnceAndSharedByPrograms) {
  const ff_options o = options_for(Layout::horizontal_fastest, FF_MEMORY_EXTERNAL);
  VadvSetup a(o), b(o);
  const std::size_t need = std::max(a.required(), b.required());
  AlignedBlock ws(need);
  FF_ASSERT_OK(ff_program_set_workspace(a.p.p, FF_DEVICE_CPU, ws.p, need));
  FF_ASSERT_OK(ff_program_set_workspace(b.p.p, FF_DEVICE_CPU, ws.p, need));
  for (int step = 0; step < 5; ++step) {
    FF_ASSERT_OK(ff_program_run(a.p.p));
    FF_ASSERT_OK(ff_program_run(b.p.p));
  }
  a.expect_reference_results();
  b.expect_reference_results();
  for (ff_program* p : {a.p.p, b.p.p}) {
    ff_memory_stats s{};
    FF_ASSERT_OK(ff_program_memory_stats(p, &s));
    EXPECT_EQ(s.calls, 5u);
    EXPECT_EQ(s.workspace_installs, 1u);
    EXPECT_EQ(s.allocator_calls, 0u);
    EXPECT_EQ(s.system_allocations, 0u);
  }
}

TEST(CApiMemory, WorkspaceSmallerThanQueriedOrMissing) {
  VadvSetup v(options_for(Layout::horizontal_fastest, FF_MEMORY_EXTERNAL));
  const std::size_t need = v.required();
  const std::vector<std::byte> before = v.args.fields.at("out").storage;
  EXPECT_EQ(ff_program_run(v.p.p), FF_ERROR_WORKSPACE);  // none set yet
  expect_words(message(), {"vadv", "null", "ff_program_set_workspace", std::to_string(need).c_str()});
  AlignedBlock ws(need);
  FF_ASSERT_OK(ff_program_set_workspace(v.p.p, FF_DEVICE_CPU, ws.p, need - 8));
  EXPECT_EQ(ff_program_run(v.p.p), FF_ERROR_WORKSPACE);
  expect_words(message(), {"vadv", "too small", std::to_string(need).c_str(), std::to_string(need - 8).c_str()});
  FF_ASSERT_OK(ff_program_set_workspace(v.p.p, FF_DEVICE_CPU, static_cast<std::byte*>(ws.p) + 64, need));
  EXPECT_EQ(ff_program_run(v.p.p), FF_ERROR_WORKSPACE);
  expect_words(message(), {"not aligned to 256"});
  EXPECT_TRUE(before == v.args.fields.at("out").storage);
  FF_ASSERT_OK(ff_program_set_workspace(v.p.p, FF_DEVICE_CPU, ws.p, need));  // a later run retries
  FF_ASSERT_OK(ff_program_run(v.p.p));
  v.expect_reference_results();
  // A workspace needs mode external without an allocator.
  Program pool("vadv", options_for(Layout::horizontal_fastest, FF_MEMORY_POOL));
  EXPECT_EQ(ff_program_set_workspace(pool.p, FF_DEVICE_CPU, ws.p, need), FF_ERROR_OPTION);
}

TEST(CApiMemory, CAllocatorCalledOnceAndReleasedAtDestroy) {
  c_allocator_state state{2, 0, 0, 0, nullptr};
  ff_options o = options_for(Layout::horizontal_fastest);  // mode unset: an allocator means external
  o.allocate = c_allocate;
  o.release = c_release;
  o.allocator_user_data = &state;
  {
    VadvSetup v(o);
    for (int i = 0; i < 4; ++i) FF_ASSERT_OK(ff_program_run(v.p.p));
    v.expect_reference_results();
    EXPECT_EQ(state.allocations, 1);
    EXPECT_EQ(state.last_bytes, v.required());
    EXPECT_EQ(state.releases, 0);
  }
  EXPECT_EQ(state.releases, 1);
}

TEST(CApiMemory, CAllocatorReturningNullOrMisaligned) {
  for (int mode : {0, 1}) {
    c_allocator_state state{mode, 0, 0, 0, nullptr};
    ff_options o = options_for(Layout::horizontal_fastest, FF_MEMORY_EXTERNAL);
    o.allocate = c_allocate;
    o.release = c_release;
    o.allocator_user_data = &state;
    VadvSetup v(o);
    const std::vector<std::byte> before = v.args.fields.at("out").storage;
    EXPECT_EQ(ff_program_run(v.p.p), FF_ERROR_WORKSPACE) << mode;
    if (mode == 0) expect_words(message(), {"vadv", "returned NULL", std::to_string(v.required()).c_str()});
    else expect_words(message(), {"vadv", "not aligned to 256"});
    EXPECT_TRUE(before == v.args.fields.at("out").storage);
    EXPECT_EQ(state.allocations, 1);
    EXPECT_EQ(state.releases, mode == 1 ? 1 : 0) << "a rejected block goes back; NULL has nothing to give back";
    state.mode = 2;  // nothing was installed: the next run asks again
    FF_ASSERT_OK(ff_program_run(v.p.p));
    EXPECT_EQ(state.allocations, 2);
    v.expect_reference_results();
  }
}

// A C++ allocator that throws, behind a handle wrapping a program compiled in C++.
template <class Throw>
void expect_throwing_allocator(Throw&& do_throw, int status, const char* word) {
  const examples::Example& ex = examples::example("vadv");
  CompileOptions o;
  o.layout = Layout::horizontal_fastest;
  o.memory.external_memory_allocator = [&](const AllocationRequest&) -> Workspace { do_throw(); return {}; };
  ff_program* p = capi::wrap(compile(ex.program, o));
  CallerArguments args(ex, small, Layout::horizontal_fastest, Order::fortran, 0);
  ASSERT_EQ(args.set_all(p, Order::fortran), FF_OK) << ff_last_error();
  EXPECT_EQ(ff_program_run(p), status);
  expect_words(message(), {word});
  FF_ASSERT_OK(ff_program_destroy(p));
}

TEST(CApiMemory, ThrowingCppAllocatorBecomesAStatus) {
  expect_throwing_allocator([] { throw std::runtime_error("the model's arena is exhausted"); }, FF_ERROR_UNKNOWN,
                            "the model's arena is exhausted");
  expect_throwing_allocator([] { throw AllocationError("no device memory"); }, FF_ERROR_ALLOCATION, "no device memory");
  expect_throwing_allocator([] { throw std::bad_alloc(); }, FF_ERROR_OUT_OF_MEMORY, "out of memory");
  expect_throwing_allocator([] { throw 42; }, FF_ERROR_UNKNOWN, "not a std::exception");
}

// An allocator that calls back into the API on the handle that is running.
struct Reentry {
  ff_program* program = nullptr;
  int inner_status = -1;
  void* block = nullptr;
};
void* reentering_allocate(void* user, int, size_t bytes, size_t alignment, const char*) {
  auto* r = static_cast<Reentry*>(user);
  r->inner_status = ff_program_run(r->program);
  r->block = std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  return r->block;
}

TEST(CApiMemory, CallbackReenteringItsOwnHandleIsRefused) {
  Reentry r;
  ff_options o = options_for(Layout::horizontal_fastest);
  o.allocate = reentering_allocate;
  o.allocator_user_data = &r;
  VadvSetup v(o);
  r.program = v.p.p;
  FF_ASSERT_OK(ff_program_run(v.p.p));
  EXPECT_EQ(r.inner_status, FF_ERROR_CONCURRENCY);
  v.expect_reference_results();
  ff_program_destroy(v.p.p);
  v.p.p = nullptr;
  std::free(r.block);
}

}  // namespace
}  // namespace fieldflow::capi_test

// ---- the C snippet of docs/host.md (docs/snippets/capi_laplacian.c) ----------------------------

extern "C" int laplacian_in_c(int nx, int ny, int nk, double* in, double* out);

namespace fieldflow::capi_test {
namespace {

TEST(CApiDocs, LaplacianSnippetFromC) {
  const int nx = 6, ny = 5, nk = 3;
  std::vector<double> in((nx + 2) * (ny + 2) * nk), out(nx * ny * nk, -1.0);
  // in[a][b][k] is the point (a - 1, b - 1, k): (a-1)^2 + b has the five-point Laplacian 2.
  for (int a = 0; a < nx + 2; ++a)
    for (int b = 0; b < ny + 2; ++b)
      for (int k = 0; k < nk; ++k) in[(a * (ny + 2) + b) * nk + k] = (a - 1) * (a - 1) + b + 0.5 * k;
  ASSERT_EQ(laplacian_in_c(nx, ny, nk, in.data(), out.data()), FF_OK) << ff_last_error();
  for (int i = 0; i < nx; ++i)
    for (int j = 0; j < ny; ++j)
      for (int k = 0; k < nk; ++k) {
        auto at = [&](int di, int dj) { return in[((i + 1 + di) * (ny + 2) + j + 1 + dj) * nk + k]; };
        const double want = -4 * at(0, 0) + at(1, 0) + at(-1, 0) + at(0, 1) + at(0, -1);
        EXPECT_EQ(out[(i * ny + j) * nk + k], want);
        EXPECT_EQ(want, 2.0);
      }
}

}  // namespace
}  // namespace fieldflow::capi_test
