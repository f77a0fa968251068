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

absl::Status StateStore::RecordPublication(
    const std::string& job_id, const std::vector<LineageRecord>& lineage,
    JobState to, const std::string& message, absl::Time now) {
  GivenLineage given(lineage, message);
  return RecordPublication(job_id, given, to, now);
}

}  // namespace backfill
