// The HTTP/JSON API (server/http_api.h) in process, over the real service
// fixture (a real state store, engine and manager) and a real HTTP client
// (libcurl): every route answers with its RPC's message or the API's own
// error, errors are what gRPC sends in JSON, bad input changes nothing,
// lists page, a watch is server-sent events, the same tokens and roles as
// gRPC, TLS, and requests from other sites' pages are refused.

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "server/bearer_tokens.h"
#include "server/call_auth.h"
#include "server/grpc_status.h"
#include "server/http_api.h"
#include "server/http_json.h"
#include "server/http_routes.h"
#include "tests/testing/http_call.h"
#include "tests/testing/server_service_fixture.h"
#include "tests/testing/test_pki.h"
#include "tests/testing/token_file.h"

namespace backfill {
namespace server_http_api_test {
namespace {

using ::testing::HasSubstr;
using testing::HttpCall;
using testing::HttpCallOptions;
using testing::HttpCallResult;
namespace pb = ::google::protobuf;

constexpr int64_t kBodyLimit = 16 << 10;

google::rpc::Status ErrorOf(const HttpCallResult& r) {
  google::rpc::Status status;
  EXPECT_TRUE(pb::util::JsonStringToMessage(r.body, &status).ok()) << r.body;
  return status;
}

std::string ReasonOf(const google::rpc::Status& status) {
  for (const auto& any : status.details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info)) return info.reason();
  }
  return "";
}

class HttpApiTest : public testing::ServerServiceTest {
 protected:
  void SetUp() override {
    ServerServiceTest::SetUp();
    StartHttp(nullptr);
  }
  void TearDown() override {
    http_.reset();
    ServerServiceTest::TearDown();
  }

  void StartHttp(const CallAuth* auth, const std::string& cert = "",
                 const std::string& key = "", const std::string& ca = "",
                 prometheus::Registry* registry = nullptr) {
    http_.reset();
    HttpApiOptions options;
    options.registry = registry;
    options.listen = "127.0.0.1:0";
    options.max_body_bytes = kBodyLimit;
    options.threads = 8;
    options.tls_cert_file = cert;
    options.tls_key_file = key;
    options.tls_client_ca_file = ca;
    auto started = HttpApiServer::Start(options, api_.get(), auth);
    ASSERT_TRUE(started.ok()) << started.status();
    http_ = *std::move(started);
    base_ = absl::StrCat(cert.empty() ? "http" : "https",
                         "://127.0.0.1:", http_->port());
  }

  HttpCallResult Get(const std::string& path, HttpCallOptions o = {}) {
    return HttpCall(base_ + path, o);
  }
  HttpCallResult Post(const std::string& path, const std::string& body,
                      HttpCallOptions o = {}) {
    o.method = "POST";
    o.body = body;
    return HttpCall(base_ + path, o);
  }

  // Submits a backfill of daily_revenue over [from, to] and waits until it
  // is SUCCEEDED; returns its id.
  std::string SubmitAndWait(const std::string& from, const std::string& to) {
    HttpCallResult r = Post(
        "/v1/backfills",
        absl::StrCat(R"({"request": {"dataset": "daily_revenue", )",
                     R"("fromPartition": ")", from, R"(", "toPartition": ")",
                     to, R"(", "reason": "fix refunds"}})"));
    EXPECT_EQ(r.status, 200) << r.body;
    v1::SubmitBackfillResponse submitted;
    EXPECT_TRUE(pb::util::JsonStringToMessage(r.body, &submitted).ok());
    const std::string id = submitted.backfill().id();
    WatchToEnd(id);
    return id;
  }

  std::unique_ptr<HttpApiServer> http_;
  std::string base_;
};

// One call per route, valid as far as the route goes.
struct Sample {
  std::string verb;
  std::string path;  // with the query string
  std::string body;
};

