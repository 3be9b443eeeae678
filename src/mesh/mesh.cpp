#include "fieldflow/mesh.h"

#include <algorithm>

#include <fmt/format.h>

#include "fieldflow/errors.h"

namespace fieldflow {

bool NeighborTable::has_skip_values() const {
  return std::find(data.begin(), data.end(), std::int32_t{-1}) != data.end();
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
