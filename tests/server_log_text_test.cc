// Unit tests of server/log_text.h: free text made safe for one log line
// (LogText). Expectations follow the escapes documented in log_text.h. The
// UTF-8 rule and the escaping itself are tested in tests/text_*_test.cc.

#include <string>
#include <string_view>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/log_text.h"

namespace backfill {
namespace server_log_text_test {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(LogTextTest, PlainAsciiIsUnchanged) {
  EXPECT_EQ(LogText("refunds double counted since 2025-03 (DATA-123)"),
            "refunds double counted since 2025-03 (DATA-123)");
  EXPECT_EQ(LogText(""), "");
}

TEST(LogTextTest, NewlineCannotForgeALogLine) {
  const std::string reason =
      "typo\n[2025-11-30 00:00:00.000] [backfilld] [info] job bf-7: RUNNING "
      "-> SUCCEEDED: all good";
  const std::string logged = LogText(reason);
  EXPECT_EQ(logged.find('\n'), std::string::npos) << logged;
  EXPECT_EQ(logged.find('\r'), std::string::npos) << logged;
  EXPECT_EQ(logged,
            "typo\\n[2025-11-30 00:00:00.000] [backfilld] [info] job bf-7: "
            "RUNNING -> SUCCEEDED: all good");
  EXPECT_EQ(LogText("a\r\nb\rc"), "a\\r\\nb\\rc");
}

TEST(LogTextTest, ControlCharactersAndAnsiEscapesAreEscaped) {
  EXPECT_EQ(LogText("a\tb"), "a\\tb");
  EXPECT_EQ(LogText(std::string_view("nul\0end", 7)), "nul\\x00end");
  EXPECT_EQ(LogText("\x01\x1f\x7f"), "\\x01\\x1f\\x7f");
  // An ANSI sequence that would clear the screen and colour the rest red.
  const std::string logged = LogText("\x1b[2J\x1b[31mred");
  EXPECT_EQ(logged, "\\x1b[2J\\x1b[31mred");
  EXPECT_EQ(logged.find('\x1b'), std::string::npos);
}

TEST(LogTextTest, BackslashIsEscapedSoEscapesAreUnambiguous) {
  // A literal backslash-n typed by the user differs from a newline.
  EXPECT_EQ(LogText("a\\nb"), "a\\\\nb");
  EXPECT_NE(LogText("a\\nb"), LogText("a\nb"));
}

TEST(LogTextTest, ValidMultiByteUtf8StaysReadable) {
  const std::string text =
      "r\xc3\xa9"
      "parer les remboursements \xe2\x80\x94 \xe4\xbf\xae\xe6\xad\xa3 "
      "\xf0\x9f\x93\x88";  // "réparer les remboursements — 修正 📈"
  EXPECT_EQ(LogText(text), text);
}

TEST(LogTextTest, InvalidUtf8BytesAreEscapedOneByOne) {
  EXPECT_EQ(LogText("a\xff"
                    "b"),
            "a\\xffb");
  // A lone continuation byte, a truncated sequence at the end.
  EXPECT_EQ(LogText("\x80z\xe4\xbf"), "\\x80z\\xe4\\xbf");
  // Overlong "/" and an encoded surrogate are not UTF-8.
  EXPECT_EQ(LogText("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(LogText("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  // A valid character right after an invalid byte is kept.
  EXPECT_EQ(LogText("\xff\xc3\xa9"), "\\xff\xc3\xa9");
}

TEST(LogTextTest, InvisibleLineBreaksAndBidiControlsAreEscaped) {
  EXPECT_EQ(LogText("a\xe2\x80\xa8"
                    "b"),
            "a\\u2028b");  // LINE SEPARATOR
  EXPECT_EQ(LogText("\xe2\x80\xae"
                    "cba"),
            "\\u202Ecba");  // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(LogText("\xc2\x9b"
                    "31m"),
            "\\u009B31m");  // C1 CSI
}

TEST(LogTextTest, LongValuesAreTruncatedWithAMarker) {
  const std::string text(5000, 'x');
  const std::string logged = LogText(text, 100);
  EXPECT_THAT(logged, StartsWith(std::string(100, 'x')));
  EXPECT_THAT(logged, EndsWith("...[truncated, 5000 bytes]"));
  EXPECT_EQ(logged.size(),
            100 + std::string("...[truncated, 5000 bytes]").size());
  EXPECT_THAT(LogText(text), HasSubstr("[truncated, 5000 bytes]"));
  EXPECT_LE(LogText(text).size(), kLogTextMaxBytes + 40);
  // Exactly at the limit: nothing is cut.
  EXPECT_EQ(LogText(std::string(100, 'y'), 100), std::string(100, 'y'));
}

TEST(LogTextTest, TruncationNeverSplitsACharacterOrAnEscape) {
  // "é" is two bytes: with a limit of 3 only one fits.
  EXPECT_EQ(LogText("\xc3\xa9\xc3\xa9", 3), "\xc3\xa9...[truncated, 4 bytes]");
  // "\n" becomes two characters: with a limit of 2 only "a" fits after it.
  EXPECT_EQ(LogText("a\nb", 2), "a...[truncated, 3 bytes]");
  EXPECT_THAT(LogText("a\nb", 2), Not(HasSubstr("\\")));
}

}  // namespace
}  // namespace server_log_text_test
}  // namespace backfill
