// Unit tests of text/utf8.h: one character decoded at a time (DecodeUtf8)
// and the first byte that breaks the rule (InvalidUtf8Offset). Every
// boundary of RFC 3629 is checked from both sides, in one table: the
// smallest and largest code point of each length, overlong forms,
// surrogates, code points above U+10FFFF, bytes that never start a character
// and sequences cut short.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "text/utf8.h"

namespace backfill {
namespace text {
namespace text_utf8_test {
namespace {

// DecodeUtf8(bytes) as "length U+XXXX" ("0" when no character), so that a
// failure shows both fields.
std::string Decoded(std::string_view bytes) {
  const Utf8Char c = DecodeUtf8(bytes);
  if (c.length == 0) return "0";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%zu U+%04X", c.length,
                static_cast<unsigned>(c.code_point));
  return buffer;
}

struct DecodeCase {
  std::string_view bytes;
  const char* decoded;  // Decoded(bytes)
};

constexpr DecodeCase kDecodeCases[] = {
    // Nothing to decode.
    {"", "0"},
    // ASCII is one byte, NUL and DEL included.
    {std::string_view("\0", 1), "1 U+0000"},
    {"A", "1 U+0041"},
    {"\x7f", "1 U+007F"},
    // Each length from its smallest to its largest code point.
    {"\xc2\x80", "2 U+0080"},
    {"\xc3\xa9", "2 U+00E9"},
    {"\xdf\xbf", "2 U+07FF"},
    {"\xe0\xa0\x80", "3 U+0800"},
    {"\xe2\x80\xae", "3 U+202E"},
    {"\xef\xbf\xbf", "3 U+FFFF"},
    {"\xf0\x90\x80\x80", "4 U+10000"},
    {"\xf0\x9f\x93\x88", "4 U+1F4C8"},
    {"\xf4\x8f\xbf\xbf", "4 U+10FFFF"},
    // Only the first character is read.
    {"ab", "1 U+0061"},
    {"\xc3\xa9\xc3\xa9", "2 U+00E9"},
    {"\xe4\xbf\xae\xff", "3 U+4FEE"},
    // Overlong forms.
    {"\xc0\xaf", "0"},  // "/" in two bytes
    {"\xc1\xbf", "0"},
    {"\xe0\x80\x80", "0"},
    {"\xe0\x9f\xbf", "0"},  // U+07FF in three bytes
    {"\xf0\x80\x80\x80", "0"},
    {"\xf0\x8f\xbf\xbf", "0"},  // U+FFFF in four bytes
    // Surrogates, and their neighbours.
    {"\xed\x9f\xbf", "3 U+D7FF"},
    {"\xed\xa0\x80", "0"},  // U+D800
    {"\xed\xbf\xbf", "0"},  // U+DFFF
    {"\xee\x80\x80", "3 U+E000"},
    // Nothing above U+10FFFF.
    {"\xf4\x90\x80\x80", "0"},  // U+110000
    {"\xf5\x80\x80\x80", "0"},
    {"\xf7\xbf\xbf\xbf", "0"},
    // Bytes that start no character: continuation bytes, 0xf8..0xff.
    {"\x80", "0"},
    {"\xbf", "0"},
    {"\xf8\x88\x80\x80\x80", "0"},
    {"\xfe", "0"},
    {"\xff", "0"},
    // Sequences cut short, or broken by a byte that is no continuation byte.
    {"\xc3", "0"},
    {"\xe4\xbf", "0"},
    {"\xf0\x9f\x93", "0"},
    {"\xc3!", "0"},
    {"\xe4\xbf!", "0"},
    {"\xf0\x9f\x93!", "0"},
    {"\xc3\xc3\xa9", "0"},
    {"\xe4\xc0\x80", "0"},
};

TEST(DecodeUtf8Test, EveryBoundaryOfRfc3629FromBothSides) {
  for (const DecodeCase& c : kDecodeCases) {
    EXPECT_EQ(Decoded(c.bytes), c.decoded)
        << "bytes \""
        << absl::CHexEscape(absl::string_view(c.bytes.data(), c.bytes.size()))
        << "\"";
  }
}

TEST(InvalidUtf8OffsetTest, FindsTheFirstBadByte) {
  EXPECT_EQ(InvalidUtf8Offset(""), std::string_view::npos);
  EXPECT_EQ(InvalidUtf8Offset("plain"), std::string_view::npos);
  EXPECT_EQ(InvalidUtf8Offset("\xc3\xa9t\xc3\xa9 \xf0\x9f\x93\x88"),
            std::string_view::npos);
  EXPECT_EQ(InvalidUtf8Offset("fix\xff"), 3u);
  EXPECT_EQ(InvalidUtf8Offset("\xc3\xa9\xc3"), 2u);      // truncated
  EXPECT_EQ(InvalidUtf8Offset("ab\xe0\x80\x80"), 2u);    // overlong
  EXPECT_EQ(InvalidUtf8Offset("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(InvalidUtf8Offset("\xf4\x8f\xbf\xbf"), std::string_view::npos);
}

TEST(InvalidUtf8OffsetTest, CountsBytesNotCharacters) {
  // After "é" (2 bytes) and "修" (3 bytes) the surrogate starts at byte 5.
  EXPECT_EQ(InvalidUtf8Offset("\xc3\xa9\xe4\xbf\xae\xed\xa0\x80"), 5u);
  // A NUL is a character like any other.
  EXPECT_EQ(InvalidUtf8Offset(std::string_view("a\0b", 3)),
            std::string_view::npos);
  // The bad byte is the lead byte, not the continuation that broke it.
  EXPECT_EQ(InvalidUtf8Offset("ok\xe4\xbf!"), 2u);
}

TEST(ValidUtf8Test, EscapesOnlyTheBytesThatAreNotUtf8) {
  struct Case {
    std::string_view bytes;
    std::string_view valid;
  };
  const Case cases[] = {
      {"", ""},
      {"plain ascii", "plain ascii"},
      // Well-formed characters and controls are kept as they are.
      {"M\xc3\xbcller\n\t", "M\xc3\xbcller\n\t"},
      {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
      // Latin-1, a lone continuation byte, 0xff.
      {"M\xfcller", "M\\xfcller"},
      {"\x80", "\\x80"},
      {"a\xff"
       "b",
       "a\\xffb"},
      // An overlong form, a surrogate, above U+10FFFF: byte by byte.
      {"\xc0\xaf", "\\xc0\\xaf"},
      {"\xed\xa0\x80", "\\xed\\xa0\\x80"},
      {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},
      // Cut short at the end, after a good character.
      {"\xc3\xa9\xe2\x82", "\xc3\xa9\\xe2\\x82"},
  };
  for (const Case& c : cases) {
    const std::string got = ValidUtf8(c.bytes);
    EXPECT_EQ(got, c.valid) << absl::CHexEscape(std::string(c.bytes));
    EXPECT_EQ(InvalidUtf8Offset(got), std::string_view::npos)
        << absl::CHexEscape(std::string(c.bytes));
  }
}

}  // namespace
}  // namespace text_utf8_test
}  // namespace text
}  // namespace backfill