TEST_F(HttpApiTest, EveryRouteAnswersWithItsMessageOrTheApisOwnError) {
  const std::string id = SubmitAndWait("2025-03-02", "2025-03-03");
  const std::map<std::string, Sample> samples = {
      {"/v1/datasets", {"GET", "/v1/datasets", ""}},
      {"/v1/datasets/{name}", {"GET", "/v1/datasets/daily_revenue", ""}},
      {"/v1/datasets/{dataset}/partitions",
       {"GET", "/v1/datasets/daily_revenue/partitions?pageSize=1", ""}},
      {"/v1/datasets/{dataset}/partitions/{partition}:explain",
       {"GET", "/v1/datasets/daily_revenue/partitions/2025-03-02:explain", ""}},
      {"/v1/backfills:plan",
       {"POST", "/v1/backfills:plan",
        R"({"request": {"dataset": "daily_revenue", "partitions": ["2025-03-04"]}})"}},
      {"/v1/backfills",
       {"POST", "/v1/backfills",
        R"({"request": {"dataset": "daily_revenue", "partitions": ["2025-03-06"], "reason": "r"}, "idempotencyKey": "k-1"})"}},
      {"/v1/backfills/{id}",
       {"GET", "/v1/backfills/" + id + "?view=BACKFILL_VIEW_BASIC", ""}},
      {"/v1/backfills/{backfill_id}/partitions",
       {"GET", "/v1/backfills/" + id + "/partitions?pageSize=1", ""}},
      {"/v1/backfills/{id}:diff", {"GET", "/v1/backfills/" + id + ":diff", ""}},
      {"/v1/backfills/{id}:watch",
       {"GET", "/v1/backfills/" + id + ":watch", ""}},
      {"/v1/backfills/{id}:cancel",
       {"POST", "/v1/backfills/" + id + ":cancel", R"({"reason": "r"})"}},
      {"/v1/backfills/{id}:pause",
       {"POST", "/v1/backfills/" + id + ":pause", R"({"reason": "r"})"}},
      {"/v1/backfills/{id}:resume",
       {"POST", "/v1/backfills/" + id + ":resume", R"({"reason": "r"})"}},
      {"/v1/backfills/{id}:retry",
       {"POST", "/v1/backfills/" + id + ":retry", R"({"reason": "r"})"}},
      {"/v1/backfills/{id}:approve",
       {"POST", "/v1/backfills/" + id + ":approve", R"({"reason": "r"})"}},
      {"/v1/backfills/{id}:rollback",
       {"POST", "/v1/backfills/" + id + ":rollback", R"({"reason": "r"})"}},
      {"/v1/backfills/{id}:confirm",
       {"POST", "/v1/backfills/" + id + ":confirm", R"({"reason": "r"})"}},
      {"/v1/auditEvents", {"GET", "/v1/auditEvents?backfillId=" + id, ""}},
      {"/v1/replayPolicies", {"GET", "/v1/replayPolicies", ""}},
      {"/v1/replayPolicies/{dataset}:evaluate",
       {"POST", "/v1/replayPolicies/daily_revenue:evaluate", "{}"}},
      {"/v1/replayPolicies/{dataset}:pause",
       {"POST", "/v1/replayPolicies/daily_revenue:pause",
        R"({"reason": "r"})"}},
      {"/v1/replayPolicies/{dataset}:resume",
       {"POST", "/v1/replayPolicies/daily_revenue:resume",
        R"({"reason": "r"})"}},
      {"/v1/nodes", {"GET", "/v1/nodes", ""}},
  };
  const pb::ServiceDescriptor* service =
      v1::PlanBackfillRequest::descriptor()->file()->FindServiceByName(
          "BackfillService");
  std::set<std::string> answered;
  for (const HttpRoute& route : HttpRoutes()) {
    const std::string key(route.path);
    if (key == "/v1/backfills" && route.verb == "GET") {
      HttpCallResult r = Get("/v1/backfills?pageSize=5");
      EXPECT_EQ(r.status, 200) << r.body;
      answered.insert("GET /v1/backfills");
      continue;
    }
    auto it = samples.find(key);
    ASSERT_NE(it, samples.end()) << "no sample call of " << key;
    const Sample& sample = it->second;
    ASSERT_EQ(sample.verb, route.verb) << key;
    HttpCallResult r = sample.verb == "GET" ? Get(sample.path)
                                            : Post(sample.path, sample.body);
    SCOPED_TRACE(absl::StrCat(sample.verb, " ", sample.path, " -> ", r.status,
                              " ", r.body.substr(0, 300)));
    ASSERT_NE(r.status, 0) << r.error;
    answered.insert(absl::StrCat(route.verb, " ", key));
    if (route.server_stream) {
      EXPECT_EQ(r.status, 200);
      EXPECT_EQ(r.headers["content-type"], "text/event-stream");
      std::vector<testing::SseEvent> events = testing::ParseSse(r.body);
      ASSERT_FALSE(events.empty());
      v1::Backfill last;
      ASSERT_TRUE(
          pb::util::JsonStringToMessage(events.back().data, &last).ok());
      EXPECT_EQ(last.id(), id);
      continue;
    }
    EXPECT_EQ(r.headers["content-type"], "application/json");
    if (r.status == 200) {
      // The RPC's own answer, in the canonical mapping.
      const pb::MethodDescriptor* method =
          service->FindMethodByName(std::string(route.method));
      std::unique_ptr<pb::Message> answer(
          pb::MessageFactory::generated_factory()
              ->GetPrototype(method->output_type())
              ->New());
      EXPECT_TRUE(pb::util::JsonStringToMessage(r.body, answer.get()).ok());
      continue;
    }
    // Or the API's refusal of this job's state, never of the call's form.
    google::rpc::Status error = ErrorOf(r);
    EXPECT_EQ(HttpStatusOf(static_cast<absl::StatusCode>(error.code())),
              r.status);
    EXPECT_NE(error.code(),
              static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_NE(ReasonOf(error), "ROUTE_NOT_FOUND");
  }
  EXPECT_EQ(answered.size(), HttpRoutes().size());
}

TEST_F(HttpApiTest, AnErrorIsWhatGrpcSendsInJson) {
  for (const std::string id : {"bf-404", "nope"}) {
    HttpCallResult r = Get("/v1/backfills/" + id);
    v1::GetBackfillRequest request;
    request.set_id(id);
    v1::Backfill unused;
    const google::rpc::Status expected =
        ToRpcStatus(api_->GetBackfill(Caller(), request, &unused));
    EXPECT_TRUE(pb::util::MessageDifferencer::Equals(ErrorOf(r), expected))
        << r.body << "\n"
        << expected.DebugString();
    EXPECT_EQ(r.status,
              HttpStatusOf(static_cast<absl::StatusCode>(expected.code())));
  }
}

TEST_F(HttpApiTest, BadInputIsRefusedNamingTheFieldAndChangesNothing) {
  struct Bad {
    std::string body;
    long status;
    std::string says;
    bool json = true;
  };
  const Bad bad[] = {
      {R"({"request": {"dataset": 7}})", 400, "request.dataset"},
      {R"({"request": {"dataset": "daily_revenue"}, "nope": 1})", 400, "nope"},
      {R"({"request": )", 400, "not JSON"},
      {R"(["daily_revenue"])", 400, "JSON object"},
      {R"({"request": {"dataset": "daily_revenue", "partitions": ["2025-03-02"], "reason": "r"}})",
       400, "application/json", false},
      {absl::StrCat(R"({"request": {"reason": ")", std::string(kBodyLimit, 'x'),
                    R"("}})"),
       429, "--max-message-bytes"},
      {R"({"request": {"dataset": "no_such", "reason": "r"}})", 400, "no_such"},
  };
  for (const Bad& b : bad) {
    HttpCallOptions o;
    o.json_body = b.json;
    if (!b.json) o.headers.emplace_back("Content-Type", "text/plain");
    HttpCallResult r = Post("/v1/backfills", b.body, o);
    EXPECT_EQ(r.status, b.status) << r.body.substr(0, 300);
    EXPECT_THAT(r.body, HasSubstr(b.says));
    EXPECT_EQ(StoredJobs(), 0u);
  }
  // Query parameters of a call that takes a body, a body of one that
  // takes none.
  EXPECT_EQ(Post("/v1/backfills?reason=x", "{}").status, 400);
  HttpCallOptions with_body;
  with_body.body = "{}";
  EXPECT_EQ(Get("/v1/backfills", with_body).status, 400);
  EXPECT_EQ(StoredJobs(), 0u);
  // Then a good one makes one job.
  HttpCallResult ok = Post(
      "/v1/backfills",
      R"({"request": {"dataset": "daily_revenue", "partitions": ["2025-03-02"], "reason": "r"}})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(StoredJobs(), 1u);
}

