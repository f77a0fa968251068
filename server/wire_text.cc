#include "server/wire_text.h"

#include <string>
#include <string_view>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "text/utf8.h"

namespace backfill {

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
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
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
