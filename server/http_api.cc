#include "server/http_api.h"

#include <httplib.h>
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
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"
#include "server/access_policy.h"
#include "server/console_assets.h"
#include "server/http_json.h"
#include "server/http_routes.h"
#include "server/log_text.h"
#include "spdlog/spdlog.h"

namespace backfill {
namespace {

namespace pb = ::google::protobuf;

// The console's Content-Security-Policy.
constexpr char kConsolePolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' "
    "data:; connect-src 'self'; font-src 'self'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

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
        {"ListDatasetPartitions", Unary(&BackfillApi::ListDatasetPartitions)},
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

void SendJson(httplib::Response& response, int status,
              const std::string& json) {
  response.status = status;
  response.set_content(json, "application/json");
}

void SendError(httplib::Response& response, const absl::Status& status) {
  SendJson(response, HttpStatusOf(status.code()), StatusToHttpJson(status));
}

// Every value of the request's header `name` (case-insensitive).
std::vector<std::string> HeaderValues(const httplib::Request& request,
                                      const std::string& name) {
  std::vector<std::string> out;
  auto [first, last] = request.headers.equal_range(name);
  for (auto it = first; it != last; ++it) out.push_back(it->second);
  return out;
}

// The Common Name of the verified client certificate, if any.
std::optional<std::string> CertificateName(const httplib::Request& request) {
  if (request.ssl == nullptr) return std::nullopt;
  X509* cert = SSL_get1_peer_certificate(request.ssl);
  if (cert == nullptr) return std::nullopt;
  char name[256];
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert),
                                          NID_commonName, name, sizeof(name));
  X509_free(cert);
  if (n <= 0) return std::nullopt;
  return std::string(name, static_cast<size_t>(n));
}

// gRPC's form of the client's address: "ipv4:10.0.0.7:5123",
// "ipv6:[::1]:5123".
std::string PeerOf(const httplib::Request& request) {
  const bool v6 = request.remote_addr.find(':') != std::string::npos;
  return v6 ? absl::StrCat("ipv6:[", request.remote_addr,
                           "]:", request.remote_port)
            : absl::StrCat("ipv4:", request.remote_addr, ":",
                           request.remote_port);
}

