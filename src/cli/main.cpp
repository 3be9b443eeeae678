// The fieldflow command-line tool: demo, inspect, plan, cache, bench, aot.
#include <fmt/format.h>

#include "cli/commands.h"
#include "fieldflow/errors.h"

int main(int argc, char** argv) {
  CLI::App app{"fieldflow: compile and run programs over fields"};
  app.require_subcommand(1);
  fieldflow::cli::add_demo(app);
  fieldflow::cli::add_inspect(app);
  fieldflow::cli::add_plan(app);
  fieldflow::cli::add_cache(app);
  fieldflow::cli::add_bench(app);
  fieldflow::cli::add_aot(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const fieldflow::Error& e) {
    fmt::print(stderr, "fieldflow: {}\n", e.what());
    return 1;
  }
  return 0;
}
