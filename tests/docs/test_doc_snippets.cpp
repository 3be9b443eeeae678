// The documentation's code is real: every file in docs/snippets/ is compiled into this binary,
// each Markdown block between `<!-- snippet: PATH -->` and `<!-- end snippet -->` must equal its
// file byte for byte, and every snippet is run here with its results checked by plain loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/mesh.h"
#include "fieldflow/reference.h"

// The snippets (docs/snippets/*.cpp).
double quickstart();
double first_program();
std::vector<std::string> type_rules();
fieldflow::ir::Program pointwise_program();
void slopes(fieldflow::Field& f, fieldflow::Field& slope, fieldflow::Field& steep);
void diffuse(fieldflow::Field& u, fieldflow::Field& flux, int n);
double diffuse_example();
fieldflow::ir::Program vertical_program();
void vertex_edge_vertex(const fieldflow::Mesh& mesh, fieldflow::Field& fv, fieldflow::Field& fe, fieldflow::Field& gv);
fieldflow::ir::Program sparse_program();
fieldflow::ir::Program tridiagonal_program();
std::string call_with_a_short_input(fieldflow::Field& out);
fieldflow::ir::Program slot_program();
fieldflow::ir::Program band_program();
std::string static_limiter(fieldflow::Field& f, fieldflow::Field& out);
void reference_pressure(fieldflow::Field& p_ref, int nk);
void bounded_means(fieldflow::Field& u, fieldflow::Field& v, fieldflow::Field& mean, fieldflow::Field& lo,
                   fieldflow::Field& hi, fieldflow::Field& rounded_lo, fieldflow::Field& rounded_hi, int n);
void mirror_upper_half(fieldflow::Field& f, fieldflow::Field& out, int n);
double advect_at(fieldflow::Field& q, double c, bool upwind, int order, int i);
void ring(int n, fieldflow::Field& left, fieldflow::Field& lap, fieldflow::Field& pow2, fieldflow::Field& flips,
          fieldflow::Field& x, fieldflow::Field& cube_root, fieldflow::Field& factorial);
void diffuse_fortran_arrays(double* u, double* scratch, int ni, int nj, int nk, int ld, int steps);
void edge_gradient(const std::int32_t* e2v, const double* psi, double* grad, int n_vertices, int n_edges);

namespace fieldflow {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = FIELDFLOW_PROJECT_SOURCE_DIR;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

struct Block {
  fs::path markdown;
  int line = 0;          // 1-based line of the opening marker
  std::string path;      // as written in the marker, relative to the project root
  std::string body;      // the fenced code, lines joined with '\n' and a final '\n'
  std::string problem;   // malformed block: what is wrong
};

std::vector<fs::path> markdown_files() {
  std::vector<fs::path> files;
  if (fs::exists(kRoot / "README.md")) files.push_back(kRoot / "README.md");
  for (const auto& e : fs::directory_iterator(kRoot / "docs"))
    if (e.path().extension() == ".md") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The code fence's language for a snippet file: C++ snippets are compiled into this test; C and
// Fortran ones (the C API and the Fortran module, docs/host.md) are built and run by tests/capi;
// CMake files (the AOT build, docs/snippets/aot/) are fenced as cmake; Python ones (docs/python.md)
// are run by python/tests/test_docs.py.
std::string fence_language(const fs::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".c") return "c";
  if (ext == ".py") return "python";
  if (ext == ".f90") return "fortran";
  if (file.filename() == "CMakeLists.txt" || ext == ".cmake") return "cmake";
  return "cpp";
}

bool is_snippet_file(const fs::path& file) {
  const std::string ext = file.extension().string();
  return ext == ".cpp" || ext == ".c" || ext == ".f90" || ext == ".py";
}

std::vector<Block> snippet_blocks(const fs::path& md) {
  static const std::string open = "<!-- snippet: ", close = " -->", end = "<!-- end snippet -->";
  std::vector<Block> blocks;
  const auto lines = split_lines(read_file(md));
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.rfind(open, 0) != 0) continue;
    Block b;
    b.markdown = md;
    b.line = static_cast<int>(i) + 1;
    if (l.size() < open.size() + close.size() || l.substr(l.size() - close.size()) != close) {
      b.problem = "marker not closed with ' -->'";
      blocks.push_back(b);
      continue;
    }
    b.path = l.substr(open.size(), l.size() - open.size() - close.size());
    const std::string fence = "```" + fence_language(b.path);
    if (i + 1 >= lines.size() || lines[i + 1] != fence) {
      b.problem = "the marker must be followed by a " + fence + " line";
      blocks.push_back(b);
      continue;
    }
    std::size_t j = i + 2;
    for (; j < lines.size() && lines[j] != "```"; ++j) b.body += lines[j] + "\n";
    if (j >= lines.size()) b.problem = "unterminated code block";
    else if (j + 1 >= lines.size() || lines[j + 1] != end) b.problem = "the code block must be followed by " + end;
    blocks.push_back(b);
    i = j;
  }
  return blocks;
}

