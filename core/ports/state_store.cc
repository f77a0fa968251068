#include "core/ports/state_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace backfill {
namespace {

// Lineage given whole: handed over as the one page's records.
class GivenLineage : public PublicationLineage {
 public:
  GivenLineage(const std::vector<LineageRecord>& lineage,
               const std::string& message)
      : lineage_(lineage), message_(message) {}

  bool ReadsTasks() const override { return false; }

  void Add(std::vector<PartitionTask>&& /*page*/,
           std::vector<LineageRecord>* lineage) override {
    if (given_) return;
    given_ = true;
    *lineage = lineage_;
  }

  std::string Message() const override { return message_; }

 private:
  const std::vector<LineageRecord>& lineage_;
  const std::string& message_;
  bool given_ = false;
};

// The partitions of a diff given whole a page at a time: a page is a copy,
// so that a large diff is not copied whole.
class GivenDiff : public DiffPages {
 public:
  static constexpr size_t kPage = 1024;

  explicit GivenDiff(const JobDiff& diff) : diff_(diff) {}

  absl::Status Rewind() override {
    dataset_ = 0;
    at_ = 0;
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Next(size_t* dataset,
                            std::vector<PartitionDiff>* partitions) override {
    while (dataset_ < diff_.datasets.size() &&
           at_ >= diff_.datasets[dataset_].partitions.size()) {
      ++dataset_;
      at_ = 0;
    }
    if (dataset_ >= diff_.datasets.size()) return false;
    const std::vector<PartitionDiff>& all = diff_.datasets[dataset_].partitions;
    const size_t end = std::min(all.size(), at_ + kPage);
    partitions->assign(all.begin() + at_, all.begin() + end);
    *dataset = dataset_;
    at_ = end;
    return true;
  }

 private:
  const JobDiff& diff_;
  size_t dataset_ = 0;
  size_t at_ = 0;
};

}  // namespace

absl::Status BuildPublicationLineage(
    const std::string& job_id, PublicationLineage& lineage,
    const std::function<
        absl::StatusOr<std::vector<PartitionTask>>(const TaskQuery&)>& read,
    const std::function<absl::Status(const std::vector<LineageRecord>&)>&
        write) {
  TaskQuery page_query;
  page_query.job_id = job_id;
  page_query.states = {TaskState::kStaged};
  page_query.limit = StateStore::kPublicationPage;
  std::vector<LineageRecord> records;
  while (true) {
    std::vector<PartitionTask> page;
    if (lineage.ReadsTasks()) {
      absl::StatusOr<std::vector<PartitionTask>> read_page = read(page_query);
      if (!read_page.ok()) return read_page.status();
      page = *std::move(read_page);
      if (!page.empty()) page_query.after_ordinal = page.back().ordinal;
    }
    const bool last = page.size() < static_cast<size_t>(page_query.limit);
    records.clear();
    lineage.Add(std::move(page), &records);
    if (absl::Status s = write(records); !s.ok()) return s;
    if (last) return absl::OkStatus();
  }
}

absl::Status WriteDiffPages(
    const JobDiffHeader& header, DiffPages& pages,
    const std::function<absl::Status(
        size_t dataset, const std::vector<PartitionDiff>& partitions)>& write) {
  RETURN_IF_ERROR(pages.Rewind());
  while (true) {
    size_t dataset = 0;
    std::vector<PartitionDiff> page;
    ASSIGN_OR_RETURN(bool more, pages.Next(&dataset, &page));
    if (!more) return absl::OkStatus();
    if (dataset >= header.datasets.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a page of the diff of job ", header.job_id, " is of dataset #",
          dataset, ", but the diff has ", header.datasets.size(), " datasets"));
    }
    RETURN_IF_ERROR(write(dataset, page));
  }
}

absl::Status StateStore::ReplaceJobDiff(const JobDiff& diff) {
  GivenDiff given(diff);
  return ReplaceJobDiff(HeaderOf(diff), given);
}

absl::Status StateStore::RecordPublication(
    const std::string& job_id, const std::vector<LineageRecord>& lineage,
    JobState to, const std::string& message, absl::Time now) {
  GivenLineage given(lineage, message);
  return RecordPublication(job_id, given, to, now);
}

}  // namespace backfill