TEST_F(HttpApiTest, ListsPageWithTokensAndFilter) {
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"2025-03-01", "2025-03-02"},
        {"2025-03-03", "2025-03-04"},
        {"2025-03-05", "2025-03-06"}}) {
    SubmitAndWait(from, to);
  }
  v1::ListBackfillsResponse page;
  HttpCallResult r = Get("/v1/backfills?pageSize=2");
  ASSERT_TRUE(pb::util::JsonStringToMessage(r.body, &page).ok()) << r.body;
  ASSERT_EQ(page.backfills_size(), 2);
  ASSERT_FALSE(page.next_page_token().empty());
  std::set<std::string> seen = {page.backfills(0).id(), page.backfills(1).id()};
  r = Get("/v1/backfills?pageSize=2&pageToken=" + page.next_page_token());
  v1::ListBackfillsResponse second;
  ASSERT_TRUE(pb::util::JsonStringToMessage(r.body, &second).ok()) << r.body;
  ASSERT_EQ(second.backfills_size(), 1);
  EXPECT_TRUE(second.next_page_token().empty());
  seen.insert(second.backfills(0).id());
  EXPECT_EQ(seen.size(), 3u);
  // Filters as query parameters, repeated for a repeated field.
  r =
      Get("/v1/backfills?states=BACKFILL_STATE_SUCCEEDED&states=BACKFILL_STATE_"
          "FAILED&dataset=daily_revenue");
  v1::ListBackfillsResponse filtered;
  ASSERT_TRUE(pb::util::JsonStringToMessage(r.body, &filtered).ok()) << r.body;
  EXPECT_EQ(filtered.backfills_size(), 3);
  r = Get("/v1/backfills?states=BACKFILL_STATE_RUNNING");
  EXPECT_EQ(r.body, "{}");
  // A token of another filter is refused.
  r = Get("/v1/backfills?pageSize=2&states=BACKFILL_STATE_RUNNING&pageToken=" +
          page.next_page_token());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("page_token"));
}

