// The HTTP/JSON mapping of BackfillService: every RPC has a route (a method
// added to the .proto without one fails here), templates match what they
// should and nothing else, and requests are built from path, query and body
// as google.api.http does, with errors naming the field.

#include <set>
#include <string>

#include "absl/status/status.h"
#include "backfill/v1/backfill.pb.h"
#include "core/base/error_details.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "server/http_json.h"
#include "server/http_routes.h"

namespace backfill {
namespace server_http_routes_test {
namespace {

using ::testing::HasSubstr;

TEST(HttpRoutesTest, EveryMethodOfTheServiceHasARouteAndNoRouteIsExtra) {
  const google::protobuf::ServiceDescriptor* service =
      v1::PlanBackfillRequest::descriptor()->file()->FindServiceByName(
          "BackfillService");
  ASSERT_NE(service, nullptr);
  std::set<std::string> routed;
  for (const HttpRoute& route : HttpRoutes()) {
    const google::protobuf::MethodDescriptor* method =
        service->FindMethodByName(std::string(route.method));
    ASSERT_NE(method, nullptr) << route.path << " names " << route.method;
    EXPECT_EQ(route.server_stream, method->server_streaming()) << route.path;
    EXPECT_TRUE(route.verb == "GET" || route.verb == "POST") << route.path;
    // Reads take their request from the query string; changes from a body.
    EXPECT_EQ(route.body, route.verb == "POST") << route.path;
    routed.insert(std::string(route.method));
  }
  for (int i = 0; i < service->method_count(); ++i) {
    EXPECT_TRUE(routed.count(service->method(i)->name()))
        << service->method(i)->name()
        << " has no HTTP route: add one to server/http_routes.cc and "
           "docs/api.md";
  }
}

struct Case {
  const char* verb;
  const char* path;
  const char* method;  // "" when nothing matches
  std::map<std::string, std::string> variables;
};

TEST(HttpRoutesTest, PathsMatchTheirRouteAndItsVariables) {
  const Case cases[] = {
      {"GET", "/v1/datasets", "ListDatasets", {}},
      {"GET",
       "/v1/datasets/daily_revenue",
       "GetDataset",
       {{"name", "daily_revenue"}}},
      {"GET",
       "/v1/datasets/daily_revenue/partitions/2025-01-31:explain",
       "ExplainPartition",
       {{"dataset", "daily_revenue"}, {"partition", "2025-01-31"}}},
      {"GET",
       "/v1/datasets/daily_revenue/partitions",
       "ListDatasetPartitions",
       {{"dataset", "daily_revenue"}}},
      // A partition value may hold '/' and ':' (keys): the last variable
      // takes the rest, up to the verb.
      {"GET",
       "/v1/datasets/by_key/partitions/eu/west:3:explain",
       "ExplainPartition",
       {{"dataset", "by_key"}, {"partition", "eu/west:3"}}},
      {"GET",
       "/v1/datasets/hourly/partitions/2025-01-31T23:explain",
       "ExplainPartition",
       {{"dataset", "hourly"}, {"partition", "2025-01-31T23"}}},
      {"POST", "/v1/backfills:plan", "PlanBackfill", {}},
      {"POST", "/v1/backfills", "SubmitBackfill", {}},
      {"GET", "/v1/backfills", "ListBackfills", {}},
      {"GET", "/v1/backfills/bf-12", "GetBackfill", {{"id", "bf-12"}}},
      {"GET",
       "/v1/backfills/bf-12/partitions",
       "ListPartitions",
       {{"backfill_id", "bf-12"}}},
      {"GET", "/v1/backfills/bf-12:diff", "DiffBackfill", {{"id", "bf-12"}}},
      {"GET", "/v1/backfills/bf-12:watch", "WatchBackfill", {{"id", "bf-12"}}},
      {"POST",
       "/v1/backfills/bf-12:approve",
       "ApproveBackfill",
       {{"id", "bf-12"}}},
      {"POST",
       "/v1/backfills/bf-12:rollback",
       "RollbackBackfill",
       {{"id", "bf-12"}}},
      {"GET", "/v1/auditEvents", "ListAuditEvents", {}},
      {"POST",
       "/v1/replayPolicies/daily_revenue:pause",
       "PauseReplayPolicy",
       {{"dataset", "daily_revenue"}}},
      {"GET", "/v1/nodes", "ListNodes", {}},
      // Nothing else.
      {"GET", "/v1/backfills/bf-12:nope", "", {}},
      {"GET", "/v1/backfills/bf-12/partitions/x", "", {}},
      {"GET", "/v1/backfills/", "", {}},
      {"GET", "/v1/datasets/a/b", "", {}},
      {"GET", "/v1", "", {}},
      {"GET", "/v2/backfills", "", {}},
      {"POST", "/v1/backfills:nope", "", {}},
      {"GET", "/v1/datasets/x/partitions/:explain", "", {}},
      {"GET", "/v1/datasets/x/partitions/2025-01-31", "", {}},
      {"POST", "/v1/datasets/x/partitions", "", {}},
  };
  for (const Case& c : cases) {
    std::optional<HttpRouteMatch> match = MatchHttpRoute(c.verb, c.path);
    if (std::string(c.method).empty()) {
      EXPECT_FALSE(match.has_value())
          << c.verb << " " << c.path << " matched " << match->route->method;
      continue;
    }
    ASSERT_TRUE(match.has_value()) << c.verb << " " << c.path;
    EXPECT_EQ(match->route->method, c.method) << c.path;
    EXPECT_EQ(match->variables, c.variables) << c.path;
  }
}

TEST(HttpRoutesTest, AKnownPathUnderAnotherVerbIsToldApart) {
  bool known = false;
  EXPECT_FALSE(MatchHttpRoute("DELETE", "/v1/backfills/bf-1", &known));
  EXPECT_TRUE(known);
  EXPECT_FALSE(MatchHttpRoute("GET", "/v1/backfills/bf-1:cancel", &known));
  EXPECT_TRUE(known);
  EXPECT_FALSE(MatchHttpRoute("GET", "/v1/elsewhere", &known));
  EXPECT_FALSE(known);
}

// The field violations of an error.
std::vector<std::string> ViolatedFields(const absl::Status& status) {
  std::vector<std::string> fields;
  for (const auto& v : DetailsOf(status).field_violations) {
    fields.push_back(v.field);
  }
  return fields;
}

TEST(HttpJsonTest, QueryParametersTakeEitherSpellingDotsAndRepeats) {
  v1::ListBackfillsRequest list;
  ASSERT_TRUE(RequestFromHttp({}, false, "",
                              {{"pageSize", "7"},
                               {"page_token", "abc"},
                               {"states", "BACKFILL_STATE_RUNNING"},
                               {"states", "BACKFILL_STATE_QUEUED"}},
                              &list)
                  .ok());
  EXPECT_EQ(list.page_size(), 7);
  EXPECT_EQ(list.page_token(), "abc");
  ASSERT_EQ(list.states_size(), 2);
  EXPECT_EQ(list.states(1), v1::BACKFILL_STATE_QUEUED);

  v1::PlanBackfillRequest plan;
  ASSERT_TRUE(RequestFromHttp({}, false, "",
                              {{"request.dataset", "daily_revenue"},
                               {"request.excludeDownstream", "true"},
                               {"request.partitions", "2025-01-01"},
                               {"request.partitions", "2025-01-03"}},
                              &plan)
                  .ok());
  EXPECT_EQ(plan.request().dataset(), "daily_revenue");
  EXPECT_TRUE(plan.request().exclude_downstream());
  EXPECT_THAT(plan.request().partitions(),
              ::testing::ElementsAre("2025-01-01", "2025-01-03"));
}

TEST(HttpJsonTest, BadQueryParametersNameTheFieldAndLeaveTheRequestEmpty) {
  struct Bad {
    QueryParams query;
    std::string field;
  };
  const Bad bad[] = {
      {{{"nope", "1"}}, "nope"},
      {{{"pageSize", "seven"}}, "page_size"},
      {{{"pageSize", "99999999999"}}, "page_size"},
      {{{"states", "BACKFILL_STATE_NOPE"}}, "states[0]"},
      {{{"pageSize", "1"}, {"page_size", "2"}}, "page_size"},
  };
  for (const Bad& b : bad) {
    v1::ListBackfillsRequest list;
    list.set_page_size(3);
    absl::Status s = RequestFromHttp({}, false, "", b.query, &list);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.field;
    EXPECT_THAT(ViolatedFields(s), ::testing::ElementsAre(b.field)) << s;
    EXPECT_EQ(list.ByteSizeLong(), 0u) << b.field;
  }
  v1::PlanBackfillRequest plan;
  absl::Status s = RequestFromHttp(
      {}, false, "", {{"request.excludeDownstream", "yes"}}, &plan);
  EXPECT_THAT(ViolatedFields(s),
              ::testing::ElementsAre("request.excludeDownstream"));
  EXPECT_THAT(s.message(), HasSubstr("true or false"));
  // A message cannot be one parameter.
  s = RequestFromHttp({}, false, "", {{"request", "x"}}, &plan);
  EXPECT_THAT(ViolatedFields(s), ::testing::ElementsAre("request"));
}

TEST(HttpJsonTest, ABodyIsAJsonObjectInEitherSpellingAndThePathWins) {
  v1::ApproveBackfillRequest approve;
  ASSERT_TRUE(
      RequestFromHttp({{"id", "bf-3"}}, true,
                      R"({"reason": "ok", "override_validation": true})", {},
                      &approve)
          .ok());
  EXPECT_EQ(approve.id(), "bf-3");
  EXPECT_EQ(approve.reason(), "ok");
  EXPECT_TRUE(approve.override_validation());
  // The same id in the body is fine; another is refused.
  EXPECT_TRUE(RequestFromHttp({{"id", "bf-3"}}, true,
                              R"({"id": "bf-3", "reason": "ok"})", {}, &approve)
                  .ok());
  absl::Status s =
      RequestFromHttp({{"id", "bf-3"}}, true,
                      R"({"id": "bf-4", "reason": "ok"})", {}, &approve);
  EXPECT_THAT(ViolatedFields(s), ::testing::ElementsAre("id"));
  EXPECT_EQ(approve.ByteSizeLong(), 0u);

  struct Bad {
    std::string body;
    std::string field;  // "": no field named
    std::string says;
  };
  const Bad bad[] = {
      {R"({"reason": 5})", "reason", "invalid value 5"},
      {R"({"reasonx": "a"})", "reasonx", "Cannot find field"},
      {R"({"reason": "a")", "", "not JSON"},
      {R"([1, 2])", "", "must be a JSON object"},
      {R"("text")", "", "must be a JSON object"},
      {R"({"override_validation": "maybe"})", "override_validation", ""},
  };
  for (const Bad& b : bad) {
    s = RequestFromHttp({{"id", "bf-3"}}, true, b.body, {}, &approve);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.body;
    if (b.field.empty()) {
      EXPECT_THAT(ViolatedFields(s), ::testing::IsEmpty()) << b.body;
    } else {
      EXPECT_THAT(ViolatedFields(s), ::testing::ElementsAre(b.field))
          << b.body << ": " << s;
    }
    EXPECT_THAT(s.message(), HasSubstr(b.says)) << b.body;
    EXPECT_EQ(approve.ByteSizeLong(), 0u) << b.body;
  }
  // A body where none is taken, and a query string where a body is.
  EXPECT_EQ(RequestFromHttp({}, false, "{}", {}, &approve).code(),
            absl::StatusCode::kInvalidArgument);
  s = RequestFromHttp({}, true, "{}", {{"reason", "x"}}, &approve);
  EXPECT_THAT(ViolatedFields(s), ::testing::ElementsAre("reason"));
}

TEST(HttpJsonTest, EveryCodeHasTheHttpStatusOfTheMapping) {
  const std::pair<absl::StatusCode, int> expected[] = {
      {absl::StatusCode::kOk, 200},
      {absl::StatusCode::kCancelled, 499},
      {absl::StatusCode::kUnknown, 500},
      {absl::StatusCode::kInvalidArgument, 400},
      {absl::StatusCode::kDeadlineExceeded, 504},
      {absl::StatusCode::kNotFound, 404},
      {absl::StatusCode::kAlreadyExists, 409},
      {absl::StatusCode::kPermissionDenied, 403},
      {absl::StatusCode::kResourceExhausted, 429},
      {absl::StatusCode::kFailedPrecondition, 400},
      {absl::StatusCode::kAborted, 409},
      {absl::StatusCode::kOutOfRange, 400},
      {absl::StatusCode::kUnimplemented, 501},
      {absl::StatusCode::kInternal, 500},
      {absl::StatusCode::kUnavailable, 503},
      {absl::StatusCode::kDataLoss, 500},
      {absl::StatusCode::kUnauthenticated, 401},
  };
  for (const auto& [code, http] : expected) {
    EXPECT_EQ(HttpStatusOf(code), http) << absl::StatusCodeToString(code);
  }
}

TEST(HttpJsonTest, AnErrorBodyIsGoogleRpcStatusWithItsDetails) {
  absl::Status error = InvalidFieldError("request.dataset", "DATASET_NOT_FOUND",
                                         "no dataset \"x\" is declared");
  const std::string json = StatusToHttpJson(error);
  google::rpc::Status status;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &status).ok())
      << json;
  EXPECT_EQ(status.code(), 3);
  EXPECT_EQ(status.message(), "no dataset \"x\" is declared");
  bool info = false, request = false;
  for (const auto& any : status.details()) {
    google::rpc::ErrorInfo e;
    google::rpc::BadRequest b;
    if (any.UnpackTo(&e)) {
      info = true;
      EXPECT_EQ(e.reason(), "DATASET_NOT_FOUND");
    } else if (any.UnpackTo(&b)) {
      request = true;
      ASSERT_EQ(b.field_violations_size(), 1);
      EXPECT_EQ(b.field_violations(0).field(), "request.dataset");
    }
  }
  EXPECT_TRUE(info && request) << json;
  EXPECT_THAT(json, HasSubstr("\"fieldViolations\""));  // lowerCamelCase
}

}  // namespace
}  // namespace server_http_routes_test
}  // namespace backfill
