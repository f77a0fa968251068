#include "server/log_text.h"

#include "text/display_text.h"

namespace backfill {

std::string LogText(std::string_view text, size_t max_bytes) {
  text::DisplayOptions options;
  options.escape_backslash = true;
  return text::TruncatedDisplayText(text, max_bytes, options);
}

}  // namespace backfill
