#include "server/wire_text.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "google/protobuf/descriptor.h"
#include "text/utf8.h"

namespace backfill {
namespace {

// Whether a message of `type` can hold a `string` field, itself or in a
// message it holds. Answers are kept per thread (no lock on the request
// path); a type that holds itself counts as holding strings while its own
// answer is being worked out, which can only make the walk visit more.
bool HoldsStrings(const google::protobuf::Descriptor* type) {
  using google::protobuf::FieldDescriptor;
  thread_local absl::flat_hash_map<const google::protobuf::Descriptor*, bool>
      known;
  if (auto it = known.find(type); it != known.end()) return it->second;
  known[type] = true;
  bool holds = false;
  for (int i = 0; i < type->field_count() && !holds; ++i) {
    const FieldDescriptor* field = type->field(i);
    holds = field->type() == FieldDescriptor::TYPE_STRING ||
            (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
             HoldsStrings(field->message_type()));
  }
  known[type] = holds;
  return holds;
}

}  // namespace

void MakeStringsUtf8(google::protobuf::Message* message) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* reflection = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      if (field->is_repeated()) {
        const int n = reflection->FieldSize(*message, field);
        for (int i = 0; i < n; ++i) {
          std::string scratch;
          const std::string& value = reflection->GetRepeatedStringReference(
              *message, field, i, &scratch);
          if (text::InvalidUtf8Offset(value) != std::string_view::npos) {
            reflection->SetRepeatedString(message, field, i,
                                          text::ValidUtf8(value));
          }
        }
      } else {
        std::string scratch;
        const std::string& value =
            reflection->GetStringReference(*message, field, &scratch);
        if (text::InvalidUtf8Offset(value) != std::string_view::npos) {
          reflection->SetString(message, field, text::ValidUtf8(value));
        }
      }
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
               HoldsStrings(field->message_type())) {
      if (field->is_repeated()) {
        const int n = reflection->FieldSize(*message, field);
        for (int i = 0; i < n; ++i) {
          MakeStringsUtf8(
              reflection->MutableRepeatedMessage(message, field, i));
        }
      } else {
        MakeStringsUtf8(reflection->MutableMessage(message, field));
      }
    }
  }
}

}  // namespace backfill
