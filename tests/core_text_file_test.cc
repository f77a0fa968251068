// ReadTextFile: the exact bytes of a file, or an error naming it.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/base/text_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_text_file_test {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class TextFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "text-file-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(TextFileTest, ReadsEveryByte) {
  const std::string path = dir_ + "/tokens.yaml";
  static constexpr char kBytes[] = "tokens:\n  - {a: \"\xc3\xa9\"}\r\n\0tail";
  const std::string bytes(kBytes, sizeof(kBytes) - 1);  // keeps the NUL
  ASSERT_EQ(bytes.size(), 28u);
  std::ofstream(path, std::ios::binary) << bytes;
  absl::StatusOr<std::string> text = ReadTextFile(path, "the token file");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, bytes);
}

TEST_F(TextFileTest, AMissingFileIsNotFoundNamingIt) {
  const std::string path = dir_ + "/missing.yaml";
  absl::StatusOr<std::string> text = ReadTextFile(path, "the token file");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(text.status().message(),
              HasSubstr("cannot read the token file " + path));
}

}  // namespace
}  // namespace core_text_file_test
}  // namespace backfill
