#include "client/cli_suggest.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace backfill {
namespace cli {
namespace {

std::string_view WithoutDashes(std::string_view word) {
  while (!word.empty() && word.front() == '-') word.remove_prefix(1);
  return word;
}

// The long flags of `app` itself ("--wait"), and those of them that take
// a value.
void AddFlags(const CLI::App& app, std::vector<std::string>* flags,
              std::set<std::string>* with_value) {
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) {
      const std::string flag = absl::StrCat("--", name);
      flags->push_back(flag);
      if (option->get_items_expected_max() > 0) with_value->insert(flag);
    }
  }
}

}  // namespace

int EditDistance(std::string_view a, std::string_view b) {
  // d[i][j]: the distance between the first i characters of a and the
  // first j of b.
  std::vector<std::vector<int>> d(a.size() + 1,
                                  std::vector<int>(b.size() + 1, 0));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::optional<std::string> ClosestName(std::string_view typed,
                                       const std::vector<std::string>& known) {
  const std::string_view word = WithoutDashes(typed);
  if (word.empty()) return std::nullopt;
  const int reach = word.size() <= 4 ? 1 : 2;
  std::optional<std::string> best;
  int best_distance = reach + 1;
  for (const std::string& name : known) {
    const int distance = EditDistance(word, WithoutDashes(name));
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::string DidYouMean(const CLI::App& app, const CLI::App* command,
                       const std::vector<std::string>& args) {
  std::vector<std::string> flags;
  std::set<std::string> with_value;
  if (command != nullptr) AddFlags(*command, &flags, &with_value);
  AddFlags(app, &flags, &with_value);
  std::vector<std::string> commands;
  for (const CLI::App* sub :
       app.get_subcommands([](const CLI::App*) { return true; })) {
    commands.push_back(sub->get_name());
  }
  auto suggest = [](const std::optional<std::string>& name) {
    return name ? absl::StrCat("did you mean ", *name, "?") : std::string();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") break;  // the rest are positionals
    if (absl::StartsWith(arg, "--")) {
      const std::string name = arg.substr(0, arg.find('='));
      if (std::find(flags.begin(), flags.end(), name) == flags.end()) {
        return suggest(ClosestName(name, flags));
      }
      if (with_value.count(name) > 0 && name.size() == arg.size()) ++i;
    } else if (command == nullptr && !absl::StartsWith(arg, "-")) {
      // The first positional is the subcommand.
      if (std::find(commands.begin(), commands.end(), arg) == commands.end()) {
        return suggest(ClosestName(arg, commands));
      }
      return "";
    }
  }
  return "";
}

}  // namespace cli
}  // namespace backfill
