// Fault injection into the run time (docs/reliability.md): the system allocation route failing on
// its Nth request, a host allocator failing on its Nth request, and `operator new` failing on its
// Nth call inside compile() and inside the first call. Each fault must surface as a typed error
// (fieldflow::Error, or std::bad_alloc for operator new itself), leave the outputs untouched and
// the instance usable: the next call after the fault clears gives the reference's values. Leaks
// are caught by LeakSanitizer in the ASan stage of scripts/test.sh.
//
// This binary replaces operator new and aligned_alloc (the CPU route's allocation function), so
// it is a test executable of its own. The replacements forward to the next definition in the
// process (the C library's, or the sanitizer runtime's in a sanitized build).
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "fieldflow/compile.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "fieldflow/reference.h"

namespace {

// Armed when > 0: counts down on every request of its kind; the request that brings it to 0 fails.
std::atomic<long> new_countdown{0}, aligned_alloc_countdown{0};
std::atomic<long> new_calls{0}, aligned_alloc_calls{0};

bool should_fail(std::atomic<long>& countdown) {
  long left = countdown.load(std::memory_order_relaxed);
  while (left > 0) {
    if (countdown.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) return left == 1;
  }
  return false;
}

void* allocate_or_throw(std::size_t n) {
  new_calls.fetch_add(1, std::memory_order_relaxed);
  if (should_fail(new_countdown)) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}

}  // namespace

extern "C" void* aligned_alloc(std::size_t alignment, std::size_t n) {
  using Fn = void* (*)(std::size_t, std::size_t);
  static const Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "aligned_alloc"));
  aligned_alloc_calls.fetch_add(1, std::memory_order_relaxed);
  if (should_fail(aligned_alloc_countdown)) return nullptr;
  return next(alignment, n);
}

