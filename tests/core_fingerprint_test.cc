#include <cstdint>
#include <limits>
#include <string>

#include "core/model/fingerprint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_fingerprint_test {
namespace {

using ::testing::MatchesRegex;

uint64_t TextRow(const std::string& a, const std::string& b) {
  RowHasher h;
  h.AddText(a);
  h.AddText(b);
  return h.Finish();
}

TEST(HashHexTest, SixteenLowercaseHexDigitsAndStable) {
  EXPECT_THAT(HashHex("abc"), MatchesRegex("[0-9a-f]{16}"));
  EXPECT_THAT(HashHex(""), MatchesRegex("[0-9a-f]{16}"));
  EXPECT_EQ(HashHex("abc"), HashHex(std::string("abc")));
  EXPECT_NE(HashHex("abc"), HashHex("abd"));
  // XXH3-64 of the empty input is a published constant.
  EXPECT_EQ(HashHex(""), "2d06800538d394c2");
}

TEST(RowHasherTest, LengthPrefixSeparatesValues) {
  EXPECT_NE(TextRow("ab", "c"), TextRow("a", "bc"));
  EXPECT_NE(TextRow("", "abc"), TextRow("abc", ""));
  EXPECT_EQ(TextRow("ab", "c"), TextRow("ab", "c"));
}

TEST(RowHasherTest, TypesAreDistinct) {
  RowHasher i, r, t, b, n, empty_text;
  i.AddInt(1);
  r.AddReal(1.0);
  t.AddText("1");
  b.AddBlob("1");
  n.AddNull();
  empty_text.AddText("");
  EXPECT_NE(i.Finish(), r.Finish());
  EXPECT_NE(i.Finish(), t.Finish());
  EXPECT_NE(t.Finish(), b.Finish());
  EXPECT_NE(n.Finish(), empty_text.Finish());
  EXPECT_NE(n.Finish(), RowHasher().Finish());
}

TEST(RowHasherTest, ValuesMatter) {
  RowHasher a, b, c;
  a.AddInt(1);
  a.AddInt(2);
  b.AddInt(2);
  b.AddInt(1);
  c.AddInt(1);
  c.AddInt(2);
  EXPECT_NE(a.Finish(), b.Finish());  // column order matters within a row
  EXPECT_EQ(a.Finish(), c.Finish());
  EXPECT_EQ(a.Finish(), a.Finish());  // Finish does not consume
}

TEST(RowHasherTest, RealsNormalizeZeroAndNaN) {
  RowHasher pz, nz, nan1, nan2, one;
  pz.AddReal(0.0);
  nz.AddReal(-0.0);
  nan1.AddReal(std::numeric_limits<double>::quiet_NaN());
  nan2.AddReal(-std::numeric_limits<double>::quiet_NaN());
  one.AddReal(1.5);
  EXPECT_EQ(pz.Finish(), nz.Finish());
  EXPECT_EQ(nan1.Finish(), nan2.Finish());
  EXPECT_NE(pz.Finish(), one.Finish());
}

TEST(FingerprintTest, OrderIndependent) {
  Fingerprint a, b;
  a.AddRow(TextRow("x", "1"));
  a.AddRow(TextRow("y", "2"));
  a.AddRow(TextRow("z", "3"));
  b.AddRow(TextRow("z", "3"));
  b.AddRow(TextRow("x", "1"));
  b.AddRow(TextRow("y", "2"));
  EXPECT_EQ(a.ToString(), b.ToString());
  EXPECT_EQ(a.rows(), 3);
}

TEST(FingerprintTest, DetectsChangesAndDuplicates) {
  Fingerprint a, b, c;
  a.AddRow(TextRow("x", "1"));
  b.AddRow(TextRow("x", "2"));
  EXPECT_NE(a.ToString(), b.ToString());
  c.AddRow(TextRow("x", "1"));
  c.AddRow(TextRow("x", "1"));
  EXPECT_NE(a.ToString(), c.ToString());
}

TEST(FingerprintTest, Format) {
  Fingerprint empty;
  EXPECT_EQ(empty.ToString(), "0000000000000000:0");
  Fingerprint f;
  f.AddRow(0xff);
  f.AddRow(0x01);
  EXPECT_EQ(f.ToString(), "0000000000000100:2");
  Fingerprint wrap;
  wrap.AddRow(std::numeric_limits<uint64_t>::max());
  wrap.AddRow(2);
  EXPECT_EQ(wrap.ToString(), "0000000000000001:2");  // modulo 2^64
}

}  // namespace
}  // namespace core_fingerprint_test
}  // namespace backfill
