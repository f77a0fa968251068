#include "server/http_routes.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace backfill {
namespace {

// `pattern` against `path`, both split at '/'; a segment "{name}" matches
// any non-empty segment. The last segment may carry a custom verb
// (":cancel"), matched at the end of the path; its variable then takes the
// rest of the path, '/' included.
bool MatchTemplate(absl::string_view pattern, absl::string_view path,
                   std::map<std::string, std::string>* variables) {
  absl::string_view verb;
  if (const size_t colon = pattern.rfind(':');
      colon != absl::string_view::npos && pattern.rfind('/') < colon &&
      (pattern.rfind('}') == absl::string_view::npos ||
       pattern.rfind('}') < colon)) {
    verb = pattern.substr(colon);
    pattern = pattern.substr(0, colon);
    if (!absl::EndsWith(path, verb)) return false;
    path = path.substr(0, path.size() - verb.size());
  }
  const std::vector<absl::string_view> want = absl::StrSplit(pattern, '/');
  const std::vector<absl::string_view> got = absl::StrSplit(path, '/');
  const auto is_variable = [](absl::string_view w) {
    return w.size() > 2 && w.front() == '{' && w.back() == '}';
  };
  // Only the variable before a custom verb takes the rest of the path.
  const bool rest = !verb.empty() && is_variable(want.back());
  if (got.size() < want.size() || (!rest && got.size() != want.size())) {
    return false;
  }
  std::map<std::string, std::string> found;
  for (size_t i = 0; i < want.size(); ++i) {
    const absl::string_view w = want[i];
    if (!is_variable(w)) {
      if (w != got[i]) return false;
      continue;
    }
    std::string value(got[i]);
    if (rest && i + 1 == want.size()) {
      for (size_t j = i + 1; j < got.size(); ++j) {
        value.push_back('/');
        value.append(got[j].data(), got[j].size());
      }
    }
    // A value with a ':' belongs to a route with that custom verb.
    if (value.empty() ||
        (verb.empty() && value.find(':') != std::string::npos)) {
      return false;
    }
    found[std::string(w.substr(1, w.size() - 2))] = std::move(value);
  }
  *variables = std::move(found);
  return true;
}

}  // namespace

const std::vector<HttpRoute>& HttpRoutes() {
  static const std::vector<HttpRoute>* const kRoutes =
      new std::vector<HttpRoute>{
          {"GET", "/v1/datasets", "ListDatasets"},
          {"GET", "/v1/datasets/{name}", "GetDataset"},
          {"GET", "/v1/datasets/{dataset}/partitions", "ListDatasetPartitions"},
          {"GET", "/v1/datasets/{dataset}/partitions/{partition}:explain",
           "ExplainPartition"},
          {"POST", "/v1/backfills:plan", "PlanBackfill", true},
          {"POST", "/v1/backfills", "SubmitBackfill", true},
          {"GET", "/v1/backfills", "ListBackfills"},
          {"GET", "/v1/backfills/{id}", "GetBackfill"},
          {"GET", "/v1/backfills/{backfill_id}/partitions", "ListPartitions"},
          {"GET", "/v1/backfills/{id}:diff", "DiffBackfill"},
          {"GET", "/v1/backfills/{id}:watch", "WatchBackfill", false, true},
          {"POST", "/v1/backfills/{id}:cancel", "CancelBackfill", true},
          {"POST", "/v1/backfills/{id}:pause", "PauseBackfill", true},
          {"POST", "/v1/backfills/{id}:resume", "ResumeBackfill", true},
          {"POST", "/v1/backfills/{id}:retry", "RetryBackfill", true},
          {"POST", "/v1/backfills/{id}:approve", "ApproveBackfill", true},
          {"POST", "/v1/backfills/{id}:rollback", "RollbackBackfill", true},
          {"POST", "/v1/backfills/{id}:confirm", "ConfirmBackfill", true},
          {"GET", "/v1/auditEvents", "ListAuditEvents"},
          {"GET", "/v1/replayPolicies", "ListReplayPolicies"},
          {"POST", "/v1/replayPolicies/{dataset}:evaluate",
           "EvaluateReplayPolicy", true},
          {"POST", "/v1/replayPolicies/{dataset}:pause", "PauseReplayPolicy",
           true},
          {"POST", "/v1/replayPolicies/{dataset}:resume", "ResumeReplayPolicy",
           true},
          {"GET", "/v1/nodes", "ListNodes"},
      };
  return *kRoutes;
}

std::optional<HttpRouteMatch> MatchHttpRoute(absl::string_view verb,
                                             absl::string_view path,
                                             bool* path_known) {
  if (path_known != nullptr) *path_known = false;
  for (const HttpRoute& route : HttpRoutes()) {
    std::map<std::string, std::string> variables;
    if (!MatchTemplate(route.path, path, &variables)) continue;
    if (route.verb != verb) {
      if (path_known != nullptr) *path_known = true;
      continue;
    }
    return HttpRouteMatch{&route, std::move(variables)};
  }
  return std::nullopt;
}

}  // namespace backfill
