// libFuzzer target: memory options and allocator behaviour.
//
// Each input builds MemoryOptions (any mode or none; an external allocator; caller workspaces
// keyed by device, null, misaligned, too small) and compiles a program with transients with them,
// then queries requirements and plans for arbitrary size maps (negative, huge, missing symbols)
// and runs a few calls at small sizes. The allocator follows a script from the input, one step per
// request: a good block (with or without a release action), null, a misaligned or too small
// block, a block for the wrong device, a fieldflow error, another exception. Promises checked:
// inconsistent options and bad blocks are typed errors; a failed call leaves the outputs as they
// were and a later call can succeed; an accepted call gives the reference executor's bits; every
// block handed out is released exactly once by the time the instance is gone (and LeakSanitizer
// sees nothing left).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "fieldflow/compile.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "fieldflow/reference.h"
#include "fuzz/libfuzzer/fuzz_support.h"

namespace ff = fieldflow;

namespace {

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "fuzz_memory_options: %s\n", message.c_str());
  std::abort();
}

// Blocks bigger than this are refused by the fuzz allocator (a host out of memory) instead of
// being allocated: the fuzzer must not run the machine out of memory on a huge size symbol.
constexpr std::size_t kMaxBlock = 64u << 20;

enum class Step : std::uint8_t { good, good_with_release, null, misaligned, too_small, wrong_device, throw_error,
                                 throw_other, count };

struct AllocatorScript {
  std::vector<Step> steps;
  std::size_t next = 0;
  int live = 0;  // blocks handed out with a release action and not released yet
  std::vector<void*> unreleased;  // blocks without a release action, freed when the input is done

  ff::Workspace operator()(const ff::AllocationRequest& request) {
    const Step step = steps.empty() ? Step::good_with_release : steps[next++ % steps.size()];
    if (step == Step::throw_error) throw ff::AllocationError("fuzz allocator refuses");
    if (step == Step::throw_other) throw std::runtime_error("fuzz allocator fails");
    if (step == Step::null) return {nullptr, request.bytes, request.device, {}};
    if (request.bytes > kMaxBlock) throw ff::AllocationError("fuzz allocator: too large");
    const std::size_t bytes = request.bytes + 512;
    auto* raw = static_cast<std::byte*>(std::aligned_alloc(256, (bytes + 255) / 256 * 256));
    if (raw == nullptr) throw ff::AllocationError("out of memory");
    ff::Workspace w{raw, request.bytes, request.device, {}};
    if (step == Step::misaligned) w.pointer = raw + 8;
    if (step == Step::too_small) w.bytes = request.bytes / 2;
    if (step == Step::wrong_device) w.device = request.device == ff::Device::cpu ? ff::Device::cuda : ff::Device::cpu;
    if (step == Step::good) {  // no release action: the host frees it when the input is done
      unreleased.push_back(raw);
      return w;
    }
    ++live;
    w.release = [this, raw] {
      --live;
      std::free(raw);
    };
    return w;
  }
  ~AllocatorScript() {
    for (void* p : unreleased) std::free(p);
  }
};

const char* const kPrograms[] = {"lap_of_lap", "hdiff", "fvm_nabla"};

ff::SizeMap fuzz_sizes(FuzzedDataProvider& in, const ff::SizeMap& valid) {
  ff::SizeMap sizes = valid;
  for (auto& [name, value] : sizes) {
    switch (in.ConsumeIntegralInRange(0, 7)) {
      case 0: value = -in.ConsumeIntegralInRange<std::int64_t>(0, 5); break;
      case 1: value = in.ConsumeIntegral<std::int64_t>(); break;
      case 2: value += in.ConsumeIntegralInRange<std::int64_t>(0, 3); break;
      default: break;
    }
  }
  if (in.ConsumeIntegralInRange(0, 7) == 0 && !sizes.empty()) sizes.erase(sizes.begin());
  if (in.ConsumeIntegralInRange(0, 7) == 0) sizes["not_a_size"] = 3;
  return sizes;
}

}  // namespace

