// Suggestions for a mistyped word of backfillctl's command line: the known
// subcommand or flag closest to an unknown one, by edit distance, when it
// is close enough to be a typo ("--wiat": did you mean --wait?).
//
// Pure functions of their arguments (the CLI11 App is only read); they own
// nothing and are thread-safe as long as the App is not modified meanwhile.

#ifndef BACKFILL_CLIENT_CLI_SUGGEST_H_
#define BACKFILL_CLIENT_CLI_SUGGEST_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"

namespace backfill {
namespace cli {

// The optimal string alignment distance between `a` and `b`: the fewest
// insertions, deletions, substitutions and swaps of two adjacent
// characters (each counting 1) that turn one into the other, no substring
// edited twice.
int EditDistance(std::string_view a, std::string_view b);

// The name of `known` closest to `typed`, if it is within a typo of it:
// leading dashes aside, at most 1 edit for a word of up to 4 characters
// and at most 2 for a longer one. On a tie the first such name of `known`.
std::optional<std::string> ClosestName(std::string_view typed,
                                       const std::vector<std::string>& known);

// For a command line `args` (without the program name) that did not
// parse, with `command` the subcommand the parser recognized (null when
// none): "did you mean X?" for the first word that names no subcommand
// (when `command` is null) or no flag `command` accepts ("--name" or
// "--name=value"), when one is close to it; "" otherwise.
std::string DidYouMean(const CLI::App& app, const CLI::App* command,
                       const std::vector<std::string>& args);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_CLI_SUGGEST_H_
