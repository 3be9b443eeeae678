// The example programs, run by the reference executor, against values computed independently
// here by plain loops (hand-written stencils, a Thomas solver, neighbour loops over the mesh
// tables). The loops also record every input element and table entry they read, which checks
// each example's compulsory_bytes formula against an actual footprint.
#include "fieldflow/examples.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "fieldflow/errors.h"
#include "fieldflow/ir.h"
#include "fieldflow/mesh.h"
#include "fieldflow/reference.h"

namespace fieldflow::examples {
namespace {

// Reads inputs as they were before the call, records what is read and which outputs are
// written with what value.
class Oracle {
 public:
  Oracle(const ExampleInstance& inst, const std::map<std::string, Field>& before) : inst_(inst), before_(before) {
    for (const auto& name : inst.outputs) expected_[name].assign(before.at(name).size(), 0.0);
  }

  double in(const std::string& field, std::initializer_list<std::int64_t> index) {
    const Field& f = before_.at(field);
    const std::int64_t off = f.offset_of(index);
    reads_[field].insert(off);
    return f.get_as_double(off);
  }
  std::int32_t nb(const std::string& table, std::int64_t element, int n) {
    const NeighborTable& t = inst_.mesh->table(table);
    table_reads_[table].insert(element * t.max_neighbors + n);
    return t(element, n);
  }
  void out(const std::string& field, std::initializer_list<std::int64_t> index, double value) {
    const std::int64_t off = before_.at(field).offset_of(index);
    ASSERT_TRUE(written_[field].insert(off).second) << field << " written twice";
    expected_.at(field)[off] = value;
  }
  double scalar(const std::string& name) const { return inst_.scalars.at(name).as_double(); }
  const Mesh& mesh() const { return *inst_.mesh; }

  // Bytes read (every distinct element once) plus bytes written.
  double footprint_bytes() const {
    double bytes = 0;
    for (const auto& [name, offs] : reads_) bytes += static_cast<double>(offs.size() * size_of(before_.at(name).dtype()));
    for (const auto& [name, offs] : table_reads_) bytes += static_cast<double>(offs.size() * sizeof(std::int32_t));
    for (const auto& [name, offs] : written_) bytes += static_cast<double>(offs.size() * size_of(before_.at(name).dtype()));
    return bytes;
  }

  // Every written point matches within 1e-12 relative; every other point kept its initial value.
  void compare(const ExampleInstance& after) const {
    for (const auto& name : inst_.outputs) {
      const Field& got = after.fields.at(name);
      const Field& init = before_.at(name);
      const auto& written = written_.count(name) ? written_.at(name) : std::set<std::int64_t>{};
      EXPECT_FALSE(written.empty()) << name;
      int failures = 0;
      for (std::int64_t i = 0; i < got.size() && failures < 10; ++i) {
        const double g = got.get_as_double(i);
        if (written.count(i)) {
          const double want = expected_.at(name)[i];
          const double tol = 1e-12 * std::max(std::abs(want), 1e-6);
          if (!(std::abs(g - want) <= tol)) {
            ADD_FAILURE() << name << " at linear offset " << i << ": got " << g << ", expected " << want;
            ++failures;
          }
        } else if (!(g == init.get_as_double(i))) {
          ADD_FAILURE() << name << " at linear offset " << i << " (outside the domain) changed from "
                        << init.get_as_double(i) << " to " << g;
          ++failures;
        }
      }
    }
  }

