#include "server/http_api.h"

#include <civetweb.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "core/base/error_details.h"
#include "google/protobuf/struct.pb.h"
#include "server/access_policy.h"
#include "server/daemon_options.h"
#include "server/http_json.h"
#include "server/http_routes.h"
#include "server/log_text.h"
#include "spdlog/spdlog.h"

namespace backfill {
namespace {

namespace pb = ::google::protobuf;

// Headers of every response.
constexpr absl::string_view kCommonHeaders[][2] = {
    {"Cache-Control", "no-store"},
    {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},
    {"X-Frame-Options", "DENY"},
};

// How often an idle watch sends a comment line, which also tells when
// its client has gone.
constexpr absl::Duration kWatchKeepAlive = absl::Seconds(15);

// A call of the API by its RPC's name: a new request message, and the
// method that answers it (unary: the answer's JSON; a stream: each update
// through `write`).
struct Dispatch {
  std::function<std::unique_ptr<pb::Message>()> new_request;
  std::function<absl::Status(BackfillApi*, const Caller&, const pb::Message&,
                             std::string*)>
      unary;
  std::function<absl::Status(BackfillApi*, const Caller&, const pb::Message&,
                             const std::function<bool(const v1::Backfill&)>&)>
      stream;
};

template <typename Req, typename Resp>
Dispatch Unary(absl::Status (BackfillApi::*method)(const Caller&, const Req&,
                                                   Resp*)) {
  Dispatch d;
  d.new_request = [] { return std::make_unique<Req>(); };
  d.unary = [method](BackfillApi* api, const Caller& caller,
                     const pb::Message& request, std::string* json) {
    Resp response;
    absl::Status s =
        (api->*method)(caller, static_cast<const Req&>(request), &response);
    if (s.ok()) *json = MessageToHttpJson(response);
    return s;
  };
  return d;
}

const std::map<absl::string_view, Dispatch>& Dispatches() {
  static const auto* const kDispatches = [] {
    auto* d = new std::map<absl::string_view, Dispatch>{
        {"PlanBackfill", Unary(&BackfillApi::PlanBackfill)},
        {"SubmitBackfill", Unary(&BackfillApi::SubmitBackfill)},
        {"GetBackfill", Unary(&BackfillApi::GetBackfill)},
        {"ListBackfills", Unary(&BackfillApi::ListBackfills)},
        {"CancelBackfill", Unary(&BackfillApi::CancelBackfill)},
        {"PauseBackfill", Unary(&BackfillApi::PauseBackfill)},
        {"ResumeBackfill", Unary(&BackfillApi::ResumeBackfill)},
        {"RetryBackfill", Unary(&BackfillApi::RetryBackfill)},
        {"RollbackBackfill", Unary(&BackfillApi::RollbackBackfill)},
        {"ListDatasets", Unary(&BackfillApi::ListDatasets)},
        {"GetDataset", Unary(&BackfillApi::GetDataset)},
        {"ApproveBackfill", Unary(&BackfillApi::ApproveBackfill)},
        {"DiffBackfill", Unary(&BackfillApi::DiffBackfill)},
        {"ExplainPartition", Unary(&BackfillApi::ExplainPartition)},
        {"ListAuditEvents", Unary(&BackfillApi::ListAuditEvents)},
        {"ConfirmBackfill", Unary(&BackfillApi::ConfirmBackfill)},
        {"ListPartitions", Unary(&BackfillApi::ListPartitions)},
        {"ListReplayPolicies", Unary(&BackfillApi::ListReplayPolicies)},
        {"EvaluateReplayPolicy", Unary(&BackfillApi::EvaluateReplayPolicy)},
        {"PauseReplayPolicy", Unary(&BackfillApi::PauseReplayPolicy)},
        {"ResumeReplayPolicy", Unary(&BackfillApi::ResumeReplayPolicy)},
        {"ListNodes", Unary(&BackfillApi::ListNodes)},
    };
    Dispatch watch;
    watch.new_request = [] {
      return std::make_unique<v1::WatchBackfillRequest>();
    };
    watch.stream = [](BackfillApi* api, const Caller& caller,
                      const pb::Message& request,
                      const std::function<bool(const v1::Backfill&)>& write) {
      return api->WatchBackfill(
          caller, static_cast<const v1::WatchBackfillRequest&>(request), write);
    };
    d->emplace("WatchBackfill", std::move(watch));
    return d;
  }();
  return *kDispatches;
}

using Headers = std::vector<std::pair<std::string, std::string>>;

// Sends the status line, the common headers and `headers`.
void SendHeaders(mg_connection* conn, int status, const Headers& headers) {
  mg_response_header_start(conn, status);
  for (const auto& h : kCommonHeaders) {
    mg_response_header_add(conn, h[0].data(), h[1].data(),
                           static_cast<int>(h[1].size()));
  }
  for (const auto& [name, value] : headers) {
    mg_response_header_add(conn, name.c_str(), value.c_str(),
                           static_cast<int>(value.size()));
  }
  mg_response_header_send(conn);
}

int SendBody(mg_connection* conn, int status, absl::string_view content_type,
             absl::string_view body, Headers extra = {}) {
  extra.emplace_back("Content-Type", std::string(content_type));
  extra.emplace_back("Content-Length", absl::StrCat(body.size()));
  SendHeaders(conn, status, extra);
  if (!body.empty()) mg_write(conn, body.data(), body.size());
  return status;
}

int SendJson(mg_connection* conn, int status, absl::string_view json) {
  return SendBody(conn, status, "application/json", json);
}

int SendError(mg_connection* conn, const absl::Status& status) {
  return SendJson(conn, HttpStatusOf(status.code()), StatusToHttpJson(status));
}

// The request's header `name` (case-insensitive), every value.
std::vector<std::string> HeaderValues(const mg_request_info* request,
                                      absl::string_view name) {
  std::vector<std::string> out;
  for (int i = 0; i < request->num_headers; ++i) {
    const mg_header& h = request->http_headers[i];
    if (h.name != nullptr && absl::EqualsIgnoreCase(h.name, name)) {
      out.emplace_back(h.value == nullptr ? "" : h.value);
    }
  }
  return out;
}

// The Common Name of the verified client certificate, if any.
std::optional<std::string> CertificateName(const mg_request_info* request) {
  if (request->client_cert == nullptr ||
      request->client_cert->peer_cert == nullptr) {
    return std::nullopt;
  }
  X509* cert = static_cast<X509*>(request->client_cert->peer_cert);
  char name[256];
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert),
                                          NID_commonName, name, sizeof(name));
  if (n <= 0) return std::nullopt;
  return std::string(name, static_cast<size_t>(n));
}