void* operator new(std::size_t n) { return allocate_or_throw(n); }
void* operator new[](std::size_t n) { return allocate_or_throw(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate_or_throw(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace fieldflow {
namespace {

// Disarms every fault when a test ends, however it ends.
struct Disarm {
  ~Disarm() {
    new_countdown = 0;
    aligned_alloc_countdown = 0;
  }
};

// vadv keeps the forward sweep of its tridiagonal solver in transients (hdiff recomputes its values).
const examples::Example& program_with_transients() { return examples::example("vadv"); }

// The transients are columns: their size follows nk.
examples::ExampleInstance instance(int nk = 6) {
  return program_with_transients().make_instance({6, 5, nk}, Layout::vertical_fastest, 11);
}

// The outputs of `got` equal those of `want`, bit for bit.
void expect_outputs_equal(examples::ExampleInstance& got, examples::ExampleInstance& want, const std::string& when) {
  for (const std::string& name : got.outputs) {
    const Field& a = got.fields.at(name);
    const Field& b = want.fields.at(name);
    ASSERT_EQ(a.bytes(), b.bytes());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0) << name << " " << when;
  }
}

examples::ExampleInstance reference_result(int nk = 6) {
  examples::ExampleInstance expected = instance(nk);
  run_reference(program_with_transients().program, expected.arguments());
  return expected;
}

// Runs `fn`; true if it threw std::bad_alloc (operator new's own error) or a fieldflow::Error other
// than InternalError (which fails the test).
bool fails_with_a_typed_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::bad_alloc&) {
    return true;
  } catch (const InternalError& e) {
    ADD_FAILURE() << "internal error: " << e.what();
  } catch (const Error&) {
    return true;
  }
  return false;
}

CompileOptions options_for(TransientMemoryMode mode) {
  CompileOptions options;
  options.memory.mode = mode;
  options.parallel_threshold = 0;
  options.num_threads = 2;
  return options;
}

// The system allocation route (aligned_alloc) fails on its Nth request during a call, for every
// N a call makes, in every mode that allocates through it.
TEST(RuntimeFaults, SystemAllocationFailingOnTheNthRequest) {
  Disarm disarm;
  examples::ExampleInstance expected = reference_result();
  {
    // OpenMP creates its thread team on the first parallel region, allocating (and aborting when
    // that fails): done here, before any fault is armed.
    CompiledProgram warm = compile(program_with_transients().program, options_for(TransientMemoryMode::pool));
    examples::ExampleInstance args = instance();
    warm(args.arguments());
  }
  for (TransientMemoryMode mode : {TransientMemoryMode::scoped, TransientMemoryMode::persistent, TransientMemoryMode::pool}) {
    // How many route allocations a first call makes, with nothing cached.
    trim_host_pool();
    long requests = 0;
    {
      CompiledProgram program = compile(program_with_transients().program, options_for(mode));
      examples::ExampleInstance args = instance();
      const long before = aligned_alloc_calls;
      program(args.arguments());
      requests = aligned_alloc_calls - before;
    }
    trim_host_pool();
    ASSERT_GT(requests, 0) << to_string(mode) << ": vadv has transients; the first call must allocate";
    for (long n = 1; n <= requests; ++n) {
      SCOPED_TRACE(std::string(to_string(mode)) + ", failing request " + std::to_string(n));
      trim_host_pool();
      CompiledProgram program = compile(program_with_transients().program, options_for(mode));
      examples::ExampleInstance args = instance(), untouched = instance();
      aligned_alloc_countdown = n;
      EXPECT_THROW(program(args.arguments()), AllocationError);
      aligned_alloc_countdown = 0;
      expect_outputs_equal(args, untouched, "after the failed call");
      program(args.arguments());
      expect_outputs_equal(args, expected, "after the fault cleared");
    }
  }
  trim_host_pool();
}

// A host allocator that fails on its Nth request: requests come from several instances and from
// an instance whose sizes grow (each growth asks again). The failing call throws the allocator's
// error, writes nothing, and the retry succeeds; every block handed out is released.
TEST(RuntimeFaults, ExternalAllocatorFailingOnTheNthRequest) {
  const std::vector<int> sizes = {4, 40, 100};  // nk: 256, 512 and 1024 bytes per column
  for (int fail_at = 1; fail_at <= 4; ++fail_at) {
    SCOPED_TRACE("allocator fails on request " + std::to_string(fail_at));
    int requests = 0, live = 0;
    CompileOptions options;
    options.parallel_threshold = 0;
    options.memory.external_memory_allocator = [&](const AllocationRequest& r) -> Workspace {
      if (++requests == fail_at) throw AllocationError("host allocator: injected failure");
      void* p = std::aligned_alloc(r.alignment, (r.bytes + r.alignment - 1) / r.alignment * r.alignment);
      ++live;
      return {p, r.bytes, r.device, [p, &live] {
                std::free(p);
                --live;
              }};
    };
    {
      CompiledProgram first = compile(program_with_transients().program, options);
      CompiledProgram second = compile(program_with_transients().program, options);
      int failures = 0;
      for (int nk : sizes) {
        for (CompiledProgram* program : {&first, &second}) {
          examples::ExampleInstance args = instance(nk), untouched = instance(nk), expected = reference_result(nk);
          try {
            (*program)(args.arguments());
          } catch (const AllocationError& e) {
            ++failures;
            EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
            expect_outputs_equal(args, untouched, "after the failed call");
            (*program)(args.arguments());
          }
          expect_outputs_equal(args, expected, "nk " + std::to_string(nk));
        }
      }
      EXPECT_EQ(failures, 1);
      EXPECT_GT(live, 0);
    }
    EXPECT_EQ(live, 0) << "blocks not released when the instances were destroyed";
  }
}

// operator new fails on its Nth call inside compile() (a cache hit: lowering, code generation,
// the cache lookup and loading), for N spread over every allocation compile() makes.
TEST(RuntimeFaults, OperatorNewFailingInsideCompile) {
  Disarm disarm;
  const ir::Program& program = program_with_transients().program;
  (void)compile(program, options_for(TransientMemoryMode::pool));  // warm the module cache
  long total = 0;
  {
    const long before = new_calls;
    CompiledProgram warm = compile(program, options_for(TransientMemoryMode::pool));
    total = new_calls - before;
  }
  ASSERT_GT(total, 100);
  examples::ExampleInstance expected = reference_result();
  int failures = 0;
  for (long n = 1; n <= total; n = n < 16 ? n + 1 : n + n / 4) {
    SCOPED_TRACE("operator new fails on call " + std::to_string(n) + " of " + std::to_string(total));
    new_countdown = n;
    failures += fails_with_a_typed_error([&] {
      CompiledProgram compiled = compile(program, options_for(TransientMemoryMode::pool));
      new_countdown = 0;
      // The fault hit a path that handled it (or none): what was compiled must still be right.
      examples::ExampleInstance args = instance();
      compiled(args.arguments());
      expect_outputs_equal(args, expected, "compiled despite the fault");
    });
    new_countdown = 0;
    CompiledProgram again = compile(program, options_for(TransientMemoryMode::pool));
    examples::ExampleInstance args = instance();
    again(args.arguments());
    expect_outputs_equal(args, expected, "after the fault cleared");
  }
  EXPECT_GT(failures, 10);
}

// operator new fails on its Nth call inside the first call of an instance (binding, sizes, the
// memory plan, transient memory), in every mode: every N up to 16, then N spread over the rest.
TEST(RuntimeFaults, OperatorNewFailingInsideTheFirstCall) {
  Disarm disarm;
  examples::ExampleInstance expected = reference_result();
  for (TransientMemoryMode mode : {TransientMemoryMode::scoped, TransientMemoryMode::persistent, TransientMemoryMode::pool}) {
    long total = 0;
    {
      CompiledProgram program = compile(program_with_transients().program, options_for(mode));
      examples::ExampleInstance args = instance();
      Arguments arguments = args.arguments();
      const long before = new_calls;
      program(arguments);
      total = new_calls - before;
    }
    ASSERT_GT(total, 0) << to_string(mode);
    int failures = 0;
    for (long n = 1; n <= total; n = n < 16 ? n + 1 : n + n / 8) {
      SCOPED_TRACE(std::string(to_string(mode)) + ": operator new fails on call " + std::to_string(n) + " of " +
                   std::to_string(total));
      CompiledProgram program = compile(program_with_transients().program, options_for(mode));
      examples::ExampleInstance args = instance(), untouched = instance();
      Arguments arguments = args.arguments();
      new_countdown = n;
      failures += fails_with_a_typed_error([&] { program(arguments); });
      const bool failed = new_countdown == 0;
      new_countdown = 0;
      if (failed) expect_outputs_equal(args, untouched, "after the failed call");
      program(arguments);
      expect_outputs_equal(args, expected, "after the fault cleared");
    }
    // A fault the call absorbs (a cache it can do without) is fine as long as the values are right.
    EXPECT_GT(failures, 16) << to_string(mode);
  }
}

}  // namespace
}  // namespace fieldflow