TEST_F(HttpApiTest, AWatchIsServerSentEventsUntilTheJobEnds) {
  HttpCallResult submitted = Post(
      "/v1/backfills",
      R"({"request": {"dataset": "daily_revenue", "fromPartition": "2025-03-01", "toPartition": "2025-03-07", "reason": "r"}})");
  v1::SubmitBackfillResponse s;
  ASSERT_TRUE(pb::util::JsonStringToMessage(submitted.body, &s).ok());
  HttpCallResult r = Get("/v1/backfills/" + s.backfill().id() + ":watch");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  EXPECT_EQ(r.headers["cache-control"], "no-store");
  std::vector<testing::SseEvent> events = testing::ParseSse(r.body);
  ASSERT_FALSE(events.empty()) << r.body;
  v1::Backfill last;
  for (const testing::SseEvent& e : events) {
    EXPECT_EQ(e.event, "");
    ASSERT_TRUE(pb::util::JsonStringToMessage(e.data, &last).ok()) << e.data;
  }
  EXPECT_EQ(last.state(), v1::BACKFILL_STATE_SUCCEEDED);
  // A watch refused at once is an error response, not a stream.
  r = Get("/v1/backfills/bf-404:watch");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(ReasonOf(ErrorOf(r)), "BACKFILL_NOT_FOUND");
}

TEST_F(HttpApiTest, EveryAnswerCarriesTheSecurityHeaders) {
  for (const std::string& path :
       {std::string("/v1/datasets"), std::string("/v1/nothing"),
        std::string("/v1/backfills/bf-9")}) {
    HttpCallResult r = Get(path);
    EXPECT_EQ(r.headers["x-content-type-options"], "nosniff") << path;
    EXPECT_EQ(r.headers["cache-control"], "no-store") << path;
    EXPECT_EQ(r.headers["x-frame-options"], "DENY") << path;
    EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u) << path;
  }
  HttpCallResult root = Get("/");
  EXPECT_EQ(root.status, 302);
  EXPECT_EQ(root.headers["location"], "/ui/");
  HttpCallOptions del;
  del.method = "DELETE";
  HttpCallResult r = Get("/v1/backfills/bf-1", del);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(ReasonOf(ErrorOf(r)), "METHOD_NOT_ALLOWED");
}

