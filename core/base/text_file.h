// ReadTextFile: the whole content of a small configuration file (a token
// file, a credentials file), with an error that names the file and says
// what it is for. NOT_FOUND when it does not exist (or cannot be opened for
// another reason), PERMISSION_DENIED when it may not be read, DATA_LOSS
// when reading it failed midway.
//
// A pure function of the file system; thread-safe.

#ifndef BACKFILL_CORE_BASE_TEXT_FILE_H_
#define BACKFILL_CORE_BASE_TEXT_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace backfill {

// `what` names the file in errors, e.g. "the token file".
absl::StatusOr<std::string> ReadTextFile(const std::string& path,
                                         const std::string& what);

}  // namespace backfill

#endif  // BACKFILL_CORE_BASE_TEXT_FILE_H_
