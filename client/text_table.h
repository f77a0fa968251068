// TextTable: a left-aligned text table for backfillctl's listings, with a
// header row and two spaces between columns; the last column is not padded
// and trailing spaces are cut. Widths are counted in bytes: cells are
// expected to be TerminalText() already (client/value_format.h).
//
// A value that owns its rows. Thread-safety: not thread-safe; build and
// render it on one thread.

#ifndef BACKFILL_CLIENT_TEXT_TABLE_H_
#define BACKFILL_CLIENT_TEXT_TABLE_H_

#include <string>
#include <vector>

namespace backfill {
namespace cli {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header);

  void AddRow(std::vector<std::string> row);

  // Every row, the header first, each ending in "\n".
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_TEXT_TABLE_H_
