// Liveness-based packing of transients (design §3): offsets 256-aligned, live-overlapping
// transients never share bytes, non-overlapping ones do, and the reported sizes are right.
#include "ir/memory_packing.h"

#include <gtest/gtest.h>

#include <random>

#include "fieldflow/errors.h"

namespace fieldflow::ir {
namespace {

PlannedTransient t(std::string name, std::size_t bytes, int first, int last, Device d = Device::cpu) {
  PlannedTransient p;
  p.name = std::move(name);
  p.bytes = bytes;
  p.first_kernel = first;
  p.last_kernel = last;
  p.device = d;
  return p;
}

std::size_t rounded(std::size_t b) { return (b + 255) / 256 * 256; }

// The invariants every plan must satisfy, whatever the heuristic did.
void expect_valid(const MemoryPlan& plan) {
  const auto& ts = plan.transients;
  std::size_t naive = 0;
  for (const PlannedTransient& a : ts) {
    EXPECT_EQ(a.offset % transient_alignment, 0u) << a.name;
    naive += rounded(a.bytes);
  }
  EXPECT_EQ(plan.naive_sum_bytes, naive);
  for (std::size_t i = 0; i < ts.size(); ++i)
    for (std::size_t j = i + 1; j < ts.size(); ++j) {
      const PlannedTransient &a = ts[i], &b = ts[j];
      if (a.device != b.device || a.bytes == 0 || b.bytes == 0) continue;
      const bool live_together = a.first_kernel <= b.last_kernel && b.first_kernel <= a.last_kernel;
      const bool share_bytes = a.offset < b.offset + rounded(b.bytes) && b.offset < a.offset + rounded(a.bytes);
      EXPECT_FALSE(live_together && share_bytes) << a.name << " and " << b.name << " collide";
    }
  EXPECT_GE(plan.packed_bytes, plan.lower_bound_bytes);
  EXPECT_LE(plan.packed_bytes, plan.naive_sum_bytes);
  EXPECT_EQ(plan.packed_bytes, plan.bytes_on(Device::cpu) + plan.bytes_on(Device::cuda));
}

// A chain of four where each overlaps only its neighbours: t0/t2 and t1/t3 share bytes.
TEST(MemoryPacking, ChainSharesBytes) {
  MemoryPlan plan = pack_transients({t("t0", 1000, 0, 1), t("t1", 1000, 1, 2), t("t2", 1000, 2, 3), t("t3", 1000, 3, 4)});
  expect_valid(plan);
  ASSERT_EQ(plan.transients.size(), 4u);
  EXPECT_EQ(plan.transients[0].name, "t0");  // input order kept
  EXPECT_EQ(plan.transients[0].offset, 0u);
  EXPECT_EQ(plan.transients[1].offset, 1024u);
  EXPECT_EQ(plan.transients[2].offset, 0u);
  EXPECT_EQ(plan.transients[3].offset, 1024u);
  EXPECT_EQ(plan.naive_sum_bytes, 4096u);
  EXPECT_EQ(plan.packed_bytes, 2048u);
  EXPECT_EQ(plan.lower_bound_bytes, 2048u);
  EXPECT_EQ(plan.bytes_on(Device::cpu), 2048u);
}

// Live ranges are inclusive: [0,1] and [1,2] overlap at kernel 1, [0,0] and [1,1] do not.
TEST(MemoryPacking, InclusiveLiveRanges) {
  MemoryPlan touching = pack_transients({t("a", 256, 0, 1), t("b", 256, 1, 2)});
  EXPECT_NE(touching.transients[0].offset, touching.transients[1].offset);
  EXPECT_EQ(touching.lower_bound_bytes, 512u);
  MemoryPlan apart = pack_transients({t("a", 256, 0, 0), t("b", 256, 1, 1)});
  EXPECT_EQ(apart.transients[0].offset, apart.transients[1].offset);
  EXPECT_EQ(apart.packed_bytes, 256u);
  EXPECT_EQ(apart.lower_bound_bytes, 256u);
}

// Odd sizes round up to 256, and every offset is a multiple of 256.
TEST(MemoryPacking, OddSizesRoundedOffsetsAligned) {
  MemoryPlan plan = pack_transients({t("a", 1, 0, 2), t("b", 257, 0, 2), t("c", 511, 0, 2), t("d", 8 * 1001, 1, 1)});
  expect_valid(plan);
  EXPECT_EQ(plan.naive_sum_bytes, 256u + 512u + 512u + 8192u);
  EXPECT_EQ(plan.lower_bound_bytes, 256u + 512u + 512u + 8192u);  // all live at kernel 1
  EXPECT_EQ(plan.packed_bytes, plan.lower_bound_bytes);
  for (const PlannedTransient& p : plan.transients) EXPECT_EQ(p.offset % 256, 0u) << p.name;
}

// The lower bound is the peak over kernels of the live bytes.
TEST(MemoryPacking, LowerBound) {
  // kernel:   0      1        2       3
  // a 4096   [---------------]
  // b 1024          [-----------------]
  // c 2048                   [------]      peak at kernel 2: 4096+1024+2048
  // d 8192   [-]                            kernel 0: 4096+8192 = 12288 (the peak)
  MemoryPlan plan = pack_transients({t("a", 4096, 0, 2), t("b", 1024, 1, 3), t("c", 2048, 2, 2), t("d", 8192, 0, 0)});
  expect_valid(plan);
  EXPECT_EQ(plan.lower_bound_bytes, 12288u);
  EXPECT_EQ(plan.naive_sum_bytes, 4096u + 1024u + 2048u + 8192u);
  EXPECT_EQ(plan.packed_bytes, 12288u);
}

// Each device is packed on its own; the plan's sizes are sums over devices.
TEST(MemoryPacking, DevicesPackedSeparately) {
  MemoryPlan plan = pack_transients({t("h", 1000, 0, 1, Device::cpu), t("g", 3000, 0, 1, Device::cuda),
                                     t("g2", 500, 2, 3, Device::cuda)});
  expect_valid(plan);
  EXPECT_EQ(plan.transients[0].offset, 0u);
  EXPECT_EQ(plan.transients[1].offset, 0u);
  EXPECT_EQ(plan.transients[2].offset, 0u);  // reuses g's bytes: g is dead by kernel 2
  EXPECT_EQ(plan.bytes_on(Device::cpu), 1024u);
  EXPECT_EQ(plan.bytes_on(Device::cuda), 3072u);
  EXPECT_EQ(plan.packed_bytes, 1024u + 3072u);
  EXPECT_EQ(plan.lower_bound_bytes, 1024u + 3072u);
  auto req = plan.requirements();
  ASSERT_EQ(req.size(), 2u);
  EXPECT_EQ(req[1].device, Device::cuda);
  EXPECT_EQ(req[1].bytes, 3072u);
}

// Nothing to pack, and zero-byte transients, take no space.
TEST(MemoryPacking, EmptyAndZeroSized) {
  MemoryPlan none = pack_transients({});
  EXPECT_EQ(none.packed_bytes, 0u);
  EXPECT_EQ(none.lower_bound_bytes, 0u);
  MemoryPlan zero = pack_transients({t("z", 0, 0, 5), t("a", 300, 0, 5)});
  expect_valid(zero);
  EXPECT_EQ(zero.packed_bytes, 512u);
  EXPECT_EQ(zero.transients[0].offset, 0u);
}

// A live range that ends before it starts is a bug of the planning pass.
TEST(MemoryPacking, BadLiveRangeIsInternalError) {
  EXPECT_THROW(pack_transients({t("backwards", 256, 3, 1)}), InternalError);
}

// Same input, same plan.
TEST(MemoryPacking, Deterministic) {
  std::mt19937 rng(7);
  std::vector<PlannedTransient> items;
  for (int i = 0; i < 40; ++i) {
    int a = static_cast<int>(rng() % 20), b = static_cast<int>(rng() % 20);
    items.push_back(t("t" + std::to_string(i), 256 * (1 + rng() % 50), std::min(a, b), std::max(a, b)));
  }
  MemoryPlan p1 = pack_transients(items), p2 = pack_transients(items);
  for (std::size_t i = 0; i < items.size(); ++i) EXPECT_EQ(p1.transients[i].offset, p2.transients[i].offset);
  EXPECT_EQ(p1.packed_bytes, p2.packed_bytes);
}

// Random schedules: every plan is valid (no live overlap shares bytes, packed >= lower bound).
TEST(MemoryPacking, RandomPlansAreValid) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<PlannedTransient> items;
    const int n = 1 + static_cast<int>(rng() % 30), kernels = 1 + static_cast<int>(rng() % 15);
    for (int i = 0; i < n; ++i) {
      int a = static_cast<int>(rng() % kernels), b = static_cast<int>(rng() % kernels);
      items.push_back(t("t" + std::to_string(i), rng() % 100000, std::min(a, b), std::max(a, b),
                        rng() % 4 == 0 ? Device::cuda : Device::cpu));
    }
    expect_valid(pack_transients(items));
  }
}