// --- the Markdown shows the files verbatim --------------------------------------------------------------

TEST(DocSnippets, EveryMarkedBlockEqualsItsFile) {
  int blocks = 0;
  for (const auto& md : markdown_files()) {
    for (const Block& b : snippet_blocks(md)) {
      ++blocks;
      const std::string where = md.filename().string() + ":" + std::to_string(b.line);
      EXPECT_TRUE(b.problem.empty()) << where << ": " << b.problem;
      if (!b.problem.empty()) continue;
      const fs::path file = kRoot / b.path;
      ASSERT_TRUE(fs::exists(file)) << where << ": no such file " << b.path;
      const std::string content = read_file(file);
      if (content != b.body) {
        // Point at the first differing line.
        const auto want = split_lines(content), got = split_lines(b.body);
        std::size_t k = 0;
        while (k < want.size() && k < got.size() && want[k] == got[k]) ++k;
        ADD_FAILURE() << where << ": the block differs from " << b.path << " at line " << k + 1 << ":\n  file: "
                      << (k < want.size() ? want[k] : "<end>") << "\n  doc:  " << (k < got.size() ? got[k] : "<end>");
      }
    }
  }
  EXPECT_GE(blocks, 11) << "docs/language.md and README.md embed the snippets";
}

TEST(DocSnippets, EverySnippetFileIsShownSomewhere) {
  std::map<std::string, int> shown;
  for (const auto& md : markdown_files())
    for (const Block& b : snippet_blocks(md)) ++shown[b.path];
  int files = 0;
  for (const auto& e : fs::directory_iterator(kRoot / "docs" / "snippets")) {
    if (!is_snippet_file(e.path())) continue;
    ++files;
    const std::string rel = "docs/snippets/" + e.path().filename().string();
    EXPECT_GT(shown[rel], 0) << rel << " is compiled but no Markdown file shows it";
  }
  EXPECT_GE(files, 11);
}

// docs/snippets/aot/ is a whole CMake project (built and run by tests/install against the installed
// package, not compiled here): docs/host.md shows every file of it.
TEST(DocSnippets, EveryAotProjectFileIsShown) {
  std::map<std::string, int> shown;
  for (const auto& md : markdown_files())
    for (const Block& b : snippet_blocks(md)) ++shown[b.path];
  int files = 0;
  for (const auto& e : fs::directory_iterator(kRoot / "docs" / "snippets" / "aot")) {
    ++files;
    const std::string rel = "docs/snippets/aot/" + e.path().filename().string();
    EXPECT_GT(shown[rel], 0) << rel << " is built by tests/install but no Markdown file shows it";
  }
  EXPECT_EQ(files, 3);
}

TEST(DocSnippets, TheCheckerNoticesADifference) {
  // The comparison above must be able to fail: a block one character off is reported.
  const fs::path tmp = fs::temp_directory_path() / "fieldflow_doc_snippet_check.md";
  const std::string real = read_file(kRoot / "docs/snippets/first_program.cpp");
  ASSERT_FALSE(real.empty());
  std::string altered = real;
  altered[altered.size() / 2] = altered[altered.size() / 2] == 'x' ? 'y' : 'x';
  std::ofstream(tmp) << "text\n<!-- snippet: docs/snippets/first_program.cpp -->\n```cpp\n" << altered
                     << "```\n<!-- end snippet -->\n<!-- snippet: docs/snippets/first_program.cpp -->\nno fence\n";
  const auto blocks = snippet_blocks(tmp);
  fs::remove(tmp);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_TRUE(blocks[0].problem.empty());
  EXPECT_NE(blocks[0].body, real);
  EXPECT_FALSE(blocks[1].problem.empty());
}

// --- the snippets run and compute the right values ------------------------------------------------------------

const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");

