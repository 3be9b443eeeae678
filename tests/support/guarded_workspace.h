#pragma once
// A caller workspace of exactly the bytes a program asks for, between two guard regions filled
// with a known pattern. A compiled program that writes one byte outside the bytes it was given
// changes a guard, which damage() reports: the check that catches out-of-bounds transient writes
// that happen to land in memory the process owns (where a sanitizer or a page fault would not).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fieldflow/memory.h"

namespace fieldflow::testing_support {

class GuardedWorkspace {
 public:
  static constexpr std::size_t guard_bytes = 4096;  // a multiple of 256: the workspace stays aligned
  static constexpr unsigned char pattern = 0xA5;

  explicit GuardedWorkspace(std::size_t bytes) : bytes_(bytes) {
    block_ = static_cast<unsigned char*>(std::aligned_alloc(transient_alignment, 2 * guard_bytes + round(bytes)));
    std::memset(block_, pattern, 2 * guard_bytes + round(bytes));
  }
  GuardedWorkspace(const GuardedWorkspace&) = delete;
  GuardedWorkspace& operator=(const GuardedWorkspace&) = delete;
  ~GuardedWorkspace() { std::free(block_); }

  Workspace workspace(Device d = Device::cpu) const { return {block_ + guard_bytes, bytes_, d, {}}; }
  void* data() const { return block_ + guard_bytes; }

  // Empty when both guards are intact; else where the first and last damaged bytes are.
  std::string damage() const {
    const unsigned char* after = block_ + guard_bytes + bytes_;
    const std::size_t after_len = guard_bytes + round(bytes_) - bytes_;
    std::string out;
    for (auto [from, len, what] : {std::tuple{static_cast<const unsigned char*>(block_), guard_bytes, "before"},
                                   std::tuple{after, after_len, "after"}}) {
      std::size_t first = len, last = 0;
      for (std::size_t i = 0; i < len; ++i)
        if (from[i] != pattern) {
          first = std::min(first, i);
          last = i;
        }
      if (first < len)
        out += std::string(what) + " the workspace: bytes " + std::to_string(first) + ".." + std::to_string(last) +
               " of the guard written; ";
    }
    return out;
  }

 private:
  static std::size_t round(std::size_t b) { return (b + transient_alignment - 1) / transient_alignment * transient_alignment; }
  std::size_t bytes_;
  unsigned char* block_ = nullptr;
};

}  // namespace fieldflow::testing_support
