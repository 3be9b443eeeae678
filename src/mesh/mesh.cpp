#include "fieldflow/mesh.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>

#include <fmt/format.h>

#include "fieldflow/errors.h"
#include "ir/memory_overlap.h"

namespace fieldflow {

std::uint64_t detail::TableIdentity::next() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

namespace {

// Entry (i, n) is entries[i * source_stride + n * neighbor_stride], int64 arithmetic in the
// checks and in generated code: the last entry's offset must not wrap (nullopt where it would).
std::optional<std::int64_t> table_span_bytes(std::int64_t n_source, int max_neighbors, std::int64_t source_stride,
                                             std::int64_t neighbor_stride) {
  const std::int64_t extents[] = {n_source, max_neighbors}, strides[] = {source_stride, neighbor_stride};
  return ir::checked_span_bytes(extents, strides, sizeof(std::int32_t));
}

}  // namespace

NeighborTable NeighborTable::view(std::string name, std::string source, std::string target, std::int64_t n_source,
                                  std::int64_t n_target, int max_neighbors, const std::int32_t* entries,
                                  std::int64_t source_stride, std::int64_t neighbor_stride) {
  if (n_source < 0 || n_target < 0 || max_neighbors <= 0)
    throw ConnectivityError(fmt::format("table view '{}': expected n_source >= 0, n_target >= 0 and max_neighbors > 0, "
                                        "given {}, {} and {}", name, n_source, n_target, max_neighbors));
  if (source_stride < 0 || neighbor_stride < 0)
    throw ConnectivityError(fmt::format("table view '{}': strides must be >= 0 entries, given source stride {} and "
                                        "neighbour stride {}", name, source_stride, neighbor_stride));
  if (!table_span_bytes(n_source, max_neighbors, source_stride, neighbor_stride))
    throw ConnectivityError(fmt::format("table view '{}': the last entry of {} rows of stride {} and {} neighbours of "
                                        "stride {} lies more bytes from the first than a 64-bit count", name,
                                        n_source, source_stride, max_neighbors, neighbor_stride));
  if (!entries && n_source > 0)
    throw ConnectivityError(fmt::format("table view '{}': entries are null but the table has {} x {} of them", name,
                                        n_source, max_neighbors));
  if (reinterpret_cast<std::uintptr_t>(entries) % alignof(std::int32_t) != 0)
    throw ConnectivityError(fmt::format("table view '{}': entries {} are misaligned for int32: expected a multiple of "
                                        "{} bytes", name, static_cast<const void*>(entries), alignof(std::int32_t)));
  NeighborTable t;
  t.name = std::move(name);
  t.source = std::move(source);
  t.target = std::move(target);
  t.n_source = n_source;
  t.n_target = n_target;
  t.max_neighbors = max_neighbors;
  // A table with no rows still needs a non-null pointer to be recognised as a view.
  static const std::int32_t no_entries = -1;
  t.view_entries_ = entries ? entries : &no_entries;
  t.source_stride_ = source_stride;
  t.neighbor_stride_ = neighbor_stride;
  return t;
}

bool NeighborTable::has_skip_values() const {
  for (std::int64_t i = 0; i < n_source; ++i)
    for (int n = 0; n < max_neighbors; ++n)
      if ((*this)(i, n) == -1) return true;
  return false;
}

std::size_t NeighborTable::span_bytes() const {
  // A view's count was checked when it was made, an owned table's entries are in memory.
  if (n_source <= 0 || max_neighbors <= 0) return 0;
  return static_cast<std::size_t>(*table_span_bytes(n_source, max_neighbors, source_stride(), neighbor_stride()));
}

const NeighborTable& Mesh::table(const std::string& table_name) const {
  auto it = tables.find(table_name);
  if (it != tables.end()) return it->second;
  std::string available;
  for (const auto& [key, t] : tables) {
    if (!available.empty()) available += ", ";
    available += key;
  }
  throw ConnectivityError(fmt::format("mesh '{}' has no neighbour table '{}'; available tables: {}",
                                      name, table_name, available.empty() ? "(none)" : available));
}

std::int64_t Mesh::size_of(const std::string& location) const {
  if (location == "Vertex") return n_vertices;
  if (location == "Edge") return n_edges;
  if (location == "Cell") return n_cells;
  throw ArgumentError(fmt::format("mesh '{}': unknown location '{}', expected Vertex, Edge or Cell",
                                  name, location));
}

}  // namespace fieldflow
