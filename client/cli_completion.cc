#include "client/cli_completion.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace backfill {
namespace cli {
namespace {

// A flag of the command line: its long and short names ("--server",
// "-h"), whether it takes a value, and its help text.
struct Flag {
  std::vector<std::string> names;
  bool takes_value = false;
  std::string description;
};

// The named options of `app` itself (not its subcommands'); positionals
// are left out.
std::vector<Flag> FlagsOf(const CLI::App& app) {
  std::vector<Flag> flags;
  for (const CLI::Option* option : app.get_options()) {
    Flag flag;
    for (const std::string& name : option->get_lnames()) {
      flag.names.push_back(absl::StrCat("--", name));
    }
    for (const std::string& name : option->get_snames()) {
      flag.names.push_back(absl::StrCat("-", name));
    }
    if (flag.names.empty()) continue;  // a positional
    flag.takes_value = option->get_items_expected_max() > 0;
    flag.description = option->get_description();
    flags.push_back(std::move(flag));
  }
  return flags;
}

// The values a positional accepts when it accepts only some
// (CLI::IsMember, whose set CLI11 shows in the type name as
// "TEXT:{bash,zsh}"); empty when it accepts any.
std::vector<std::string> ChoicesOf(const CLI::Option& option) {
  const std::string type = option.get_type_name();
  const size_t open = type.find('{');
  const size_t close = type.find('}', open);
  if (open == std::string::npos || close == std::string::npos) return {};
  return absl::StrSplit(type.substr(open + 1, close - open - 1), ',',
                        absl::SkipEmpty());
}

// The positionals of `app` in the order they are parsed, each with its
// name ("SHELL") and choices (ChoicesOf).
struct Positional {
  std::string name;
  std::vector<std::string> choices;
};
std::vector<Positional> PositionalsOf(const CLI::App& app) {
  std::vector<Positional> out;
  for (const CLI::Option* option : app.get_options()) {
    if (option->nonpositional()) continue;
    out.push_back({option->get_name(), ChoicesOf(*option)});
  }
  return out;
}

std::vector<const CLI::App*> SubcommandsOf(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

// Every name of `flags`, space-separated.
std::string Names(const std::vector<Flag>& flags) {
  std::vector<std::string> names;
  for (const Flag& flag : flags) {
    names.insert(names.end(), flag.names.begin(), flag.names.end());
  }
  return absl::StrJoin(names, " ");
}

// The first sentence of `text` on one line, for a zsh description inside
// single quotes and [...]: quotes, brackets, colons and backslashes escaped.
std::string ZshDescription(const std::string& text) {
  std::string line = absl::StrReplaceAll(text, {{"\n", " "}});
  const size_t end = line.find("; ");
  if (end != std::string::npos) line.resize(end);
  return absl::StrReplaceAll(line, {{"\\", "\\\\"},
                                    {"'", "'\\''"},
                                    {"[", "\\["},
                                    {"]", "\\]"},
                                    {":", "\\:"}});
}

// `_arguments` specs of `flags`: '--name[description]' or, taking a value,
// '--name[description]:value:_files'.
std::vector<std::string> ZshSpecs(const std::vector<Flag>& flags) {
  std::vector<std::string> specs;
  for (const Flag& flag : flags) {
    for (const std::string& name : flag.names) {
      specs.push_back(
          absl::StrCat("'", name, "[", ZshDescription(flag.description), "]",
                       flag.takes_value ? ":value:_files" : "", "'"));
    }
  }
  return specs;
}

}  // namespace

std::string BashCompletion(const CLI::App& app) {
  const std::string program = app.get_name();
  const std::string function =
      absl::StrCat("_", absl::StrReplaceAll(program, {{"-", "_"}}));
  const std::vector<Flag> globals = FlagsOf(app);
  std::set<std::string> with_value;
  for (const Flag& flag : globals) {
    if (flag.takes_value)
      with_value.insert(flag.names.begin(), flag.names.end());
  }
  std::vector<std::string> commands;
  std::string cases;
  for (const CLI::App* command : SubcommandsOf(app)) {
    commands.push_back(command->get_name());
    const std::vector<Flag> flags = FlagsOf(*command);
    for (const Flag& flag : flags) {
      if (flag.takes_value) {
        with_value.insert(flag.names.begin(), flag.names.end());
      }
    }
    // The choices of each positional, in order ("" for any value).
    std::vector<std::string> choices;
    bool any_choice = false;
    for (const Positional& positional : PositionalsOf(*command)) {
      choices.push_back(
          absl::StrCat("\"", absl::StrJoin(positional.choices, " "), "\""));
      any_choice = any_choice || !positional.choices.empty();
    }
    absl::StrAppend(&cases, "    ", command->get_name(), ")\n      words=\"",
                    Names(flags), " $globals\"\n");
    if (any_choice) {
      absl::StrAppend(&cases, "      choices=(", absl::StrJoin(choices, " "),
                      ")\n");
    }
    absl::StrAppend(&cases, "      ;;\n");
  }
  return absl::StrCat(
      "# bash completion of ", program, " (generated by `", program,
      " completion bash`).\n"
      "# Load it with: source <(",
      program,
      " completion bash)\n",  //
      function,
      "() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\"\n"
      "  local prev=\"\"\n"
      "  if ((COMP_CWORD > 0)); then prev=\"${COMP_WORDS[COMP_CWORD-1]}\"; "
      "fi\n"
      "  local globals=\"",
      Names(globals),
      "\"\n"
      "  local commands=\"",
      absl::StrJoin(commands, " "),
      "\"\n"
      "  local with_value=\" ",
      absl::StrJoin(with_value, " "),
      " \"\n"
      "  # A flag's value: the default (file name) completion.\n"
      "  if [[ \"$cur\" != -* && \"$with_value\" == *\" $prev \"* ]]; then\n"
      "    COMPREPLY=()\n"
      "    return\n"
      "  fi\n"
      "  # The subcommand: the first word that is no flag nor a flag's "
      "value.\n"
      "  local command=\"\" i\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    local word=\"${COMP_WORDS[i]}\"\n"
      "    if [[ \"$with_value\" == *\" $word \"* ]]; then\n"
      "      ((i++))\n"
      "    elif [[ \"$word\" != -* ]]; then\n"
      "      command=\"$word\"\n"
      "      break\n"
      "    fi\n"
      "  done\n"
      "  # The subcommand's flags, and the values of each of its positionals\n"
      "  # that takes one of a few (\"\": any, file names).\n"
      "  local words\n"
      "  local -a choices=()\n"
      "  case \"$command\" in\n"
      "    \"\")\n"
      "      if [[ \"$cur\" == -* ]]; then words=\"$globals\"; else "
      "words=\"$commands\"; fi\n"
      "      ;;\n",
      cases,
      "    *)\n"
      "      words=\"$globals\"\n"
      "      ;;\n"
      "  esac\n"
      "  if [[ -n \"$command\" && \"$cur\" != -* ]]; then\n"
      "    # Which positional is typed: count those after the subcommand.\n"
      "    local n=0\n"
      "    for ((i++; i < COMP_CWORD; i++)); do\n"
      "      local word=\"${COMP_WORDS[i]}\"\n"
      "      if [[ \"$with_value\" == *\" $word \"* ]]; then\n"
      "        ((i++))\n"
      "      elif [[ \"$word\" != -* ]]; then\n"
      "        ((n++))\n"
      "      fi\n"
      "    done\n"
      "    COMPREPLY=($(compgen -W \"${choices[n]}\" -- \"$cur\"))\n"
      "    return\n"
      "  fi\n"
      "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
      "}\n"
      "complete -o default -F ",
      function, " ", program, "\n");
}

std::string ZshCompletion(const CLI::App& app) {
  const std::string program = app.get_name();
  const std::string function =
      absl::StrCat("_", absl::StrReplaceAll(program, {{"-", "_"}}));
  const std::vector<std::string> globals = ZshSpecs(FlagsOf(app));
  std::string commands;
  std::string cases;
  for (const CLI::App* command : SubcommandsOf(app)) {
    absl::StrAppend(&commands, "    '", command->get_name(), ":",
                    ZshDescription(command->get_description()), "'\n");
    std::vector<std::string> specs = ZshSpecs(FlagsOf(*command));
    // Positionals up to the last that takes one of a few values:
    // 'N:NAME:(a b)', or 'N:NAME:_files' for one that takes any.
    const std::vector<Positional> positionals = PositionalsOf(*command);
    size_t last_choice = 0;
    for (size_t i = 0; i < positionals.size(); ++i) {
      if (!positionals[i].choices.empty()) last_choice = i + 1;
    }
    for (size_t i = 0; i < last_choice; ++i) {
      const Positional& positional = positionals[i];
      specs.push_back(absl::StrCat(
          "'", i + 1, ":", ZshDescription(positional.name), ":",
          positional.choices.empty()
              ? std::string("_files")
              : absl::StrCat("(", absl::StrJoin(positional.choices, " "), ")"),
          "'"));
    }
    absl::StrAppend(&cases, "        ", command->get_name(),
                    ")\n          _arguments \"${globals[@]}\" ",
                    absl::StrJoin(specs, " "), " '*:argument:_files'\n",
                    "          ;;\n");
  }
  return absl::StrCat(
      "#compdef ", program, "\n# zsh completion of ", program,
      " (generated by `", program,
      " completion zsh`).\n"
      "# Install it as _",
      program, " in a directory of $fpath, or load it with: source <(", program,
      " completion zsh)\n",  //
      function,
      "() {\n"
      "  local -a globals commands\n"
      "  globals=(\n    ",
      absl::StrJoin(globals, "\n    "),
      "\n  )\n"
      "  commands=(\n",
      commands,
      "  )\n"
      "  local curcontext=\"$curcontext\" state line\n"
      "  _arguments -C \"${globals[@]}\" '1:command:->command' "
      "'*::argument:->argument'\n"
      "  case $state in\n"
      "    command)\n"
      "      _describe -t commands '",
      program,
      " command' commands\n"
      "      ;;\n"
      "    argument)\n"
      "      case $words[1] in\n",
      cases,
      "      esac\n"
      "      ;;\n"
      "  esac\n"
      "}\n"
      "if [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n  ",
      function, " \"$@\"\nelse\n  compdef ", function, " ", program, "\nfi\n");
}

}  // namespace cli
}  // namespace backfill