// gRPC's form of the client's address: "ipv4:10.0.0.7:5123".
std::string PeerOf(const mg_request_info* request) {
  return absl::StrCat("ipv4:", request->remote_addr, ":", request->remote_port);
}

CallCredentials CredentialsOf(const mg_request_info* request) {
  CallCredentials credentials;
  credentials.authorization = HeaderValues(request, "Authorization");
  credentials.certificate_name = CertificateName(request);
  credentials.peer = PeerOf(request);
  return credentials;
}

// The query string's parameters, decoded; INVALID_ARGUMENT for a bad
// percent-escape.
absl::StatusOr<QueryParams> ParseQuery(const char* query) {
  QueryParams out;
  if (query == nullptr || *query == '\0') return out;
  for (absl::string_view part : absl::StrSplit(query, '&')) {
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    const absl::string_view raw_key = part.substr(0, eq);
    const absl::string_view raw_value = eq == absl::string_view::npos
                                            ? absl::string_view()
                                            : part.substr(eq + 1);
    std::string key(raw_key.size() + 1, '\0');
    std::string value(raw_value.size() + 1, '\0');
    const int k =
        mg_url_decode(raw_key.data(), static_cast<int>(raw_key.size()),
                      key.data(), static_cast<int>(key.size()), 1);
    const int v =
        mg_url_decode(raw_value.data(), static_cast<int>(raw_value.size()),
                      value.data(), static_cast<int>(value.size()), 1);
    if (k < 0 || v < 0) {
      return WithReason(absl::InvalidArgumentError(absl::StrCat(
                            "the query string has a malformed parameter: \"",
                            Utf8Prefix(part, 80), "\"")),
                        "MALFORMED_QUERY");
    }
    key.resize(static_cast<size_t>(k));
    value.resize(static_cast<size_t>(v));
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

// The body, at most `limit` bytes; RESOURCE_EXHAUSTED beyond.
absl::StatusOr<std::string> ReadBody(mg_connection* conn,
                                     const mg_request_info* request,
                                     int64_t limit) {
  auto too_large = [limit] {
    return WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "the request body is larger than ", limit,
            " bytes, the limit set by backfilld --max-message-bytes")),
        "REQUEST_TOO_LARGE", {{"limit", absl::StrCat(limit)}});
  };
  if (request->content_length > limit) return too_large();
  std::string body;
  char buffer[16384];
  while (true) {
    const int n = mg_read(conn, buffer, sizeof(buffer));
    if (n <= 0) break;
    body.append(buffer, static_cast<size_t>(n));
    if (static_cast<int64_t>(body.size()) > limit) return too_large();
  }
  return body;
}

