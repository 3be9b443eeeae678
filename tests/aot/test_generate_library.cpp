// The build-time generator on its own: registry rules, the files it writes and what the header
// documents, and its refusals (nothing is written when one selected program cannot be generated).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "aot/generate_library.h"
#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"

namespace fieldflow {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("fieldflow_test_generate_" + name);
  fs::remove_all(dir);
  return dir;
}

ir::Program scaled() {
  const Dimension I = horizontal_dim("I");
  ProgramBuilder p("scaled");
  Expr a = p.field("a", {I}, DType::float32), b = p.field("b", {I}, DType::float32);
  Expr factor = p.scalar("factor", DType::float32), n = p.scalar("n", DType::int32);
  p.call("scale", a * factor + b, {b}, {{I, 0, n}});
  return p.build();
}

TEST(AotPrograms, NamesAreUniqueCIdentifiers) {
  AotPrograms programs;
  programs.add(scaled());
  EXPECT_THROW(programs.add("scaled", [] { return scaled(); }), ProgramError);
  EXPECT_THROW(programs.add("my-program", [] { return scaled(); }), ArgumentError);
  EXPECT_THROW(programs.add("2nd", [] { return scaled(); }), ArgumentError);
  try {
    programs.find("nope");
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("no program 'nope' is registered; registered are: scaled"), std::string::npos)
        << e.what();
  }
}

TEST(GenerateLibrary, WritesASourceAndADocumentedCHeaderPerProgram) {
  AotPrograms programs;
  programs.add(scaled(), {{"factor", Scalar(0.5f)}});
  aot::builtin_examples(programs);
  aot::LibraryOptions o;
  o.out_dir = fresh_dir("writes");
  o.library = "lib1";
  o.layout = Layout::horizontal_fastest;
  o.programs = {"scaled", "vadv"};
  o.registration = "fieldflow_aot_programs_lib1";
  const auto written = aot::generate_library(programs, o);
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[0].source, o.out_dir / "fieldflow_aot_lib1_scaled.cpp");
  EXPECT_EQ(written[1].header, o.out_dir / "fieldflow_aot_lib1_vadv.h");

  const std::string header = read(o.out_dir / "fieldflow_aot_lib1_scaled.h");
  EXPECT_NE(header.find("const ff_aot_program* fieldflow_aot_lib1_scaled(void);"), std::string::npos) << header;
  EXPECT_NE(header.find("layout horizontal_fastest"), std::string::npos) << header;
  EXPECT_NE(header.find("static scalars factor=0.5f"), std::string::npos) << header;
  EXPECT_NE(header.find(" *    0  a                field         float32  [I] in\n"), std::string::npos) << header;
  EXPECT_NE(header.find(" *    1  b                field         float32  [I] inout\n"), std::string::npos) << header;
  EXPECT_NE(header.find(" *    2  factor           scalar        float32  static = 0.5f (pass this value)\n"),
            std::string::npos) << header;
  EXPECT_NE(header.find("fieldflow_aot_lib1_scaled_param_n = 3,"), std::string::npos) << header;
  const std::string vadv = read(o.out_dir / "fieldflow_aot_lib1_vadv.h");
  EXPECT_NE(vadv.find("field         float64  [I, J, K] out\n"), std::string::npos) << vadv;

  const std::string source = read(o.out_dir / "fieldflow_aot_lib1_scaled.cpp");
  EXPECT_NE(source.find("extern \"C\" std::int32_t ff_aot_lib1_scaled_run(const ff_call* call)"), std::string::npos);
  EXPECT_NE(source.find("void fieldflow_aot_programs_lib1(::fieldflow::AotPrograms&);"), std::string::npos);
  EXPECT_NE(source.find("\"horizontal_fastest\", \"factor=0.5f;\""), std::string::npos) << source;
  EXPECT_EQ(source.find("ff_run"), std::string::npos) << "JIT names would clash between programs";
  fs::remove_all(o.out_dir);
}

TEST(GenerateLibrary, RefusesBadSelectionsBeforeWritingAnything) {
  AotPrograms programs;
  aot::builtin_examples(programs);
  aot::LibraryOptions o;
  o.out_dir = fresh_dir("refuses");
  o.library = "lib2";
  o.registration = "fieldflow_aot_programs_lib2";
  EXPECT_THROW(aot::generate_library(programs, o), ArgumentError);  // no programs
  o.programs = {"hdiff", "hdiff"};
  EXPECT_THROW(aot::generate_library(programs, o), ArgumentError);  // twice
  o.programs = {"hdiff", "nope"};
  EXPECT_THROW(aot::generate_library(programs, o), ArgumentError);  // unknown
  o.programs = {"hdiff"};
  o.static_scalars = {{"nope", Scalar(1.0)}};
  EXPECT_THROW(aot::generate_library(programs, o), ArgumentError);  // a static scalar no program has
  o.static_scalars.clear();
  o.backend = Backend::reference;
  try {
    aot::generate_library(programs, o);
    ADD_FAILURE() << "a reference library was generated";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("backend reference holds no compiled code; expected cpu or cuda"),
              std::string::npos) << e.what();
  }
  o.backend = Backend::cpu;
  o.library = "lib-2";
  EXPECT_THROW(aot::generate_library(programs, o), ArgumentError);
  EXPECT_FALSE(fs::exists(o.out_dir));
}

TEST(GenerateLibrary, GeneratorMainReportsErrorsByExitStatus) {
  auto run = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return aot::generator_main(static_cast<int>(argv.size()), argv.data(), &aot::builtin_examples);
  };
  EXPECT_EQ(run({"gen", "--library", "x", "hdiff"}), 1);  // no --out
  EXPECT_EQ(run({"gen", "--out", "/tmp", "--library", "x", "--layout", "diagonal", "hdiff"}), 1);
  EXPECT_EQ(run({"gen", "--out", "/tmp", "--library", "x", "--bogus", "hdiff"}), 1);
  const fs::path dir = fresh_dir("main");
  EXPECT_EQ(run({"gen", "--out", dir.string(), "--library", "x", "laplacian"}), 0);
  EXPECT_TRUE(fs::exists(dir / "fieldflow_aot_x_laplacian.cpp"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fieldflow
