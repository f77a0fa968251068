// Check: one validation check of one dataset of a job, run on its staging
// before anything is published (step 4 of the playbook). One small unit per
// kind (core/checks/*_check.h); check_set.h lists the checks of a dataset —
// the always-on ones and those its pipeline file declares.
//
// A check asks the engine's profile for what it needs (Require), then
// evaluates the numbers against its thresholds (Run): the engine counts and
// sums, the check decides. Results follow check_result.h: one summary per
// check and dataset plus the failing partitions (ResultBuilder).
//
// Checks are built per validation and used by one thread; not thread-safe.

#ifndef BACKFILL_CORE_CHECKS_CHECK_H_
#define BACKFILL_CORE_CHECKS_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/model/catalog.h"
#include "core/model/check_result.h"
#include "core/ports/engine.h"

namespace backfill {

// What a check reads. Pointers are owned by the caller and outlive Run.
struct CheckContext {
  Engine* engine = nullptr;
  const JobLayout* layout = nullptr;
  const DatasetSpec* dataset = nullptr;
  // The job's partitions of the dataset ("" for an unpartitioned one).
  absl::Span<const std::string> partitions;
  const Profile* staged = nullptr;           // the staged rows, by partition
  const Profile* published = nullptr;        // the published rows they replace
  const ValidationReport* report = nullptr;  // the engine's ValidateStaged
};

class Check {
 public:
  virtual ~Check() = default;
  // Adds what the check needs to the profile of the staged rows (and, for
  // measures, of the published rows: the same request is used for both).
  virtual void Require(ProfileRequest* request) { (void)request; }
  virtual absl::StatusOr<std::vector<CheckResult>> Run(
      const CheckContext& context) = 0;
};

// Collects a check's outcome on each partition into the results stored:
// the failing partitions (at most kMaxFailedResultsPerCheck) and one
// summary.
class ResultBuilder {
 public:
  ResultBuilder(std::string check, std::string kind, CheckSeverity severity,
                std::string dataset, std::string allowed);

  void Pass();
  void Fail(const std::string& partition, std::string observed,
            std::string message, std::vector<std::string> samples = {});
  // A result about the whole dataset or job (partition ""), stored whether
  // it passed or not.
  void Whole(bool passed, std::string observed, std::string message,
             std::vector<std::string> samples = {});
  // The results; with `summary`, a summary of the partitions first.
  std::vector<CheckResult> Finish(bool summary = true);

 private:
  CheckResult Base() const;

  CheckResult base_;
  int64_t checked_ = 0;
  int64_t failed_ = 0;
  std::vector<CheckResult> failures_;
  std::vector<CheckResult> wholes_;
};

// "12.5%" style text of a fraction; "+" for growth.
std::string PercentText(double fraction);
// A number as a person reads it: integers without decimals, others with up
// to 6 significant digits.
std::string NumberText(double value);
// "1 row" / "3 rows".
std::string RowsText(int64_t rows);

}  // namespace backfill

#endif  // BACKFILL_CORE_CHECKS_CHECK_H_
