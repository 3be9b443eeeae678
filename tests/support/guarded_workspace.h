#pragma once
// A caller workspace of exactly the bytes a program asks for, between two guard regions filled
// with a known pattern. A compiled program that writes one byte outside the bytes it was given
// changes a guard, which damage() reports: the check that catches out-of-bounds transient writes
// that happen to land in memory the process owns (where a sanitizer or a page fault would not).
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "fieldflow/memory.h"

namespace fieldflow::testing_support {

class GuardedWorkspace {
 public:
  static constexpr std::size_t guard_bytes = 4096;  // a multiple of 256: the workspace stays aligned

  explicit GuardedWorkspace(std::size_t bytes) : bytes_(bytes) {
    const std::size_t total = (2 * guard_bytes + bytes + transient_alignment - 1) / transient_alignment * transient_alignment;
    block_.reset(static_cast<unsigned char*>(std::aligned_alloc(transient_alignment, total)));
    for (std::size_t i = 0; i < guard_bytes; ++i) block_.get()[i] = block_.get()[guard_bytes + bytes + i] = pattern(i);
  }

  Workspace workspace(Device d = Device::cpu) const { return {data(), bytes_, d, {}}; }
  unsigned char* data() const { return block_.get() + guard_bytes; }
  // All-ones bytes are NaN in every float type: a transient read before it is written shows.
  void poison() { std::memset(data(), 0xFF, bytes_); }

  // Empty when both guards are intact; else how far the damage reaches on each side.
  std::string damage() const {
    const unsigned char* b = block_.get();
    std::int64_t before = -1, after = -1;
    for (std::size_t i = 0; i < guard_bytes; ++i) {
      if (b[i] != pattern(i) && before < 0) before = static_cast<std::int64_t>(guard_bytes - i);
      if (b[guard_bytes + bytes_ + i] != pattern(i)) after = static_cast<std::int64_t>(i + 1);
    }
    std::string s;
    if (after >= 0) s += fmt::format("wrote {} bytes past the workspace ({} bytes)", after, bytes_);
    if (before >= 0) s += fmt::format("{}wrote {} bytes before the workspace", s.empty() ? "" : "; ", before);
    return s;
  }

 private:
  // Varies by position, so a stray write of any one byte value shows.
  static constexpr unsigned char pattern(std::size_t i) { return static_cast<unsigned char>(0xA5 ^ (i * 31)); }
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::size_t bytes_;
  std::unique_ptr<unsigned char, Free> block_;
};

}  // namespace fieldflow::testing_support
