#include "core/ports/state_store.h"

#include <utility>

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

absl::Status StateStore::RecordPublication(
    const std::string& job_id, const std::vector<LineageRecord>& lineage,
    JobState to, const std::string& message, absl::Time now) {
  GivenLineage given(lineage, message);
  return RecordPublication(job_id, given, to, now);
}

}  // namespace backfill
