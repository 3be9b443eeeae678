#pragma once
// Sub-commands of the `fieldflow` tool, one file each.
#include <CLI/CLI.hpp>

namespace fieldflow::cli {

void add_demo(CLI::App& app);
void add_inspect(CLI::App& app);
void add_plan(CLI::App& app);
void add_cache(CLI::App& app);
void add_bench(CLI::App& app);
void add_aot(CLI::App& app);

}  // namespace fieldflow::cli
