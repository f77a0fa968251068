#include "core/ports/engine.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"

namespace backfill {

absl::Status TransformRefused(const DatasetSpec& dataset, std::string_view why,
                              const std::vector<InputRef>& inputs,
                              std::string_view engine) {
  std::vector<std::string> upstream;
  std::set<std::string> seen;
  for (const InputRef& in : inputs) {
    if (seen.insert(in.dataset->name).second) {
      upstream.push_back(
          absl::StrCat(in.dataset->name, " (table ", in.dataset->table, ")"));
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "transform of ", dataset.name, " is refused: it ", std::string(why),
      "; a transform may read only its declared upstream datasets (",
      upstream.empty() ? std::string("none") : absl::StrJoin(upstream, ", "),
      ") and call ", std::string(engine),
      "'s functions of the allow-list in docs/pipeline-spec.md"));
}

absl::Status CheckProfileRequest(const DatasetSpec& dataset,
                                 const ProfileRequest& request) {
  auto declared = [&](const std::string& column) {
    for (const ColumnSpec& c : dataset.columns) {
      if (c.name == column) return true;
    }
    return false;
  };
  for (const std::vector<std::string>* columns :
       {&request.measures, &request.null_columns}) {
    for (const std::string& c : *columns) {
      if (!declared(c)) {
        return absl::InvalidArgumentError(
            absl::StrCat("ProfileStaged: ", c, " is not a contract column of ",
                         dataset.name));
      }
    }
  }
  for (const ProfileRequest::Reference& r : request.references) {
    if (!declared(r.column) || r.dataset == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ProfileStaged: bad reference from ", dataset.name, ".", r.column));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> Engine::CountRowsInPartitions(
    const DatasetSpec& dataset, const std::vector<std::string>& partitions) {
  ASSIGN_OR_RETURN(auto all, CountRowsByPartition(dataset));
  std::vector<int64_t> out;
  out.reserve(partitions.size());
  for (const std::string& p : partitions) {
    auto it = all.find(p);
    out.push_back(it == all.end() ? 0 : it->second);
  }
  return out;
}

absl::StatusOr<std::vector<absl::StatusOr<PartitionDiff>>>
Engine::DiffPartitions(const std::string& job_id, const DatasetSpec& dataset,
                       absl::Span<const std::string> partitions,
                       int sample_limit) {
  std::vector<absl::StatusOr<PartitionDiff>> out;
  out.reserve(partitions.size());
  for (const std::string& partition : partitions) {
    out.push_back(DiffPartition(job_id, dataset, partition, sample_limit));
  }
  return out;
}

absl::StatusOr<PartitionStats> Engine::PartitionStatistics(
    const DatasetSpec& dataset) {
  ASSIGN_OR_RETURN(auto all, CountRowsByPartition(dataset));
  PartitionStats stats;
  for (auto& [partition, rows] : all) {
    stats.total_rows += rows;
    if (rows > 0) stats.rows.emplace(partition, rows);
  }
  stats.refresh = "exact";
  return stats;
}

}  // namespace backfill
