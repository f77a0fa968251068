#include "core/base/json_value.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace backfill {
namespace {

constexpr int kMaxDepth = 64;

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : s_(text) {}

  absl::StatusOr<JsonValue> Document() {
    JsonValue v;
    if (absl::Status st = Value(&v, 0); !st.ok()) return st;
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected text after the value");
    return v;
  }

 private:
  absl::Status Error(std::string_view why) const {
    return absl::InvalidArgumentError(
        absl::StrCat("not valid JSON at byte ", pos_, ": ",
                     absl::string_view(why.data(), why.size())));
  }

  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
                                s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::Status Value(JsonValue* out, int depth) {
    if (depth > kMaxDepth) return Error("nested too deeply");
    SkipSpace();
    if (pos_ >= s_.size()) return Error("a value was expected");
    const char c = s_[pos_];
    if (c == '{') return Object(out, depth);
    if (c == '[') return Array(out, depth);
    if (c == '"') {
      out->type = JsonValue::Type::kString;
      return String(&out->text);
    }
    if (Literal("true")) {
      out->type = JsonValue::Type::kBool;
      out->boolean = true;
      return absl::OkStatus();
    }
    if (Literal("false")) {
      out->type = JsonValue::Type::kBool;
      return absl::OkStatus();
    }
    if (Literal("null")) {
      out->type = JsonValue::Type::kNull;
      return absl::OkStatus();
    }
    if (c == '-' || (c >= '0' && c <= '9')) return Number(out);
    return Error("a value was expected");
  }

  absl::Status Object(JsonValue* out, int depth) {
    out->type = JsonValue::Type::kObject;
    ++pos_;  // {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') {
        return Error("a field name in quotes was expected");
      }
      std::string name;
      if (absl::Status st = String(&name); !st.ok()) return st;
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Error("':' expected");
      ++pos_;
      JsonValue v;
      if (absl::Status st = Value(&v, depth + 1); !st.ok()) return st;
      out->fields[name] = std::move(v);
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("',' or '}' expected");
    }
  }

  absl::Status Array(JsonValue* out, int depth) {
    out->type = JsonValue::Type::kArray;
    ++pos_;  // [
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      JsonValue v;
      if (absl::Status st = Value(&v, depth + 1); !st.ok()) return st;
      out->items.push_back(std::move(v));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("',' or ']' expected");
    }
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool Hex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_ + i];
      v <<= 4;
      if (h >= '0' && h <= '9') {
        v |= static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        v |= static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        v |= static_cast<uint32_t>(h - 'A' + 10);
      } else {
        return false;
      }
    }
    pos_ += 4;
    *out = v;
    return true;
  }

  absl::Status String(std::string* out) {
    ++pos_;  // "
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("control character in a string");
      }
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return Error("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return Error("bad \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low = 0;
            if (!Literal("\\u") || !Hex4(&low) || low < 0xDC00 ||
                low > 0xDFFF) {
              return Error("unpaired surrogate in a \\u escape");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Error("unpaired surrogate in a \\u escape");
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Error("bad escape in a string");
      }
    }
  }

  absl::Status Number(JsonValue* out) {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return Error("bad number");
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Error("bad number");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Error("bad number");
    }
    out->type = JsonValue::Type::kNumber;
    out->number_text = std::string(s_.substr(start, pos_ - start));
    char* end = nullptr;
    out->number = std::strtod(out->number_text.c_str(), &end);
    if (!std::isfinite(out->number)) return Error("number out of range");
    return absl::OkStatus();
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<JsonValue> ParseJson(std::string_view text) {
  return JsonParser(text).Document();
}

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<int>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out += "\"";
  return out;
}

}  // namespace backfill