TEST(DocSnippets, Quickstart) { EXPECT_DOUBLE_EQ(quickstart(), 20.0); }

TEST(DocSnippets, FirstProgram) { EXPECT_DOUBLE_EQ(first_program(), 2.0); }

TEST(DocSnippets, TypeRules) {
  const auto seen = type_rules();
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen[0], "float32[I, K]");
  EXPECT_EQ(seen[1], "bool[I, K]");
  EXPECT_EQ(seen[2], "float64[I, K]");
  EXPECT_EQ(seen[3], "float64[I, K]");
  EXPECT_NE(seen[4].find("float32 and float64"), std::string::npos) << seen[4];
  EXPECT_NE(seen[4].find("astype"), std::string::npos) << seen[4];
  EXPECT_NE(seen[5].find("literal 0.5"), std::string::npos) << seen[5];
}

TEST(DocSnippets, Pointwise) {
  Field T({I, K}, DType::float32, {8, 4}), q({I, K}, DType::float32, {8, 4});
  Field rh({I, K}, DType::float32, {8, 4}), cloudy({I, K}, DType::boolean, {8, 4}), h({I, K}, DType::float32, {8, 4});
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 4; ++k) {
      T.at<float>({i, k}) = 250.0f + 8.0f * static_cast<float>(i) - 3.0f * static_cast<float>(k);
      q.at<float>({i, k}) = 0.002f + 0.003f * static_cast<float>((i + 2 * k) % 7);
    }
  T.at<float>({0, 0}) = std::numeric_limits<float>::quiet_NaN();
  T.at<float>({1, 0}) = 190.0f;
  run_reference(pointwise_program(),
                Arguments().field("T", T).field("q", q).field("rh", rh).field("cloudy", cloudy).field("height", h));
  int clamped = 0, saturated = 0;
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 4; ++k) {
      const float t = T.at<float>({i, k}), qq = q.at<float>({i, k});
      const float es = 6.112f * std::exp(17.67f * (t - 273.15f) / (t - 29.65f));
      const float ratio = qq * 1013.25f / (0.622f * es);
      const bool valid = !std::isnan(ratio) && t > 200.0f && t < 330.0f;
      const float want = valid ? std::min(std::max(ratio, 0.0f), 1.0f) : 0.0f;
      EXPECT_FLOAT_EQ(rh.at<float>({i, k}), want) << i << "," << k;
      EXPECT_EQ(cloudy.at<bool>({i, k}), valid && ratio > 0.95f) << i << "," << k;
      EXPECT_FLOAT_EQ(h.at<float>({i, k}), 250.0f * std::sqrt(static_cast<float>(k) + 0.5f));
      clamped += valid && ratio > 1.0f;
      saturated += cloudy.at<bool>({i, k});
    }
  EXPECT_EQ(rh.at<float>({0, 0}), 0.0f);  // NaN temperature
  EXPECT_EQ(rh.at<float>({1, 0}), 0.0f);  // out of range
  EXPECT_GT(clamped, 0);
  EXPECT_GT(saturated, 0);
}

TEST(DocSnippets, Operators) {
  const int n = 12;
  Field f({I}, DType::float64, {n}), slope({I}, DType::float64, {n}), steep({I}, DType::boolean, {n});
  const double v[n] = {0, 1, 3, 2, 2, 5, 9, 8, 4, 4.2, 4.1, 0};
  for (int i = 0; i < n; ++i) f.at<double>({i}) = v[i];
  slope.fill(-99);
  slopes(f, slope, steep);
  for (int i = 0; i < n; ++i) {
    if (i == 0 || i == n - 1) {
      EXPECT_EQ(slope.at<double>({i}), -99) << "outside the domain";
      continue;
    }
    const double a = v[i + 1] - v[i], b = v[i] - v[i - 1];
    const double want = a * b <= 0 ? 0.0 : (std::abs(a) < std::abs(b) ? a : b);
    EXPECT_EQ(slope.at<double>({i}), want) << i;
    EXPECT_EQ(steep.at<bool>({i}), std::abs(want) > 0.5) << i;
  }
}

