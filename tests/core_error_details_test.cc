// ErrorDetails: reasons, metadata and field violations attached to an
// absl::Status, and the renaming of field paths for an outer message.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/base/error_details.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_error_details_test {
namespace {

std::vector<std::string> Fields(const absl::Status& status) {
  std::vector<std::string> out;
  for (const FieldViolation& v : DetailsOf(status).field_violations) {
    out.push_back(v.field);
  }
  return out;
}

TEST(ErrorDetailsTest, AStatusWithoutDetailsHasNone) {
  ErrorDetails details = DetailsOf(absl::NotFoundError("no job bf-1"));
  EXPECT_EQ(details.reason, "");
  EXPECT_TRUE(details.metadata.empty());
  EXPECT_TRUE(details.field_violations.empty());
  EXPECT_EQ(DetailsOf(absl::OkStatus()).reason, "");
}

TEST(ErrorDetailsTest, OkStaysOkWhateverIsAttached) {
  absl::Status ok = WithFieldViolation(
      WithReason(absl::OkStatus(), "SOMETHING", {{"k", "v"}}), "f", "bad");
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(DetailsOf(ok).reason, "");
}

TEST(ErrorDetailsTest, ReasonAndMetadataKeepTheCodeAndTheMessage) {
  absl::Status status =
      WithReason(absl::NotFoundError("no job bf-7"), "BACKFILL_NOT_FOUND",
                 {{"backfill_id", "bf-7"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "no job bf-7");
  ErrorDetails details = DetailsOf(status);
  EXPECT_EQ(details.reason, "BACKFILL_NOT_FOUND");
  EXPECT_EQ(details.metadata,
            (std::map<std::string, std::string>{{"backfill_id", "bf-7"}}));
}

TEST(ErrorDetailsTest, ASecondReasonReplacesTheFirstWithItsMetadata) {
  absl::Status status = WithReason(
      WithReason(absl::FailedPreconditionError("x"), "FIRST", {{"a", "1"}}),
      "SECOND", {{"b", "2"}});
  ErrorDetails details = DetailsOf(status);
  EXPECT_EQ(details.reason, "SECOND");
  EXPECT_EQ(details.metadata, (std::map<std::string, std::string>{{"b", "2"}}));
}

TEST(ErrorDetailsTest, ViolationsKeepTheirOrderAndASecondOfAFieldReplaces) {
  absl::Status status = absl::InvalidArgumentError("bad");
  // More than ten, so that an order kept as text would sort "10" first.
  std::vector<std::string> expected;
  for (int i = 0; i < 12; ++i) {
    const std::string field = "partitions[" + std::to_string(11 - i) + "]";
    status = WithFieldViolation(status, field, "not a day");
    expected.push_back(field);
  }
  status = WithFieldViolation(status, "partitions[11]", "replaced");
  EXPECT_EQ(Fields(status), expected);
  EXPECT_EQ(DetailsOf(status).field_violations[0].description, "replaced");
}

TEST(ErrorDetailsTest, InvalidFieldErrorIsInvalidArgumentNamingTheField) {
  absl::Status status =
      InvalidFieldError("reason", "REASON_REQUIRED", "a reason is required");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "a reason is required");
  ErrorDetails details = DetailsOf(status);
  EXPECT_EQ(details.reason, "REASON_REQUIRED");
  ASSERT_EQ(details.field_violations.size(), 1u);
  EXPECT_EQ(details.field_violations[0],
            (FieldViolation{"reason", "a reason is required"}));
}

TEST(ErrorDetailsTest, PrefixingNamesFieldsInTheOuterMessage) {
  absl::Status status = WithFieldViolation(
      WithFieldViolation(
          WithFieldViolation(absl::InvalidArgumentError("bad"), "reason", "r"),
          "idempotency_key", "k"),
      "request.dataset", "d");
  absl::Status named = PrefixFieldPaths(status, "request", {"idempotency_key"});
  EXPECT_EQ(Fields(named),
            (std::vector<std::string>{"request.reason", "idempotency_key",
                                      "request.dataset"}));
  // Idempotent: prefixing again changes nothing.
  EXPECT_EQ(Fields(PrefixFieldPaths(named, "request", {"idempotency_key"})),
            Fields(named));
}

absl::Status Inner() {
  return InvalidFieldError("keys[2]", "ENTITY_KEY_INVALID", "empty key");
}

absl::Status Outer() {
  RETURN_IF_ERROR(Inner());
  return absl::OkStatus();
}

TEST(ErrorDetailsTest, DetailsPassThroughTheReturnMacros) {
  absl::Status status = Outer();
  EXPECT_EQ(DetailsOf(status).reason, "ENTITY_KEY_INVALID");
  EXPECT_EQ(Fields(status), std::vector<std::string>{"keys[2]"});
}

}  // namespace
}  // namespace core_error_details_test
}  // namespace backfill