CallCredentials CredentialsOf(const httplib::Request& request) {
  CallCredentials credentials;
  credentials.authorization = HeaderValues(request, "Authorization");
  credentials.certificate_name = CertificateName(request);
  credentials.peer = PeerOf(request);
  return credentials;
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
absl::Status CheckOrigin(const httplib::Request& request,
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

// HOST and PORT of a listen address ("[::1]:80" gives "::1").
std::pair<std::string, int> SplitListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port)) {
    port = -1;
  }
  return {host, port};
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
  std::unique_ptr<HttpApiServer> self(new HttpApiServer(options, api, auth));
  if (self->tls()) {
    self->server_ = std::make_unique<httplib::SSLServer>(
        options.tls_cert_file.c_str(), options.tls_key_file.c_str(),
        options.tls_client_ca_file.empty()
            ? nullptr
            : options.tls_client_ca_file.c_str());
  } else {
    self->server_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& server = *self->server_;
  if (!server.is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http-listen ", options.listen,
        ": cannot set up TLS with --tls-cert ", options.tls_cert_file,
        " and --tls-key ", options.tls_key_file,
        options.tls_client_ca_file.empty()
            ? ""
            : absl::StrCat(" and --tls-client-ca ",
                           options.tls_client_ca_file)));
  }
  const int threads = std::max(2, options.threads);
  server.new_task_queue = [threads] {
    return new httplib::ThreadPool(threads);
  };
  const time_t io = static_cast<time_t>(
      std::max<int64_t>(1, absl::ToInt64Seconds(options.io_timeout)));
  server.set_read_timeout(io, 0);
  server.set_write_timeout(io, 0);
  server.set_keep_alive_timeout(30);
  server.set_default_headers({{"Cache-Control", "no-store"},
                              {"X-Content-Type-Options", "nosniff"},
                              {"X-Frame-Options", "DENY"},
                              {"Referrer-Policy", "no-referrer"}});
  HttpApiServer* raw = self.get();
  // Every request is routed here, whatever its method and path. A body is
  // read only once the caller is admitted (ServeApi).
  const auto plain = [raw](const httplib::Request& request,
                           httplib::Response& response) {
    raw->Serve(request, response, nullptr);
  };
  const auto with_body = [raw](const httplib::Request& request,
                               httplib::Response& response,
                               const httplib::ContentReader& reader) {
    raw->Serve(request, response, &reader);
  };
  server.Get(".*", plain);
  server.Options(".*", plain);
  server.Post(".*", with_body);
  server.Put(".*", with_body);
  server.Patch(".*", with_body);
  server.Delete(".*", with_body);
  // What the server itself refuses (a malformed request, a path or header
  // too long) gets the API's error form.
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request&, httplib::Response& response) {
        if (!response.body.empty()) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        response.set_content(
            StatusToHttpJson(WithReason(
                absl::InvalidArgumentError(absl::StrCat(
                    "the HTTP server refused the request as malformed (",
                    response.status, ")")),
                "MALFORMED_REQUEST")),
            "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  const auto [host, port] = SplitListen(options.listen);
  const int bound = port == 0 ? server.bind_to_any_port(host)
                    : server.bind_to_port(host, port) ? port
                                                      : -1;
  if (bound <= 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on --http-listen ", options.listen,
        " (address in use, not local, or malformed; use HOST:PORT)"));
  }
  self->port_ = bound;
  self->listener_ = std::thread([raw] { raw->server_->listen_after_bind(); });
  // Serving once the listener runs: a stop() before that would be lost and
  // leave the listener in accept() for good.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!server.is_running()) {
    if (absl::Now() > deadline) {
      return absl::UnavailableError(
          absl::StrCat("--http-listen ", options.listen,
                       ": the HTTP server did not start within 10 s"));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return self;
}

HttpApiServer::HttpApiServer(const HttpApiOptions& options, BackfillApi* api,
                             const CallAuth* auth)
    : options_(options), api_(api), auth_(auth) {
  if (options.registry != nullptr) {
    requests_ = &prometheus::BuildCounter()
                     .Name("backfill_http_requests_total")
                     .Help(
                         "Requests of the HTTP port (--http-listen), by the "
                         "API method their route calls (console: the "
                         "console's files; none: no route) and HTTP status")
                     .Register(*options.registry);
  }
}

HttpApiServer::~HttpApiServer() {
  if (server_ != nullptr) server_->stop();
  if (listener_.joinable()) listener_.join();
}

void HttpApiServer::Serve(const httplib::Request& request,
                          httplib::Response& response,
                          const httplib::ContentReader* reader) {
  const bool api =
      absl::StartsWith(request.path, "/v1/") || request.path == "/v1";
  std::string method = "console";
  bool path_known = false;
  std::optional<HttpRouteMatch> match;
  if (api) {
    match = MatchHttpRoute(request.method, request.path, &path_known);
    method = match.has_value() ? std::string(match->route->method) : "none";
  }
  const bool authenticated = auth_ != nullptr && auth_->enabled();
  if (absl::Status s = CheckOrigin(request, SplitListen(options_.listen).first,
                                   authenticated);
      !s.ok()) {
    SendError(response, s);
  } else if (api) {
    ServeApi(request, response, reader, match, path_known);
  } else {
    ServeConsole(request, response);
  }
  Count(method, response.status);
}

