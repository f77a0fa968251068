// HttpApiServer: backfilld's HTTP port (--http-listen): the HTTP/JSON API
// under /v1/ (server/http_routes.h, in the canonical JSON mapping of
// server/http_json.h) and the console under /ui/.
//
// Every API call goes through the same steps as over gRPC, with the same
// rules: the route names the RPC; CallAuth (server/call_auth.h) admits the
// caller from its "Authorization: Bearer" header or client certificate,
// with the same tokens and roles, before anything else is read; the request
// is limited in size (--max-message-bytes) and built from the path, the
// query string or the body; then the method of BackfillApi
// (server/backfill_api.h) answers, which the gRPC handlers call too. A
// watch (`GET /v1/backfills/{id}:watch`) is answered as server-sent events
// and counts against the caller's watch streams like a gRPC one. Responses
// carry `Cache-Control: no-store`, `X-Content-Type-Options: nosniff` and,
// for pages, a Content-Security-Policy that allows nothing from elsewhere;
// credentials travel only in headers, never in cookies, so another site's
// page cannot make a call on a user's behalf (CSRF).
//
// The server is civetweb, with a fixed pool of threads (one per open
// connection; a watch holds one while it lasts). TLS (--tls-cert,
// --tls-key, --tls-client-ca) is set up through OpenSSL as on the gRPC
// port.
//
// Owns the civetweb context; borrows the API and the authorization, which
// must outlive it. Thread-safe: civetweb calls the handlers concurrently,
// and they keep no state of their own.

#ifndef BACKFILL_SERVER_HTTP_API_H_
#define BACKFILL_SERVER_HTTP_API_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/backfill_api.h"
#include "server/call_auth.h"

struct mg_context;
struct mg_connection;
struct mg_request_info;

namespace backfill {

struct HttpApiOptions {
  std::string listen;  // HOST:PORT, IPv4 or a name; port 0: any free port
  // PEM files as for the gRPC port; "": plaintext.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;  // "": no client certificate asked for
  int64_t max_body_bytes = 4 << 20;
  // Connections served at once (each holds a thread).
  int threads = 48;
  // How long reading a request or writing a response may stall.
  absl::Duration io_timeout = absl::Seconds(30);
};

class HttpApiServer {
 public:
  // Starts serving; UNAVAILABLE when the address cannot be bound,
  // INVALID_ARGUMENT for an address or TLS file it cannot use.
  static absl::StatusOr<std::unique_ptr<HttpApiServer>> Start(
      const HttpApiOptions& options, BackfillApi* api, const CallAuth* auth);

  HttpApiServer(const HttpApiServer&) = delete;
  HttpApiServer& operator=(const HttpApiServer&) = delete;

  // Stops: open connections are closed (watches end), then the threads
  // are joined.
  ~HttpApiServer();

  // The port bound (the one asked for, or the one picked for port 0).
  int port() const { return port_; }
  bool tls() const { return !options_.tls_cert_file.empty(); }

 private:
  HttpApiServer(const HttpApiOptions& options, BackfillApi* api,
                const CallAuth* auth);

  static int HandleApi(mg_connection* conn, void* self);
  static int HandleConsole(mg_connection* conn, void* self);
  static int InitTls(void* ssl_ctx, void* self);

  int ServeApi(mg_connection* conn);
  int ServeConsole(mg_connection* conn);
  // GET /ui/session: who the caller is and which methods it may call, for
  // the console to show only the actions it may take.
  int ServeSession(mg_connection* conn, const mg_request_info* request);

  const HttpApiOptions options_;
  BackfillApi* const api_;
  const CallAuth* const auth_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_HTTP_API_H_
