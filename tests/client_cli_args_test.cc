// Unit tests of client/cli_args.h: list flags split item by item without
// trimming or dropping anything, and the UTF-8 check of text arguments.
// Expectations are the messages documented in cli_args.h and docs/cli.md.
// Also of backfillctl's command line (cli_command_line.h): every
// subcommand's --help has examples that its parser accepts, the shell
// completion (cli_completion.h) offers every subcommand and flag the help
// lists and the choices of `completion SHELL`, and works in bash; a typo
// of a flag or subcommand gets the closest one suggested (cli_suggest.h);
// and --version names the project's version, the commit and the API
// package.

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/cli_args.h"
#include "client/cli_command_line.h"
#include "client/cli_completion.h"
#include "client/cli_suggest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/executable_dir.h"

namespace backfill {
namespace cli {
namespace client_cli_args_test {
namespace {

using ::testing::ElementsAre;

std::string ListError(const std::vector<std::string>& raw) {
  absl::StatusOr<std::vector<std::string>> items =
      SplitListFlag("--partitions", raw);
  EXPECT_FALSE(items.ok());
  if (items.ok()) return "";
  EXPECT_EQ(items.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(items.status().message());
}

TEST(SplitListFlagTest, SplitsOnCommasAcrossOccurrences) {
  absl::StatusOr<std::vector<std::string>> items =
      SplitListFlag("--partitions", {"2025-03-01,2025-03-02", "2025-03-05"});
  ASSERT_TRUE(items.ok()) << items.status();
  EXPECT_THAT(*items, ElementsAre("2025-03-01", "2025-03-02", "2025-03-05"));
}

TEST(SplitListFlagTest, KeepsItemsExactlyAsTyped) {
  // Inner spaces and non-ASCII keys are the user's business (and the
  // server's), not trimmed or changed here.
  absl::StatusOr<std::vector<std::string>> items =
      SplitListFlag("--partitions", {"new york,z\xc3\xbcrich"});
  ASSERT_TRUE(items.ok()) << items.status();
  EXPECT_THAT(*items, ElementsAre("new york", "z\xc3\xbcrich"));
}

TEST(SplitListFlagTest, RefusesEmptyItemsWithTheirPosition) {
  EXPECT_EQ(ListError({"a,,b"}), "--partitions: item 2 is empty (\"a,,b\")");
  EXPECT_EQ(ListError({"a,"}), "--partitions: item 2 is empty (\"a,\")");
  EXPECT_EQ(ListError({",a"}), "--partitions: item 1 is empty (\",a\")");
  EXPECT_EQ(ListError({""}), "--partitions: item 1 is empty (\"\")");
  EXPECT_EQ(ListError({","}), "--partitions: item 1 is empty (\",\")");
  // Counted over every occurrence of the flag.
  EXPECT_EQ(ListError({"a,b", "c,,d"}),
            "--partitions: item 4 is empty (\"c,,d\")");
}

TEST(SplitListFlagTest, RefusesLeadingOrTrailingWhitespace) {
  EXPECT_EQ(ListError({"2025-03-01 "}),
            "--partitions: item 1 \"2025-03-01 \" has leading or trailing "
            "whitespace");
  EXPECT_EQ(ListError({"2025-03-01, 2025-03-02"}),
            "--partitions: item 2 \" 2025-03-02\" has leading or trailing "
            "whitespace");
  EXPECT_EQ(ListError({"a", "b\t"}),
            "--partitions: item 2 \"b\\t\" has leading or trailing "
            "whitespace");
  EXPECT_EQ(ListError({" "}),
            "--partitions: item 1 \" \" has leading or trailing whitespace");
  EXPECT_EQ(ListError({"x\n"}),
            "--partitions: item 1 \"x\\n\" has leading or trailing "
            "whitespace");
}

TEST(CheckUtf8Test, AcceptsUtf8) {
  EXPECT_TRUE(CheckUtf8("--reason", "").ok());
  EXPECT_TRUE(CheckUtf8("--reason", "fix refunds").ok());
  EXPECT_TRUE(
      CheckUtf8("--reason",
                "r\xc3\xa9parer \xe4\xbf\xae\xe6\xad\xa3 \xf0\x9f\x93\x88")
          .ok());
}

TEST(CheckUtf8Test, RefusesInvalidUtf8NamingTheArgument) {
  absl::Status status = CheckUtf8("--reason", "fix\xff");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--reason is not valid UTF-8 (byte 0xff at offset 3); text "
            "arguments must be UTF-8");
  // Latin-1 "é", a truncated sequence, an overlong form, a surrogate.
  EXPECT_FALSE(CheckUtf8("DATASET", "caf\xe9").ok());
  EXPECT_FALSE(CheckUtf8("DATASET", "\xe4\xbf").ok());
  EXPECT_FALSE(CheckUtf8("DATASET", "\xc0\xaf").ok());
  EXPECT_FALSE(CheckUtf8("DATASET", "\xed\xa0\x80").ok());
  EXPECT_EQ(CheckUtf8("JOB", "bf-\xc3").message(),
            "JOB is not valid UTF-8 (byte 0xc3 at offset 3); text arguments "
            "must be UTF-8");
}

// The standard output of `command` (run by /bin/sh) and its exit code.
std::pair<std::string, int> Shell(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {"", -1};
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  const int status = pclose(pipe);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

// The subcommand names of backfillctl, from its --help.
std::vector<std::string> SubcommandNames() {
  std::unique_ptr<CommandLine> line = NewCommandLine();
  std::vector<std::string> names;
  for (const CLI::App* command :
       line->app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(command->get_name());
  }
  return names;
}

// The long flags a help text lists: "--name" words that open a line.
std::set<std::string> HelpFlags(const std::string& help) {
  std::set<std::string> flags;
  for (absl::string_view text : absl::StrSplit(help, '\n')) {
    text = absl::StripLeadingAsciiWhitespace(text);
    for (absl::string_view word : absl::StrSplit(text, absl::ByAnyChar(" ,"))) {
      if (absl::StartsWith(word, "--") && word.size() > 2) {
        flags.insert(std::string(word));
      } else if (!(absl::StartsWith(word, "-") && word.size() == 2)) {
        break;
      }
    }
  }
  return flags;
}

// The example command lines of a subcommand's help: the lines after
// "Examples:" that start with "  backfillctl ", up to the next blank line.
std::vector<std::string> ExampleLines(const std::string& help) {
  std::vector<std::string> lines;
  bool in_examples = false;
  for (absl::string_view text : absl::StrSplit(help, '\n')) {
    if (text == "Examples:") {
      in_examples = true;
      continue;
    }
    if (!in_examples) continue;
    if (text.empty()) break;
    if (absl::StartsWith(text, "  backfillctl ")) {
      lines.emplace_back(absl::StripPrefix(text, "  "));
    }
  }
  return lines;
}

TEST(CommandLineTest, HasTheSubcommandsTheDocsDescribe) {
  EXPECT_THAT(SubcommandNames(),
              ::testing::UnorderedElementsAre(
                  "datasets", "plan", "submit", "status", "list", "partitions",
                  "freshness", "watch", "cancel", "pause", "resume", "retry",
                  "rollback", "approve", "diff", "why", "audit", "policies",
                  "confirm", "nodes", "health", "completion"));
}

TEST(CommandLineTest, EveryHelpHasExamplesThatTheParserAccepts) {
  for (const std::string& name : SubcommandNames()) {
    std::unique_ptr<CommandLine> line = NewCommandLine();
    const std::string help = line->app.get_subcommand(name)->help();
    const std::vector<std::string> examples = ExampleLines(help);
    EXPECT_THAT(examples, ::testing::Not(::testing::IsEmpty()))
        << name << " --help has no Examples section:\n"
        << help;
    for (std::string example : examples) {
      // A redirection (`> FILE`) is the shell's, not an argument.
      example = std::string(absl::StripTrailingAsciiWhitespace(
          example.substr(0, example.find(" > "))));
      std::unique_ptr<CommandLine> parser = NewCommandLine();
      try {
        parser->app.parse(example, /*program_name_included=*/true);
      } catch (const CLI::ParseError& e) {
        ADD_FAILURE() << name << " example does not parse: " << example << ": "
                      << e.what();
        continue;
      }
      const std::vector<CLI::App*> parsed = parser->app.get_subcommands();
      ASSERT_EQ(parsed.size(), 1u) << example;
      EXPECT_EQ(parsed[0]->get_name(), name) << example;
    }
  }
}

TEST(CommandLineTest, TheParserRefusesWhatExamplesMustNotContain) {
  // The check above would catch a wrong example: the parser refuses an
  // unknown flag, a missing positional and a value outside a choice.
  for (const char* wrong : {"backfillctl plan daily_revenue --form 2025-03-01",
                            "backfillctl status", "backfillctl completion fish",
                            "backfillctl list --all --limit 3"}) {
    std::unique_ptr<CommandLine> parser = NewCommandLine();
    EXPECT_THROW(parser->app.parse(wrong, true), CLI::ParseError) << wrong;
  }
}

TEST(CompletionTest, OffersEverySubcommandAndFlagTheHelpLists) {
  std::unique_ptr<CommandLine> line = NewCommandLine();
  // Quotes as spaces, so that every word stands between spaces.
  const std::string bash =
      absl::StrReplaceAll(BashCompletion(line->app), {{"\"", " "}});
  const std::string zsh = ZshCompletion(line->app);
  const std::set<std::string> globals = HelpFlags(line->app.help());
  ASSERT_THAT(globals, ::testing::Contains("--server"));
  ASSERT_THAT(globals, ::testing::Contains("--version"));
  for (const std::string& flag : globals) {
    EXPECT_THAT(bash, ::testing::HasSubstr(" " + flag + " ")) << flag;
    EXPECT_THAT(zsh, ::testing::HasSubstr("'" + flag + "[")) << flag;
  }
  // Flags without a value take none in zsh either.
  EXPECT_THAT(zsh, ::testing::HasSubstr("'--json[Print the response as "
                                        "protobuf JSON (one document) on "
                                        "stdout]'"));
  for (const std::string& name : SubcommandNames()) {
    EXPECT_THAT(bash, ::testing::HasSubstr(" " + name + " ")) << name;
    EXPECT_THAT(zsh, ::testing::HasSubstr("'" + name + ":")) << name;
    // The subcommand's own flags, in its branch of each script.
    const std::string help = line->app.get_subcommand(name)->help();
    const size_t bash_branch = bash.find("    " + name + ")\n");
    const size_t zsh_branch = zsh.find("        " + name + ")\n");
    ASSERT_NE(bash_branch, std::string::npos) << name;
    ASSERT_NE(zsh_branch, std::string::npos) << name;
    const std::string bash_words =
        bash.substr(bash_branch, bash.find(";;", bash_branch) - bash_branch);
    const std::string zsh_words =
        zsh.substr(zsh_branch, zsh.find(";;", zsh_branch) - zsh_branch);
    for (const std::string& flag : HelpFlags(help)) {
      if (globals.count(flag) > 0) continue;
      EXPECT_THAT(bash_words, ::testing::HasSubstr(" " + flag + " ")) << name;
      EXPECT_THAT(zsh_words, ::testing::HasSubstr("'" + flag + "[")) << name;
    }
  }
}

class BashCompletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (std::filesystem::temp_directory_path() /
                       "backfillctl-completion-XXXXXX")
                          .string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    script_ = dir_ + "/backfillctl.bash";
    std::ofstream out(script_);
    out << BashCompletion(NewCommandLine()->app);
    ASSERT_TRUE(out.good());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // What bash completes for the words typed so far (`words`, the last one
  // being completed), the script sourced; one candidate per line.
  std::vector<std::string> Complete(const std::vector<std::string>& words) {
    std::string array;
    for (const std::string& word : words)
      absl::StrAppend(&array, " '", word, "'");
    const std::string program =
        absl::StrCat("source '", script_, "' && COMP_WORDS=(", array,
                     ") && COMP_CWORD=", words.size() - 1,
                     "; _backfillctl; printf '%s\\n' \"${COMPREPLY[@]}\"");
    std::ofstream(dir_ + "/run.bash") << program;
    auto [out, code] = Shell(absl::StrCat("bash ", dir_, "/run.bash"));
    EXPECT_EQ(code, 0) << out;
    std::vector<std::string> candidates;
    for (absl::string_view candidate : absl::StrSplit(out, '\n')) {
      if (!candidate.empty()) candidates.emplace_back(candidate);
    }
    return candidates;
  }

  std::string dir_;
  std::string script_;
};

TEST_F(BashCompletionTest, TheScriptIsValidBash) {
  auto [out, code] = Shell(absl::StrCat("bash -n '", script_, "' 2>&1"));
  EXPECT_EQ(code, 0) << out;
}

TEST_F(BashCompletionTest, CompletesSubcommandsAndTheirFlags) {
  using ::testing::ElementsAre;
  using ::testing::UnorderedElementsAre;
  EXPECT_THAT(Complete({"backfillctl", "pa"}),
              UnorderedElementsAre("partitions", "pause"));
  // A global flag's value is skipped when finding the subcommand.
  EXPECT_THAT(Complete({"backfillctl", "--server", "h:1", "pl"}),
              ElementsAre("plan"));
  // A flag without value is no more than itself.
  EXPECT_THAT(Complete({"backfillctl", "--json", "pl"}), ElementsAre("plan"));
  EXPECT_THAT(Complete({"backfillctl", "--json", "list", "--da"}),
              ElementsAre("--dataset"));
  EXPECT_THAT(Complete({"backfillctl", "plan", "daily_revenue", "--fr"}),
              ElementsAre("--from"));
  EXPECT_THAT(Complete({"backfillctl", "health", "--ans"}),
              ElementsAre("--answering"));
  // Global flags after the subcommand too.
  EXPECT_THAT(Complete({"backfillctl", "status", "--tls-c"}),
              UnorderedElementsAre("--tls-ca", "--tls-cert"));
  // A flag's value: nothing offered (bash falls back to file names).
  EXPECT_THAT(Complete({"backfillctl", "--tls-ca", ""}), ElementsAre());
  // submit's own flags are not offered to plan.
  EXPECT_THAT(Complete({"backfillctl", "plan", "--reas"}), ElementsAre());
}

TEST_F(BashCompletionTest, CompletesTheShellsOfCompletion) {
  using ::testing::ElementsAre;
  using ::testing::UnorderedElementsAre;
  EXPECT_THAT(Complete({"backfillctl", "completion", ""}),
              UnorderedElementsAre("bash", "zsh"));
  EXPECT_THAT(Complete({"backfillctl", "completion", "z"}), ElementsAre("zsh"));
  EXPECT_THAT(Complete({"backfillctl", "--server", "h:1", "completion", "b"}),
              ElementsAre("bash"));
  EXPECT_THAT(Complete({"backfillctl", "--json", "completion", ""}),
              UnorderedElementsAre("bash", "zsh"));
  // Only the shell is a choice: after it, and at other subcommands'
  // positionals, nothing is offered (bash falls back to file names).
  EXPECT_THAT(Complete({"backfillctl", "completion", "bash", ""}),
              ElementsAre());
  EXPECT_THAT(Complete({"backfillctl", "status", ""}), ElementsAre());
  EXPECT_THAT(Complete({"backfillctl", "completion", "--he"}),
              ::testing::Contains("--help"));
}

TEST(CompletionTest, ZshCompletesTheShellsOfCompletion) {
  const std::string zsh = ZshCompletion(NewCommandLine()->app);
  const size_t branch = zsh.find("        completion)\n");
  ASSERT_NE(branch, std::string::npos);
  const std::string words = zsh.substr(branch, zsh.find(";;", branch) - branch);
  EXPECT_THAT(words, ::testing::HasSubstr(" '1:SHELL:(bash zsh)' "));
  // Only `policies` (its ACTION) has another positional of choices.
  const std::regex choice_spec(R"('[0-9]+:[A-Z_]+:\()");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(zsh.begin(), zsh.end(), choice_spec),
                    std::sregex_iterator()),
      2);
  EXPECT_THAT(zsh, ::testing::HasSubstr(" '1:ACTION:(check pause resume)' "));
}

TEST(SuggestTest, EditDistanceCountsSwapsAsOneEdit) {
  EXPECT_EQ(EditDistance("wait", "wait"), 0);
  EXPECT_EQ(EditDistance("wiat", "wait"), 1);  // a swap
  EXPECT_EQ(EditDistance("wat", "wait"), 1);
  EXPECT_EQ(EditDistance("waits", "wait"), 1);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("abc", ""), 3);
  // Optimal string alignment: a swapped pair is not edited again.
  EXPECT_EQ(EditDistance("ca", "abc"), 3);
}

TEST(SuggestTest, ClosestNameOnlyWithinATypo) {
  const std::vector<std::string> flags = {"--wait",   "--no-wait", "--reason",
                                          "--ticket", "--from",    "--to"};
  EXPECT_EQ(ClosestName("--wiat", flags), "--wait");
  EXPECT_EQ(ClosestName("--no-wiat", flags), "--no-wait");
  EXPECT_EQ(ClosestName("--reson", flags), "--reason");
  EXPECT_EQ(ClosestName("--form", flags), "--from");
  EXPECT_EQ(ClosestName("--tciket", flags), "--ticket");
  EXPECT_EQ(ClosestName("--rsaeon", flags), "--reason");  // 2 edits
  // Too far to be a typo of anything.
  EXPECT_EQ(ClosestName("--bogus", flags), std::nullopt);
  EXPECT_EQ(ClosestName("--rezzzn", flags), std::nullopt);  // 3 edits
  // Short words allow one edit only.
  EXPECT_EQ(ClosestName("--ot", flags), "--to");
  EXPECT_EQ(ClosestName("--xy", flags), std::nullopt);
  EXPECT_EQ(ClosestName("--", flags), std::nullopt);
  EXPECT_EQ(ClosestName("stauts", {"status", "list"}), "status");
  // A tie goes to the first name.
  EXPECT_EQ(ClosestName("--wat", {"--what", "--wait"}), "--what");
}

TEST(SuggestTest, DidYouMeanTheClosestFlagOfTheSubcommand) {
  std::unique_ptr<CommandLine> line = NewCommandLine();
  const CLI::App& app = line->app;
  EXPECT_EQ(DidYouMean(app, line->submit,
                       {"submit", "daily_revenue", "--reason", "r", "--wiat"}),
            "did you mean --wait?");
  EXPECT_EQ(DidYouMean(app, line->submit, {"submit", "d", "--wiat=true"}),
            "did you mean --wait?");
  // A global flag after the subcommand.
  EXPECT_EQ(DidYouMean(app, line->status, {"status", "bf-1", "--jsno"}),
            "did you mean --json?");
  // Another subcommand's flag is no suggestion.
  EXPECT_EQ(DidYouMean(app, line->plan, {"plan", "d", "--wiat"}), "");
  // A flag's value is not read as a flag.
  EXPECT_EQ(DidYouMean(app, line->submit,
                       {"submit", "d", "--reason", "--wiat", "--tciket", "T"}),
            "did you mean --ticket?");
  EXPECT_EQ(DidYouMean(app, line->submit, {"submit", "d", "--bogus"}), "");
  // Before the subcommand: the global flags, then the subcommand.
  EXPECT_EQ(DidYouMean(app, nullptr, {"--sever", "h:1", "list"}),
            "did you mean --server?");
  EXPECT_EQ(DidYouMean(app, nullptr, {"--server", "h:1", "stauts", "bf-1"}),
            "did you mean status?");
  EXPECT_EQ(DidYouMean(app, nullptr, {"restart"}), "");
}

TEST(SuggestTest, EverySwappedFlagSuggestsItself) {
  // Two adjacent letters of every long flag of every subcommand swapped:
  // the flag itself is suggested, never another one.
  std::unique_ptr<CommandLine> line = NewCommandLine();
  int checked = 0;
  for (const CLI::App* command :
       line->app.get_subcommands([](const CLI::App*) { return true; })) {
    for (const CLI::App* owner :
         std::vector<const CLI::App*>{command, &line->app}) {
      for (const CLI::Option* option : owner->get_options()) {
        for (const std::string& name : option->get_lnames()) {
          if (name.size() < 3) continue;
          std::string typo = "--" + name;
          std::swap(typo[3], typo[4]);
          if (typo == "--" + name) continue;  // the same letter twice
          EXPECT_EQ(DidYouMean(line->app, command, {command->get_name(), typo}),
                    absl::StrCat("did you mean --", name, "?"))
              << command->get_name() << " " << typo;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
}

// The project's version as CMakeLists.txt declares it.
std::string ProjectVersion() {
  std::ifstream in(std::string(BACKFILL_SOURCE_DIR) + "/CMakeLists.txt");
  std::stringstream text;
  text << in.rdbuf();
  std::smatch match;
  const std::string cmake = text.str();
  if (!std::regex_search(
          cmake, match,
          std::regex(R"(project\(backfilld VERSION ([0-9.]+))"))) {
    return "<none>";
  }
  return match[1];
}

TEST(VersionTest, BackfillctlPrintsVersionCommitAndApi) {
  auto [out, code] = Shell(absl::StrCat(::backfill::testing::ExecutableDir(),
                                        "/backfillctl --version 2>&1"));
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::StartsWith(
                       absl::StrCat("backfillctl ", ProjectVersion(), " ")));
  EXPECT_THAT(out, ::testing::HasSubstr("API backfill.v1"));
  // Built from a git checkout: the commit of HEAD.
  auto [head, git] =
      Shell(absl::StrCat("git -C '", BACKFILL_SOURCE_DIR,
                         "' rev-parse --short=12 HEAD 2>/dev/null"));
  if (git == 0 && !head.empty()) {
    EXPECT_THAT(out,
                ::testing::HasSubstr(absl::StrCat(
                    "(commit ", absl::StripTrailingAsciiWhitespace(head))));
  }
}

}  // namespace
}  // namespace client_cli_args_test
}  // namespace cli
}  // namespace backfill
