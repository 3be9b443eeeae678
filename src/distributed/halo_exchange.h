#pragma once
// Halo exchange on MPI: which bytes travel (an ExchangePlan, built once per binding of a call),
// exchange patterns of meshes (built once per decomposition, location and halo, then shared), and
// the engine that packs, sends, receives and unpacks them with persistent requests.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fieldflow/distributed.h"
#include "fieldflow/field.h"
#include "runtime/transient_memory.h"

namespace fieldflow::distributed {

// Which points of a location one rank sends to and receives from each peer (local ids). Receive
// lists are halo points, send lists owned points; peers in increasing rank order.
struct MeshPattern {
  // Which collective build made it (1, 2, ... per decomposition, equal on every rank): a rank's
  // pattern is only valid with the patterns the other ranks built in the same call.
  std::uint64_t build = 0;
  std::vector<int> peers;
  std::vector<std::vector<std::int32_t>> send, receive;  // per peer
};

struct HaloPatternCache {
  std::map<std::pair<std::string, std::vector<std::int32_t>>, std::shared_ptr<const MeshPattern>> patterns;
  std::uint64_t builds = 0;
};

namespace detail {

// Collective: the pattern that fills `halo_points` (local ids of `location`, halo only) on this
// rank. Reused from the decomposition's cache when every rank finds there a pattern of the same
// build (the same halo on one rank may pair with other halos on the others).
std::shared_ptr<const MeshPattern> mesh_pattern(const MeshDecomposition& d, const std::string& location,
                                                const std::vector<std::int32_t>& halo_points);

// Part of one field in one message: a box (absolute indices, one range per axis of the field), or
// a list of points along one axis (every index of the other axes).
struct Segment {
  int field = 0;  // index into the fields of the call
  std::vector<std::int64_t> lo, hi;
  const std::vector<std::int32_t>* points = nullptr;
  int point_axis = -1;
  std::size_t bytes = 0;
};

struct Message {
  int peer = MPI_PROC_NULL;
  int tag = 0;
  std::vector<Segment> segments;
  std::size_t bytes = 0;
  std::size_t offset = 0;  // in the send or receive area of the pack buffer
};

struct ExchangePlan {
  std::vector<Message> sends, receives;
  std::size_t send_bytes = 0, receive_bytes = 0;
  std::uint64_t id = 0;  // changes whenever the plan does (persistent requests are rebuilt)
  // Adds a segment to the message for (peer, tag), creating it; sizes offsets when finished.
  void add(bool send, int peer, int tag, Segment s);
  void finish();
};

// Bytes of a segment of `f`.
std::size_t segment_bytes(const Field& f, const Segment& s);
// Copies a segment of `f` to (pack) or from (unpack) consecutive bytes at `buffer`, in the
// field's own axis order; returns the bytes. Runs along a unit-stride axis move with memcpy.
std::size_t copy_segment(Field& f, const Segment& s, std::byte* buffer, bool pack);

// Packs and unpacks with persistent requests; pack buffers come from a TransientMemory, so every
// mode (and the host's memory, in external mode) applies to them as to transients.
class HaloExchange {
 public:
  HaloExchange(MPI_Comm comm, const std::string& label, const MemoryOptions& memory);
  ~HaloExchange();
  HaloExchange(const HaloExchange&) = delete;
  HaloExchange& operator=(const HaloExchange&) = delete;

  // Obtains the pack buffers for `plan` (may throw: call it inside a collective check).
  void acquire(const ExchangePlan& plan);
  void release() { lease_.end(); }
  // Posts the receives, packs and posts the sends.
  void start(const ExchangePlan& plan, const std::vector<Field*>& fields, ExchangeStats& stats);
  // Gives MPI a chance to move messages (while computing).
  void progress();
  // Waits for every message, unpacks, ends the buffers' lease.
  void finish(const ExchangePlan& plan, const std::vector<Field*>& fields, ExchangeStats& stats);

  runtime::TransientMemory& memory() { return memory_; }
  std::size_t last_bytes() const { return last_bytes_; }

 private:
  void free_requests();
  MPI_Comm comm_;
  runtime::TransientMemory memory_;
  runtime::TransientMemory::Lease lease_;
  std::vector<MPI_Request> requests_;  // receives first, then sends
  std::uint64_t requests_plan_ = 0;
  void* requests_base_ = nullptr;
  std::size_t last_bytes_ = 0;
};

}  // namespace detail
}  // namespace fieldflow::distributed
