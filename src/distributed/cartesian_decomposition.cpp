// Block decomposition of a Cartesian grid over an MPI Cartesian communicator.
#include <fmt/format.h>

#include "distributed/collective.h"
#include "fieldflow/distributed.h"
#include "fieldflow/errors.h"

namespace fieldflow::distributed {

namespace {

// Block b of n points split into p blocks: the first n % p blocks get one point more.
std::int64_t block_begin(std::int64_t n, int p, int b) {
  const std::int64_t base = n / p, extra = n % p;
  return b * base + std::min<std::int64_t>(b, extra);
}

}  // namespace

CartesianDecomposition::CartesianDecomposition(MPI_Comm comm, CartesianGrid grid, std::array<int, 2> process_grid)
    : grid_(std::move(grid)) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  detail::require_same_on_all_ranks(
      comm,
      fmt::format("grid {} x {} along {}, {} (periodic {}, {}), process grid {} x {}", grid_.nx, grid_.ny,
                  grid_.i.name, grid_.j.name, grid_.periodic_i, grid_.periodic_j, process_grid[0], process_grid[1]),
      "the Cartesian decomposition");
  detail::collectively(comm, [&] {
    if (grid_.nx <= 0 || grid_.ny <= 0)
      throw ArgumentError(fmt::format("Cartesian decomposition: grid {} x {} is empty", grid_.nx, grid_.ny));
    if (process_grid[0] < 0 || process_grid[1] < 0 ||
        (process_grid[0] > 0 && process_grid[1] > 0 && process_grid[0] * process_grid[1] != size))
      throw ArgumentError(fmt::format("Cartesian decomposition: process grid {} x {} does not match the "
                                      "communicator's {} ranks",
                                      process_grid[0], process_grid[1], size));
  });
  dims_ = process_grid;
  MPI_Dims_create(size, 2, dims_.data());
  detail::collectively(comm, [&] {
    if (dims_[0] > grid_.nx || dims_[1] > grid_.ny)
      throw ArgumentError(fmt::format("Cartesian decomposition: {} x {} ranks for a {} x {} grid leave ranks "
                                      "without points",
                                      dims_[0], dims_[1], grid_.nx, grid_.ny));
  });
  const int periods[2] = {grid_.periodic_i ? 1 : 0, grid_.periodic_j ? 1 : 0};
  // No reordering: rank r of `comm` stays rank r, so hosts can map ranks to nodes themselves.
  MPI_Cart_create(comm, 2, dims_.data(), periods, 0, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Cart_coords(comm_, rank_, 2, coords_.data());
  const std::int64_t n[2] = {grid_.nx, grid_.ny};
  for (int a = 0; a < 2; ++a) {
    begin_[a] = block_begin(n[a], dims_[a], coords_[a]);
    end_[a] = block_begin(n[a], dims_[a], coords_[a] + 1);
  }
}

CartesianDecomposition::~CartesianDecomposition() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

int CartesianDecomposition::neighbor(int di, int dj) const {
  int c[2] = {coords_[0] + di, coords_[1] + dj};
  const bool periodic[2] = {grid_.periodic_i, grid_.periodic_j};
  for (int a = 0; a < 2; ++a) {
    if (c[a] >= 0 && c[a] < dims_[a]) continue;
    if (!periodic[a]) return MPI_PROC_NULL;
    c[a] = (c[a] % dims_[a] + dims_[a]) % dims_[a];
  }
  int r = MPI_PROC_NULL;
  MPI_Cart_rank(comm_, c, &r);
  return r;
}

std::string CartesianDecomposition::describe() const {
  return fmt::format("Cartesian {} x {} (periodic {}, {}) over {} x {} ranks", grid_.nx, grid_.ny, grid_.periodic_i,
                     grid_.periodic_j, dims_[0], dims_[1]);
}

}  // namespace fieldflow::distributed
