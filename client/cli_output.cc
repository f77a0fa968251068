#include "client/cli_output.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/cli_format.h"
#include "client/cli_terms.h"
#include "client/rpc_error.h"

namespace backfill {
namespace cli {

// Prints `backfillctl: MESSAGE` on stderr (one line, control characters
// escaped) and returns `code`.
int Fail(int code, absl::string_view message) {
  std::cerr << "backfillctl: "
            << cli::TerminalText(
                   absl::StrReplaceAll(message, {{"\n", " "}, {"\r", " "}}))
            << std::endl;
  return code;
}

int CliOutput::RpcError(const absl::Status& status,
                        absl::string_view more) const {
  // The server names request fields and methods in API terms; say them as
  // this CLI's flags and commands, and name the flags of refused fields the
  // message does not mention.
  std::string line = absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                                  cli::InCliTerms(status.message()));
  std::vector<std::string> flags;
  for (const RpcFieldViolation& violation : FieldViolationsOf(status)) {
    std::optional<std::string> flag = cli::FlagOfField(violation.field);
    if (!flag.has_value() || absl::StrContains(line, *flag) ||
        std::find(flags.begin(), flags.end(), *flag) != flags.end()) {
      continue;
    }
    flags.push_back(*flag);
  }
  if (!flags.empty()) {
    absl::StrAppend(&line, " (", absl::StrJoin(flags, ", "), ")");
  }
  if (status.code() == absl::StatusCode::kUnavailable) {
    absl::StrAppend(&line, "; is backfilld running at ", globals_.server, "?");
    if (absl::StrContains(status.message(), "Socket closed")) {
      // A server that closes the connection at once often wants TLS, or a
      // client certificate.
      absl::StrAppend(&line,
                      globals_.security.tls
                          ? " (if it requires a client certificate, give "
                            "--tls-cert and --tls-key)"
                          : " (if it serves TLS, give --tls-ca)");
    }
  } else if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    absl::StrAppend(&line, " (after ", globals_.timeout_seconds,
                    " s; raise with --timeout)");
  } else if (status.code() == absl::StatusCode::kUnauthenticated) {
    absl::StrAppend(&line,
                    globals_.token.empty()
                        ? " (no token was sent: give one with "
                          "$BACKFILL_TOKEN or --token)"
                        : " (the token given with $BACKFILL_TOKEN or --token "
                          "was refused)");
  }
  absl::StrAppend(&line, more);
  return Fail(kExitFailure, line);
}

int CliOutput::Print(const google::protobuf::Message& message,
                     const std::string& human) const {
  if (!globals_.json) {
    std::cout << human << std::flush;
    return kExitOk;
  }
  absl::StatusOr<std::string> json = cli::ToJson(message);
  if (!json.ok()) return Fail(kExitFailure, json.status().message());
  std::cout << *json;
  if (json->empty() || json->back() != '\n') std::cout << "\n";
  std::cout << std::flush;
  return kExitOk;
}

}  // namespace cli
}  // namespace backfill