// Every program's module is compiled (cached) before the first input, whose compile is then a hit.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ff::fuzz::keep_jit_openmp_runtime_loaded();
  for (const char* name : kPrograms) {
    for (int mode = 0; mode < 4; ++mode) {
      ff::CompileOptions options;
      options.parallel_threshold = 0;
      options.memory.mode = static_cast<ff::TransientMemoryMode>(mode);
      if (options.memory.mode == ff::TransientMemoryMode::external) {
        options.memory.external_memory_allocator = [](const ff::AllocationRequest&) { return ff::Workspace{}; };
      }
      (void)ff::compile(ff::examples::example(name).program, options);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const auto& example = ff::examples::example(in.PickValueInArray(kPrograms));
  AllocatorScript script;
  for (int n = in.ConsumeIntegralInRange(0, 6); n > 0; --n) {
    script.steps.push_back(static_cast<Step>(in.ConsumeIntegralInRange<int>(0, static_cast<int>(Step::count) - 1)));
  }
  // Caller workspaces outlive the compiled program (declared first).
  std::vector<std::unique_ptr<std::byte, decltype(&std::free)>> buffers;
  ff::CompileOptions options;
  options.parallel_threshold = 0;
  options.num_threads = in.ConsumeIntegralInRange(1, 3);
  const int mode = in.ConsumeIntegralInRange(0, 4);
  if (mode < 4) options.memory.mode = static_cast<ff::TransientMemoryMode>(mode);
  if (in.ConsumeBool()) {
    options.memory.external_memory_allocator = [&script](const ff::AllocationRequest& r) { return script(r); };
  }
  for (int n = in.ConsumeIntegralInRange(0, 2); n > 0; --n) {
    const ff::Device device = in.ConsumeIntegralInRange(0, 3) == 0 ? ff::Device::cuda : ff::Device::cpu;
    const std::size_t bytes = in.ConsumeIntegralInRange<std::size_t>(0, 1 << 20);
    auto* raw = static_cast<std::byte*>(std::aligned_alloc(256, (bytes + 256 + 255) / 256 * 256));
    buffers.emplace_back(raw, &std::free);
    ff::Workspace w{raw, bytes, device, {}};
    switch (in.ConsumeIntegralInRange(0, 5)) {
      case 0: w.pointer = nullptr; break;
      case 1: w.pointer = raw + in.ConsumeIntegralInRange(1, 255); w.bytes = bytes; break;
      default: break;
    }
    options.memory.external_workspace[device] = w;
  }

  try {
    options.memory.validate();
  } catch (const ff::OptionError&) {
    return 0;
  } catch (const std::exception& e) {
    fail(std::string("validate: not an OptionError: ") + e.what());
  }

  ff::examples::ExampleSize sizes;
  sizes.nx = in.ConsumeIntegralInRange(3, 5);
  sizes.ny = in.ConsumeIntegralInRange(3, 5);
  sizes.nk = in.ConsumeIntegralInRange(1, 4);
  try {
    ff::CompiledProgram program = ff::compile(example.program, options);
    for (int n = in.ConsumeIntegralInRange(0, 2); n > 0; --n) {
      ff::examples::ExampleInstance probe = example.make_instance(sizes, ff::Layout::vertical_fastest, 1);
      const ff::SizeMap query = fuzz_sizes(in, ff::size_symbols(example.program, probe.arguments()));
      try {
        (void)program.workspace_requirements(query);
        (void)program.memory_plan(query);
      } catch (const ff::InternalError& e) {
        fail(std::string("requirements: internal error: ") + e.what());
      } catch (const ff::Error&) {
      }
    }
    for (int call = in.ConsumeIntegralInRange(1, 4); call > 0; --call) {
      if (in.ConsumeBool()) {
        sizes.nx = in.ConsumeIntegralInRange(3, 6);
        sizes.nk = in.ConsumeIntegralInRange(1, 5);
      }
      ff::examples::ExampleInstance instance = example.make_instance(sizes, ff::Layout::vertical_fastest, 7);
      ff::examples::ExampleInstance expected = example.make_instance(sizes, ff::Layout::vertical_fastest, 7);
      ff::run_reference(example.program, expected.arguments());
      ff::examples::ExampleInstance untouched = example.make_instance(sizes, ff::Layout::vertical_fastest, 7);
      bool rejected = false;
      try {
        if (in.ConsumeIntegralInRange(0, 5) == 0) program.prepare(ff::size_symbols(example.program, instance.arguments()));
        program(instance.arguments());
      } catch (const ff::InternalError& e) {
        fail(std::string("call: internal error: ") + e.what());
      } catch (const ff::Error&) {
        rejected = true;
      }
      const auto& want = rejected ? untouched : expected;
      for (const std::string& name : instance.outputs) {
        const ff::Field& got = instance.fields.at(name);
        if (std::memcmp(got.data(), want.fields.at(name).data(), got.bytes()) != 0) {
          fail(std::string(rejected ? "a rejected call changed " : "values differ from the reference in ") + name);
        }
      }
    }
  } catch (const ff::InternalError& e) {
    fail(std::string("internal error: ") + e.what());
  } catch (const ff::Error&) {
  } catch (const std::runtime_error& e) {
    // The allocator's own exception is allowed through to the caller unchanged.
    if (std::string(e.what()) != "fuzz allocator fails") fail(std::string("untyped exception: ") + e.what());
  }
  if (script.live != 0) fail("allocator blocks not released after the program was destroyed: " + std::to_string(script.live));
  return 0;
}
