#include "client/cli_terms.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace backfill::cli {
namespace {

// Request fields (the last component of a path, without an index) and the
// flags or arguments that set them.
constexpr std::pair<absl::string_view, absl::string_view> kFieldFlags[] = {
    {"dataset", "DATASET"},
    {"from_partition", "--from"},
    {"to_partition", "--to"},
    {"partitions", "--partitions"},
    {"reason", "--reason"},
    {"ticket", "--ticket"},
    {"requested_by", "--requested-by"},
    {"exclude_downstream", "--no-downstream"},
    {"priority", "--priority"},
    {"max_parallel", "--max-parallel"},
    {"affected_by", "--affected-by"},
    {"auto_detect", "--auto"},
    {"max_cost", "--max-cost"},
    {"keys", "--keys"},
    {"override_frozen", "--override-frozen"},
    {"idempotency_key", "--idempotency-key"},
    {"no_wait", "--no-wait"},
    {"id", "JOB"},
    {"backfill_id", "JOB"},
    {"override_validation", "--override"},
    {"approved_by", "--approved-by"},
    {"force", "--force"},
    {"page_size", "--limit"},
    {"sample_rows", "--samples"},
    {"since", "--since"},
    {"states", "--state"},
    {"freshness", "--only"},
    {"partition", "PARTITION"},
};

constexpr std::pair<absl::string_view, absl::string_view> kMethodCommands[] = {
    {"PlanBackfill", "plan"},         {"SubmitBackfill", "submit"},
    {"GetBackfill", "status"},        {"ListBackfills", "list"},
    {"WatchBackfill", "watch"},       {"CancelBackfill", "cancel"},
    {"PauseBackfill", "pause"},       {"ResumeBackfill", "resume"},
    {"RetryBackfill", "retry"},       {"RollbackBackfill", "rollback"},
    {"ListDatasets", "datasets"},     {"ApproveBackfill", "approve"},
    {"DiffBackfill", "diff"},         {"ExplainPartition", "why"},
    {"ListAuditEvents", "audit"},     {"ConfirmBackfill", "confirm"},
    {"ListPartitions", "partitions"}, {"ListDatasetPartitions", "freshness"},
};

}  // namespace

std::optional<std::string> FlagOfField(absl::string_view path) {
  const size_t dot = path.rfind('.');
  absl::string_view last =
      dot == absl::string_view::npos ? path : path.substr(dot + 1);
  last = last.substr(0, last.find('['));
  for (const auto& [field, flag] : kFieldFlags) {
    if (field == last) return std::string(flag);
  }
  return std::nullopt;
}

std::optional<std::string> CommandOfMethod(absl::string_view method) {
  for (const auto& [name, command] : kMethodCommands) {
    if (name == method)
      return absl::StrCat("backfillctl ", std::string(command));
  }
  return std::nullopt;
}

std::string InCliTerms(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t open = text.find('`', i);
    const size_t close =
        open == absl::string_view::npos ? open : text.find('`', open + 1);
    if (close == absl::string_view::npos) {
      absl::StrAppend(&out, text.substr(i));
      break;
    }
    absl::StrAppend(&out, text.substr(i, open - i));
    const absl::string_view name = text.substr(open + 1, close - open - 1);
    if (std::optional<std::string> flag = FlagOfField(name)) {
      out.append(*flag);
    } else if (std::optional<std::string> command = CommandOfMethod(name)) {
      out.append(*command);
    } else {
      absl::StrAppend(&out, name);
    }
    i = close + 1;
  }
  return out;
}

}  // namespace backfill::cli
