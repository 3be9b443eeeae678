// Liveness-based packing; see memory_packing.h for the contract. Optimal packing of weighted
// intervals (dynamic storage allocation) is NP-hard, so each device is packed by a few cheap
// greedy heuristics and the smallest result is kept: largest-first with lowest-offset placement
// (the usual winner when a few big fields dominate), largest-first with best-fit gaps (TFLite's
// "greedy by size"), and earliest-first, which is optimal when sizes are equal (the interval-graph
// colouring case). Ties keep the earlier heuristic, so the plan is deterministic.
#include "ir/memory_packing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>

#include "fieldflow/errors.h"

namespace fieldflow::ir {

namespace {

std::size_t round_up(std::size_t bytes) {
  FIELDFLOW_ASSERT(bytes <= std::numeric_limits<std::size_t>::max() - transient_alignment,
                   fmt::format("transient of {} bytes is too large to plan", bytes));
  return (bytes + transient_alignment - 1) / transient_alignment * transient_alignment;
}

struct Item {
  std::size_t size;  // rounded
  int first, last;
  std::size_t input_index;
};

bool live_together(const Item& a, const Item& b) { return a.first <= b.last && b.first <= a.last; }

enum class Placement { lowest_offset, best_fit };

// Offset for `item`, given the items already placed (with their offsets), by `how`.
std::size_t place(const Item& item, const std::vector<const Item*>& placed, const std::vector<std::size_t>& offsets,
                  Placement how) {
  // Address ranges of the placed items that are live at the same time as `item`, by offset.
  std::vector<std::pair<std::size_t, std::size_t>> busy;
  for (std::size_t i = 0; i < placed.size(); ++i)
    if (placed[i]->size > 0 && live_together(*placed[i], item))
      busy.emplace_back(offsets[i], offsets[i] + placed[i]->size);
  std::sort(busy.begin(), busy.end());

  std::size_t cursor = 0;  // everything below is taken or already considered
  std::size_t best = std::numeric_limits<std::size_t>::max();
  std::size_t best_gap = std::numeric_limits<std::size_t>::max();
  for (const auto& [begin, end] : busy) {
    if (begin > cursor) {
      const std::size_t gap = begin - cursor;
      if (gap >= item.size) {
        if (how == Placement::lowest_offset) return cursor;
        if (gap < best_gap) {
          best_gap = gap;
          best = cursor;
        }
      }
    }
    cursor = std::max(cursor, end);
  }
  return best != std::numeric_limits<std::size_t>::max() ? best : cursor;
}

// Packs `items` in the given order; returns the offsets (by position in `items`) and the end.
std::pair<std::vector<std::size_t>, std::size_t> pack_in_order(const std::vector<Item>& items,
                                                               const std::vector<std::size_t>& order,
                                                               Placement how) {
  std::vector<std::size_t> offsets(items.size(), 0);
  std::vector<const Item*> placed;
  std::vector<std::size_t> placed_offsets;
  std::size_t end = 0;
  for (std::size_t k : order) {
    const Item& item = items[k];
    if (item.size == 0) continue;  // holds no bytes: offset 0, collides with nothing
    offsets[k] = place(item, placed, placed_offsets, how);
    placed.push_back(&item);
    placed_offsets.push_back(offsets[k]);
    end = std::max(end, offsets[k] + item.size);
  }
  return {offsets, end};
}

// Peak of simultaneously live bytes: no packing can use less.
std::size_t lower_bound(const std::vector<Item>& items) {
  std::vector<std::pair<std::int64_t, std::int64_t>> events;  // (kernel, +/- bytes)
  for (const Item& it : items) {
    if (it.size == 0) continue;
    events.emplace_back(it.first, static_cast<std::int64_t>(it.size));
    events.emplace_back(static_cast<std::int64_t>(it.last) + 1, -static_cast<std::int64_t>(it.size));
  }
  // At one kernel index the ends (negative) sort before the starts, so a range ending at k-1 and
  // one starting at k are never counted together.
  std::sort(events.begin(), events.end());
  std::int64_t live = 0, peak = 0;
  for (const auto& [kernel, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return static_cast<std::size_t>(peak);
}

}  // namespace

MemoryPlan pack_transients(std::vector<PlannedTransient> transients) {
  MemoryPlan plan;
  for (Device device : {Device::cpu, Device::cuda}) {
    std::vector<Item> items;
    for (std::size_t i = 0; i < transients.size(); ++i) {
      const PlannedTransient& t = transients[i];
      if (t.device != device) continue;
      FIELDFLOW_ASSERT(t.first_kernel <= t.last_kernel,
                       fmt::format("transient '{}' has live range [{}, {}] that ends before it starts", t.name,
                                   t.first_kernel, t.last_kernel));
      items.push_back({round_up(t.bytes), t.first_kernel, t.last_kernel, i});
    }
    if (items.empty()) continue;

    std::vector<std::size_t> by_size(items.size());
    std::iota(by_size.begin(), by_size.end(), 0);
    std::vector<std::size_t> by_start = by_size;
    // Index as the last key makes every order total, hence the plan deterministic.
    std::sort(by_size.begin(), by_size.end(), [&](std::size_t a, std::size_t b) {
      const Item &x = items[a], &y = items[b];
      if (x.size != y.size) return x.size > y.size;
      if (x.first != y.first) return x.first < y.first;
      return a < b;
    });
    std::sort(by_start.begin(), by_start.end(), [&](std::size_t a, std::size_t b) {
      const Item &x = items[a], &y = items[b];
      if (x.first != y.first) return x.first < y.first;
      if (x.size != y.size) return x.size > y.size;
      return a < b;
    });

    std::pair<std::vector<std::size_t>, std::size_t> best{{}, std::numeric_limits<std::size_t>::max()};
    for (const auto& [order, how] : {std::pair{&by_size, Placement::lowest_offset},
                                     std::pair{&by_size, Placement::best_fit},
                                     std::pair{&by_start, Placement::lowest_offset}}) {
      auto candidate = pack_in_order(items, *order, how);
      if (candidate.second < best.second) best = std::move(candidate);
    }

    for (std::size_t k = 0; k < items.size(); ++k) {
      transients[items[k].input_index].offset = best.first[k];
      plan.naive_sum_bytes += items[k].size;
    }
    plan.packed_bytes += best.second;
    plan.lower_bound_bytes += lower_bound(items);
  }
  plan.transients = std::move(transients);
  return plan;
}

}  // namespace fieldflow::ir
