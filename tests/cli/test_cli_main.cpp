// The CLI frame: help, version, unknown verbs and options give the documented exit codes.
#include <gtest/gtest.h>

#include "run_cli.hpp"

using rafter::testing::run_rafter;

TEST(CliMain, HelpListsTheVerbs) {
  auto r = run_rafter({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* verb : {"topology", "probe", "profile", "report", "plot", "compare"})
    EXPECT_NE(r.out.find(verb), std::string::npos) << verb;
}

TEST(CliMain, VersionPrintsTheVersion) {
  auto r = run_rafter({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find('.'), std::string::npos);
}

TEST(CliMain, UnknownVerbOrOptionIsOneLineAndExitTwo) {
  for (auto args : {std::vector<std::string>{"frobnicate"}, std::vector<std::string>{"--no-such-option"}}) {
    auto r = run_rafter(args);
    EXPECT_EQ(r.exit_code, 2) << args[0];
    ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("rafter: error: ", 0), 0u) << r.err;
  }
}