// The host of a Host header ("example.com:8080" → "example.com",
// "[::1]:80" → "::1").
std::string HostOf(absl::string_view host_header) {
  std::string host(absl::StripAsciiWhitespace(host_header));
  if (absl::StartsWith(host, "[")) {
    const size_t close = host.find(']');
    return close == std::string::npos ? host : host.substr(1, close - 1);
  }
  const size_t colon = host.rfind(':');
  return colon == std::string::npos ? host : host.substr(0, colon);
}

// Whether `host` is an IP address literal or "localhost": not a name an
// attacker's DNS could point at this machine.
bool IsAddressOrLocalhost(const std::string& host) {
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  if (host.find(':') != std::string::npos) return true;  // IPv6 literal
  const std::vector<std::string> parts = absl::StrSplit(host, '.');
  if (parts.size() != 4) return false;
  for (const std::string& part : parts) {
    int octet = 0;
    if (!absl::SimpleAtoi(part, &octet) || octet < 0 || octet > 255) {
      return false;
    }
  }
  return true;
}

// A call that another site's page makes in a user's browser, or that
// reaches this port under a name that is not its own (DNS rebinding), is
// refused: PERMISSION_DENIED.
absl::Status CheckOrigin(const mg_request_info* request,
                         const std::string& listen_host, bool authenticated) {
  const std::vector<std::string> host = HeaderValues(request, "Host");
  const std::vector<std::string> origin = HeaderValues(request, "Origin");
  if (!origin.empty() && !host.empty()) {
    const std::string& o = origin.front();
    const size_t scheme = o.find("://");
    const std::string origin_host =
        scheme == std::string::npos ? o : o.substr(scheme + 3);
    if (!absl::EqualsIgnoreCase(origin_host,
                                absl::StripAsciiWhitespace(host.front()))) {
      return WithReason(
          absl::PermissionDeniedError(absl::StrCat(
              "calls from pages of another origin (", Utf8Prefix(o, 100),
              ") are refused: the API serves its own console only")),
          "CROSS_ORIGIN");
    }
  }
  // Without credentials, only a name that cannot be rebound.
  if (!authenticated && !host.empty()) {
    const std::string name = HostOf(host.front());
    if (!IsAddressOrLocalhost(name) &&
        !absl::EqualsIgnoreCase(name, listen_host)) {
      return WithReason(
          absl::PermissionDeniedError(absl::StrCat(
              "requests for host \"", Utf8Prefix(name, 100),
              "\" are refused: without --auth-tokens this port answers "
              "only to its address, \"localhost\" or ",
              listen_host)),
          "HOST_NOT_ALLOWED");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpApiServer>> HttpApiServer::Start(
    const HttpApiOptions& options, BackfillApi* api, const CallAuth* auth) {
  for (const HttpRoute& route : HttpRoutes()) {
    if (!Dispatches().count(route.method)) {
      return absl::InternalError(absl::StrCat(
          "the HTTP route ", route.verb, " ", route.path, " names ",
          route.method, ", which server/http_api.cc does not dispatch"));
    }
  }
  std::unique_ptr<HttpApiServer> server(new HttpApiServer(options, api, auth));
  const bool tls = !options.tls_cert_file.empty();
  const std::string ports = absl::StrCat(options.listen, tls ? "s" : "");
  const std::string threads = absl::StrCat(options.threads);
  const std::string timeout =
      absl::StrCat(absl::ToInt64Milliseconds(options.io_timeout));
  const char* config[] = {"listening_ports",
                          ports.c_str(),
                          "num_threads",
                          threads.c_str(),
                          "request_timeout_ms",
                          timeout.c_str(),
                          "enable_keep_alive",
                          "yes",
                          "keep_alive_timeout_ms",
                          "30000",
                          "max_request_size",
                          "65536",
                          nullptr};
  mg_callbacks callbacks{};
  if (tls) callbacks.init_ssl = &HttpApiServer::InitTls;
  // civetweb's own messages (a connection it could not read, a TLS
  // handshake that failed) go to the log at debug level.
  callbacks.log_message = [](const mg_connection*, const char* message) {
    spdlog::debug("http: {}", LogText(message));
    return 1;
  };
  mg_init_data init{};
  init.callbacks = &callbacks;
  init.user_data = server.get();
  init.configuration_options = config;
  char error_text[256] = {0};
  unsigned error_code = 0;
  mg_error_data error{};
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  server->context_ = mg_start2(&init, &error);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "--http-listen ", options.listen, ": cannot serve HTTP there: ",
        error_text[0] != '\0' ? error_text : "civetweb could not start"));
  }
  mg_server_port bound[4];
  const int n = mg_get_server_ports(server->context_, 4, bound);
  if (n >= 1) server->port_ = bound[0].port;
  mg_set_request_handler(server->context_, "/v1/", &HttpApiServer::HandleApi,
                         server.get());
  mg_set_request_handler(server->context_, "/v1", &HttpApiServer::HandleApi,
                         server.get());
  mg_set_request_handler(server->context_, "/ui", &HttpApiServer::HandleConsole,
                         server.get());
  mg_set_request_handler(server->context_, "/", &HttpApiServer::HandleConsole,
                         server.get());
  return server;
}

