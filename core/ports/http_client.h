// HttpClient: the HTTP calls the daemon makes (invalidating and probing
// downstream consumers, sending lineage events). The core sees only this
// interface; platform/curl_http_client.h implements it with libcurl, and
// tests answer in process. Implementations are thread-safe: one client
// serves every job.

#ifndef BACKFILL_CORE_PORTS_HTTP_CLIENT_H_
#define BACKFILL_CORE_PORTS_HTTP_CLIENT_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace backfill {

struct HttpRequest {
  std::string method = "GET";  // GET or POST
  std::string url;             // http:// or https:// only
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // sent as is (POST)
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration timeout = absl::Seconds(30);  // the whole exchange
  size_t max_response_bytes = size_t{1} << 20;
};

struct HttpResponse {
  int status = 0;  // the HTTP status code
  std::string body;
};

class HttpClient {
 public:
  virtual ~HttpClient() = default;

  // The server's answer, whatever its status code. Errors when no answer
  // came, with a message naming the URL and the cause:
  //   INVALID_ARGUMENT   the URL is malformed or not http(s)
  //   DEADLINE_EXCEEDED  no complete answer within the timeouts
  //   RESOURCE_EXHAUSTED the body is longer than max_response_bytes
  //   UNAVAILABLE        anything else (refused, DNS, TLS, reset)
  virtual absl::StatusOr<HttpResponse> Send(const HttpRequest& request) = 0;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PORTS_HTTP_CLIENT_H_
