// Halo exchange: patterns, plans, packing and persistent requests (see halo_exchange.h).
#include "distributed/halo_exchange.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "distributed/collective.h"
#include "fieldflow/errors.h"
#include "ir/field_elements.h"

namespace fieldflow::distributed::detail {

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::size_t copy_segment(Field& f, const Segment& s, std::byte* buffer, bool pack) {
  if (!s.points) return ir::copy_box(f, s.lo.data(), s.hi.data(), buffer, pack);
  const std::size_t rank = f.dims().size(), esize = size_of(f.dtype());
  const int axis = s.point_axis;
  // One point's elements are contiguous when the point axis is the slowest and the others dense
  // (vertical_fastest [Location, K]): one memcpy per point.
  std::int64_t per_point = 1, dense = 1;
  bool rows = true;
  for (int a = static_cast<int>(rank) - 1; a >= 0; --a) {
    if (a == axis) continue;
    rows &= f.strides()[a] == dense;
    dense *= f.shape()[a];
    per_point *= f.shape()[a];
  }
  rows &= f.strides()[axis] == dense;
  auto* base = static_cast<std::byte*>(f.data());
  std::byte* out = buffer;
  if (rows) {
    const std::size_t bytes = static_cast<std::size_t>(per_point) * esize;
    const std::int64_t origin = f.origin()[axis];
    for (const std::int32_t p : *s.points) {
      std::byte* at = base + (p - origin) * f.strides()[axis] * static_cast<std::int64_t>(esize);
      if (pack) std::memcpy(out, at, bytes); else std::memcpy(at, out, bytes);
      out += bytes;
    }
    return static_cast<std::size_t>(out - buffer);
  }
  std::vector<std::int64_t> lo(rank), hi(rank);
  for (std::size_t a = 0; a < rank; ++a) {
    lo[a] = f.origin()[a];
    hi[a] = f.origin()[a] + f.shape()[a];
  }
  for (const std::int32_t p : *s.points) {
    lo[axis] = p;
    hi[axis] = p + 1;
    out += ir::copy_box(f, lo.data(), hi.data(), out, pack);
  }
  return static_cast<std::size_t>(out - buffer);
}

namespace {
std::atomic<std::uint64_t> next_plan_id{1};
}  // namespace

std::size_t segment_bytes(const Field& f, const Segment& s) {
  std::int64_t n = 1;
  for (std::size_t a = 0; a < f.dims().size(); ++a) {
    if (s.points && static_cast<int>(a) == s.point_axis) {
      n *= static_cast<std::int64_t>(s.points->size());
      continue;
    }
    n *= s.points ? f.shape()[a] : std::max<std::int64_t>(0, s.hi[a] - s.lo[a]);
  }
  return static_cast<std::size_t>(n) * size_of(f.dtype());
}

void ExchangePlan::add(bool send, int peer, int tag, Segment s) {
  if (peer == MPI_PROC_NULL || s.bytes == 0) return;
  auto& list = send ? sends : receives;
  for (auto& m : list)
    if (m.peer == peer && m.tag == tag) {
      m.bytes += s.bytes;
      m.segments.push_back(std::move(s));
      return;
    }
  Message m;
  m.peer = peer;
  m.tag = tag;
  m.bytes = s.bytes;
  m.segments.push_back(std::move(s));
  list.push_back(std::move(m));
}

void ExchangePlan::finish() {
  // Message starts 64-byte aligned, so packing never shares a cache line between messages.
  auto lay_out = [](std::vector<Message>& list, std::size_t start) {
    std::size_t at = start;
    for (auto& m : list) {
      m.offset = at;
      at += (m.bytes + 63) / 64 * 64;
    }
    return at - start;
  };
  send_bytes = lay_out(sends, 0);
  receive_bytes = lay_out(receives, send_bytes);
  id = next_plan_id++;
}

std::shared_ptr<const MeshPattern> mesh_pattern(const MeshDecomposition& d, const std::string& location,
                                                const std::vector<std::int32_t>& halo_points) {
  auto& cache = d.patterns().patterns;
  const auto key = std::make_pair(location, halo_points);
  auto it = cache.find(key);
  // Reused only when every rank found the pattern of one build: each rank keys its cache by its
  // own halo, and the same halo here may have been built beside another halo there (found by
  // the distributed fuzzer: the sends of one build met the receives of another, MPI_ERR_TRUNCATE).
  const std::int64_t build = it != cache.end() ? static_cast<std::int64_t>(it->second->build) : 0;
  std::int64_t mine[2] = {build, -build}, most[2] = {0, 0};
  MPI_Allreduce(mine, most, 2, MPI_INT64_T, MPI_MAX, d.comm());
  if (build != 0 && most[0] == build && -most[1] == build) return it->second;

  const int size = d.size();
  const auto& owners = d.owners(location);
  const auto& ids = d.global_ids(location);
  auto pattern = std::make_shared<MeshPattern>();
  pattern->build = ++d.patterns().builds;
  std::vector<std::vector<std::int32_t>> receive(static_cast<std::size_t>(size));
  for (const std::int32_t p : halo_points) receive[owners[p]].push_back(p);
  std::vector<int> receive_counts(size), send_counts(size);
  for (int r = 0; r < size; ++r) receive_counts[r] = static_cast<int>(receive[r].size());
  MPI_Alltoall(receive_counts.data(), 1, MPI_INT, send_counts.data(), 1, MPI_INT, d.comm());
  std::vector<int> rdispl(size + 1, 0), sdispl(size + 1, 0);
  for (int r = 0; r < size; ++r) {
    rdispl[r + 1] = rdispl[r] + receive_counts[r];
    sdispl[r + 1] = sdispl[r] + send_counts[r];
  }
  std::vector<std::int64_t> wanted(static_cast<std::size_t>(rdispl[size])), asked(static_cast<std::size_t>(sdispl[size]));
  for (int r = 0; r < size; ++r)
    for (std::size_t i = 0; i < receive[r].size(); ++i) wanted[rdispl[r] + i] = ids[receive[r][i]];
  MPI_Alltoallv(wanted.data(), receive_counts.data(), rdispl.data(), MPI_INT64_T, asked.data(), send_counts.data(),
                sdispl.data(), MPI_INT64_T, d.comm());
  std::unordered_map<std::int64_t, std::int32_t> local_of;
  for (std::int64_t i = 0; i < d.owned(location); ++i) local_of.emplace(ids[i], static_cast<std::int32_t>(i));
  for (int r = 0; r < size; ++r) {
    if (receive_counts[r] == 0 && send_counts[r] == 0) continue;
    std::vector<std::int32_t> send;
    for (int i = sdispl[r]; i < sdispl[r + 1]; ++i) {
      auto found = local_of.find(asked[i]);
      FIELDFLOW_ASSERT(found != local_of.end(), fmt::format("rank {} was asked for {} {} it does not own", d.rank(),
                                                            location, asked[i]));
      send.push_back(found->second);
    }
    pattern->peers.push_back(r);
    pattern->send.push_back(std::move(send));
    pattern->receive.push_back(std::move(receive[r]));
  }
  cache[key] = pattern;
  return pattern;
}

HaloExchange::HaloExchange(MPI_Comm comm, const std::string& label, const MemoryOptions& memory)
    : comm_(comm), memory_(label, memory) {}

HaloExchange::~HaloExchange() {
  lease_.end();
  free_requests();
}

void HaloExchange::free_requests() {
  for (auto& r : requests_)
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  requests_.clear();
  requests_plan_ = 0;
  requests_base_ = nullptr;
}

void HaloExchange::acquire(const ExchangePlan& plan) {
  lease_.end();
  last_bytes_ = plan.send_bytes + plan.receive_bytes;
  lease_ = memory_.begin_call({{Device::cpu, last_bytes_, 64}});
}

void HaloExchange::start(const ExchangePlan& plan, const std::vector<Field*>& fields, ExchangeStats& stats) {
  auto* base = static_cast<std::byte*>(lease_.base(Device::cpu));
  // Persistent requests bind buffer addresses: rebuilt when the plan or the buffer moved (every
  // call in scoped mode, which allocates per call; never in steady state otherwise).
  if (plan.id != requests_plan_ || base != requests_base_) {
    free_requests();
    for (const auto& m : plan.receives) {
      requests_.emplace_back();
      MPI_Recv_init(base + m.offset, static_cast<int>(m.bytes), MPI_BYTE, m.peer, m.tag, comm_, &requests_.back());
    }
    for (const auto& m : plan.sends) {
      requests_.emplace_back();
      MPI_Send_init(base + m.offset, static_cast<int>(m.bytes), MPI_BYTE, m.peer, m.tag, comm_, &requests_.back());
    }
    requests_plan_ = plan.id;
    requests_base_ = base;
  }
  const std::size_t receives = plan.receives.size();
  if (receives) MPI_Startall(static_cast<int>(receives), requests_.data());
  const double t0 = now();
  for (std::size_t i = 0; i < plan.sends.size(); ++i) {
    const Message& m = plan.sends[i];
    std::byte* out = base + m.offset;
    for (const auto& s : m.segments) out += copy_segment(*fields[s.field], s, out, true);
    MPI_Start(&requests_[receives + i]);
    stats.bytes_sent += m.bytes;
  }
  stats.messages_sent += plan.sends.size();
  stats.pack_seconds += now() - t0;
}

void HaloExchange::progress() {
  if (requests_.empty()) return;
  int done = 0;
  MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE);
}

void HaloExchange::finish(const ExchangePlan& plan, const std::vector<Field*>& fields, ExchangeStats& stats) {
  auto* base = static_cast<std::byte*>(lease_.base(Device::cpu));
  const double t0 = now();
  if (!requests_.empty()) MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  const double t1 = now();
  for (const auto& m : plan.receives) {
    std::byte* in = base + m.offset;
    for (const auto& s : m.segments) in += copy_segment(*fields[s.field], s, in, false);
  }
  stats.wait_seconds += t1 - t0;
  stats.unpack_seconds += now() - t1;
  lease_.end();
}

}  // namespace fieldflow::distributed::detail
