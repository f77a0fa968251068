// Tests of the embedded console (server/console_assets.h): every file of
// server/console/ is in the binary byte for byte with its content type and
// a strong ETag, lookups are exact, and the console asks nothing of another
// origin and nothing the daemon's Content-Security-Policy forbids (no
// inline script or style, no style attribute, no eval, no innerHTML).

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "server/console_assets.h"

namespace backfill {
namespace server_console_assets_test {
namespace {

namespace fs = std::filesystem;

fs::path ConsoleDir() {
  return fs::path(BACKFILL_SOURCE_DIR) / "server" / "console";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Every file under server/console/, by path relative to it ('/'
// separators), as the build embeds them: names starting with a dot left
// out.
std::map<std::string, std::string> SourceFiles() {
  std::map<std::string, std::string> files;
  for (const fs::directory_entry& entry :
       fs::recursive_directory_iterator(ConsoleDir())) {
    if (!entry.is_regular_file()) continue;
    const std::string relative =
        entry.path().lexically_relative(ConsoleDir()).generic_string();
    bool hidden = false;
    for (const fs::path& part : fs::path(relative)) {
      if (part.string().rfind('.', 0) == 0) hidden = true;
    }
    if (hidden) continue;
    files[relative] = ReadFile(entry.path());
  }
  return files;
}

std::string Extension(std::string_view path) {
  const size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? "" : std::string(path.substr(dot));
}

// The directory part of a path: "js/pages/job.js" -> "js/pages/".
std::string DirOf(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos
             ? ""
             : std::string(path.substr(0, slash + 1));
}

// `reference` (a relative URL or module specifier) resolved against the
// directory `base`; "" when it leaves the console's root.
std::string Resolve(const std::string& base, const std::string& reference) {
  std::vector<std::string> parts;
  std::string joined = base + reference;
  std::stringstream stream(joined);
  std::string part;
  while (std::getline(stream, part, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (parts.empty()) return "";
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

TEST(ConsoleAssetsTest, EveryFileOfTheConsoleIsEmbeddedByteForByte) {
  const std::map<std::string, std::string> files = SourceFiles();
  ASSERT_FALSE(files.empty()) << ConsoleDir();
  ASSERT_TRUE(files.count("index.html"));
  for (const auto& [path, bytes] : files) {
    const ConsoleAsset* asset = FindConsoleAsset(path);
    ASSERT_NE(asset, nullptr) << path << " is not embedded";
    EXPECT_EQ(asset->path, path);
    EXPECT_EQ(asset->body.size(), bytes.size()) << path;
    EXPECT_TRUE(asset->body == bytes) << path << " differs from the source";
  }
  // And nothing else: every embedded asset is a file of the source tree.
  const std::vector<const ConsoleAsset*> all = AllConsoleAssets();
  EXPECT_EQ(all.size(), files.size());
  for (const ConsoleAsset* asset : all) {
    EXPECT_TRUE(files.count(std::string(asset->path)))
        << asset->path << " is embedded but not in server/console/";
  }
}

TEST(ConsoleAssetsTest, AssetsAreSortedAndEachIsFoundAtItsPath) {
  const std::vector<const ConsoleAsset*> all = AllConsoleAssets();
  ASSERT_FALSE(all.empty());
  for (size_t i = 1; i < all.size(); ++i) {
    EXPECT_LT(all[i - 1]->path, all[i]->path);
  }
  for (const ConsoleAsset* asset : all) {
    EXPECT_EQ(FindConsoleAsset(asset->path), asset) << asset->path;
    EXPECT_NE(asset->path.front(), '/') << asset->path;
  }
}

TEST(ConsoleAssetsTest, ContentTypeFollowsTheExtension) {
  const std::map<std::string, std::string> types = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
  };
  for (const ConsoleAsset* asset : AllConsoleAssets()) {
    const auto it = types.find(Extension(asset->path));
    ASSERT_NE(it, types.end()) << asset->path;
    EXPECT_EQ(asset->content_type, it->second) << asset->path;
  }
  ASSERT_NE(FindConsoleAsset("index.html"), nullptr);
  EXPECT_EQ(FindConsoleAsset("index.html")->content_type,
            "text/html; charset=utf-8");
  ASSERT_NE(FindConsoleAsset("console.css"), nullptr);
  EXPECT_EQ(FindConsoleAsset("console.css")->content_type,
            "text/css; charset=utf-8");
  ASSERT_NE(FindConsoleAsset("js/main.js"), nullptr);
  EXPECT_EQ(FindConsoleAsset("js/main.js")->content_type,
            "text/javascript; charset=utf-8");
}

TEST(ConsoleAssetsTest, EtagsAreQuotedHashesThatDifferWithTheBody) {
  std::map<std::string_view, std::string_view> body_of_etag;
  const std::regex form("^\"[0-9a-f]{32}\"$");
  for (const ConsoleAsset* asset : AllConsoleAssets()) {
    const std::string etag(asset->etag);
    EXPECT_TRUE(std::regex_match(etag, form)) << asset->path << ": " << etag;
    auto [it, inserted] = body_of_etag.emplace(asset->etag, asset->body);
    if (!inserted) {
      EXPECT_EQ(it->second, asset->body)
          << "two different bodies share the ETag " << etag;
    }
  }
}

TEST(ConsoleAssetsTest, UnknownPathsAreNull) {
  for (std::string_view path :
       {"", "/", "/index.html", "/ui/index.html", "ui/index.html", "index.htm",
        "INDEX.HTML", "index.html/", "js", "js/", "./index.html",
        "js/../index.html", "../index.html", "nope.js", "js/nope.js"}) {
    EXPECT_EQ(FindConsoleAsset(path), nullptr) << "'" << path << "'";
  }
  EXPECT_EQ(FindConsoleAsset(std::string_view("index.html\0", 11)), nullptr);
}

TEST(ConsoleAssetsTest, IndexReferencesOnlyRelativeAssetsThatExist) {
  const ConsoleAsset* index = FindConsoleAsset("index.html");
  ASSERT_NE(index, nullptr);
  const std::string html(index->body);
  const std::regex attribute(R"re(\s(src|href)\s*=\s*"([^"]*)")re");
  int assets = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), attribute);
       it != std::sregex_iterator(); ++it) {
    const std::string url = (*it)[2];
    if (!url.empty() && url[0] == '#') continue;  // a route of the console
    SCOPED_TRACE(url);
    EXPECT_EQ(url.find(':'), std::string::npos) << "not a relative URL";
    EXPECT_NE(url.rfind("//", 0), 0u) << "protocol-relative URL";
    EXPECT_NE(url.rfind('/', 0), 0u) << "absolute path";
    EXPECT_NE(FindConsoleAsset(Resolve("", url)), nullptr) << "not embedded";
    ++assets;
  }
  EXPECT_GE(assets, 2);  // the stylesheet and the script at least
}

TEST(ConsoleAssetsTest, ModulesImportOnlyEmbeddedModules) {
  const std::regex import_from(
      R"re((?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s*'([^']+)')re");
  const std::regex side_import(R"re((?:^|\n)\s*import\s*'([^']+)')re");
  int imports = 0;
  for (const ConsoleAsset* asset : AllConsoleAssets()) {
    if (Extension(asset->path) != ".js") continue;
    const std::string text(asset->body);
    for (const std::regex* re : {&import_from, &side_import}) {
      for (auto it = std::sregex_iterator(text.begin(), text.end(), *re);
           it != std::sregex_iterator(); ++it) {
        const std::string specifier = (*it)[1];
        SCOPED_TRACE(std::string(asset->path) + " imports " + specifier);
        ASSERT_TRUE(specifier.rfind("./", 0) == 0 ||
                    specifier.rfind("../", 0) == 0)
            << "only relative imports";
        EXPECT_NE(FindConsoleAsset(Resolve(DirOf(asset->path), specifier)),
                  nullptr);
        ++imports;
      }
    }
  }
  EXPECT_GT(imports, 10);
}

TEST(ConsoleAssetsTest, NoAssetNamesAnotherOrigin) {
  for (const ConsoleAsset* asset : AllConsoleAssets()) {
    const std::string body(asset->body);
    EXPECT_EQ(body.find("http://"), std::string::npos) << asset->path;
    EXPECT_EQ(body.find("https://"), std::string::npos) << asset->path;
  }
}

// What the daemon's Content-Security-Policy (script-src 'self';
// style-src 'self') would block, and what would let API data become markup.
TEST(ConsoleAssetsTest, NothingTheContentSecurityPolicyForbids) {
  const ConsoleAsset* index = FindConsoleAsset("index.html");
  ASSERT_NE(index, nullptr);
  const std::string html(index->body);
  EXPECT_EQ(html.find("<style"), std::string::npos);
  EXPECT_EQ(html.find("style="), std::string::npos);
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(\son[a-z]+\s*=)")))
      << "inline event handler";
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(<script(?![^>]*\ssrc=))")))
      << "inline script";
  for (const ConsoleAsset* asset : AllConsoleAssets()) {
    if (Extension(asset->path) != ".js") continue;
    const std::string text(asset->body);
    SCOPED_TRACE(asset->path);
    for (const char* banned :
         {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
          "eval(", "new Function", "EventSource", "setAttribute('style'",
          "document.cookie", "localStorage"}) {
      EXPECT_EQ(text.find(banned), std::string::npos) << banned;
    }
  }
}

}  // namespace
}  // namespace server_console_assets_test
}  // namespace backfill
