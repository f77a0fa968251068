// HttpApiServer: backfilld's HTTP port (--http-listen): the HTTP/JSON API
// under /v1/ (server/http_routes.h, in the canonical JSON mapping of
// server/http_json.h) and the console under /ui/.
//
// Every API call goes through the same steps as over gRPC, with the same
// rules: the route names the RPC; CallAuth (server/call_auth.h) admits the
// caller from its "Authorization: Bearer" header or client certificate,
// with the same tokens and roles, before the request is interpreted; the
// body is limited in size (--max-message-bytes); the request message is
// built from the path, the query string or the body; then the method of
// BackfillApi (server/backfill_api.h) answers, which the gRPC handlers call
// too. A watch (`GET /v1/backfills/{id}:watch`) is answered as server-sent
// events and counts against the caller's watch streams like a gRPC one.
//
// Every response carries `Cache-Control: no-store`,
// `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY` and
// `Referrer-Policy: no-referrer`. Credentials travel only in headers,
// never in cookies, and no CORS header is ever sent, so another site's page
// cannot make a call on a user's behalf (CSRF); a request whose Origin is
// another site, or (without tokens) whose Host is a name other than this
// port's own, is refused.
//
// The server is cpp-httplib, with a fixed pool of threads (each serves one
// connection at a time; a watch holds one while it lasts). TLS (--tls-cert,
// --tls-key, --tls-client-ca) uses the same files as the gRPC port.
//
// Owns the HTTP server and its threads; borrows the API and the
// authorization, which must outlive it. Thread-safe: the server calls the
// handlers concurrently, and they keep no state of their own.

#ifndef BACKFILL_SERVER_HTTP_API_H_
#define BACKFILL_SERVER_HTTP_API_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/backfill_api.h"
#include "server/call_auth.h"
#include "server/http_routes.h"

namespace prometheus {
class Counter;
template <typename T>
class Family;
class Registry;
}  // namespace prometheus

namespace httplib {
class Server;
class ContentReader;
struct Request;
struct Response;
}  // namespace httplib

namespace backfill {

struct HttpApiOptions {
  std::string listen;  // HOST:PORT or [IPV6]:PORT; port 0: any free port
  // PEM files as for the gRPC port; "": plaintext.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;  // "": no client certificate asked for
  // The largest request body; a larger one is refused (RESOURCE_EXHAUSTED).
  int64_t max_body_bytes = 4 << 20;
  // Connections served at once.
  int threads = 32;
  // How long reading a request or writing a response may stall.
  absl::Duration io_timeout = absl::Seconds(30);
  // Where the requests are counted,
  //   backfill_http_requests_total{method, code}
  // (method: the RPC's name, "console" for /ui/, "none" for no route);
  // null: not counted. Not owned; must outlive the server.
  prometheus::Registry* registry = nullptr;
};

class HttpApiServer {
 public:
  // Starts serving; UNAVAILABLE when the address cannot be bound,
  // INVALID_ARGUMENT for TLS files it cannot use.
  static absl::StatusOr<std::unique_ptr<HttpApiServer>> Start(
      const HttpApiOptions& options, BackfillApi* api, const CallAuth* auth);

  HttpApiServer(const HttpApiServer&) = delete;
  HttpApiServer& operator=(const HttpApiServer&) = delete;

  // Stops accepting, ends the connections, joins the threads. Open watches
  // end first when the API was told it shuts down (BackfillApi::
  // BeginShutdown), within a poll.
  ~HttpApiServer();

  // The port bound (the one asked for, or the one picked for port 0).
  int port() const { return port_; }
  bool tls() const { return !options_.tls_cert_file.empty(); }

 private:
  HttpApiServer(const HttpApiOptions& options, BackfillApi* api,
                const CallAuth* auth);

  // Every request, whatever its path; `reader` reads its body (null: a
  // request read whole, with no body to speak of).
  void Serve(const httplib::Request& request, httplib::Response& response,
             const httplib::ContentReader* reader);
  // An API call, its route already matched (`path_known`: some route
  // has the path under another verb).
  void ServeApi(const httplib::Request& request, httplib::Response& response,
                const httplib::ContentReader* reader,
                const std::optional<HttpRouteMatch>& match, bool path_known);
  void ServeConsole(const httplib::Request& request,
                    httplib::Response& response);
  // Counts one answered request (no-op without a registry).
  void Count(const std::string& method, int status);
  // GET /ui/session: who the caller is and which methods it may call, for
  // the console to show only the actions it may take.
  void ServeSession(const httplib::Request& request,
                    httplib::Response& response);

  const HttpApiOptions options_;
  BackfillApi* const api_;
  const CallAuth* const auth_;
  prometheus::Family<prometheus::Counter>* requests_ = nullptr;
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  int port_ = 0;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_HTTP_API_H_
