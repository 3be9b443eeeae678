// `fieldflow cache list|show KEY|clear`: the on-disk compile cache.
#include <fmt/format.h>

#include "cli/commands.h"
#include "toolchain/module_cache.h"

namespace fieldflow::cli {

void add_cache(CLI::App& app) {
  auto* cmd = app.add_subcommand("cache", "List, show or clear the compile cache");
  cmd->require_subcommand(1);
  cmd->add_subcommand("list", "List cached modules")->callback([] {
    toolchain::ModuleCache cache;
    const auto entries = cache.list();
    fmt::print("cache {} ({} entries)\n", cache.directory().string(), entries.size());
    if (const std::string problem = cache.trust_problem(); !problem.empty()) {
      fmt::print("warning: entries here are ignored, {}; modules are built in {} instead\n", problem,
                 cache.fallback_directory().string());
    }
    for (const auto& e : entries) {
      fmt::print("  {}  {:<20} {:>10} B  {}\n", e.key, e.name, e.size_bytes, e.created);
      if (!e.problem.empty() && cache.trust_problem().empty()) fmt::print("      ignored: {}\n", e.problem);
    }
  });
  auto* show = cmd->add_subcommand("show", "Show one cached module");
  auto key = std::make_shared<std::string>();
  show->add_option("key", *key, "Entry key (from `fieldflow cache list`)")->required();
  show->callback([key] { fmt::print("{}\n", toolchain::ModuleCache().show(*key)); });
  cmd->add_subcommand("clear", "Remove every cached module")->callback([] {
    toolchain::ModuleCache cache;
    fmt::print("removed {} entries from {}\n", cache.clear(), cache.directory().string());
  });
}

}  // namespace fieldflow::cli