TEST(DocSnippets, HaloAndDomains) {
  const int n = 7;
  Field u({I}, DType::float64, {n + 2}, {-1}), flux({I}, DType::float64, {n + 1});
  std::vector<double> old(n + 2);
  for (int i = -1; i <= n; ++i) old[i + 1] = u.at<double>({i}) = std::sin(0.7 * i) + 0.1 * i;
  diffuse(u, flux, n);
  auto o = [&](int i) { return old[i + 1]; };
  for (int i = 0; i <= n; ++i) EXPECT_DOUBLE_EQ(flux.at<double>({i}), o(i) - o(i - 1)) << i;
  for (int i = 0; i < n; ++i)
    EXPECT_DOUBLE_EQ(u.at<double>({i}), o(i) + 0.25 * ((o(i + 1) - o(i)) - (o(i) - o(i - 1)))) << i;
  EXPECT_EQ(u.at<double>({-1}), o(-1));
  EXPECT_EQ(u.at<double>({n}), o(n));
  EXPECT_DOUBLE_EQ(diffuse_example(), 0.5);
}

TEST(DocSnippets, Vertical) {
  const int ni = 4, nk = 6;
  Field q({I, K}, DType::float64, {ni, nk}), lev({I, K}, DType::int32, {ni, nk});
  Field dq({I, K}, DType::float64, {ni, nk}), g({I, K}, DType::float64, {ni, nk});
  for (int i = 0; i < ni; ++i)
    for (int k = 0; k < nk; ++k) {
      q.at<double>({i, k}) = (i + 1) * k * k + 0.5 * i;
      lev.at<std::int32_t>({i, k}) = (nk - 1 - k) - i % 2;  // reversed column, shifted down on odd i
    }
  run_reference(vertical_program(),
                Arguments().field("q", q).field("lev", lev).scalar("nk", nk).field("dq", dq).field("g", g));
  for (int i = 0; i < ni; ++i)
    for (int k = 0; k < nk; ++k) {
      auto Q = [&](int kk) { return q.at<double>({i, kk}); };
      const double want = k == 0 ? Q(1) - Q(0) : k >= nk - 1 ? Q(k) - Q(k - 1) : (Q(k + 1) - Q(k - 1)) / 2;
      EXPECT_DOUBLE_EQ(dq.at<double>({i, k}), want) << i << "," << k;
      EXPECT_EQ(g.at<double>({i, k}), Q(nk - 1 - i % 2)) << i << "," << k;
    }
}

TEST(DocSnippets, Unstructured) {
  const Mesh mesh = make_bounded_mesh(5, 4);
  Field fv({Vertex}, DType::float64, {mesh.n_vertices}), fe({Edge}, DType::float64, {mesh.n_edges});
  Field gv({Vertex}, DType::float64, {mesh.n_vertices});
  for (std::int64_t v = 0; v < mesh.n_vertices; ++v) fv.at<double>({v}) = mesh.vertex_x[v] * 3 - mesh.vertex_y[v] * mesh.vertex_y[v];
  vertex_edge_vertex(mesh, fv, fe, gv);
  const auto &e2v = mesh.table("E2V"), &v2e = mesh.table("V2E");
  std::vector<double> edge(mesh.n_edges);
  for (std::int64_t e = 0; e < mesh.n_edges; ++e) {
    edge[e] = 0.5 * (fv.at<double>({e2v(e, 0)}) + fv.at<double>({e2v(e, 1)}));
    EXPECT_DOUBLE_EQ(fe.at<double>({e}), edge[e]);
  }
  for (std::int64_t v = 0; v < mesh.n_vertices; ++v) {
    double s = 0;
    int count = 0;
    for (int n = 0; n < 6; ++n)
      if (v2e(v, n) >= 0) s += edge[v2e(v, n)], ++count;
    EXPECT_DOUBLE_EQ(gv.at<double>({v}), s / count) << v;
  }
}