HttpApiServer::HttpApiServer(const HttpApiOptions& options, BackfillApi* api,
                             const CallAuth* auth)
    : options_(options), api_(api), auth_(auth) {}

HttpApiServer::~HttpApiServer() {
  if (context_ != nullptr) mg_stop(context_);
}

int HttpApiServer::InitTls(void* ssl_ctx, void* self) {
  auto* server = static_cast<HttpApiServer*>(self);
  SSL_CTX* ctx = static_cast<SSL_CTX*>(ssl_ctx);
  const HttpApiOptions& o = server->options_;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, o.tls_cert_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, o.tls_key_file.c_str(),
                                  SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    spdlog::error("http: cannot use --tls-cert {} and --tls-key {}",
                  LogText(o.tls_cert_file), LogText(o.tls_key_file));
    return -1;
  }
  if (!o.tls_client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, o.tls_client_ca_file.c_str(),
                                      nullptr) != 1) {
      spdlog::error("http: cannot use --tls-client-ca {}",
                    LogText(o.tls_client_ca_file));
      return -1;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       nullptr);
  }
  return 1;
}

int HttpApiServer::HandleApi(mg_connection* conn, void* self) {
  return static_cast<HttpApiServer*>(self)->ServeApi(conn);
}

int HttpApiServer::HandleConsole(mg_connection* conn, void* self) {
  return static_cast<HttpApiServer*>(self)->ServeConsole(conn);
}

