// The registry of programs a library generator offers (fieldflow/aot.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "aot/generate_library.h"
#include "fieldflow/aot.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"

namespace fieldflow {

void AotPrograms::add(std::string name, Builder build, std::map<std::string, Scalar> static_scalars) {
  aot::check_identifier("program", name);
  for (const auto& e : entries_)
    if (e.name == name)
      throw ProgramError(fmt::format("AOT programs: '{}' is registered twice; each name must be unique", name));
  if (!build) throw ProgramError(fmt::format("AOT programs: '{}' is registered without a builder", name));
  entries_.push_back({std::move(name), std::move(build), std::move(static_scalars)});
}

void AotPrograms::add(const ir::Program& program, std::map<std::string, Scalar> static_scalars) {
  add(program.name, [program] { return program; }, std::move(static_scalars));
}

const AotPrograms::Entry& AotPrograms::find(const std::string& name) const {
  std::vector<std::string> names;
  for (const auto& e : entries_) {
    if (e.name == name) return e;
    names.push_back(e.name);
  }
  throw ArgumentError(fmt::format("AOT programs: no program '{}' is registered; registered are: {}", name,
                                  names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
}

namespace aot {
void builtin_examples(AotPrograms& programs) {
  for (const auto& ex : examples::all_examples()) {
    const std::string name = ex.name;
    programs.add(name, [name] { return examples::example(name).program; });
  }
}
}  // namespace aot

}  // namespace fieldflow
