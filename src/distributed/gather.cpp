// Gathering every rank's owned points into one global field on every rank (tests, output).
#include <fmt/format.h>

#include <cstring>

#include "distributed/collective.h"
#include "distributed/halo_exchange.h"
#include "fieldflow/distributed.h"
#include "fieldflow/errors.h"

namespace fieldflow::distributed {

namespace {

void check_same_dims(const Field& local, const Field& global) {
  if (local.dims() != global.dims() || local.dtype() != global.dtype())
    throw ArgumentError(fmt::format("gather: the global field {} and the local field {} differ in dims or dtype",
                                    global.describe(), local.describe()));
}

// Every rank's packed bytes (and one index list per rank), on every rank.
std::vector<std::vector<std::byte>> all_gather(MPI_Comm comm, const std::vector<std::byte>& mine) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(size), displs(size + 1, 0);
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  for (int r = 0; r < size; ++r) displs[r + 1] = displs[r] + counts[r];
  std::vector<std::byte> all(static_cast<std::size_t>(displs[size]));
  MPI_Allgatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, comm);
  std::vector<std::vector<std::byte>> out;
  for (int r = 0; r < size; ++r) out.emplace_back(all.begin() + displs[r], all.begin() + displs[r + 1]);
  return out;
}

template <class T>
std::vector<std::byte> as_bytes(const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

void gather(const CartesianDecomposition& d, const Field& local, Field& global) {
  detail::Segment box;
  detail::collectively(d.comm(), [&] {
    check_same_dims(local, global);
    for (std::size_t a = 0; a < local.dims().size(); ++a) {
      const Dimension& dim = local.dims()[a];
      const int axis = dim == d.grid().i ? 0 : dim == d.grid().j ? 1 : -1;
      box.lo.push_back(axis >= 0 ? d.begin(axis) : local.origin()[a]);
      box.hi.push_back(axis >= 0 ? d.end(axis) : local.origin()[a] + local.shape()[a]);
      for (const Field* f : {&local, static_cast<const Field*>(&global)})
        if (box.lo[a] < f->origin()[a] || box.hi[a] > f->origin()[a] + f->shape()[a])
          throw ArgumentError(fmt::format("gather: field {} does not cover the rank's block {} [{}, {})", f->describe(),
                                          dim.name, box.lo[a], box.hi[a]));
    }
  });
  std::vector<std::byte> mine(detail::segment_bytes(local, box));
  detail::copy_segment(const_cast<Field&>(local), box, mine.data(), true);
  std::vector<std::int64_t> bounds = box.lo;
  bounds.insert(bounds.end(), box.hi.begin(), box.hi.end());
  const auto data = all_gather(d.comm(), mine), boxes = all_gather(d.comm(), as_bytes(bounds));
  for (std::size_t r = 0; r < data.size(); ++r) {
    const std::size_t rank = local.dims().size();
    std::vector<std::int64_t> b(2 * rank);
    std::memcpy(b.data(), boxes[r].data(), boxes[r].size());
    detail::Segment s;
    s.lo.assign(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(rank));
    s.hi.assign(b.begin() + static_cast<std::ptrdiff_t>(rank), b.end());
    detail::copy_segment(global, s, const_cast<std::byte*>(data[r].data()), false);
  }
}

void gather(const MeshDecomposition& d, const Field& local, Field& global) {
  const Dimension* loc = nullptr;
  for (const auto& dim : local.dims())
    if (dim.kind == DimKind::horizontal) loc = &dim;
  std::vector<std::int32_t> owned_points;
  std::vector<std::int64_t> ids;
  int axis = -1;
  detail::collectively(d.comm(), [&] {
    check_same_dims(local, global);
    if (!loc) throw ArgumentError(fmt::format("gather: field {} has no mesh location", local.describe()));
    axis = local.axis_of(*loc);
    const std::int64_t owned = d.owned(loc->name);
    if (local.origin()[axis] > 0 || local.origin()[axis] + local.shape()[axis] < owned ||
        global.origin()[axis] > 0 || global.origin()[axis] + global.shape()[axis] < d.global_size(loc->name))
      throw ArgumentError(fmt::format("gather: local {} or global {} does not cover the {} points", local.describe(),
                                      global.describe(), loc->name));
    for (std::int64_t p = 0; p < owned; ++p) {
      owned_points.push_back(static_cast<std::int32_t>(p));
      ids.push_back(d.global_ids(loc->name)[p]);
    }
  });
  detail::Segment s;
  s.points = &owned_points;
  s.point_axis = axis;
  std::vector<std::byte> mine(detail::segment_bytes(local, s));
  detail::copy_segment(const_cast<Field&>(local), s, mine.data(), true);
  const auto data = all_gather(d.comm(), mine), id_lists = all_gather(d.comm(), as_bytes(ids));
  for (std::size_t r = 0; r < data.size(); ++r) {
    std::vector<std::int64_t> theirs(id_lists[r].size() / sizeof(std::int64_t));
    std::memcpy(theirs.data(), id_lists[r].data(), id_lists[r].size());
    std::vector<std::int32_t> points(theirs.begin(), theirs.end());
    detail::Segment g;
    g.points = &points;
    g.point_axis = axis;
    detail::copy_segment(global, g, const_cast<std::byte*>(data[r].data()), false);
  }
}

}  // namespace fieldflow::distributed
