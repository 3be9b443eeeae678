#include "aot/fingerprint.h"

#include <fmt/format.h>
#include <xxhash.h>

#include "fieldflow/abi.h"
#include "passes/pipeline.h"

namespace fieldflow::aot {

std::string fingerprint(const driver::CpuBuild& build) {
  // Each part is preceded by its length, so no part can be shifted into its neighbour.
  std::string buffer;
  for (const std::string& part : {std::string("fieldflow-aot-v1"), build.source, build.schedule.print(),
                                  passes::pipeline_description(), fmt::format("abi{}", FF_ABI_VERSION)})
    buffer += fmt::format("{}:", part.size()) + part;
  const XXH128_hash_t hash = XXH3_128bits(buffer.data(), buffer.size());
  return fmt::format("{:016x}{:016x}", hash.high64, hash.low64);
}

}  // namespace fieldflow::aot