TEST_F(HttpApiTest, OtherSitesPagesAndReboundHostsAreRefused) {
  const std::string body =
      R"({"request": {"dataset": "daily_revenue", "partitions": ["2025-03-02"], "reason": "r"}})";
  HttpCallOptions foreign;
  foreign.headers = {{"Origin", "https://attacker.example"}};
  HttpCallResult r = Post("/v1/backfills", body, foreign);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(ReasonOf(ErrorOf(r)), "CROSS_ORIGIN");
  HttpCallOptions rebound;
  rebound.headers = {{"Host", "attacker.example"}};
  r = Post("/v1/backfills", body, rebound);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(ReasonOf(ErrorOf(r)), "HOST_NOT_ALLOWED");
  EXPECT_EQ(StoredJobs(), 0u);
  // The console's own origin is fine.
  HttpCallOptions own;
  own.headers = {{"Origin", base_}};
  EXPECT_EQ(Post("/v1/backfills", body, own).status, 200);
  EXPECT_EQ(StoredJobs(), 1u);
}

// backfill_http_requests_total{method, code}: the value of one series.
double RequestCount(prometheus::Registry& registry, const std::string& method,
                    const std::string& code) {
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != "backfill_http_requests_total") continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& label : metric.label) labels[label.name] = label.value;
      if (labels["method"] == method && labels["code"] == code) {
        return metric.counter.value;
      }
    }
  }
  return 0;
}

TEST_F(HttpApiTest, RequestsAreCountedByMethodAndStatus) {
  prometheus::Registry registry;
  StartHttp(nullptr, "", "", "", &registry);
  EXPECT_EQ(Get("/v1/datasets").status, 200);
  EXPECT_EQ(Get("/v1/datasets").status, 200);
  EXPECT_EQ(Get("/v1/backfills/bf-404").status, 404);
  EXPECT_EQ(Get("/v1/nothing").status, 404);
  EXPECT_EQ(Get("/ui/").status, 200);
  HttpCallOptions foreign;
  foreign.headers = {{"Origin", "https://attacker.example"}};
  EXPECT_EQ(Get("/v1/datasets", foreign).status, 403);
  EXPECT_EQ(RequestCount(registry, "ListDatasets", "200"), 2);
  EXPECT_EQ(RequestCount(registry, "ListDatasets", "403"), 1);
  EXPECT_EQ(RequestCount(registry, "GetBackfill", "404"), 1);
  EXPECT_EQ(RequestCount(registry, "none", "404"), 1);
  EXPECT_EQ(RequestCount(registry, "console", "200"), 1);
}

class HttpApiAuthTest : public HttpApiTest {
 protected:
  void SetUp() override {
    ServerServiceTest::SetUp();
    std::vector<testing::TokenGrant> grants;
    for (const auto& [name, roles] :
         std::vector<std::pair<std::string, std::string>>{
             {"vera", "viewer"}, {"otto", "operator"}, {"april", "approver"}}) {
      tokens_[name] = absl::StrCat("tok-", name, "-8d2e41");
      grants.push_back({name, roles, tokens_[name]});
    }
    auto tokens =
        BearerTokens::Parse(testing::TokenFileText(grants), "tokens.yaml");
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    auth_ = std::make_unique<CallAuth>(
        std::make_shared<const BearerTokens>(*std::move(tokens)), nullptr);
    StartHttp(auth_.get());
  }
  void TearDown() override {
    HttpApiTest::TearDown();
    auth_.reset();
  }
  HttpCallOptions As(const std::string& name) {
    HttpCallOptions o;
    o.headers = {{"Authorization", "Bearer " + tokens_.at(name)}};
    return o;
  }
  std::map<std::string, std::string> tokens_;
  std::unique_ptr<CallAuth> auth_;
};

