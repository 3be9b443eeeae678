// A cuda program's steady-state calls allocate nothing on the host: the CUDA runner (its kernels'
// parameter words, launches in pieces, error flag, stream) on the emulated CUDA runtime, with every
// heap allocation of the process counted (support/counting_allocator.h, whose counter
// test_capi_steady_state checks) and the emulator's own bookkeeping switched off. Fields in
// device memory, in persistent and external mode (scoped and pool ask the runtime for device
// memory on every call, which the emulation takes from the host heap); programs with
// transients, tables, an in-kernel check (outputs saved before each call) and a scan.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "fieldflow/examples.h"
#include "fieldflow/reference.h"
#include "support/backend_harness.h"
#include "support/counting_allocator.h"
#include "support/cuda_emulator.h"
#include "support/cuda_harness.h"

namespace fieldflow {
namespace {

using testing_support::Emulator;
using testing_support::EmulatedDeviceFields;
using testing_support::EmulatedDeviceMemory;

// Each test's emulator is the one in use while its programs live; none after.
class CudaSteadyState : public ::testing::Test {
 protected:
  void TearDown() override { testing_support::emulator = nullptr; }
};

TEST_F(CudaSteadyState, CallsOnDeviceFieldsAllocateNothingOnTheHost) {
  for (const char* name : {"hdiff", "vadv", "nabla4", "c2e2co_sum", "diffusion_chain"})
    for (TransientMemoryMode mode : {TransientMemoryMode::persistent, TransientMemoryMode::external}) {
      SCOPED_TRACE(fmt::format("{}, {}", name, to_string(mode)));
      Emulator emulator;
      EmulatedDeviceMemory memory(emulator);
      const auto& ex = examples::example(name);
      CompileOptions o;
      o.memory.mode = mode;
      if (mode == TransientMemoryMode::external)
        o.memory.external_memory_allocator = testing_support::emulated_device_allocator(emulator);
      testing_support::EmulatedProgram p = testing_support::compile_with_emulated_runtime(emulator, ex.program, o);
      const examples::ExampleSize size{131, 5, 7, ex.unstructured};
      auto ref = ex.make_instance(size, Layout::horizontal_fastest, 3);
      auto dev = ex.make_instance(size, Layout::horizontal_fastest, 3);
      EmulatedDeviceFields d(emulator, dev);
      emulator.record = false;
      for (int warm = 0; warm < 3; ++warm) (*p.program)(d.args);
      const long before = testing_support::heap_allocations();
      for (int call = 0; call < 10; ++call) (*p.program)(d.args);
      EXPECT_EQ(testing_support::heap_allocations() - before, 0);
      // The calls did their work: each one from the same inputs, the outputs equal the reference's.
      run_reference(ex.program, ref.arguments());
      d.copy_back(dev);
      for (auto& [field, f] : ref.fields) EXPECT_TRUE(testing_support::same_bits(f, dev.fields.at(field), field));
    }
}

// The gather program checks its dynamic offsets in the kernel: a call saves the device outputs
// before it runs (to restore them if a check fails) and reads the error flag back; in copies kept
// across calls, so steady-state calls allocate nothing either.
TEST_F(CudaSteadyState, AProgramThatChecksReadsInTheKernelAllocatesNothing) {
  Emulator emulator;
  EmulatedDeviceMemory memory(emulator);
  const ir::Program program = testing_support::gather_program();
  CompileOptions options;
  options.memory.mode = TransientMemoryMode::persistent;  // pool's device memory is the host heap here
  testing_support::EmulatedProgram p = testing_support::compile_with_emulated_runtime(emulator, program, options);
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  const std::int64_t ni = 40, nk = 6;
  std::vector<double> a((ni + 2) * nk, 1.5), o(ni * nk, 0.0);
  std::vector<std::int32_t> off(ni * nk, 1);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 0.25 * static_cast<double>(i % 17);
  emulator.add_device(a.data(), a.size() * sizeof(double));
  emulator.add_device(o.data(), o.size() * sizeof(double));
  emulator.add_device(off.data(), off.size() * sizeof(std::int32_t));
  Field fa = Field::view(a.data(), {I, K}, DType::float64, {ni + 2, nk}, {1, ni + 2}, {}, Device::cuda);
  Field fo = Field::view(o.data(), {I, K}, DType::float64, {ni, nk}, {1, ni}, {}, Device::cuda);
  Field foff = Field::view(off.data(), {I, K}, DType::int32, {ni, nk}, {1, ni}, {}, Device::cuda);
  Arguments args;
  args.field("a", fa).field("off", foff).field("o", fo).scalar("ni", ni).scalar("nk", nk);
  emulator.record = false;
  for (int warm = 0; warm < 3; ++warm) (*p.program)(args);
  const long before = testing_support::heap_allocations();
  for (int call = 0; call < 10; ++call) (*p.program)(args);
  EXPECT_EQ(testing_support::heap_allocations() - before, 0);
  for (std::int64_t k = 0; k < nk; ++k)
    for (std::int64_t i = 0; i < ni; ++i)
      EXPECT_EQ(o[k * ni + i], a[k * (ni + 2) + i + 1] - a[k * (ni + 2) + i]) << i << ", " << k;
  emulator.remove_device(a.data());
  emulator.remove_device(o.data());
  emulator.remove_device(off.data());
}

// Host outputs that interleave in one array come back element by element through a host buffer
// of the runner's: sized by the first call, reused by the next ones.
TEST_F(CudaSteadyState, InterleavedHostOutputsAllocateNothing) {
  Emulator emulator;
  EmulatedDeviceMemory memory(emulator);
  CompileOptions options;
  options.memory.mode = TransientMemoryMode::persistent;
  testing_support::EmulatedProgram p =
      testing_support::compile_with_emulated_runtime(emulator, testing_support::components_program(), options);
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  const std::int64_t ni = 70, nk = 5, components = 3;
  std::vector<double> aos(static_cast<std::size_t>(ni * components * nk), -1.0);
  const auto at = [&](int c, std::int64_t i, std::int64_t k) -> double& {
    return aos[static_cast<std::size_t>((k * components + c) * ni + i)];  // I fastest, as cuda's default layout
  };
  for (std::int64_t i = 0; i < ni; ++i)
    for (std::int64_t k = 0; k < nk; ++k) at(0, i, k) = static_cast<double>(i % 9) - 0.25 * static_cast<double>(k);
  const auto component = [&](int c) {
    return Field::view(aos.data() + c * ni, {I, K}, DType::float64, {ni, nk}, {1, components * ni});
  };
  Field fa = component(0), fu = component(1), fv = component(2);
  Arguments args;
  args.field("a", fa).field("u", fu).field("v", fv).scalar("n", ni).scalar("nk", nk);
  emulator.record = false;
  for (int warm = 0; warm < 3; ++warm) (*p.program)(args);
  const long before = testing_support::heap_allocations();
  for (int call = 0; call < 10; ++call) (*p.program)(args);
  EXPECT_EQ(testing_support::heap_allocations() - before, 0);
  for (std::int64_t i = 0; i < ni; ++i)
    for (std::int64_t k = 0; k < nk; ++k) {
      const double u = i == 0 || i == ni - 1 ? -1.0 : (at(0, i + 1, k) + at(0, i - 1, k)) * 0.5;
      ASSERT_EQ(at(1, i, k), u) << "u at " << i << ", " << k;
      ASSERT_EQ(at(2, i, k), 2.0 * at(0, i, k)) << "v at " << i << ", " << k;
    }
}

}  // namespace
}  // namespace fieldflow