int HttpApiServer::ServeApi(mg_connection* conn) {
  const mg_request_info* request = mg_get_request_info(conn);
  const std::string verb =
      request->request_method == nullptr ? "" : request->request_method;
  const std::string path =
      request->local_uri_raw == nullptr ? "" : request->local_uri_raw;
  const bool authenticated = auth_ != nullptr && auth_->enabled();
  if (absl::Status s =
          CheckOrigin(request, HostOf(options_.listen), authenticated);
      !s.ok()) {
    return SendError(conn, s);
  }
  bool path_known = false;
  std::optional<HttpRouteMatch> match = MatchHttpRoute(verb, path, &path_known);
  if (!match.has_value()) {
    if (path_known) {
      return SendError(conn, WithReason(absl::InvalidArgumentError(absl::StrCat(
                                            verb, " is not a method of ", path,
                                            " (docs/api.md lists the routes)")),
                                        "METHOD_NOT_ALLOWED"));
    }
    return SendError(conn, WithReason(absl::NotFoundError(absl::StrCat(
                                          "no route ", verb, " ", path,
                                          " (docs/api.md lists the routes)")),
                                      "ROUTE_NOT_FOUND"));
  }
  const HttpRoute& route = *match->route;
  const std::string method(route.method);
  const CallCredentials credentials = CredentialsOf(request);
  if (auth_ != nullptr) {
    if (absl::Status s = auth_->Admit(credentials, method); !s.ok()) {
      return SendError(conn, s);
    }
  }
  Caller caller;
  if (auth_ != nullptr) {
    absl::StatusOr<std::optional<Principal>> who =
        auth_->Authenticate(credentials);
    if (who.ok()) caller.principal = *who;
  }
  caller.peer = credentials.peer;
  std::string body;
  if (route.body) {
    const std::vector<std::string> type = HeaderValues(request, "Content-Type");
    absl::StatusOr<std::string> read =
        ReadBody(conn, request, options_.max_body_bytes);
    if (!read.ok()) return SendError(conn, read.status());
    body = *std::move(read);
    // A JSON content type makes a browser ask before it sends a request
    // from another site's page: one more guard against CSRF.
    if (!body.empty() &&
        (type.empty() ||
         !absl::StartsWithIgnoreCase(absl::StripAsciiWhitespace(type.front()),
                                     "application/json"))) {
      return SendError(conn, WithReason(absl::InvalidArgumentError(
                                            "a request body must be sent as "
                                            "Content-Type: application/json"),
                                        "CONTENT_TYPE"));
    }
  } else if (request->content_length > 0) {
    return SendError(
        conn, WithReason(absl::InvalidArgumentError(
                             "this call takes no body: give its fields as "
                             "query parameters"),
                         "UNEXPECTED_BODY"));
  }
  absl::StatusOr<QueryParams> query = ParseQuery(request->query_string);
  if (!query.ok()) return SendError(conn, query.status());
  const Dispatch& dispatch = Dispatches().at(route.method);
  std::unique_ptr<pb::Message> message = dispatch.new_request();
  if (absl::Status s = RequestFromHttp(match->variables, route.body, body,
                                       *query, message.get());
      !s.ok()) {
    return SendError(conn, s);
  }
  if (!route.server_stream) {
    std::string json;
    absl::Status s = dispatch.unary(api_, caller, *message, &json);
    if (!s.ok()) return SendError(conn, s);
    return SendJson(conn, 200, json);
  }
  // Server-sent events: the response starts with the first update, so that
  // a watch refused at once (an unknown id, too many streams) gets its own
  // status.
  bool started = false;
  bool gone = false;
  absl::Time last_write = absl::Now();
  auto send = [&](absl::string_view text) {
    if (mg_send_chunk(conn, text.data(), static_cast<unsigned>(text.size())) <=
        0) {
      gone = true;
    }
    last_write = absl::Now();
    return !gone;
  };
  auto start = [&] {
    if (started) return;
    started = true;
    SendHeaders(conn, 200,
                {{"Content-Type", "text/event-stream"},
                 {"Transfer-Encoding", "chunked"}});
  };
  caller.cancelled = [&] {
    if (gone) return true;
    if (started && absl::Now() - last_write >= kWatchKeepAlive) {
      send(": keep-alive\n\n");
    }
    return gone;
  };
  absl::Status s =
      dispatch.stream(api_, caller, *message, [&](const v1::Backfill& update) {
        start();
        return send(absl::StrCat("data: ", MessageToHttpJson(update), "\n\n"));
      });
  if (!started) {
    if (!s.ok()) return SendError(conn, s);
    start();
  } else if (!s.ok() && !gone) {
    send(absl::StrCat("event: error\ndata: ", StatusToHttpJson(s), "\n\n"));
  }
  if (!gone) mg_send_chunk(conn, "", 0);
  return 200;
}

