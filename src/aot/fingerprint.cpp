#include "aot/fingerprint.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <initializer_list>

#include "fieldflow/abi.h"
#include "passes/pipeline.h"

namespace fieldflow::aot {

namespace {

std::string hash_of(std::initializer_list<std::string> parts) {
  // Each part is preceded by its length, so no part can be shifted into its neighbour.
  std::string buffer;
  for (const std::string& part : parts) buffer += fmt::format("{}:", part.size()) + part;
  const XXH128_hash_t hash = XXH3_128bits(buffer.data(), buffer.size());
  return fmt::format("{:016x}{:016x}", hash.high64, hash.low64);
}

}  // namespace

std::string fingerprint(const driver::CpuBuild& build) {
  return hash_of({"fieldflow-aot-v1", build.source, build.schedule.print(), passes::pipeline_description(),
                  fmt::format("abi{}", FF_ABI_VERSION)});
}

std::string fingerprint(const driver::CudaBuild& build, const std::string& cuda_arch) {
  return hash_of({"fieldflow-aot-cuda-v1", build.source.source, build.schedule.print(), passes::pipeline_description(),
                  fmt::format("abi{}", FF_ABI_VERSION), cuda_arch});
}

}  // namespace fieldflow::aot
