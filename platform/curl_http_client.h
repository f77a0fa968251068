// CurlHttpClient: HttpClient over libcurl's easy interface. Each Send uses
// its own easy handle, so concurrent calls share nothing; redirects are not
// followed, only http and https are allowed, and no signal is used for
// timeouts. No proxy is ever used (proxy variables in the environment are
// ignored): requests go straight to the URL's host. A header whose name or
// value holds CR, LF or NUL (or whose name holds a colon) is refused
// (INVALID_ARGUMENT naming the header, never its value) before anything is
// sent. libcurl's global state is set up once, on the first construction, and
// never torn down. Thread-safe.

#ifndef BACKFILL_PLATFORM_CURL_HTTP_CLIENT_H_
#define BACKFILL_PLATFORM_CURL_HTTP_CLIENT_H_

#include "core/ports/http_client.h"

namespace backfill {

class CurlHttpClient final : public HttpClient {
 public:
  CurlHttpClient();

  absl::StatusOr<HttpResponse> Send(const HttpRequest& request) override;
};

}  // namespace backfill

#endif  // BACKFILL_PLATFORM_CURL_HTTP_CLIENT_H_