 private:
  const ExampleInstance& inst_;
  const std::map<std::string, Field>& before_;
  std::map<std::string, std::set<std::int64_t>> reads_, table_reads_, written_;
  std::map<std::string, std::vector<double>> expected_;
};

using OracleFn = std::function<void(Oracle&, const ExampleSize&)>;

// ------------------------------------------------------------------------------------------------
// Hand-written Cartesian oracles.

template <class F> void for_ijk(const ExampleSize& s, F f) {
  for (std::int64_t i = 0; i < s.nx; ++i)
    for (std::int64_t j = 0; j < s.ny; ++j)
      for (std::int64_t k = 0; k < s.nk; ++k) f(i, j, k);
}

double lap_at(Oracle& o, const std::string& f, std::int64_t i, std::int64_t j, std::int64_t k) {
  return -4.0 * o.in(f, {i, j, k}) + o.in(f, {i + 1, j, k}) + o.in(f, {i - 1, j, k}) + o.in(f, {i, j + 1, k}) +
         o.in(f, {i, j - 1, k});
}

void laplacian_oracle(Oracle& o, const ExampleSize& s) {
  for_ijk(s, [&](auto i, auto j, auto k) { o.out("out", {i, j, k}, lap_at(o, "in", i, j, k)); });
}

void lap_of_lap_oracle(Oracle& o, const ExampleSize& s) {
  for_ijk(s, [&](auto i, auto j, auto k) {
    auto lap = [&](std::int64_t a, std::int64_t b) { return lap_at(o, "in", a, b, k); };
    o.out("out", {i, j, k},
          -4.0 * lap(i, j) + lap(i + 1, j) + lap(i - 1, j) + lap(i, j + 1) + lap(i, j - 1));
  });
}

void hdiff_oracle(Oracle& o, const ExampleSize& s) {
  for_ijk(s, [&](auto i, auto j, auto k) {
    auto in = [&](std::int64_t a, std::int64_t b) { return o.in("in", {a, b, k}); };
    auto lap = [&](std::int64_t a, std::int64_t b) { return lap_at(o, "in", a, b, k); };
    auto flx = [&](std::int64_t a, std::int64_t b) {
      const double r = lap(a + 1, b) - lap(a, b);
      return r * (in(a + 1, b) - in(a, b)) > 0.0 ? 0.0 : r;
    };
    auto fly = [&](std::int64_t a, std::int64_t b) {
      const double r = lap(a, b + 1) - lap(a, b);
      return r * (in(a, b + 1) - in(a, b)) > 0.0 ? 0.0 : r;
    };
    o.out("out", {i, j, k},
          in(i, j) - o.in("coeff", {i, j, k}) * (flx(i, j) - flx(i - 1, j) + fly(i, j) - fly(i, j - 1)));
  });
}

// gridtools vertical_advection_dycore for u, solved column by column with the Thomas algorithm.
void vadv_oracle(Oracle& o, const ExampleSize& s) {
  const double dtr = o.scalar("dtr_stage");
  const std::int64_t nk = s.nk;
  for (std::int64_t i = 0; i < s.nx; ++i)
    for (std::int64_t j = 0; j < s.ny; ++j) {
      std::vector<double> cp(nk), dp(nk), x(nk);
      auto us = [&](std::int64_t k) { return o.in("u_stage", {i, j, k}); };
      double cp_prev = 0, dp_prev = 0;
      for (std::int64_t k = 0; k < nk; ++k) {
        const double gav = k == 0 ? 0.0 : -0.25 * (o.in("wcon", {i + 1, j, k}) + o.in("wcon", {i, j, k}));
        const double gcv =
            k == nk - 1 ? 0.0 : 0.25 * (o.in("wcon", {i + 1, j, k + 1}) + o.in("wcon", {i, j, k + 1}));
        const double as = gav * 0.5, cs = gcv * 0.5;
        const double a = gav * 0.5, c = gcv * 0.5;
        const double b = dtr - a - c;
        const double corr = (k == 0 ? 0.0 : -as * (us(k - 1) - us(k))) + (k == nk - 1 ? 0.0 : -cs * (us(k + 1) - us(k)));
        const double d = dtr * o.in("u_pos", {i, j, k}) + o.in("utens", {i, j, k}) +
                         o.in("utens_stage", {i, j, k}) + corr;
        const double divided = 1.0 / (b - cp_prev * a);
        cp[k] = c * divided;
        dp[k] = (d - dp_prev * a) * divided;
        cp_prev = cp[k];
        dp_prev = dp[k];
      }
      double x_next = 0;
      for (std::int64_t k = nk - 1; k >= 0; --k) {
        x[k] = dp[k] - cp[k] * x_next;
        x_next = x[k];
      }
      for (std::int64_t k = 0; k < nk; ++k) o.out("out", {i, j, k}, dtr * (x[k] - o.in("u_pos", {i, j, k})));
    }
}

void vertical_interp_oracle(Oracle& o, const ExampleSize& s) {
  for_ijk(s, [&](auto i, auto j, auto k) {
    o.out("out", {i, j, k}, 0.5 * (o.in("in", {i, j, k}) + o.in("in", {i, j, k + 1})));
  });
}

void masked_update_oracle(Oracle& o, const ExampleSize& s) {
  const double dt = o.scalar("dt");
  for_ijk(s, [&](auto i, auto j, auto k) {
    const double a = o.in("a", {i, j, k}), b = o.in("b", {i, j, k});
    // Tendencies counted as read densely (as compulsory_bytes assumes), used where mask holds.
    const double ta = o.in("ta", {i, j, k}), tb = o.in("tb", {i, j, k});
    const bool m = o.in("mask", {i, j, k}) != 0.0;
    o.out("a", {i, j, k}, m ? a + dt * ta : a);
    o.out("b", {i, j, k}, m ? b + dt * tb : b);
  });
}

// ------------------------------------------------------------------------------------------------
// Hand-written neighbour loops over the torus mesh tables.

void fvm_nabla_oracle(Oracle& o, const ExampleSize& s) {
  const Mesh& m = o.mesh();
  for (std::int64_t v = 0; v < m.n_vertices; ++v)
    for (std::int64_t k = 0; k < s.nk; ++k) {
      double sx = 0, sy = 0;
      for (int n = 0; n < 6; ++n) {
        const std::int64_t e = o.nb("V2E", v, n);
        const double zavg = 0.5 * (o.in("pp", {o.nb("E2V", e, 0), k}) + o.in("pp", {o.nb("E2V", e, 1), k}));
        const double sign = o.in("sign", {v, n});
        sx = sx + zavg * o.in("S_x", {e}) * sign;
        sy = sy + zavg * o.in("S_y", {e}) * sign;
      }
      o.out("pnabla_x", {v, k}, sx / o.in("vol", {v}));
      o.out("pnabla_y", {v, k}, sy / o.in("vol", {v}));
    }
}

void nabla4_oracle(Oracle& o, const ExampleSize& s) {
  const Mesh& m = o.mesh();
  for (std::int64_t e = 0; e < m.n_edges; ++e)
    for (std::int64_t k = 0; k < s.nk; ++k) {
      double tang = 0, norm = 0;
      for (int n = 0; n < 4; ++n) {
        const std::int64_t v = o.nb("E2C2V", e, n);
        const double u = o.in("u_vert", {v, k}), w = o.in("v_vert", {v, k});
        tang = tang + (u * o.in("tang_weight_u", {e, n}) + w * o.in("tang_weight_v", {e, n}));
        norm = norm + (u * o.in("norm_weight_u", {e, n}) + w * o.in("norm_weight_v", {e, n}));
      }
      const double z2 = o.in("z_nabla2_e", {e, k});
      const double ivv = o.in("inv_vert_vert_length", {e}), ipe = o.in("inv_primal_edge_length", {e});
      o.out("z_nabla4_e2", {e, k}, 4.0 * ((norm - 2.0 * z2) * (ivv * ivv) + (tang - 2.0 * z2) * (ipe * ipe)));
    }
}

void c2e2co_sum_oracle(Oracle& o, const ExampleSize& s) {
  const Mesh& m = o.mesh();
  for (std::int64_t c = 0; c < m.n_cells; ++c)
    for (std::int64_t k = 0; k < s.nk; ++k) {
      double sum = 0;
      for (int n = 0; n < 4; ++n) sum = sum + o.in("in", {o.nb("C2E2CO", c, n), k}) * o.in("weights", {c, n});
      o.out("out", {c, k}, sum);
    }
}

void diffusion_chain_oracle(Oracle& o, const ExampleSize& s) {
  const Mesh& m = o.mesh();
  const double dt = o.scalar("dt");
  for (std::int64_t v = 0; v < m.n_vertices; ++v)
    for (std::int64_t k = 0; k < s.nk; ++k) {
      double div = 0;
      for (int n = 0; n < 6; ++n) {
        const std::int64_t e = o.nb("V2E", v, n);
        const double flux = (o.in("u", {o.nb("E2V", e, 1), k}) - o.in("u", {o.nb("E2V", e, 0), k})) * o.in("inv_len", {e});
        div = div + flux * o.in("sign", {v, n});
      }
      o.out("out", {v, k}, o.in("u", {v, k}) + dt * div);
    }
}

const std::map<std::string, OracleFn>& oracles() {
  static const std::map<std::string, OracleFn> m = {
      {"laplacian", laplacian_oracle},   {"lap_of_lap", lap_of_lap_oracle},
      {"hdiff", hdiff_oracle},           {"vadv", vadv_oracle},
      {"fvm_nabla", fvm_nabla_oracle},   {"nabla4", nabla4_oracle},
      {"c2e2co_sum", c2e2co_sum_oracle}, {"vertical_interp", vertical_interp_oracle},
      {"masked_update", masked_update_oracle}, {"diffusion_chain", diffusion_chain_oracle},
  };
  return m;
}

// ------------------------------------------------------------------------------------------------

struct Case {
  std::string example;
  ExampleSize size;
  Layout layout;
  std::uint64_t seed;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.example << " " << c.size.nx << "x" << c.size.ny << "x" << c.size.nk << " " << to_string(c.layout)
      << " seed " << c.seed;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return c.example + "_" + std::to_string(c.size.nx) + "x" + std::to_string(c.size.ny) + "x" +
         std::to_string(c.size.nk) + "_" + std::string(to_string(c.layout));
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& ex : all_examples()) {
    // Small sizes: the reference executor interprets every point. nx != ny catches transposed
    // index arithmetic; the torus needs nx, ny >= 3.
    const std::vector<ExampleSize> sizes = ex.unstructured ? std::vector<ExampleSize>{{4, 4, 3}, {3, 5, 2}}
                                                           : std::vector<ExampleSize>{{8, 8, 5}, {5, 7, 3}};
    std::uint64_t seed = 1;
    for (const auto& s : sizes)
      for (Layout l : {Layout::vertical_fastest, Layout::horizontal_fastest}) cases.push_back({ex.name, s, l, seed++});
  }
  return cases;
}

class ExampleValues : public testing::TestWithParam<Case> {};

TEST_P(ExampleValues, ReferenceMatchesHandWrittenLoops) {
  const Case& c = GetParam();
  const Example& ex = example(c.example);
  ExampleInstance inst = ex.make_instance(c.size, c.layout, c.seed);
  std::map<std::string, Field> before;
  for (const auto& [name, f] : inst.fields) {
    EXPECT_EQ(f.layout(), c.layout) << name;
    before.emplace(name, f.clone());
  }
  ASSERT_NO_THROW(run_reference(ex.program, inst.arguments()));

  Oracle oracle(inst, before);
  oracles().at(c.example)(oracle, c.size);
  oracle.compare(inst);
  EXPECT_DOUBLE_EQ(ex.compulsory_bytes(c.size), oracle.footprint_bytes())
      << "compulsory_bytes disagrees with the inputs read plus outputs written by the hand-written loops";
}

INSTANTIATE_TEST_SUITE_P(AllExamples, ExampleValues, testing::ValuesIn(all_cases()), case_name);

// ------------------------------------------------------------------------------------------------

TEST(Examples, EveryExampleHasAnOracle) {
  for (const auto& ex : all_examples()) EXPECT_TRUE(oracles().count(ex.name)) << ex.name;
  EXPECT_EQ(oracles().size(), all_examples().size());
}

TEST(Examples, NamesAreUniqueAndComplete) {
  std::set<std::string> names;
  for (const auto& ex : all_examples()) {
    EXPECT_TRUE(names.insert(ex.name).second) << "duplicate " << ex.name;
    EXPECT_EQ(&example(ex.name), &ex);
    EXPECT_FALSE(ex.description.empty()) << ex.name;
    EXPECT_EQ(ex.program.name, ex.name);
  }
  const std::set<std::string> expected = {"laplacian", "lap_of_lap",      "hdiff",         "vadv",
                                          "fvm_nabla", "nabla4",          "c2e2co_sum",    "vertical_interp",
                                          "masked_update", "diffusion_chain"};
  EXPECT_EQ(names, expected);
}

TEST(Examples, UnknownNameThrowsArgumentErrorListingValidNames) {
  try {
    example("nope");
    FAIL() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'nope'"), std::string::npos) << msg;
    for (const auto& ex : all_examples()) EXPECT_NE(msg.find(ex.name), std::string::npos) << msg;
  }
}

TEST(Examples, ProgramsVerifyAndPrint) {
  for (const auto& ex : all_examples()) {
    EXPECT_NO_THROW(ir::verify(ex.program)) << ex.name;
    const std::string text = ir::print(ex.program);
    EXPECT_NE(text.find(ex.name), std::string::npos) << text;
    EXPECT_FALSE(ex.program.stmts.empty()) << ex.name;
  }
}

TEST(Examples, DomainsUseIntScalarParameters) {
  // One compiled program serves every size: no domain bound may be a constant size.
  for (const auto& ex : all_examples())
    for (const auto& st : ex.program.stmts)
      for (const auto& r : st.domain) {
        EXPECT_TRUE(r.lo.is_constant()) << ex.name;
        EXPECT_FALSE(r.hi.is_constant()) << ex.name << " " << r.dim.name << " hi " << r.hi.to_string();
        for (const auto& [sym, coeff] : r.hi.terms) {
          const ir::Param* p = ex.program.find(sym);
          ASSERT_NE(p, nullptr) << sym;
          EXPECT_EQ(p->kind, ir::ParamKind::scalar);
          EXPECT_EQ(p->type.dtype, DType::int32);
        }
      }
}

bool has_label(const ir::Program& p, const std::string& label) {
  for (const auto& st : p.stmts)
    for (const ir::Expr* e : ir::post_order(st.expr))
      if (e->kind == ir::ExprKind::named && e->name == label) return true;
  return false;
}

TEST(Examples, IntermediatesAreLabelledForTheCompiler) {
  for (const char* l : {"lap", "flx", "fly"}) EXPECT_TRUE(has_label(example("hdiff").program, l)) << l;
  EXPECT_TRUE(has_label(example("lap_of_lap").program, "lap"));
  EXPECT_TRUE(has_label(example("diffusion_chain").program, "edge_flux"));
  EXPECT_TRUE(has_label(example("fvm_nabla").program, "zavg"));
  // Labels leave the choice to the compiler: none of them forces a transient.
  for (const auto& ex : all_examples())
    for (const auto& st : ex.program.stmts)
      for (const ir::Expr* e : ir::post_order(st.expr))
        if (e->kind == ir::ExprKind::named) {
          EXPECT_FALSE(e->materialize) << ex.name << " " << e->name;
        }
}

TEST(Examples, ProgramShapes) {
  // Outputs, in/out arguments, scans, tuples: what each example is there to exercise.
  EXPECT_EQ(example("fvm_nabla").program.stmts.at(0).outputs, (std::vector<std::string>{"pnabla_x", "pnabla_y"}));
  EXPECT_EQ(example("masked_update").program.stmts.at(0).outputs, (std::vector<std::string>{"a", "b"}));
  int scans = 0;
  for (const ir::Expr* e : ir::post_order(example("vadv").program.stmts.at(0).expr))
    if (e->kind == ir::ExprKind::scan) {
      ++scans;
      EXPECT_EQ(e->forward, e->init.size() == 2) << "forward sweep carries (c', d'), backward carries x";
    }
  EXPECT_EQ(scans, 2);
  for (const auto& ex : all_examples()) {
    ExampleInstance inst = ex.make_instance(ExampleSize{4, 5, 3}, Layout::vertical_fastest, 7);
    EXPECT_EQ(ex.unstructured, inst.mesh != nullptr) << ex.name;
    std::vector<std::string> outs;
    for (const auto& st : ex.program.stmts)
      for (const auto& o : st.outputs) outs.push_back(o);
    EXPECT_EQ(inst.outputs, outs) << ex.name;
    for (const auto& p : ex.program.params) {
      if (p.kind == ir::ParamKind::field) {
        ASSERT_TRUE(inst.fields.count(p.name)) << ex.name << " " << p.name;
        EXPECT_EQ(inst.fields.at(p.name).dtype(), p.type.dtype) << ex.name << " " << p.name;
      }
      if (p.kind == ir::ParamKind::scalar) {
        EXPECT_TRUE(inst.scalars.count(p.name)) << ex.name << " " << p.name;
      }
    }
  }
}

TEST(Examples, InstancesAreDeterministicPerSeed) {
  for (const auto& ex : all_examples()) {
    const ExampleSize s{4, 4, 3};
    ExampleInstance a = ex.make_instance(s, Layout::vertical_fastest, 11);
    ExampleInstance b = ex.make_instance(s, Layout::vertical_fastest, 11);
    ExampleInstance c = ex.make_instance(s, Layout::vertical_fastest, 12);
    bool any_difference = false;
    for (const auto& [name, f] : a.fields) {
      const Field &g = b.fields.at(name), &h = c.fields.at(name);
      ASSERT_EQ(f.size(), g.size());
      for (std::int64_t i = 0; i < f.size(); ++i) {
        ASSERT_EQ(f.get_as_double(i), g.get_as_double(i)) << ex.name << " " << name;
        ASSERT_TRUE(std::isfinite(f.get_as_double(i))) << ex.name << " " << name;
        any_difference |= f.get_as_double(i) != h.get_as_double(i);
      }
    }
    EXPECT_TRUE(any_difference) << ex.name << ": the seed changes no data";
  }
}

TEST(Examples, LayoutsHoldTheSameValues) {
  for (const auto& ex : all_examples()) {
    const ExampleSize s{4, 3, 2};
    ExampleInstance a = ex.make_instance(s, Layout::vertical_fastest, 5);
    ExampleInstance b = ex.make_instance(s, Layout::horizontal_fastest, 5);
    for (const auto& [name, f] : a.fields) {
      const Field& g = b.fields.at(name);
      EXPECT_EQ(f.origin(), g.origin()) << name;
      EXPECT_EQ(f.shape(), g.shape()) << name;
      if (f.dims().size() > 1) {
        EXPECT_NE(f.strides(), g.strides()) << ex.name << " " << name;
      }
      // Same value at the same absolute index, whatever the layout.
      std::vector<std::int64_t> idx(f.dims().size());
      for (std::size_t a0 = 0; a0 < idx.size(); ++a0) idx[a0] = f.origin()[a0] + f.shape()[a0] - 1;
      EXPECT_EQ(f.get_as_double(f.offset_of(idx)), g.get_as_double(g.offset_of(idx))) << ex.name << " " << name;
    }
  }
}

TEST(Examples, CartesianInputsUseHaloOrigins) {
  for (const char* name : {"laplacian", "lap_of_lap", "hdiff"}) {
    const ExampleSize s{6, 5, 2};
    ExampleInstance inst = example(name).make_instance(s, Layout::vertical_fastest, 3);
    const int halo = std::string(name) == "laplacian" ? 1 : 2;
    const Field& in = inst.fields.at("in");
    EXPECT_EQ(in.origin(), (std::vector<std::int64_t>{-halo, -halo, 0})) << name;
    EXPECT_EQ(in.shape(), (std::vector<std::int64_t>{6 + 2 * halo, 5 + 2 * halo, 2})) << name;
  }
  ExampleInstance vi = example("vertical_interp").make_instance({6, 5, 2}, Layout::vertical_fastest, 3);
  EXPECT_EQ(vi.fields.at("in").shape()[2], 3);
  EXPECT_EQ(vi.fields.at("out").shape()[2], 2);
}

TEST(Examples, ArgumentsSurviveMovingTheInstance) {
  const Example& ex = example("diffusion_chain");
  ExampleInstance inst = ex.make_instance({3, 3, 2}, Layout::vertical_fastest, 1);
  const Arguments args = inst.arguments();
  ExampleInstance moved = std::move(inst);
  ASSERT_NO_THROW(run_reference(ex.program, args));
  EXPECT_EQ(args.find("out")->field, &moved.fields.at("out"));
}

TEST(Examples, CompulsoryBytesGrowWithSize) {
  for (const auto& ex : all_examples()) {
    const double small = ex.compulsory_bytes({4, 4, 3}), large = ex.compulsory_bytes({8, 8, 6});
    EXPECT_GT(small, 0) << ex.name;
    EXPECT_GT(large, 4 * small) << ex.name;
  }
}

}  // namespace
}  // namespace fieldflow::examples
