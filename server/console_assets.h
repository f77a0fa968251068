// console_assets: the files of the browser console (server/console/) that
// the daemon serves under /ui/, compiled into the binary so that the daemon
// needs no files beside it and always serves the console of its own
// version. The build (cmake/EmbedFiles.cmake, run by server/CMakeLists.txt
// whenever a file of server/console/ changes) turns every file of that
// directory into one ConsoleAsset: its path relative to server/console/
// ("index.html", "js/api.js"), its Content-Type (from the extension), its
// bytes exactly as in the source tree, and a strong ETag (128 bits of the
// SHA-256 of the bytes, quoted as the header carries it).
//
// What the console is and the API it calls are in server/console/index.html
// and server/console/js/api.js; this unit only holds the bytes. Serving them
// (mapping /ui/ to index.html, headers, If-None-Match) is the HTTP server's.
//
// The assets are constants with static storage duration, owned by the
// program: pointers and views stay valid for its whole life. Thread-safe:
// the functions only read them.

#ifndef BACKFILL_SERVER_CONSOLE_ASSETS_H_
#define BACKFILL_SERVER_CONSOLE_ASSETS_H_

#include <cstddef>
#include <string_view>
#include <vector>

namespace backfill {

struct ConsoleAsset {
  // Relative to server/console/, with '/' separators: "index.html",
  // "js/api.js". No leading '/'.
  std::string_view path;
  // E.g. "text/html; charset=utf-8", "text/javascript; charset=utf-8".
  std::string_view content_type;
  // The file's bytes.
  std::string_view body;
  // A strong entity tag, with its double quotes: "\"3f2a...\"" (32 hex
  // digits).
  std::string_view etag;
};

// The asset at `path` (as ConsoleAsset::path spells it: "index.html", not
// "/ui/index.html" or "/index.html"), or nullptr when there is none. An
// exact match: "" and directories are nullptr.
const ConsoleAsset* FindConsoleAsset(std::string_view path);

// Every asset, sorted by path.
std::vector<const ConsoleAsset*> AllConsoleAssets();

namespace console_internal {
// Defined in the generated console_assets_data.cc, sorted by path.
extern const ConsoleAsset kConsoleAssets[];
extern const size_t kConsoleAssetCount;
}  // namespace console_internal

}  // namespace backfill

#endif  // BACKFILL_SERVER_CONSOLE_ASSETS_H_
