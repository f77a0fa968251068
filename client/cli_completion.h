// Shell completion scripts of backfillctl, generated from its CLI11 App
// (cli_command_line.h): the subcommands, their flags and the global flags
// are read from the App the parser uses, so the completion knows exactly
// what the parser accepts. A positional that takes one of a few values
// (CLI::IsMember: `completion SHELL`) completes with them. After a flag
// that takes a value, or at any other positional, the shell's default
// (file name) completion applies.
//
// Pure functions of the App: they own nothing, keep no state and are
// thread-safe as long as the App is not modified meanwhile.

#ifndef BACKFILL_CLIENT_CLI_COMPLETION_H_
#define BACKFILL_CLIENT_CLI_COMPLETION_H_

#include <string>

#include "CLI/CLI.hpp"

namespace backfill {
namespace cli {

// A bash script that defines the completion of `app`'s program (for
// `source <(backfillctl completion bash)` or /etc/bash_completion.d/).
std::string BashCompletion(const CLI::App& app);

// A zsh completion function (#compdef) for a directory in $fpath, or for
// `source <(backfillctl completion zsh)` after compinit.
std::string ZshCompletion(const CLI::App& app);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_CLI_COMPLETION_H_
