// Ahead-of-time libraries of cuda programs (fieldflow_add_library BACKEND cuda, CMakeLists.txt),
// checked without a device: the descriptor says backend, layout and architecture; the embedded
// image is a CUDA ELF and exactly what NVRTC compiles from the CUDA source this fieldflow
// regenerates for the program; load_aot refuses other backends, foreign fingerprints and a missing
// image with typed errors, and without a device says so. (Runs on a device: tests/cuda.)
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include <fmt/format.h>

#include "aot/generate_library.h"
#include "driver/cuda_build.h"
#include "fieldflow/aot.h"
#include "fieldflow/aot_module.h"
#include "fieldflow/device_errors.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "fieldflow_aot_aot_test_cuda_clipped_scale.h"
#include "fieldflow_aot_aot_test_cuda_fvm_nabla.h"
#include "fieldflow_aot_aot_test_cuda_hdiff.h"
#include "fieldflow_aot_aot_test_vertical_hdiff.h"
#include "support/backend_harness.h"
#include "toolchain/module_cache.h"

namespace fieldflow {
namespace {

using testing_support::error_of;

namespace fs = std::filesystem;

CompileOptions cuda_options() {
  CompileOptions o;
  o.backend = Backend::cuda;
  return o;
}

TEST(AotCuda, TheDescriptorSaysBackendLayoutAndArchitecture) {
  for (const ff_aot_program* d : {fieldflow_aot_aot_test_cuda_hdiff(), fieldflow_aot_aot_test_cuda_fvm_nabla()}) {
    const AotProgramInfo info = aot_program_info(d);
    EXPECT_EQ(info.backend, Backend::cuda) << info.name;
    EXPECT_EQ(info.cuda_arch, "sm_90") << info.name;
    EXPECT_EQ(info.layout, Layout::horizontal_fastest) << "cuda's default layout";
    EXPECT_EQ(d->run, nullptr) << "no host code: the kernels are the image";
    EXPECT_EQ(d->descriptor_version, FF_AOT_DESCRIPTOR_VERSION);
  }
  const AotProgramInfo cpu = aot_program_info(fieldflow_aot_aot_test_vertical_hdiff());
  EXPECT_EQ(cpu.backend, Backend::cpu);
  EXPECT_EQ(cpu.cuda_arch, "");
  EXPECT_EQ(fieldflow_aot_aot_test_vertical_hdiff()->cubin, nullptr);
}

// The embedded image is what NVRTC makes of the CUDA source this fieldflow generates for the
// program (with the library's symbols) for sm_90, byte for byte: the library holds exactly the
// kernels load_aot's fingerprint vouches for.
TEST(AotCuda, TheEmbeddedImageIsNvrtcsOutputForTheRegeneratedSource) {
  if (!driver::cuda_built()) GTEST_SKIP() << "fieldflow was built without the CUDA toolkit";
  const fs::path cache = fs::temp_directory_path() / fmt::format("fieldflow-test-aot-cuda-{}", std::random_device()());
  for (const ff_aot_program* d : {fieldflow_aot_aot_test_cuda_hdiff(), fieldflow_aot_aot_test_cuda_clipped_scale()}) {
    SCOPED_TRACE(d->name);
    ASSERT_NE(d->cubin, nullptr);
    ASSERT_GT(d->cubin_bytes, 64u);
    const auto* image = d->cubin;
    EXPECT_EQ(std::memcmp(image, "\x7f" "ELF", 4), 0) << "an ELF image";
    std::uint16_t machine = 0;
    std::memcpy(&machine, image + 18, sizeof machine);
    EXPECT_EQ(machine, 190) << "e_machine EM_CUDA";

    CompileOptions o = cuda_options();
    if (std::string(d->name) == "clipped_scale") o.static_scalars["limit"] = Scalar(0.75);
    AotPrograms programs;
    d->programs(programs);
    const ir::Program program = programs.find(d->name).build();
    const driver::CudaBuild build = driver::build_cuda_source(program, o, aot::symbol_prefix(d->library, d->name));
    const driver::CudaBinary binary = driver::compile_cuda_binary(d->name, build.source.source, "sm_90", cache.string());
    const std::string now = toolchain::ModuleCache::read_artifact({"", binary.path, false, 0, ""});
    ASSERT_EQ(now.size(), d->cubin_bytes);
    EXPECT_EQ(std::memcmp(now.data(), image, now.size()), 0);
  }
  std::error_code ec;
  fs::remove_all(cache, ec);
}

TEST(AotCuda, LoadAotRefusesWhatDoesNotMatchAndSaysWhenThereIsNoDevice) {
  const ff_aot_program* d = fieldflow_aot_aot_test_cuda_hdiff();
  // The library's backend, both ways round.
  std::string msg = error_of<OptionError>([&] { load_aot(d, CompileOptions{}); });
  EXPECT_NE(msg.find("options.backend must be cuda (the library holds compiled cuda code), given cpu"), std::string::npos)
      << msg;
  msg = error_of<OptionError>([&] { load_aot(fieldflow_aot_aot_test_vertical_hdiff(), cuda_options()); });
  EXPECT_NE(msg.find("options.backend must be cpu"), std::string::npos) << msg;
  CompileOptions vertical = cuda_options();
  vertical.layout = Layout::vertical_fastest;
  msg = error_of<OptionError>([&] { load_aot(d, vertical); });
  EXPECT_NE(msg.find("generated for layout horizontal_fastest, options.layout is vertical_fastest"), std::string::npos)
      << msg;
  // Another fingerprint (another fieldflow, another architecture recorded), or no image at all.
  ff_aot_program other_hash = *d;
  other_hash.hash = "0123456789abcdef0123456789abcdef";
  msg = error_of<CompileError>([&] { load_aot(&other_hash, cuda_options()); });
  EXPECT_NE(msg.find("(fingerprint 0123456789abcdef0123456789abcdef)"), std::string::npos) << msg;
  ff_aot_program other_arch = *d;
  other_arch.cuda_arch = "sm_80";
  EXPECT_THROW(load_aot(&other_arch, cuda_options()), CompileError);
  ff_aot_program no_image = *d;
  no_image.cubin = nullptr;
  msg = error_of<CompileError>([&] { load_aot(&no_image, cuda_options()); });
  EXPECT_NE(msg.find("has no CUDA image"), std::string::npos) << msg;
  // The real one: a program on a device, or the reason there is none.
  bool has_device = true;
  try {
    (void)compile(examples::example("laplacian").program, cuda_options());
  } catch (const BackendUnavailableError&) {
    has_device = false;
  }
  if (has_device) {
    CompiledProgram p = load_aot(d, cuda_options());
    EXPECT_EQ(p.backend(), Backend::cuda);
    EXPECT_EQ(p.layout(), Layout::horizontal_fastest);
  } else {
    msg = error_of<BackendUnavailableError>([&] { load_aot(d, cuda_options()); });
    EXPECT_NE(msg.find("program 'hdiff': backend cuda"), std::string::npos) << msg;
  }
}

// A version 1 descriptor (before backends) is a cpu program and still loads: its missing fields
// are never read.
TEST(AotCuda, VersionOneDescriptorsAreCpuPrograms) {
  ff_aot_program v1 = *fieldflow_aot_aot_test_vertical_hdiff();
  v1.descriptor_version = 1;
  v1.backend = nullptr;
  v1.cuda_arch = nullptr;
  EXPECT_EQ(aot_program_info(&v1).backend, Backend::cpu);
  CompileOptions o;
  o.layout = Layout::vertical_fastest;
  EXPECT_EQ(load_aot(&v1, o).backend(), Backend::cpu);
}

}  // namespace
}  // namespace fieldflow
