#include "server/console_assets.h"

#include <algorithm>

namespace backfill {

const ConsoleAsset* FindConsoleAsset(std::string_view path) {
  const ConsoleAsset* begin = console_internal::kConsoleAssets;
  const ConsoleAsset* end = begin + console_internal::kConsoleAssetCount;
  const ConsoleAsset* it = std::lower_bound(
      begin, end, path, [](const ConsoleAsset& asset, std::string_view p) {
        return asset.path < p;
      });
  if (it == end || it->path != path) return nullptr;
  return it;
}

std::vector<const ConsoleAsset*> AllConsoleAssets() {
  std::vector<const ConsoleAsset*> assets;
  assets.reserve(console_internal::kConsoleAssetCount);
  for (size_t i = 0; i < console_internal::kConsoleAssetCount; ++i) {
    assets.push_back(&console_internal::kConsoleAssets[i]);
  }
  return assets;
}

}  // namespace backfill
