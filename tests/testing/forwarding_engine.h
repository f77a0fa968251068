// ForwardingEngine: an Engine that passes every call to another engine, for
// tests to override the calls they want to observe, hold back or make fail.
// Does not own the inner engine. Thread-safe as the inner engine is.

#ifndef BACKFILL_TESTS_TESTING_FORWARDING_ENGINE_H_
#define BACKFILL_TESTS_TESTING_FORWARDING_ENGINE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/ports/engine.h"

namespace backfill::testing {

class ForwardingEngine : public Engine {
 public:
  explicit ForwardingEngine(Engine* inner) : inner_(inner) {}

  absl::StatusOr<WarehouseInfo> Inspect() override { return inner_->Inspect(); }
  absl::Status Claim(const std::string& store_id, bool take_over) override {
    return inner_->Claim(store_id, take_over);
  }
  absl::StatusOr<std::map<std::string, int64_t>> CountRowsByPartition(
      const DatasetSpec& dataset) override {
    return inner_->CountRowsByPartition(dataset);
  }
  absl::StatusOr<std::vector<int64_t>> CountRowsInPartitions(
      const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) override {
    return inner_->CountRowsInPartitions(dataset, partitions);
  }
  absl::StatusOr<PartitionStats> PartitionStatistics(
      const DatasetSpec& dataset) override {
    return inner_->PartitionStatistics(dataset);
  }
  absl::StatusOr<std::map<std::string, InputFingerprint>> CurrentFingerprints(
      const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) override {
    return inner_->CurrentFingerprints(dataset, partitions);
  }
  absl::Status PrepareJob(const JobLayout& layout) override {
    return inner_->PrepareJob(layout);
  }
  absl::StatusOr<StageResult> StagePartition(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& partition,
      const std::vector<InputRef>& inputs) override {
    return inner_->StagePartition(job_id, dataset, partition, inputs);
  }
  absl::StatusOr<ValidationReport> ValidateStaged(
      const std::string& job_id, const DatasetSpec& dataset) override {
    return inner_->ValidateStaged(job_id, dataset);
  }
  absl::StatusOr<PartitionDiff> DiffPartition(const std::string& job_id,
                                              const DatasetSpec& dataset,
                                              const std::string& partition,
                                              int sample_limit) override {
    return inner_->DiffPartition(job_id, dataset, partition, sample_limit);
  }
  absl::StatusOr<std::vector<absl::StatusOr<PartitionDiff>>> DiffPartitions(
      const std::string& job_id, const DatasetSpec& dataset,
      absl::Span<const std::string> partitions, int sample_limit) override {
    return inner_->DiffPartitions(job_id, dataset, partitions, sample_limit);
  }
  absl::StatusOr<bool> IsPublished(const std::string& job_id) override {
    return inner_->IsPublished(job_id);
  }
  absl::Status Publish(const JobLayout& layout) override {
    return inner_->Publish(layout);
  }
  absl::Status ReleasePartitions(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) override {
    return inner_->ReleasePartitions(job_id, dataset, partitions);
  }
  absl::Status DropStaging(const std::string& job_id) override {
    return inner_->DropStaging(job_id);
  }
  absl::StatusOr<RollbackResult> Rollback(const RollbackSpec& spec) override {
    return inner_->Rollback(spec);
  }
  absl::StatusOr<std::vector<RollbackCopy>> ListRollbackCopies() override {
    return inner_->ListRollbackCopies();
  }
  absl::Status DropRollbackCopies(
      const std::vector<RollbackCopy>& copies) override {
    return inner_->DropRollbackCopies(copies);
  }
  absl::StatusOr<std::vector<std::string>> ListJobsWithStaging() override {
    return inner_->ListJobsWithStaging();
  }
  absl::StatusOr<Profile> ProfileStaged(
      const std::string& job_id, const DatasetSpec& dataset,
      const ProfileRequest& request) override {
    return inner_->ProfileStaged(job_id, dataset, request);
  }
  absl::StatusOr<Profile> ProfilePublished(
      const std::string& job_id, const DatasetSpec& dataset,
      const ProfileRequest& request) override {
    return inner_->ProfilePublished(job_id, dataset, request);
  }
  absl::StatusOr<std::map<std::string, CountWithSamples>> RunAssertion(
      const std::string& job_id, const DatasetSpec& dataset,
      const std::string& sql, int samples) override {
    return inner_->RunAssertion(job_id, dataset, sql, samples);
  }
  absl::StatusOr<SqlValue> QueryValue(const DatasetSpec& dataset,
                                      const std::string& partition,
                                      const std::string& sql) override {
    return inner_->QueryValue(dataset, partition, sql);
  }
  absl::StatusOr<QueryShape> DescribeQuery(
      const std::string& sql, const std::vector<const DatasetSpec*>& stand_ins,
      const DatasetSpec* own) override {
    return inner_->DescribeQuery(sql, stand_ins, own);
  }
  absl::StatusOr<std::optional<std::vector<ColumnSpec>>> DescribeTable(
      const DatasetSpec& dataset) override {
    return inner_->DescribeTable(dataset);
  }
  absl::StatusOr<std::vector<std::string>> PartitionsMatching(
      const DatasetSpec& dataset, const std::string& predicate,
      size_t max_partitions) override {
    return inner_->PartitionsMatching(dataset, predicate, max_partitions);
  }
  void Interrupt() override { inner_->Interrupt(); }

 protected:
  Engine* inner() const { return inner_; }

 private:
  Engine* const inner_;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_FORWARDING_ENGINE_H_
