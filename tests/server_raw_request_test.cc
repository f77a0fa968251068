// Unit tests of server/raw_request.h without a server: finding the `string`
// field that holds invalid UTF-8 in a serialized request, and ParseRequest's
// answers. Requests with bad bytes are made as a real client would send them:
// a valid message is serialized and its bytes are patched.

#include <string>

#include "absl/status/status.h"
#include "backfill/v1/backfill.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/raw_request.h"

namespace backfill {
namespace server_raw_request_test {
namespace {

using ::testing::HasSubstr;

// `message` serialized, with `marker` replaced by `bytes` (same length, so
// that every length prefix stays right).
std::string Patched(const google::protobuf::Message& message,
                    const std::string& marker, const std::string& bytes) {
  EXPECT_EQ(marker.size(), bytes.size());
  std::string wire = message.SerializeAsString();
  const size_t at = wire.find(marker);
  EXPECT_NE(at, std::string::npos) << marker;
  if (at != std::string::npos) wire.replace(at, marker.size(), bytes);
  return wire;
}

v1::SubmitBackfillRequest Submit() {
  v1::SubmitBackfillRequest submit;
  v1::BackfillRequest* request = submit.mutable_request();
  request->set_dataset("daily_revenue");
  request->add_partitions("2025-03-01");
  request->add_partitions("2025-03-02");
  request->set_reason("fix refunds");
  request->set_requested_by("alice");
  submit.set_idempotency_key("key-1");
  return submit;
}

TEST(FindInvalidUtf8Test, NamesTheNestedFieldAndTheOffset) {
  v1::SubmitBackfillRequest submit = Submit();
  submit.mutable_request()->set_reason("fix REASON");
  const std::string wire = Patched(submit, "REASON", "RE\xff\xfeON");
  std::optional<InvalidUtf8Field> bad =
      FindInvalidUtf8(*v1::SubmitBackfillRequest::descriptor(), wire);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->path, "request.reason");
  EXPECT_EQ(bad->offset, 6u);
  EXPECT_EQ(bad->byte, 0xff);
}

TEST(FindInvalidUtf8Test, IndexesRepeatedFields) {
  v1::SubmitBackfillRequest submit = Submit();
  submit.mutable_request()->add_partitions("PART");
  const std::string wire = Patched(submit, "PART", "P\xc3(T");
  std::optional<InvalidUtf8Field> bad =
      FindInvalidUtf8(*v1::SubmitBackfillRequest::descriptor(), wire);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->path, "request.partitions[2]");
  EXPECT_EQ(bad->offset, 1u);
}

TEST(FindInvalidUtf8Test, TopLevelFieldAndValidUtf8) {
  v1::CancelBackfillRequest cancel;
  cancel.set_id("bf-1");
  // Valid non-ASCII text is fine; the bad byte is in the second field.
  cancel.set_reason("annul\xc3\xa9 \xe2\x80\x94 BAD");
  std::optional<InvalidUtf8Field> none = FindInvalidUtf8(
      *v1::CancelBackfillRequest::descriptor(), cancel.SerializeAsString());
  EXPECT_FALSE(none.has_value());
  std::optional<InvalidUtf8Field> bad = FindInvalidUtf8(
      *v1::CancelBackfillRequest::descriptor(), Patched(cancel, "BAD",
                                                        "B\x80"
                                                        "D"));
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->path, "reason");
}

TEST(FindInvalidUtf8Test, UndeclaredFieldsAndBytesFieldsAreNotText) {
  // Field 15 (undeclared) holds invalid UTF-8: an unknown field, kept as
  // bytes by protobuf, not text.
  std::string wire = v1::GetBackfillRequest().SerializeAsString();
  wire += std::string("\x7a\x02\xff\xfe", 4);  // field 15, length 2
  EXPECT_FALSE(
      FindInvalidUtf8(*v1::GetBackfillRequest::descriptor(), wire).has_value());
  v1::GetBackfillRequest parsed;
  EXPECT_TRUE(ParseRequest(wire, &parsed).ok());
}

TEST(ParseRequestTest, InvalidUtf8IsInvalidArgumentNamingTheField) {
  v1::SubmitBackfillRequest submit = Submit();
  submit.mutable_request()->set_requested_by("WHO");
  v1::SubmitBackfillRequest parsed;
  absl::Status status = ParseRequest(Patched(submit, "WHO", "W\xffO"), &parsed);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "invalid request: field request.requested_by is not valid UTF-8 "
            "(byte 0xff at offset 1); text fields must be UTF-8");
}

TEST(ParseRequestTest, MalformedBytesAreInvalidArgument) {
  v1::PlanBackfillRequest parsed;
  // Field 1, length 5, but only two bytes follow.
  absl::Status status = ParseRequest(std::string("\x0a\x05"
                                                 "ab",
                                                 4),
                                     &parsed);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("not a well-formed backfill.v1.PlanBackfillRequest"));
}

TEST(ParseRequestTest, ValidBytesParseExactly) {
  v1::SubmitBackfillRequest submit = Submit();
  submit.mutable_request()->set_reason(
      "r\xc3\xa9parer \xe4\xbf\xae\xe6\xad\xa3");
  v1::SubmitBackfillRequest parsed;
  parsed.set_idempotency_key("stale");  // cleared by ParseRequest
  ASSERT_TRUE(ParseRequest(submit.SerializeAsString(), &parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), submit.SerializeAsString());
  v1::ListDatasetsRequest empty;
  EXPECT_TRUE(ParseRequest("", &empty).ok());
}

}  // namespace
}  // namespace server_raw_request_test
}  // namespace backfill