// Equal sizes form an interval-graph colouring, which the greedy solves optimally.
TEST(MemoryPacking, EqualSizesReachLowerBound) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<PlannedTransient> items;
    const int n = 1 + static_cast<int>(rng() % 25);
    for (int i = 0; i < n; ++i) {
      int a = static_cast<int>(rng() % 12), b = static_cast<int>(rng() % 12);
      items.push_back(t("t" + std::to_string(i), 8000 + rng() % 192, std::min(a, b), std::max(a, b)));
    }
    MemoryPlan plan = pack_transients(items);
    expect_valid(plan);
    EXPECT_EQ(plan.packed_bytes, plan.lower_bound_bytes) << "trial " << trial;
  }
}

// Typical stencil schedules pack within 5% of the lower bound.
TEST(MemoryPacking, TypicalStencilsNearLowerBound) {
  auto check = [](const char* what, const std::vector<PlannedTransient>& items) {
    MemoryPlan plan = pack_transients(items);
    expect_valid(plan);
    EXPECT_LE(static_cast<double>(plan.packed_bytes), 1.05 * static_cast<double>(plan.lower_bound_bytes))
        << what << ": packed " << plan.packed_bytes << ", lower bound " << plan.lower_bound_bytes;
    EXPECT_LT(plan.packed_bytes, plan.naive_sum_bytes) << what;
  };
  const std::size_t nx = 128, ny = 128, nz = 80;
  auto cart = [&](std::size_t halo) { return (nx + 2 * halo) * (ny + 2 * halo) * nz * 8; };

  // Two horizontal-diffusion steps: lap feeds flx and fly, which feed the step's output; the
  // first step's output is the second step's input.
  check("hdiff x2", {t("lap", cart(3), 0, 1), t("flx", cart(2), 1, 2), t("fly", cart(2), 1, 2),
                     t("mid", cart(2), 2, 3), t("lap2", cart(1), 3, 4), t("flx2", cart(0), 4, 5),
                     t("fly2", cart(0), 4, 5)});

  // A chain of smoothers whose extents shrink, with a long-lived coefficient field and a 2D
  // column transient used by a vertical solver in the middle.
  check("shrinking chain", {t("s0", cart(4), 0, 1), t("s1", cart(3), 1, 2), t("s2", cart(2), 2, 3),
                            t("s3", cart(1), 3, 4), t("s4", cart(0), 4, 5), t("coeff", cart(0), 0, 5),
                            t("column", nx * ny * 8, 2, 3)});

  // An ICON-like dycore step: cell, edge and vertex fields (edges ~1.5x cells, vertices ~0.5x).
  const std::size_t cells = 20480 * 90 * 8, edges = 30720 * 90 * 8, verts = 10242 * 90 * 8;
  check("icon diffusion", {t("div", cells, 0, 1), t("kh_c", cells, 1, 3), t("vn_vert", verts, 0, 2),
                           t("u_vert", verts, 0, 2), t("v_vert", verts, 0, 2), t("kh_smag_e", edges, 2, 4),
                           t("nabla2_vn", edges, 4, 5), t("z_temp", cells, 5, 6), t("w_tmp", cells, 6, 7),
                           t("theta_tmp", cells, 7, 8)});

  // Two devices: a CPU preprocessing chain and a GPU stencil chain.
  check("two devices", {t("pre0", cart(1), 0, 1, Device::cpu), t("pre1", cart(0), 1, 2, Device::cpu),
                        t("g0", cart(2), 0, 1, Device::cuda), t("g1", cart(1), 1, 2, Device::cuda),
                        t("g2", cart(0), 2, 3, Device::cuda)});
}

}  // namespace
}  // namespace fieldflow::ir
