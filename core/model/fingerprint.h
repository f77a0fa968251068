// Fingerprint: an order-independent 64-bit fingerprint of a multiset of
// rows, so that the same rows in any order give the same value. Each row is
// hashed with XXH3 over its typed values; row hashes are summed modulo 2^64.
//
// A Fingerprint is a small value; not synchronized.

#ifndef BACKFILL_CORE_MODEL_FINGERPRINT_H_
#define BACKFILL_CORE_MODEL_FINGERPRINT_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace backfill {

// Hex of XXH3-64 of `data`.
std::string HashHex(std::string_view data);

class RowHasher {
 public:
  RowHasher();
  void AddNull();
  void AddInt(int64_t v);
  void AddReal(double v);
  void AddText(std::string_view v);
  void AddBlob(std::string_view v);
  uint64_t Finish() const;
  // Empties the hasher for the next row, keeping its buffer.
  void Clear() { buf_.clear(); }

 private:
  std::string buf_;
};

class Fingerprint {
 public:
  Fingerprint() = default;
  // The fingerprint whose row hashes sum to `sum` over `rows` rows (as an
  // aggregate computed elsewhere reports them).
  static Fingerprint FromSum(uint64_t sum, int64_t rows) {
    Fingerprint fp;
    fp.sum_ = sum;
    fp.rows_ = rows;
    return fp;
  }
  void AddRow(uint64_t row_hash) {
    sum_ += row_hash;
    ++rows_;
  }
  int64_t rows() const { return rows_; }
  // 16 hex digits of the sum, then ":" and the row count.
  std::string ToString() const;

 private:
  uint64_t sum_ = 0;
  int64_t rows_ = 0;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_FINGERPRINT_H_
