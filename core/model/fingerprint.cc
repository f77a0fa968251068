#include "core/model/fingerprint.h"

#include <xxhash.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "absl/strings/str_format.h"

namespace backfill {
namespace {

// Type tags: every value is encoded as tag, then (for variable-length
// values) its length, then its bytes, so that neither ("ab", "c") and
// ("a", "bc") nor the integer 1 and the real 1.0 encode alike.
constexpr char kNullTag = 'N';
constexpr char kIntTag = 'I';
constexpr char kRealTag = 'R';
constexpr char kTextTag = 'T';
constexpr char kBlobTag = 'B';

// Appends `v` as 8 little-endian bytes (independent of the host order).
void AppendU64(std::string* buf, uint64_t v) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  }
  buf->append(bytes, sizeof(bytes));
}

void AppendBytes(std::string* buf, char tag, std::string_view v) {
  buf->push_back(tag);
  AppendU64(buf, static_cast<uint64_t>(v.size()));
  buf->append(v.data(), v.size());
}

}  // namespace

std::string HashHex(std::string_view data) {
  return absl::StrFormat(
      "%016x", static_cast<uint64_t>(XXH3_64bits(data.data(), data.size())));
}

RowHasher::RowHasher() { buf_.reserve(64); }

void RowHasher::AddNull() { buf_.push_back(kNullTag); }

void RowHasher::AddInt(int64_t v) {
  buf_.push_back(kIntTag);
  AppendU64(&buf_, static_cast<uint64_t>(v));
}

void RowHasher::AddReal(double v) {
  // One encoding per value: -0.0 equals 0.0 and every NaN is the same NaN.
  if (v == 0.0) v = 0.0;
  if (std::isnan(v)) v = std::numeric_limits<double>::quiet_NaN();
  uint64_t bits;
  static_assert(sizeof(bits) == sizeof(v), "double must be 64 bits");
  std::memcpy(&bits, &v, sizeof(bits));
  buf_.push_back(kRealTag);
  AppendU64(&buf_, bits);
}

void RowHasher::AddText(std::string_view v) { AppendBytes(&buf_, kTextTag, v); }

void RowHasher::AddBlob(std::string_view v) { AppendBytes(&buf_, kBlobTag, v); }

uint64_t RowHasher::Finish() const {
  return static_cast<uint64_t>(XXH3_64bits(buf_.data(), buf_.size()));
}

std::string Fingerprint::ToString() const {
  return absl::StrFormat("%016x:%d", sum_, rows_);
}

}  // namespace backfill