TEST_F(HttpApiAuthTest, TheSameTokensAndRolesAsGrpc) {
  HttpCallResult r = Get("/v1/datasets");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(ReasonOf(ErrorOf(r)), "CREDENTIALS_MISSING");
  HttpCallOptions unknown;
  unknown.headers = {{"Authorization", "Bearer tok-nobody"}};
  EXPECT_EQ(ReasonOf(ErrorOf(Get("/v1/datasets", unknown))), "TOKEN_UNKNOWN");
  EXPECT_EQ(Get("/v1/datasets", As("vera")).status, 200);

  const std::string body =
      R"({"request": {"dataset": "daily_revenue", "partitions": ["2025-03-02"], "reason": "r", "requestedBy": "ci"}})";
  r = Post("/v1/backfills", body, As("vera"));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(ReasonOf(ErrorOf(r)), "ROLE_REQUIRED");
  EXPECT_EQ(StoredJobs(), 0u);
  r = Post("/v1/backfills", body, As("otto"));
  ASSERT_EQ(r.status, 200) << r.body;
  v1::SubmitBackfillResponse submitted;
  ASSERT_TRUE(pb::util::JsonStringToMessage(r.body, &submitted).ok());
  // Lineage names the principal, the client's claim only beside it.
  EXPECT_EQ(submitted.backfill().request().requested_by(),
            "otto (on behalf of ci)");
  const std::string id = submitted.backfill().id();
  WatchToEnd(id);
  // A viewer may not roll back; nothing changes.
  r = Post("/v1/backfills/" + id + ":rollback", R"({"reason": "r"})",
           As("vera"));
  EXPECT_EQ(r.status, 403);
  v1::Backfill after;
  ASSERT_TRUE(pb::util::JsonStringToMessage(
                  Get("/v1/backfills/" + id, As("vera")).body, &after)
                  .ok());
  EXPECT_EQ(after.state(), v1::BACKFILL_STATE_SUCCEEDED);

  // The console's session says who and what, by the same policy.
  auto allowed = [&](const std::string& name) {
    pb::Struct session;
    EXPECT_TRUE(pb::util::JsonStringToMessage(Get("/ui/session", As(name)).body,
                                              &session)
                    .ok());
    std::set<std::string> methods;
    for (const auto& v :
         session.fields().at("allowedMethods").list_value().values()) {
      methods.insert(v.string_value());
    }
    EXPECT_EQ(session.fields().at("principal").string_value(), name);
    return methods;
  };
  std::set<std::string> vera = allowed("vera");
  EXPECT_TRUE(vera.count("GetBackfill"));
  EXPECT_FALSE(vera.count("ApproveBackfill"));
  EXPECT_FALSE(vera.count("SubmitBackfill"));
  EXPECT_TRUE(allowed("april").count("ApproveBackfill"));
  EXPECT_EQ(Get("/ui/session").status, 401);
}

TEST_F(HttpApiTest, TlsWithTheSameFilesAsTheGrpcPort) {
  const std::string pki = (std::filesystem::path(dir_) / "pki").string();
  std::filesystem::create_directories(pki);
  ASSERT_TRUE(testing::MakeTestPki(pki, {"otto"}));
  StartHttp(nullptr, pki + "/server.pem", pki + "/server.key", pki + "/ca.pem");
  ASSERT_TRUE(http_->tls());
  HttpCallOptions o;
  o.ca_file = pki + "/ca.pem";
  o.client_cert_file = pki + "/otto.pem";
  o.client_key_file = pki + "/otto.key";
  HttpCallResult r = Get("/v1/datasets", o);
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  // Without a client certificate the handshake fails; so does plaintext.
  HttpCallOptions no_cert;
  no_cert.ca_file = o.ca_file;
  EXPECT_EQ(Get("/v1/datasets", no_cert).status, 0);
  const std::string plain = absl::StrCat("http://127.0.0.1:", http_->port());
  EXPECT_NE(HttpCall(plain + "/v1/datasets").status, 200);
}

}  // namespace
}  // namespace server_http_api_test
}  // namespace backfill