TEST(DocSnippets, SparseFields) {
  const Mesh mesh = make_bounded_mesh(4, 4);
  const Dimension E2C2VDim{"E2C2VDim", DimKind::local};
  Field fv({Vertex}, DType::float64, {mesh.n_vertices}), fe({Edge}, DType::float64, {mesh.n_edges});
  Field w({Edge, E2C2VDim}, DType::float64, {mesh.n_edges, 4});
  Field interp({Edge}, DType::float64, {mesh.n_edges}), peak({Edge}, DType::float64, {mesh.n_edges});
  for (std::int64_t v = 0; v < mesh.n_vertices; ++v) fv.at<double>({v}) = std::cos(1.3 * v);
  for (std::int64_t e = 0; e < mesh.n_edges; ++e) {
    fe.at<double>({e}) = std::sin(0.9 * e);
    for (int n = 0; n < 4; ++n) w.at<double>({e, n}) = 0.1 * (n + 1) + 0.01 * e;
  }
  run_reference(sparse_program(), Arguments()
                                      .field("fv", fv).field("fe", fe).field("w", w)
                                      .field("interp", interp).field("peak", peak)
                                      .scalar("n_edges", mesh.n_edges)
                                      .connectivity("E2C2V", mesh.table("E2C2V"))
                                      .connectivity("E2V", mesh.table("E2V"))
                                      .connectivity("V2E", mesh.table("V2E")));
  const auto &e2c2v = mesh.table("E2C2V"), &e2v = mesh.table("E2V"), &v2e = mesh.table("V2E");
  for (std::int64_t e = 0; e < mesh.n_edges; ++e) {
    double s = 0, m = std::numeric_limits<double>::lowest();
    for (int n = 0; n < 4; ++n)
      if (e2c2v(e, n) >= 0) s += w.at<double>({e, n}) * fv.at<double>({e2c2v(e, n)});
    for (int n = 0; n < 6; ++n)
      if (const auto x = v2e(e2v(e, 0), n); x >= 0) m = std::max(m, fe.at<double>({x}));
    EXPECT_DOUBLE_EQ(interp.at<double>({e}), s) << e;
    EXPECT_EQ(peak.at<double>({e}), m) << e;
  }
}

TEST(DocSnippets, Tridiagonal) {
  const int ni = 3, nk = 9;
  Field a({I, K}, DType::float64, {ni, nk}), b({I, K}, DType::float64, {ni, nk}), c({I, K}, DType::float64, {ni, nk}),
      d({I, K}, DType::float64, {ni, nk}), x({I, K}, DType::float64, {ni, nk});
  for (int i = 0; i < ni; ++i)
    for (int k = 0; k < nk; ++k) {
      a.at<double>({i, k}) = k == 0 ? 0.0 : -1.0 - 0.1 * i;
      b.at<double>({i, k}) = 4.0 + 0.2 * k;
      c.at<double>({i, k}) = k == nk - 1 ? 0.0 : -1.0 + 0.05 * k;
      d.at<double>({i, k}) = std::sin(k + i);
    }
  run_reference(tridiagonal_program(), Arguments()
                                           .field("a", a).field("b", b).field("c", c).field("d", d).field("x", x)
                                           .scalar("ni", ni).scalar("nk", nk));
  for (int i = 0; i < ni; ++i)
    for (int k = 0; k < nk; ++k) {  // the solution satisfies every equation of its column
      double lhs = b.at<double>({i, k}) * x.at<double>({i, k});
      if (k > 0) lhs += a.at<double>({i, k}) * x.at<double>({i, k - 1});
      if (k < nk - 1) lhs += c.at<double>({i, k}) * x.at<double>({i, k + 1});
      EXPECT_NEAR(lhs, d.at<double>({i, k}), 1e-12) << i << "," << k;
    }
}

TEST(DocSnippets, CallErrors) {
  Field out({I}, DType::float64, {10});
  out.fill(7.0);
  const std::string msg = call_with_a_short_input(out);
  for (const char* word : {"program 'diff'", "call 'forward_difference'", "field 'a'", "I=10", "[0, 10)"})
    EXPECT_NE(msg.find(word), std::string::npos) << msg;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(out.at<double>({i}), 7.0);
}

TEST(DocSnippets, SlotsAndPromotion) {
  const Connectivity E2C2V = make_connectivity("E2C2V", Edge, Vertex, 4);
  const int ne = 5, nk = 3;
  Field w({Edge, E2C2V.local, K}, DType::float64, {ne, 4, nk}), length({Edge}, DType::float64, {ne}),
      depth({K}, DType::float64, {nk}), out({Edge, K}, DType::float64, {ne, nk});
  for (int e = 0; e < ne; ++e) {
    length.at<double>({e}) = 1.0 + e;
    for (int n = 0; n < 4; ++n)
      for (int k = 0; k < nk; ++k) w.at<double>({e, n, k}) = 100.0 * n + 10.0 * e + k;
  }
  for (int k = 0; k < nk; ++k) depth.at<double>({k}) = 0.5 * k;
  run_reference(slot_program(), Arguments().field("w", w).field("length", length).field("depth", depth)
                                    .field("out", out).scalar("n_edges", ne).scalar("nk", nk));
  for (int e = 0; e < ne; ++e)
    for (int k = 0; k < nk; ++k)
      EXPECT_EQ(out.at<double>({e, k}), (200.0 + 10.0 * e + k) + (1.0 + e) * (0.5 * k)) << e << "," << k;
}