int HttpApiServer::ServeConsole(mg_connection* conn) {
  const mg_request_info* request = mg_get_request_info(conn);
  const std::string path =
      request->local_uri_raw == nullptr ? "" : request->local_uri_raw;
  const std::string verb =
      request->request_method == nullptr ? "" : request->request_method;
  if (path == "/" || path == "/ui") {
    return SendBody(conn, 302, "text/plain", "", {{"Location", "/ui/"}});
  }
  const bool authenticated = auth_ != nullptr && auth_->enabled();
  if (absl::Status s =
          CheckOrigin(request, HostOf(options_.listen), authenticated);
      !s.ok()) {
    return SendError(conn, s);
  }
  if (verb != "GET" && verb != "HEAD") {
    return SendError(conn, WithReason(absl::InvalidArgumentError(absl::StrCat(
                                          verb, " is not a method of ", path)),
                                      "METHOD_NOT_ALLOWED"));
  }
  if (path == "/ui/session") return ServeSession(conn, request);
  return SendError(conn, WithReason(absl::NotFoundError(absl::StrCat(
                                        "nothing is served at ", path)),
                                    "ROUTE_NOT_FOUND"));
}

int HttpApiServer::ServeSession(mg_connection* conn,
                                const mg_request_info* request) {
  std::optional<Principal> principal;
  const bool authenticated = auth_ != nullptr && auth_->enabled();
  if (authenticated) {
    absl::StatusOr<std::optional<Principal>> who =
        auth_->Authenticate(CredentialsOf(request));
    if (!who.ok()) return SendError(conn, who.status());
    principal = *who;
  }
  pb::Struct session;
  auto& fields = *session.mutable_fields();
  fields["authentication"].set_bool_value(authenticated);
  if (principal.has_value()) {
    fields["principal"].set_string_value(principal->name);
    auto* roles = fields["roles"].mutable_list_value();
    for (Role role : principal->roles) {
      roles->add_values()->set_string_value(std::string(RoleName(role)));
    }
  }
  auto* allowed = fields["allowedMethods"].mutable_list_value();
  std::set<absl::string_view> seen;
  for (const HttpRoute& route : HttpRoutes()) {
    if (!seen.insert(route.method).second) continue;
    if (principal.has_value() &&
        !MayCall(*principal, std::string(route.method))) {
      continue;
    }
    allowed->add_values()->set_string_value(std::string(route.method));
  }
  return SendJson(conn, 200, MessageToHttpJson(session));
}

}  // namespace backfill
