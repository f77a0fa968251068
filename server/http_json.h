// HttpJson: requests and answers of the HTTP API (server/http_api.h) in
// protobuf's canonical JSON mapping of the API's messages: lowerCamelCase
// names on output, either spelling on input; 64-bit integers as strings,
// enums by name, timestamps in RFC 3339.
//
// A request message is built from three places, as google.api.http does:
// the variables of the route's path, then either the JSON body (routes
// with a body) or the query string (the others), whose parameter names are
// field names, dotted for fields of nested messages (`request.dataset`),
// repeated for repeated fields. Anything that names no field, has the
// wrong type, or contradicts a path variable is INVALID_ARGUMENT naming
// the field (a BadRequest field violation), and the call changes nothing.
//
// Errors are answered with the HTTP status of their canonical code and a
// google.rpc.Status body with the same details as over gRPC (ErrorInfo,
// BadRequest).
//
// Pure functions; thread-safe.

#ifndef BACKFILL_SERVER_HTTP_JSON_H_
#define BACKFILL_SERVER_HTTP_JSON_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace backfill {

// A query string's parameters, decoded, in their order.
using QueryParams = std::vector<std::pair<std::string, std::string>>;

// Fills `request` (cleared first) from a call: `variables` of the path;
// `body` (the JSON object of a route with a body; must be empty without);
// `query` (a route without a body; must be empty with one).
absl::Status RequestFromHttp(
    const std::map<std::string, std::string>& variables, bool has_body,
    absl::string_view body, const QueryParams& query,
    google::protobuf::Message* request);

// `message` in the canonical JSON mapping.
std::string MessageToHttpJson(const google::protobuf::Message& message);

// The HTTP status of a canonical code (400 for INVALID_ARGUMENT,
// FAILED_PRECONDITION and OUT_OF_RANGE, 401, 403, 404, 409 for ABORTED and
// ALREADY_EXISTS, 429, 499 for CANCELLED, 501, 503, 504, 500 otherwise).
int HttpStatusOf(absl::StatusCode code);

// The body of an error: google.rpc.Status in the canonical JSON mapping,
// bounded as over gRPC (server/grpc_status.h).
std::string StatusToHttpJson(const absl::Status& status);

}  // namespace backfill

#endif  // BACKFILL_SERVER_HTTP_JSON_H_