TEST(DocSnippets, CompoundConditions) {
  const int nk = 10;  // band [4, 9)
  Field q({I, K}, DType::float64, {4, nk}), out({I, K}, DType::float64, {4, nk});
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < nk; ++k) q.at<double>({i, k}) = k * k + i;
  run_reference(band_program(), Arguments().field("q", q).field("out", out).scalar("nk", nk));
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < nk; ++k) {
      const double want = k >= 4 && k < 9 ? (q.at<double>({i, k - 1}) + q.at<double>({i, k + 1})) / 2 : q.at<double>({i, k});
      EXPECT_EQ(out.at<double>({i, k}), want) << i << "," << k;
    }
}

TEST(DocSnippets, StaticScalars) {
  Field f({I}, DType::float64, {8}), out({I}, DType::float64, {8});
  for (int i = 0; i < 8; ++i) f.at<double>({i}) = 0.5 * i;
  const std::string msg = static_limiter(f, out);
  for (const char* word : {"program 'limiter'", "'limit'", "static", "true", "false"})
    EXPECT_NE(msg.find(word), std::string::npos) << msg;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out.at<double>({i}), std::min(0.5 * i, 1.0)) << i;
}

TEST(DocSnippets, IntegerMath) {
  const int n = 7;
  Field left({I}, DType::int32, {n}), lap({I}, DType::int32, {n}), pow2({I}, DType::int64, {n});
  Field flips({I}, DType::boolean, {n}), x({I}, DType::float64, {n}), root({I}, DType::float64, {n}),
      fact({I}, DType::float64, {n});
  for (int i = 0; i < n; ++i) x.at<double>({i}) = i == n - 1 ? -27.0 : i;
  ring(n, left, lap, pow2, flips, x, root, fact);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(left.at<std::int32_t>({i}), i == 0 ? n - 1 : i - 1) << i;
    EXPECT_EQ(lap.at<std::int32_t>({i}), i == 0 ? -1 : 0) << i;
    EXPECT_EQ(pow2.at<std::int64_t>({i}), std::int64_t{1} << i) << i;
    EXPECT_EQ(flips.at<bool>({i}), (i % 2 == 1) != (i >= n / 2)) << i;
    EXPECT_EQ(root.at<double>({i}), std::cbrt(x.at<double>({i}))) << i;
    if (i < n - 1) {
      EXPECT_NEAR(fact.at<double>({i}), std::tgamma(i + 1.0), 1e-9) << i;  // i!
    }
  }
  EXPECT_DOUBLE_EQ(root.at<double>({n - 1}), -3.0);  // std::cbrt(-27.0) may be an ulp off
  EXPECT_DOUBLE_EQ(fact.at<double>({4}), 24.0);
}

TEST(DocSnippets, CarryScan) {
  const int ni = 3, nk = 6;
  Field p({I, K}, DType::float64, {ni, nk + 1});  // one level more than the call writes
  p.fill(-1.0);
  reference_pressure(p, nk);
  for (int i = 0; i < ni; ++i) {
    double want = 1000.0 / 0.9;
    for (int k = 0; k < nk; ++k) {
      want *= 0.9;
      EXPECT_EQ(p.at<double>({i, k}), want) << i << "," << k;
    }
    EXPECT_EQ(p.at<double>({i, nk}), -1.0);
  }
  EXPECT_NEAR(p.at<double>({0, 0}), 1000.0, 1e-9);
}

