// Unit tests of text/display_text.h: the display form of free text, one
// piece per character (DisplayPieces), joined (DisplayText) and cut to a
// size (TruncatedDisplayText). Expectations follow the escapes documented in
// display_text.h: each class of escape at its boundaries, the backslash
// option, and cuts that never split a character or an escape.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "text/display_text.h"

namespace backfill {
namespace text {
namespace text_display_text_test {
namespace {

using ::testing::ElementsAre;
using ::testing::EndsWith;

constexpr DisplayOptions kEscapeBackslash{/*escape_backslash=*/true};

struct EscapeCase {
  std::string_view text;
  const char* shown;  // DisplayText(text), whatever escape_backslash says
};

constexpr EscapeCase kEscapeCases[] = {
    // Printable text in any language is kept.
    {"", ""},
    {" ~refunds (DATA-123)", " ~refunds (DATA-123)"},
    {"r\xc3\xa9parer \xe2\x80\x94 \xe4\xbf\xae\xe6\xad\xa3 \xf0\x9f\x93\x88",
     "r\xc3\xa9parer \xe2\x80\x94 \xe4\xbf\xae\xe6\xad\xa3 \xf0\x9f\x93\x88"},
    // Invisible but harmless: no-break space, zero-width joiner, BOM.
    {"\xc2\xa0\xe2\x80\x8d\xef\xbb\xbf", "\xc2\xa0\xe2\x80\x8d\xef\xbb\xbf"},
    // Newline, carriage return and tab have short escapes.
    {"a\nb\rc\td", "a\\nb\\rc\\td"},
    // Other ASCII controls and DEL: hex, lower case.
    {std::string_view("\0", 1), "\\x00"},
    {"\x01\x07\x08\x0b\x0c\x1f", "\\x01\\x07\\x08\\x0b\\x0c\\x1f"},
    {"\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"},
    {"del\x7f", "del\\x7f"},
    // Bytes that are not UTF-8, one by one.
    {"caf\xe9", "caf\\xe9"},
    {"\x80\xbf\xfe\xff", "\\x80\\xbf\\xfe\\xff"},
    {"\xc0\xaf", "\\xc0\\xaf"},                    // overlong
    {"\xed\xa0\x80", "\\xed\\xa0\\x80"},           // surrogate
    {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},  // above U+10FFFF
    {"z\xe4\xbf", "z\\xe4\\xbf"},                  // cut short
    // ... and the character right after a bad byte is read afresh.
    {"\xff\xc3\xa9", "\\xff\xc3\xa9"},
    {"\xe4\xbf\n", "\\xe4\\xbf\\n"},
    // C1 controls: \uNNNN, upper case; U+00A0 is printable.
    {"\xc2\x80", "\\u0080"},
    {"\xc2\x85", "\\u0085"},
    {"\xc2\x9b[31m", "\\u009B[31m"},
    {"\xc2\x9f", "\\u009F"},
    {"\xc2\xa0", "\xc2\xa0"},
    // Bidi marks, line and paragraph separators, embeddings and overrides,
    // isolates: \uNNNN; their neighbours are kept.
    {"\xe2\x80\x8d", "\xe2\x80\x8d"},
    {"\xe2\x80\x8e\xe2\x80\x8f", "\\u200E\\u200F"},
    {"\xe2\x80\xa7", "\xe2\x80\xa7"},
    {"a\xe2\x80\xa8z\xe2\x80\xa9", "a\\u2028z\\u2029"},
    {"\xe2\x80\xaa\xe2\x80\xae!", "\\u202A\\u202E!"},
    {"\xe2\x80\xaf", "\xe2\x80\xaf"},
    {"\xe2\x81\xa5", "\xe2\x81\xa5"},
    {"\xe2\x81\xa6\xe2\x81\xa9", "\\u2066\\u2069"},
    {"\xe2\x81\xaa", "\xe2\x81\xaa"},
};

TEST(DisplayTextTest, EachClassOfEscapeAtItsBoundaries) {
  for (const EscapeCase& c : kEscapeCases) {
    const std::string bytes =
        absl::CHexEscape(absl::string_view(c.text.data(), c.text.size()));
    EXPECT_EQ(DisplayText(c.text), c.shown) << "text \"" << bytes << "\"";
    EXPECT_EQ(DisplayText(c.text, kEscapeBackslash), c.shown)
        << "text \"" << bytes << "\"";
  }
}

TEST(DisplayTextTest, BackslashesAreEscapedOnlyWhenAsked) {
  EXPECT_EQ(DisplayText("C:\\tmp\\n"), "C:\\tmp\\n");
  EXPECT_EQ(DisplayText("C:\\tmp\\n", kEscapeBackslash), "C:\\\\tmp\\\\n");
  // Escaped, a typed backslash-n and a newline read differently; kept, they
  // read alike (the terminal form is for reading only).
  EXPECT_NE(DisplayText("a\\nb", kEscapeBackslash),
            DisplayText("a\nb", kEscapeBackslash));
  EXPECT_EQ(DisplayText("a\\nb"), DisplayText("a\nb"));
  EXPECT_THAT(DisplayPieces("\\", kEscapeBackslash), ElementsAre("\\\\"));
  EXPECT_THAT(DisplayPieces("\\"), ElementsAre("\\"));
}

TEST(DisplayPiecesTest, OnePiecePerCharacterOrBadByte) {
  EXPECT_TRUE(DisplayPieces("").empty());
  const std::string text = "a\n\xc3\xa9\xff\xe2\x80\xae\xf0\x9f\x93\x88\\\x1b";
  EXPECT_THAT(DisplayPieces(text),
              ElementsAre("a", "\\n", "\xc3\xa9", "\\xff", "\\u202E",
                          "\xf0\x9f\x93\x88", "\\", "\\x1b"));
  for (const DisplayOptions options : {DisplayOptions{}, kEscapeBackslash}) {
    std::string joined;
    for (const std::string& piece : DisplayPieces(text, options)) {
      joined += piece;
    }
    EXPECT_EQ(joined, DisplayText(text, options));
  }
}

TEST(TruncatedDisplayTextTest, TextThatFitsIsNotCut) {
  EXPECT_EQ(TruncatedDisplayText("", 0), "");
  EXPECT_EQ(TruncatedDisplayText("abc", 3), "abc");
  // The limit is on the output: "\n" takes two bytes of it.
  EXPECT_EQ(TruncatedDisplayText("a\n", 3), "a\\n");
  EXPECT_EQ(TruncatedDisplayText("a\\", 3, kEscapeBackslash), "a\\\\");
}

TEST(TruncatedDisplayTextTest, CutTextEndsWithTheMarker) {
  EXPECT_EQ(TruncatedDisplayText("abcd", 3), "abc...[truncated, 4 bytes]");
  EXPECT_EQ(TruncatedDisplayText("abcd", 0), "...[truncated, 4 bytes]");
  // N is the size of the text given, not of its display form.
  const std::string text(5000, '\x01');
  const std::string cut = TruncatedDisplayText(text, 100);
  std::string expected;
  for (int i = 0; i < 25; ++i) expected += "\\x01";
  EXPECT_EQ(cut, expected + "...[truncated, 5000 bytes]");
}

TEST(TruncatedDisplayTextTest, NeverSplitsACharacter) {
  // "é" is two bytes, "📈" four: what does not fit whole is left out.
  EXPECT_EQ(TruncatedDisplayText("\xc3\xa9\xc3\xa9", 3),
            "\xc3\xa9...[truncated, 4 bytes]");
  EXPECT_EQ(TruncatedDisplayText("a\xf0\x9f\x93\x88", 4),
            "a...[truncated, 5 bytes]");
}

TEST(TruncatedDisplayTextTest, NeverSplitsAnEscape) {
  EXPECT_EQ(TruncatedDisplayText("a\nb", 2), "a...[truncated, 3 bytes]");
  EXPECT_EQ(TruncatedDisplayText("a\x1b", 4), "a...[truncated, 2 bytes]");
  EXPECT_EQ(TruncatedDisplayText("a\xff", 4), "a...[truncated, 2 bytes]");
  EXPECT_EQ(TruncatedDisplayText("a\xe2\x80\xae", 6),
            "a...[truncated, 4 bytes]");
  EXPECT_EQ(TruncatedDisplayText("a\\", 2, kEscapeBackslash),
            "a...[truncated, 2 bytes]");
  EXPECT_EQ(TruncatedDisplayText("a\\", 2), "a\\");
}

TEST(TruncatedDisplayTextTest, EveryCutIsAWholeNumberOfPieces) {
  const std::string text =
      "x\n\xc3\xa9\xff\xe2\x80\xae\\\xf0\x9f\x93\x88\x1b"
      "end";
  const std::string marker =
      "...[truncated, " + std::to_string(text.size()) + " bytes]";
  for (const DisplayOptions options : {DisplayOptions{}, kEscapeBackslash}) {
    const std::vector<std::string> pieces = DisplayPieces(text, options);
    const std::string whole = DisplayText(text, options);
    for (size_t max_bytes = 0; max_bytes <= whole.size() + 1; ++max_bytes) {
      SCOPED_TRACE(max_bytes);
      const std::string cut = TruncatedDisplayText(text, max_bytes, options);
      if (max_bytes >= whole.size()) {
        EXPECT_EQ(cut, whole);
        continue;
      }
      ASSERT_THAT(cut, EndsWith(marker));
      const std::string kept = cut.substr(0, cut.size() - marker.size());
      // The longest run of whole pieces that fits.
      std::string expected;
      for (const std::string& piece : pieces) {
        if (expected.size() + piece.size() > max_bytes) break;
        expected += piece;
      }
      EXPECT_EQ(kept, expected);
    }
  }
}

}  // namespace
}  // namespace text_display_text_test
}  // namespace text
}  // namespace backfill
