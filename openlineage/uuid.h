// Name-based UUIDs (RFC 4122 version 5): the SHA-1 of a namespace UUID and a
// name, so that the same name always gives the same UUID. OpenLineage run
// ids are made this way from the state store's id and the job id, so that
// every event about one job, before and after a restart, names one run.
//
// SHA-1 is OpenSSL's (libcrypto). Stateless free functions; thread-safe.

#ifndef BACKFILL_OPENLINEAGE_UUID_H_
#define BACKFILL_OPENLINEAGE_UUID_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace backfill::openlineage {

using Uuid = std::array<uint8_t, 16>;

// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", lower-case hex.
std::string FormatUuid(const Uuid& uuid);

// The canonical text form (either letter case); INVALID_ARGUMENT otherwise.
absl::StatusOr<Uuid> ParseUuid(std::string_view text);

// The version 5 UUID of `name` (its bytes as given, usually UTF-8) in
// `name_space`.
Uuid NameBasedUuid(const Uuid& name_space, std::string_view name);

}  // namespace backfill::openlineage

#endif  // BACKFILL_OPENLINEAGE_UUID_H_
