#include "server/http_json.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/error_details.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/rpc/status.pb.h"
#include "server/grpc_status.h"

namespace backfill {
namespace {

namespace pb = ::google::protobuf;

// The field of `type` named `name` in either spelling, or null.
const pb::FieldDescriptor* FieldNamed(const pb::Descriptor* type,
                                      absl::string_view name) {
  for (int i = 0; i < type->field_count(); ++i) {
    const pb::FieldDescriptor* field = type->field(i);
    if (field->name() == name || field->json_name() == name) return field;
  }
  return nullptr;
}

// Messages whose JSON form is a string, and which may therefore be given
// as one parameter.
bool IsStringLikeMessage(const pb::Descriptor* type) {
  const std::string& name = type->full_name();
  return name == "google.protobuf.Timestamp" ||
         name == "google.protobuf.Duration" ||
         name == "google.protobuf.FieldMask";
}

absl::Status BadField(absl::string_view field, absl::string_view reason,
                      const std::string& message) {
  return InvalidFieldError(field, reason, message);
}

// Sets the field at dotted `path` of the message `type`, whose JSON object
// is `root`, to `text` (a query parameter's or a path variable's value):
// converted to the field's JSON type. `from`: "query parameter" or "path".
absl::Status SetFromText(const pb::Descriptor* type, pb::Struct* root,
                         absl::string_view path, const std::string& text,
                         absl::string_view from, bool from_path) {
  const std::vector<absl::string_view> parts = absl::StrSplit(path, '.');
  pb::Struct* object = root;
  for (size_t i = 0; i < parts.size(); ++i) {
    const pb::FieldDescriptor* field = FieldNamed(type, parts[i]);
    if (field == nullptr) {
      return BadField(path, "UNKNOWN_FIELD",
                      absl::StrCat("the ", from, " `", path,
                                   "` names no field of ", type->full_name()));
    }
    const std::string key = field->json_name();
    const bool last = i + 1 == parts.size();
    if (!last) {
      if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE ||
          field->is_repeated() || IsStringLikeMessage(field->message_type())) {
        return BadField(path, "UNKNOWN_FIELD",
                        absl::StrCat("the ", from, " `", path, "`: `", parts[i],
                                     "` is not a message with fields"));
      }
      type = field->message_type();
      object = (*object->mutable_fields())[key].mutable_struct_value();
      continue;
    }
    if (field->is_map() ||
        (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE &&
         !IsStringLikeMessage(field->message_type()))) {
      return BadField(path, "FIELD_NOT_A_VALUE",
                      absl::StrCat("`", path, "` is a message: it cannot be ",
                                   "given as a ", from,
                                   (from_path ? "" : "; send it in a body")));
    }
    pb::Value value;
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_BOOL) {
      if (text == "true" || text == "1") {
        value.set_bool_value(true);
      } else if (text == "false" || text == "0") {
        value.set_bool_value(false);
      } else {
        return BadField(path, "INVALID_VALUE",
                        absl::StrCat("the ", from, " `", path,
                                     "` is a bool: true or false, not \"",
                                     Utf8Prefix(text, 64), "\""));
      }
    } else {
      // Numbers as strings: the JSON parser reads "12" for every numeric
      // type, and says which field when it is not one.
      value.set_string_value(text);
    }
    pb::Value& slot = (*object->mutable_fields())[key];
    if (field->is_repeated()) {
      *slot.mutable_list_value()->add_values() = std::move(value);
    } else if (slot.kind_case() != pb::Value::KIND_NOT_SET) {
      const bool same = slot.kind_case() == value.kind_case() &&
                        slot.string_value() == value.string_value() &&
                        slot.bool_value() == value.bool_value();
      if (from_path && same) continue;
      return BadField(
          path, from_path ? "PATH_VALUE_CONFLICT" : "REPEATED_PARAMETER",
          from_path ? absl::StrCat("`", path,
                                   "` is given in the path and differs in "
                                   "the body: leave it out of the body")
                    : absl::StrCat("the query parameter `", path,
                                   "` is given more than once, and the "
                                   "field takes one value"));
    } else {
      slot = std::move(value);
    }
  }
  return absl::OkStatus();
}

