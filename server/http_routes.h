// HttpRoutes: the HTTP/JSON face of backfill.v1.BackfillService, declared
// once. Each route maps an HTTP verb and a path template, in the style of
// google.api.http ("/v1/backfills/{id}:cancel"), to the RPC it calls, and
// says whether the request message comes from the JSON body ("*") or from
// the query string. Variables of the template name fields of the request
// message; the last segment's variable takes the rest of the path (a
// partition value may hold a '/'), up to the custom verb after its last
// ':'.
//
// Every method of the service has at least one route: the test of this
// table fails for a method added to the .proto without one.
//
// Values only; thread-safe.

#ifndef BACKFILL_SERVER_HTTP_ROUTES_H_
#define BACKFILL_SERVER_HTTP_ROUTES_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace backfill {

struct HttpRoute {
  absl::string_view verb;      // "GET", "POST"
  absl::string_view path;      // "/v1/backfills/{id}:cancel"
  absl::string_view method;    // the RPC: "CancelBackfill"
  bool body = false;           // the request is the JSON body ("*")
  bool server_stream = false;  // answered as server-sent events
};

// Every route, in the order the API reference lists them.
const std::vector<HttpRoute>& HttpRoutes();

// A route that matched a request, with the values of its variables
// (URL-decoded), by field name.
struct HttpRouteMatch {
  const HttpRoute* route = nullptr;
  std::map<std::string, std::string> variables;
};

// The route of `verb` and `path` (decoded, without the query string), or
// nullopt. `path_known` (optional) is set when some route has the path
// under another verb: the answer is then 405, not 404.
std::optional<HttpRouteMatch> MatchHttpRoute(absl::string_view verb,
                                             absl::string_view path,
                                             bool* path_known = nullptr);

}  // namespace backfill

#endif  // BACKFILL_SERVER_HTTP_ROUTES_H_