void HttpApiServer::ServeApi(const httplib::Request& request,
                             httplib::Response& response,
                             const httplib::ContentReader* reader,
                             const std::optional<HttpRouteMatch>& match,
                             bool path_known) {
  if (!match.has_value()) {
    if (path_known) {
      return SendError(
          response,
          WithReason(absl::InvalidArgumentError(absl::StrCat(
                         request.method, " is not a method of ", request.path,
                         " (docs/api.md lists the routes)")),
                     "METHOD_NOT_ALLOWED"));
    }
    return SendError(
        response, WithReason(absl::NotFoundError(absl::StrCat(
                                 "no route ", request.method, " ", request.path,
                                 " (docs/api.md lists the routes)")),
                             "ROUTE_NOT_FOUND"));
  }
  const HttpRoute& route = *match->route;
  const std::string method(route.method);
  const CallCredentials credentials = CredentialsOf(request);
  Caller caller;
  caller.peer = credentials.peer;
  if (auth_ != nullptr && auth_->enabled()) {
    if (absl::Status s = auth_->Admit(credentials, method); !s.ok()) {
      return SendError(response, s);
    }
    absl::StatusOr<std::optional<Principal>> who =
        auth_->Authenticate(credentials);
    if (who.ok()) caller.principal = *who;
  }
  // The body, read now (admitted), at most max_body_bytes of it. A body
  // on a method read whole (GET) would be left on the connection as the
  // next request: refused, and the connection closed.
  std::string body;
  const size_t limit = static_cast<size_t>(options_.max_body_bytes);
  if (reader == nullptr) {
    const std::string length = request.get_header_value("Content-Length");
    if ((!length.empty() && length != "0") ||
        request.has_header("Transfer-Encoding")) {
      response.set_header("Connection", "close");
      return SendError(response,
                       WithReason(absl::InvalidArgumentError(absl::StrCat(
                                      request.method,
                                      " takes no body: give the call's fields "
                                      "as query parameters")),
                                  "UNEXPECTED_BODY"));
    }
  } else {
    bool too_large = false;
    const bool read = (*reader)([&](const char* data, size_t length) {
      if (body.size() + length > limit) {
        too_large = true;
        return false;
      }
      body.append(data, length);
      return true;
    });
    if (!read && !too_large) {
      response.set_header("Connection", "close");
      return SendError(response,
                       WithReason(absl::InvalidArgumentError(
                                      "the request body could not be read "
                                      "whole (the connection ended early)"),
                                  "MALFORMED_REQUEST"));
    }
    if (too_large) {
      response.set_header("Connection", "close");
      return SendError(
          response,
          WithReason(absl::ResourceExhaustedError(
                         absl::StrCat("the request body is larger than ", limit,
                                      " bytes, the limit set by backfilld "
                                      "--max-message-bytes")),
                     "REQUEST_TOO_LARGE", {{"limit", absl::StrCat(limit)}}));
    }
  }
  if (!route.body && !body.empty()) {
    return SendError(response, WithReason(absl::InvalidArgumentError(
                                              "this call takes no body: give "
                                              "its fields as query parameters"),
                                          "UNEXPECTED_BODY"));
  }
  if (route.body && !body.empty()) {
    // A JSON content type makes a browser ask before it sends a request
    // from another site's page: one more guard against CSRF.
    const std::string type = request.get_header_value("Content-Type");
    if (!absl::StartsWithIgnoreCase(absl::StripAsciiWhitespace(type),
                                    "application/json")) {
      return SendError(response,
                       WithReason(absl::InvalidArgumentError(
                                      "a request body must be sent as "
                                      "Content-Type: application/json"),
                                  "CONTENT_TYPE"));
    }
  }
  QueryParams query(request.params.begin(), request.params.end());
  const Dispatch& dispatch = Dispatches().at(route.method);
  std::unique_ptr<pb::Message> message = dispatch.new_request();
  if (absl::Status s = RequestFromHttp(match->variables, route.body, body,
                                       query, message.get());
      !s.ok()) {
    return SendError(response, s);
  }
  if (!route.server_stream) {
    std::string json;
    if (absl::Status s = dispatch.unary(api_, caller, *message, &json);
        !s.ok()) {
      return SendError(response, s);
    }
    return SendJson(response, 200, json);
  }
  // A watch of a job that cannot be read is refused with its own status;
  // then server-sent events, one per update.
  {
    v1::GetBackfillRequest get;
    get.set_id(static_cast<const v1::WatchBackfillRequest&>(*message).id());
    get.set_view(v1::BACKFILL_VIEW_BASIC);
    v1::Backfill unused;
    if (absl::Status s = api_->GetBackfill(caller, get, &unused); !s.ok()) {
      return SendError(response, s);
    }
  }
  std::shared_ptr<pb::Message> watch(std::move(message));
  BackfillApi* api = api_;
  response.status = 200;
  response.set_chunked_content_provider(
      "text/event-stream",
      [api, caller, watch, &dispatch](size_t, httplib::DataSink& sink) mutable {
        absl::Time last_write = absl::Now();
        bool gone = false;
        auto send = [&](const std::string& text) {
          if (!gone && !sink.write(text.data(), text.size())) gone = true;
          last_write = absl::Now();
          return !gone;
        };
        caller.cancelled = [&] {
          if (!gone && !sink.is_writable()) gone = true;
          if (!gone && absl::Now() - last_write >= kWatchKeepAlive) {
            send(": keep-alive\n\n");
          }
          return gone;
        };
        absl::Status s = dispatch.stream(
            api, caller, *watch, [&](const v1::Backfill& update) {
              return send(
                  absl::StrCat("data: ", MessageToHttpJson(update), "\n\n"));
            });
        if (!s.ok() && !gone) {
          send(absl::StrCat("event: error\ndata: ", StatusToHttpJson(s),
                            "\n\n"));
        }
        if (!gone) sink.done();
        return !gone;
      });
}