TEST(DocSnippets, Tuples) {
  const int n = 9;
  Field u({I}, DType::float64, {n}), v({I}, DType::float64, {n}), mean({I}, DType::float64, {n}),
      lo({I}, DType::float64, {n}), hi({I}, DType::float64, {n}), rlo({I}, DType::int32, {n}),
      rhi({I}, DType::int32, {n});
  std::vector<double> d(n);
  for (int i = 0; i < n; ++i) {
    u.at<double>({i}) = 3.0 * std::sin(1.7 * i);
    v.at<double>({i}) = 0.5 * i;
    d[i] = u.at<double>({i}) - v.at<double>({i});
  }
  mean.fill(99);
  bounded_means(u, v, mean, lo, hi, rlo, rhi, n);
  for (int i = 0; i < n - 1; ++i) {
    const double l = i == 0 ? d[0] : std::min(d[i - 1], d[i + 1]), h = i == 0 ? d[0] : std::max(d[i - 1], d[i + 1]);
    EXPECT_EQ(mean.at<double>({i}), i == 0 ? d[0] : 0.5 * (d[i - 1] + d[i + 1])) << i;
    EXPECT_EQ(lo.at<double>({i}), l) << i;
    EXPECT_EQ(hi.at<double>({i}), h) << i;
    EXPECT_EQ(rlo.at<std::int32_t>({i}), static_cast<std::int32_t>(l)) << i;
    EXPECT_EQ(rhi.at<std::int32_t>({i}), static_cast<std::int32_t>(h)) << i;
  }
  EXPECT_EQ(mean.at<double>({n - 1}), 99.0);  // outside the domain
}

TEST(DocSnippets, BoundsAndGathers) {
  for (int n : {7, 8}) {
    Field f({I}, DType::float64, {n}), out({I}, DType::float64, {n});
    for (int i = 0; i < n; ++i) f.at<double>({i}) = 10.0 * i + 1;
    out.fill(-1);
    mirror_upper_half(f, out, n);
    for (int i = 0; i < n; ++i) EXPECT_EQ(out.at<double>({i}), i >= n / 2 ? 10.0 * (n - 1 - i) + 1 : -1.0) << n << " " << i;
  }
}

TEST(DocSnippets, IfElse) {
  Field q({I}, DType::float64, {8});
  for (int i = 0; i < 8; ++i) q.at<double>({i}) = i * i;
  const int i = 4;
  const double l = q.at<double>({i - 1}), m = q.at<double>({i}), r = q.at<double>({i + 1});
  EXPECT_EQ(advect_at(q, 0.5, true, 1, i), 0.5 * (m - l));
  EXPECT_EQ(advect_at(q, -0.5, true, 1, i), -0.5 * (r - m));
  EXPECT_EQ(advect_at(q, 0.5, false, 2, i), 0.5 * 0.5 * (r - l));
  EXPECT_EQ(advect_at(q, 0.5, false, 3, i), 0.0);
}

TEST(DocSnippets, HostViews) {
  // Fortran-ordered arrays with a padded leading dimension; padding holds NaN and must stay so.
  const int ni = 9, nj = 6, nk = 3, ld = 11, steps = 4;
  auto at = [&](int i, int j, int k) { return static_cast<std::size_t>(i + ld * (j + nj * k)); };
  std::vector<double> u(static_cast<std::size_t>(ld * nj * nk), std::nan("")), expected;
  for (int k = 0; k < nk; ++k)
    for (int j = 0; j < nj; ++j)
      for (int i = 0; i < ni; ++i) u[at(i, j, k)] = std::sin(0.3 * i) + std::cos(0.2 * j) + k;
  std::vector<double> scratch = u;
  expected = u;
  for (int s = 0; s < steps; ++s) {
    std::vector<double> next = expected;
    for (int k = 0; k < nk; ++k)
      for (int j = 1; j < nj - 1; ++j)
        for (int i = 1; i < ni - 1; ++i) {
          const double a = expected[at(i, j, k)];
          next[at(i, j, k)] = a + 0.1 * (expected[at(i + 1, j, k)] + expected[at(i - 1, j, k)] +
                                         expected[at(i, j + 1, k)] + expected[at(i, j - 1, k)] - 4.0 * a);
        }
    expected = next;
  }
  diffuse_fortran_arrays(u.data(), scratch.data(), ni, nj, nk, ld, steps);
  for (std::size_t x = 0; x < u.size(); ++x) {
    if (std::isnan(expected[x])) EXPECT_TRUE(std::isnan(u[x])) << x;  // padding untouched
    else EXPECT_EQ(u[x], expected[x]) << x;
  }

  // A 4-vertex, 5-edge graph, e2v in Fortran order.
  const std::int32_t e2v[10] = {0, 1, 2, 3, 0,  //
                                1, 2, 3, 0, 2};
  const double psi[4] = {1, 4, 9, 16};
  double grad[5] = {};
  edge_gradient(e2v, psi, grad, 4, 5);
  for (int e = 0; e < 5; ++e) EXPECT_EQ(grad[e], psi[e2v[5 + e]] - psi[e2v[e]]) << e;
}

}  // namespace
}  // namespace fieldflow