// The field path and the reason in one of protobuf's JSON parse errors:
// "(request.dataset): invalid value 5 for type TYPE_STRING",
// "nope: Cannot find field.".
std::string FieldOfParseError(absl::string_view message) {
  if (!message.empty() && message.front() == '(') {
    const size_t close = message.find("):");
    if (close != absl::string_view::npos) {
      return std::string(message.substr(1, close - 1));
    }
  }
  const size_t cannot = message.find(": Cannot find field");
  if (cannot != absl::string_view::npos) {
    return std::string(message.substr(0, cannot));
  }
  return "";
}

}  // namespace

absl::Status RequestFromHttp(
    const std::map<std::string, std::string>& variables, bool has_body,
    absl::string_view body, const QueryParams& query, pb::Message* request) {
  request->Clear();
  const pb::Descriptor* type = request->GetDescriptor();
  pb::Struct root;
  if (has_body) {
    if (!query.empty()) {
      return BadField(
          query.front().first, "QUERY_WITH_BODY",
          absl::StrCat("this call takes its request in the JSON "
                       "body; the query parameter `",
                       query.front().first, "` belongs in the body"));
    }
    if (!body.empty()) {
      pb::Value parsed;
      pb::util::Status s =
          pb::util::JsonStringToMessage(std::string(body), &parsed);
      if (!s.ok()) {
        return WithReason(absl::InvalidArgumentError(absl::StrCat(
                              "the request body is not JSON: ",
                              Utf8Prefix(std::string(s.message()), 200))),
                          "MALFORMED_JSON");
      }
      if (parsed.kind_case() != pb::Value::kStructValue) {
        return WithReason(absl::InvalidArgumentError(absl::StrCat(
                              "the request body must be a JSON object (a ",
                              type->full_name(), ")")),
                          "MALFORMED_JSON");
      }
      root = parsed.struct_value();
    }
  } else {
    if (!body.empty()) {
      return WithReason(
          absl::InvalidArgumentError(
              "this call takes no body: give its fields as query parameters"),
          "UNEXPECTED_BODY");
    }
    for (const auto& [name, value] : query) {
      if (absl::Status s =
              SetFromText(type, &root, name, value, "query parameter", false);
          !s.ok()) {
        return s;
      }
    }
  }
  for (const auto& [name, value] : variables) {
    // A variable already in the body (either spelling) must agree with it.
    const pb::FieldDescriptor* field = FieldNamed(type, name);
    if (field != nullptr && field->json_name() != field->name()) {
      auto other = root.fields().find(field->name());
      if (other != root.fields().end()) {
        pb::Value moved = other->second;
        root.mutable_fields()->erase(field->name());
        (*root.mutable_fields())[field->json_name()] = std::move(moved);
      }
    }
    if (absl::Status s =
            SetFromText(type, &root, name, value, "path variable", true);
        !s.ok()) {
      return s;
    }
  }
  std::string json;
  if (pb::util::Status s = pb::util::MessageToJsonString(root, &json);
      !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot re-encode the request: ",
                                            std::string(s.message())));
  }
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  if (pb::util::Status s =
          pb::util::JsonStringToMessage(json, request, options);
      !s.ok()) {
    request->Clear();
    const std::string message(s.message());
    const std::string field = FieldOfParseError(message);
    const std::string text =
        absl::StrCat("the request is not a valid ", type->full_name(), ": ",
                     Utf8Prefix(message, 300));
    if (field.empty()) {
      return WithReason(absl::InvalidArgumentError(text), "MALFORMED_JSON");
    }
    return BadField(field, "INVALID_FIELD", text);
  }
  return absl::OkStatus();
}

std::string MessageToHttpJson(const pb::Message& message) {
  std::string json;
  pb::util::JsonPrintOptions options;
  if (!pb::util::MessageToJsonString(message, &json, options).ok()) {
    // Only a message with an Any of an unknown type fails; the API sends
    // none but the error details, which are linked in.
    return "{}";
  }
  return json;
}

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

std::string StatusToHttpJson(const absl::Status& status) {
  return MessageToHttpJson(ToRpcStatus(status));
}

}  // namespace backfill
