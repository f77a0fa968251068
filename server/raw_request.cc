#include "server/raw_request.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/error_details.h"
#include "google/protobuf/unknown_field_set.h"
#include "text/utf8.h"

namespace backfill {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Sub-messages are followed at most this deep (protobuf's own default
// recursion limit); the backfill.v1 requests nest two levels.
constexpr int kMaxDepth = 100;

// FindInvalidUtf8() for the message of type `type` serialized in `wire`,
// found at `prefix` ("" for the request, "request." for its field
// `request`).
std::optional<InvalidUtf8Field> FindIn(const Descriptor& type,
                                       std::string_view wire,
                                       const std::string& prefix, int depth) {
  if (depth > kMaxDepth) return std::nullopt;
  // Without the schema: every field, by number and wire type, with the
  // bytes of each length-delimited one as they came.
  UnknownFieldSet fields;
  if (!fields.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
    return std::nullopt;
  }
  std::map<int, int> seen;  // values so far per field number
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& value = fields.field(i);
    const FieldDescriptor* field = type.FindFieldByNumber(value.number());
    // A field the schema does not declare, or with another wire type, is an
    // unknown field to protobuf too: never checked as text.
    if (field == nullptr ||
        value.type() != UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    const int index = seen[value.number()]++;
    std::string path = absl::StrCat(prefix, field->name());
    if (field->is_repeated()) absl::StrAppend(&path, "[", index, "]");
    const std::string& bytes = value.length_delimited();
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      const size_t offset = text::InvalidUtf8Offset(bytes);
      if (offset != std::string_view::npos) {
        return InvalidUtf8Field{path, offset,
                                static_cast<unsigned char>(bytes[offset])};
      }
    } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      std::optional<InvalidUtf8Field> found = FindIn(
          *field->message_type(), bytes, absl::StrCat(path, "."), depth + 1);
      if (found.has_value()) return found;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<InvalidUtf8Field> FindInvalidUtf8(const Descriptor& type,
                                                std::string_view wire) {
  return FindIn(type, wire, "", 0);
}

absl::Status ParseRequest(std::string_view wire,
                          google::protobuf::Message* request) {
  request->Clear();
  const Descriptor& type = *request->GetDescriptor();
  // Checked before parsing: protobuf would refuse the same bytes, but
  // without saying which field, and would log an error line of its own.
  if (std::optional<InvalidUtf8Field> bad = FindInvalidUtf8(type, wire)) {
    const std::string message = absl::StrFormat(
        "invalid request: field %s is not valid UTF-8 (byte 0x%02x at offset "
        "%d); text fields must be UTF-8",
        bad->path, bad->byte, bad->offset);
    return InvalidFieldError(bad->path, "INVALID_UTF8", message);
  }
  if (!request->ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
    request->Clear();
    return WithReason(absl::InvalidArgumentError(absl::StrCat(
                          "invalid request: the bytes are not a well-formed ",
                          type.full_name())),
                      "REQUEST_MALFORMED");
  }
  return absl::OkStatus();
}

namespace raw_request_internal {

std::string Flatten(const grpc::ByteBuffer& raw) {
  std::string bytes;
  std::vector<grpc::Slice> slices;
  if (!raw.Valid() || !raw.Dump(&slices).ok()) return bytes;
  bytes.reserve(raw.Length());
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

grpc::Status NoRequest(grpc::ServerContext* context) {
  // gRPC ends a call whose request is over the receive limit itself (the
  // client gets RESOURCE_EXHAUSTED "Received message larger than max"), and
  // the read here just finds no message; the call shows as cancelled at
  // once or a moment later. Waited for briefly, so that the status this
  // returns, which the metrics count (server/grpc_metrics.h), is the one the
  // client got rather than a guess made too early.
  const absl::Time until = absl::Now() + absl::Milliseconds(100);
  while (!context->IsCancelled() && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  if (context->IsCancelled()) {
    if (absl::Now() >= absl::FromChrono(context->deadline())) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "the call's deadline passed before its request "
                          "arrived");
    }
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        "the request was refused before it was read: larger than the "
        "server's receive limit (backfilld --max-message-bytes)");
  }
  return ToGrpcStatus(
      WithReason(absl::InvalidArgumentError(
                     "invalid request: the call carried no request message"),
                 "REQUEST_MISSING"));
}

}  // namespace raw_request_internal
}  // namespace backfill
