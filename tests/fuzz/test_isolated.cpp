// The fuzzer's child processes: what a check returns comes back whole, and a check that crashes,
// exits without reporting, hangs or throws becomes a Failure instead of ending the campaign.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "fuzz/isolated.h"

namespace fieldflow::fuzz {
namespace {

IsolationOptions quiet() {
  IsolationOptions o;
  o.quiet = true;
  // The test binary may run under a sanitizer whose handler turns a SIGSEGV into a report and an
  // exit: the child gets the default action, as the fuzzer's children get what was there before it.
  o.in_child = [] {
    for (int sig : {SIGSEGV, SIGABRT}) std::signal(sig, SIG_DFL);
  };
  return o;
}

TEST(FuzzIsolation, ACheckThatPassesReturnsItsCountsAddedToTheParents) {
  RunStats stats;
  stats.compiled_calls = 5;
  const pid_t parent = ::getpid();
  const auto f = run_isolated(
      [&](RunStats& s) -> std::optional<Failure> {
        if (::getpid() == parent) throw std::logic_error("the check ran in the parent");
        s.compiled_calls += 7;
        s.c_api_calls = 3;
        s.static_scalar_calls = 0xFFFF'FFFF'FFFFull;  // all bytes of a word travel
        return std::nullopt;
      },
      stats, quiet());
  EXPECT_FALSE(f.has_value()) << f->kind << ": " << f->detail;
  EXPECT_EQ(stats.compiled_calls, 12u);
  EXPECT_EQ(stats.c_api_calls, 3u);
  EXPECT_EQ(stats.static_scalar_calls, 0xFFFF'FFFF'FFFFull);
}

TEST(FuzzIsolation, AFailureComesBackWithItsVariant) {
  RunStats stats;
  std::string long_detail(100000, 'x');  // more than a pipe's buffer: read while the child writes
  long_detail += "end";
  const auto f = run_isolated(
      [&](RunStats& s) -> std::optional<Failure> {
        s.reference_calls = 2;
        Failure g;
        g.kind = "values differ";
        g.detail = long_detail;
        g.path = Path::cuda_runner;
        g.mode = TransientMemoryMode::scoped;
        g.threads = 3;
        g.layout = Layout::horizontal_fastest;
        return g;
      },
      stats, quiet());
  ASSERT_TRUE(f.has_value());
  EXPECT_FALSE(is_process_failure(*f));
  EXPECT_EQ(f->kind, "values differ");
  EXPECT_EQ(f->detail, long_detail);
  EXPECT_EQ(f->path, Path::cuda_runner);
  EXPECT_EQ(f->mode, TransientMemoryMode::scoped);
  EXPECT_EQ(f->threads, 3);
  EXPECT_EQ(f->layout, Layout::horizontal_fastest);
  EXPECT_EQ(stats.reference_calls, 2u);
}

TEST(FuzzIsolation, ACrashIsAFailureNamingTheSignal) {
  RunStats stats;
  stats.compiled_calls = 4;
  const auto f = run_isolated(
      [](RunStats& s) -> std::optional<Failure> {
        s.compiled_calls += 100;  // lost with the child
        std::raise(SIGSEGV);
        return std::nullopt;
      },
      stats, quiet());
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(is_process_failure(*f));
  EXPECT_EQ(f->kind, "crashed: SIGSEGV");
  EXPECT_NE(f->detail.find("signal 11"), std::string::npos) << f->detail;
  EXPECT_EQ(stats.compiled_calls, 4u);

  const auto aborted = run_isolated([](RunStats&) -> std::optional<Failure> { std::abort(); }, stats, quiet());
  ASSERT_TRUE(aborted.has_value());
  EXPECT_EQ(aborted->kind, "crashed: SIGABRT");
}

TEST(FuzzIsolation, AnExitWithoutAReportIsAFailure) {
  // What a sanitizer does after its report (exit status 1), or code calling std::exit.
  RunStats stats;
  const auto f = run_isolated([](RunStats&) -> std::optional<Failure> { std::_Exit(1); }, stats, quiet());
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(is_process_failure(*f));
  EXPECT_EQ(f->kind, "died: exit status 1");
  const auto zero = run_isolated([](RunStats&) -> std::optional<Failure> { std::_Exit(0); }, stats, quiet());
  ASSERT_TRUE(zero.has_value());
  EXPECT_EQ(zero->kind, "died: exit status 0");
}

TEST(FuzzIsolation, AHungCheckIsKilledAtTheTimeout) {
  RunStats stats;
  IsolationOptions o = quiet();
  o.timeout = std::chrono::seconds(1);
  const auto start = std::chrono::steady_clock::now();
  const auto f = run_isolated(
      [](RunStats&) -> std::optional<Failure> {
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      },
      stats, o);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, "hung");
  EXPECT_TRUE(is_process_failure(*f));
  // Killed at the deadline, not left behind: run_isolated returned well before the child would end.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(FuzzIsolation, AnExceptionOfTheCheckIsAFailureOfTheCheck) {
  RunStats stats;
  const auto f = run_isolated([](RunStats&) -> std::optional<Failure> { throw std::runtime_error("harness broke"); },
                              stats, quiet());
  ASSERT_TRUE(f.has_value());
  EXPECT_FALSE(is_process_failure(*f));
  EXPECT_EQ(f->kind, "uncaught exception");
  EXPECT_EQ(f->detail, "harness broke");
}

}  // namespace
}  // namespace fieldflow::fuzz