void HttpApiServer::Count(const std::string& method, int status) {
  if (requests_ == nullptr) return;
  // Both labels are bounded: the service's methods, and HTTP statuses.
  requests_->Add({{"method", method}, {"code", absl::StrCat(status)}})
      .Increment();
}

void HttpApiServer::ServeConsole(const httplib::Request& request,
                                 httplib::Response& response) {
  const std::string& path = request.path;
  if (path == "/" || path == "/ui") {
    response.set_redirect("/ui/");
    return;
  }
  if (request.method != "GET" && request.method != "HEAD") {
    return SendError(
        response, WithReason(absl::InvalidArgumentError(absl::StrCat(
                                 request.method, " is not a method of ", path)),
                             "METHOD_NOT_ALLOWED"));
  }
  if (path == "/ui/session") return ServeSession(request, response);
  const ConsoleAsset* asset = nullptr;
  if (absl::StartsWith(path, "/ui/")) {
    const std::string name = path == "/ui/" ? "index.html" : path.substr(4);
    asset = FindConsoleAsset(name);
  }
  if (asset == nullptr) {
    return SendError(response, WithReason(absl::NotFoundError(absl::StrCat(
                                              "nothing is served at ", path,
                                              " (the console is at /ui/)")),
                                          "ROUTE_NOT_FOUND"));
  }
  // Nothing but this origin: no inline script or style, no frames, no
  // other site's scripts, fonts or images.
  response.set_header("Content-Security-Policy", kConsolePolicy);
  response.set_header("ETag", std::string(asset->etag));
  if (request.get_header_value("If-None-Match") == asset->etag) {
    response.status = 304;
    return;
  }
  response.status = 200;
  response.set_content(asset->body.data(), asset->body.size(),
                       std::string(asset->content_type));
}

void HttpApiServer::ServeSession(const httplib::Request& request,
                                 httplib::Response& response) {
  std::optional<Principal> principal;
  const bool authenticated = auth_ != nullptr && auth_->enabled();
  if (authenticated) {
    absl::StatusOr<std::optional<Principal>> who =
        auth_->Authenticate(CredentialsOf(request));
    if (!who.ok()) return SendError(response, who.status());
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
  SendJson(response, 200, MessageToHttpJson(session));
}

}  // namespace backfill
