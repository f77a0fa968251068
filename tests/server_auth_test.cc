// In-process gRPC tests of authentication and authorization: every role
// (and no token, and a token no one was given) against every method of
// backfill.v1.BackfillService, checked against a table of who may call what
// written here by hand, not read from core/access_policy; credentials
// checked before the request is parsed; malformed authorization metadata;
// refusals counted by method and code; the authenticated principal
// recorded as who submitted, cancelled and approved (a name the client
// gives kept only as "on behalf of"); and docs/security.md's role table
// against the service's methods and the access policy. A real
// SqliteStateStore and SqliteEngine on a temporary directory, a real
// BackfillManager, the service on a gRPC server at 127.0.0.1:0 with a
// CallAuth from a token file.
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/backfill_client.h"
#include "core/base/clock.h"
#include "core/model/pipeline_loader.h"
#include "core/run/backfill_manager.h"
#include "core/run/job_observer.h"
#include "core/run/replay_keeper.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "server/access_policy.h"
#include "server/backfill_service_impl.h"
#include "server/bearer_tokens.h"
#include "server/call_auth.h"
#include "server/daemon.h"
#include "server/daemon_options.h"
#include "server/replay_policy_collector.h"
#include "server/tls_files.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "tests/testing/prometheus_text.h"
#include "tests/testing/raw_grpc.h"
#include "tests/testing/revenue_pipeline.h"
#include "tests/testing/test_pki.h"

namespace backfill {
namespace server_auth_test {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kService = "backfill.v1.BackfillService";

// Who may call what, as the API documents it. Written out per method so
// that a change of the policy shows here; every method of the service must
// be listed (a new method fails the test until someone decides).
const std::map<std::string, std::set<std::string>>& Allowed() {
  static const auto* allowed = [] {
    const std::set<std::string> everyone = {"vera", "otto", "april", "ada",
                                            "olivia"};
    const std::set<std::string> operators = {"otto", "ada", "olivia"};
    const std::set<std::string> approvers = {"april", "ada", "olivia"};
    return new std::map<std::string, std::set<std::string>>{
        {"PlanBackfill", everyone},
        {"GetBackfill", everyone},
        {"ListBackfills", everyone},
        {"WatchBackfill", everyone},
        {"ListDatasets", everyone},
        {"DiffBackfill", everyone},
        {"ExplainPartition", everyone},
        {"ListAuditEvents", everyone},
        {"ListPartitions", everyone},
        {"GetDataset", everyone},
        {"ListDatasetPartitions", everyone},
        {"SubmitBackfill", operators},
        {"CancelBackfill", operators},
        {"PauseBackfill", operators},
        {"ResumeBackfill", operators},
        {"RetryBackfill", operators},
        {"ConfirmBackfill", operators},
        {"ApproveBackfill", approvers},
        {"RollbackBackfill", approvers},
        {"ListReplayPolicies", everyone},
        {"EvaluateReplayPolicy", everyone},  // submitting: operators
        {"PauseReplayPolicy", operators},
        {"ResumeReplayPolicy", operators},
        {"ListNodes", everyone},
    };
  }();
  return *allowed;
}

// The role each refusal names, for PERMISSION_DENIED messages.
std::string NeededRole(const std::string& method) {
  const std::set<std::string>& who = Allowed().at(method);
  if (who.count("vera")) return "viewer";
  if (who.count("otto")) return "operator";
  return "approver";
}

void Exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << sql << ": " << (error ? error : "");
  sqlite3_free(error);
}

void CreateWarehouse(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::string sql =
      "CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date "
      "TEXT NOT NULL, customer_id INTEGER NOT NULL, amount REAL NOT NULL, "
      "refund REAL NOT NULL);"
      "CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, region "
      "TEXT NOT NULL);"
      "INSERT INTO dim_customers VALUES (1, 'emea'), (2, 'amer');";
  for (int day = 1; day <= 3; ++day) {
    absl::StrAppendFormat(&sql,
                          "INSERT INTO raw_orders (order_date, customer_id, "
                          "amount, refund) VALUES ('2025-03-%02d', %d, %d, "
                          "0);",
                          day, 1 + day % 2, 10 * day);
  }
  Exec(db, sql);
  sqlite3_close(db);
}

class ServerAuthTest : public ::testing::Test {
 protected:
  // The port's credentials (plaintext here; TLS in ServerTlsTest) and
  // whether it verifies client certificates.
  virtual std::shared_ptr<grpc::ServerCredentials> Credentials() {
    return grpc::InsecureServerCredentials();
  }
  virtual bool ClientCertificates() { return false; }

  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartService()); }

  void StartService() {
    std::string tmpl =
        (fs::temp_directory_path() / "backfill-auth-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const std::string warehouse = (fs::path(dir_) / "warehouse.db").string();
    ASSERT_NO_FATAL_FAILURE(CreateWarehouse(warehouse));
    // daily_revenue's jobs wait for an approval before they publish, and
    // its days before March are closed.
    absl::StatusOr<Catalog> catalog = LoadPipelineTexts(
        {{"pipeline.yaml",
          absl::StrReplaceAll(fixtures::RevenuePipelineYaml(),
                              {{"  - name: daily_revenue\n    kind: derived\n",
                                "  - name: daily_revenue\n    kind: derived\n"
                                "    require_approval: true\n"
                                "    frozen: {before: 2025-03-01}\n"
                                "    replay: {on: [input_change], "
                                "window: 3650d}\n"}})}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<Catalog>(*std::move(catalog));
    auto store = SqliteStateStore::Open((fs::path(dir_) / "state.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto engine = SqliteEngine::Open(warehouse, 4);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    ManagerOptions options;
    options.workers = 2;
    options.max_attempts = 1;
    manager_ = std::make_unique<BackfillManager>(catalog_.get(), store_.get(),
                                                 engine_.get(), &clock_,
                                                 &observer_, options);
    ASSERT_TRUE(manager_->Start().ok());

    // The token file, as an administrator writes it: digests only.
    std::string file = "tokens:\n";
    for (const auto& [name, roles] :
         std::vector<std::pair<std::string, std::string>>{
             {"vera", "viewer"},
             {"otto", "operator"},
             {"april", "approver"},
             {"ada", "admin"},
             {"olivia", "operator, approver"}}) {
      tokens_[name] = absl::StrCat("tok-", name, "-4f1c9a7e0b2d");
      absl::StrAppend(
          &file, "  - {principal: ", name, ", roles: [", roles,
          "], sha256: ", HexDigest(Sha256Of(tokens_[name])),
          ClientCertificates() && (name == "otto" || name == "olivia")
              ? ", client_certificate: true"
              : "",
          "}\n");
    }
    auto tokens = BearerTokens::Parse(file, "tokens.yaml");
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    auth_ = std::make_unique<CallAuth>(
        std::make_shared<const BearerTokens>(*std::move(tokens)), &registry_,
        ClientCertificates());

    api_ = std::make_unique<BackfillApi>(
        manager_.get(), absl::Milliseconds(100), kMaxListPageBytes);
    service_ = std::make_unique<BackfillServiceImpl>(api_.get(), auth_.get());
    // The policies are looked at on demand only (no loop).
    replay_ = std::make_unique<ReplayKeeper>(manager_.get(), engine_.get(),
                                             store_.get(), &clock_,
                                             ReplayKeeper::Options{});
    api_->SetReplayKeeper(replay_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", Credentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    target_ = absl::StrCat("127.0.0.1:", port);
  }

  void TearDown() override {
    if (server_) {
      api_->BeginShutdown();
      server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
      server_->Wait();
    }
    if (manager_) manager_->Shutdown();
    server_.reset();
    service_.reset();
    replay_.reset();
    manager_.reset();
    engine_.reset();
    store_.reset();
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // A client that sends `name`'s token ("" for none), over `security`.
  std::unique_ptr<BackfillClient> ClientOf(
      const std::string& name, const ChannelSecurity& security = {}) {
    auto client = BackfillClient::Connect(target_, security);
    client->set_rpc_timeout(absl::Seconds(30));
    if (!name.empty()) client->set_token(tokens_.at(name));
    return client;
  }

  grpc::Status Call(
      const std::string& method, const std::string& request,
      const std::vector<std::pair<std::string, std::string>>& metadata) {
    std::string response;
    return testing::RawCall(target_, absl::StrCat("/", kService, "/", method),
                            request, &response, metadata);
  }

  // The value of backfill_auth_refusals_total{grpc_method, grpc_code}.
  double Refusals(const std::string& method, const std::string& code) {
    const std::string text =
        prometheus::TextSerializer().Serialize(registry_.Collect());
    for (const testing::PromSample& s : testing::ParseSamples(text)) {
      if (s.name == "backfill_auth_refusals_total" &&
          s.labels.count("grpc_method") &&
          s.labels.at("grpc_method") == method && s.labels.count("grpc_code") &&
          s.labels.at("grpc_code") == code) {
        return s.value;
      }
    }
    return 0;
  }

  std::string dir_;
  SystemClock clock_;
  JobObserver observer_;
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<BackfillManager> manager_;
  prometheus::Registry registry_;
  std::map<std::string, std::string> tokens_;
  std::unique_ptr<CallAuth> auth_;
  std::unique_ptr<ReplayKeeper> replay_;
  std::unique_ptr<BackfillApi> api_;
  std::unique_ptr<BackfillServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string target_;
};

TEST_F(ServerAuthTest, EveryRoleAgainstEveryMethod) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          kService);
  ASSERT_NE(service, nullptr);
  int calls = 0;
  for (int m = 0; m < service->method_count(); ++m) {
    const std::string method = service->method(m)->name();
    ASSERT_TRUE(Allowed().count(method))
        << method << " is not in this test's table: decide who may call it";
    // An empty request: what an admitted call answers (INVALID_ARGUMENT for
    // a missing id, a list) changes nothing.
    for (const char* who_text :
         {"", "stranger", "vera", "otto", "april", "ada", "olivia"}) {
      const std::string who = who_text;
      std::vector<std::pair<std::string, std::string>> metadata;
      if (who == "stranger") {
        metadata.push_back({"authorization", "Bearer tok-stranger-000"});
      } else if (!who.empty()) {
        metadata.push_back({"authorization", "Bearer " + tokens_.at(who)});
      }
      const grpc::Status status = Call(method, "", metadata);
      ++calls;
      SCOPED_TRACE(absl::StrCat(method, " by '", who,
                                "': ", status.error_code(), " ",
                                status.error_message()));
      if (who.empty() || who == "stranger") {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
      } else if (Allowed().at(method).count(who)) {
        EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
        EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
      } else {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
        EXPECT_THAT(status.error_message(), HasSubstr("principal " + who));
        EXPECT_THAT(status.error_message(), HasSubstr(method));
        EXPECT_THAT(status.error_message(),
                    HasSubstr("requires the " + NeededRole(method) + " role"));
      }
      // A refusal never repeats a token.
      EXPECT_THAT(status.error_message(), Not(HasSubstr("tok-")));
    }
  }
  EXPECT_EQ(calls, 7 * service->method_count());
}

TEST_F(ServerAuthTest, CredentialsAreCheckedBeforeTheRequestIsRead) {
  // A request that does not parse (a text field that is not UTF-8): without
  // credentials, or with a role that may not call the method, the answer
  // says nothing about the request.
  const std::string bad_utf8 = std::string("\x0a\x03\x12\x01\xff", 5);
  EXPECT_EQ(Call("SubmitBackfill", bad_utf8, {}).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Call("SubmitBackfill", bad_utf8,
                 {{"authorization", "Bearer " + tokens_["vera"]}})
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Call("SubmitBackfill", bad_utf8,
                 {{"authorization", "Bearer " + tokens_["otto"]}})
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServerAuthTest, AuthorizationMetadataMustBeOneBearerToken) {
  const std::string token = tokens_["vera"];
  struct Case {
    std::vector<std::pair<std::string, std::string>> metadata;
    grpc::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{}, grpc::StatusCode::UNAUTHENTICATED, "requires a bearer token"},
      {{{"authorization", token}},
       grpc::StatusCode::UNAUTHENTICATED,
       "must be \"Bearer <token>\""},
      {{{"authorization", "Basic " + token}},
       grpc::StatusCode::UNAUTHENTICATED,
       "must be \"Bearer <token>\""},
      {{{"authorization", "Bearer "}},
       grpc::StatusCode::UNAUTHENTICATED,
       "must be \"Bearer <token>\""},
      {{{"authorization", "Bearer " + token + "x"}},
       grpc::StatusCode::UNAUTHENTICATED,
       "not one this backfilld knows"},
      {{{"authorization", "Bearer " + token},
        {"authorization", "Bearer " + token}},
       grpc::StatusCode::UNAUTHENTICATED,
       "more than one"},
      // The scheme in any case, spaces around the token: still the token.
      {{{"authorization", "bearer   " + token + "  "}},
       grpc::StatusCode::OK,
       ""},
      {{{"authorization", "BEARER " + token}}, grpc::StatusCode::OK, ""},
  };
  for (const Case& c : cases) {
    const grpc::Status status = Call("ListDatasets", "", c.metadata);
    SCOPED_TRACE(c.metadata.empty() ? "(none)" : c.metadata[0].second);
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.says));
    EXPECT_THAT(status.error_message(), Not(HasSubstr(token)));
  }
}

TEST_F(ServerAuthTest, RefusalsAreCountedByMethodAndCode) {
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(Call("CancelBackfill", "", {}).ok());
  EXPECT_FALSE(Call("CancelBackfill", "",
                    {{"authorization", "Bearer " + tokens_["vera"]}})
                   .ok());
  EXPECT_FALSE(Call("ApproveBackfill", "",
                    {{"authorization", "Bearer " + tokens_["otto"]}})
                   .ok());
  // Admitted calls are not refusals, whatever they answer.
  EXPECT_FALSE(Call("CancelBackfill", "",
                    {{"authorization", "Bearer " + tokens_["otto"]}})
                   .ok());
  EXPECT_EQ(Refusals("CancelBackfill", "UNAUTHENTICATED"), 3);
  EXPECT_EQ(Refusals("CancelBackfill", "PERMISSION_DENIED"), 1);
  EXPECT_EQ(Refusals("ApproveBackfill", "PERMISSION_DENIED"), 1);
  EXPECT_EQ(Refusals("ApproveBackfill", "UNAUTHENTICATED"), 0);
}

TEST_F(ServerAuthTest, TheAuthenticatedPrincipalIsWhoActed) {
  auto olivia = ClientOf("olivia");
  auto otto = ClientOf("otto");
  auto april = ClientOf("april");

  // Submitted in someone's name: recorded as on their behalf.
  v1::BackfillRequest request;
  request.set_dataset("daily_revenue");
  request.set_from_partition("2025-03-01");
  request.set_to_partition("2025-03-03");
  request.set_reason("refunds were ignored");
  request.set_requested_by("ci-nightly");
  auto first = olivia->Submit(request, "key-1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->backfill().request().requested_by(),
            "olivia (on behalf of ci-nightly)");
  // Under its own name, or none: the principal alone.
  request.set_from_partition("2025-03-03");
  request.set_to_partition("2025-03-04");
  request.set_requested_by("otto");
  auto second = otto->Submit(request, "key-2");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->backfill().request().requested_by(), "otto");

  // Both wait for an approval once they are validated; until then a job
  // past its recompute can be neither approved nor cancelled.
  auto await_approval = [&](const std::string& job_id) {
    absl::StatusOr<v1::Backfill> job;
    for (int i = 0; i < 300; ++i) {
      job = olivia->Get(job_id);
      ASSERT_TRUE(job.ok()) << job.status();
      if (job->state() == v1::BACKFILL_STATE_AWAITING_APPROVAL) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    ASSERT_EQ(job->state(), v1::BACKFILL_STATE_AWAITING_APPROVAL);
  };

  // april approves the first, claiming to be someone else.
  const std::string id = first->backfill().id();
  ASSERT_NO_FATAL_FAILURE(await_approval(id));
  v1::ApproveBackfillRequest approve;
  approve.set_id(id);
  approve.set_reason("checked the diff");
  approve.set_approved_by("the boss");
  auto approved = april->Approve(approve);
  ASSERT_TRUE(approved.ok()) << approved.status();
  EXPECT_EQ(approved->approval().approved_by(),
            "april (on behalf of the boss)");

  // otto cancels the second: the audit log names him.
  ASSERT_NO_FATAL_FAILURE(await_approval(second->backfill().id()));
  auto cancelled = otto->Cancel(second->backfill().id(), "not needed");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  v1::ListAuditEventsRequest audit;
  audit.set_backfill_id(second->backfill().id());
  auto events = ClientOf("vera")->ListAuditEvents(audit);
  ASSERT_TRUE(events.ok()) << events.status();
  bool named = false;
  for (const v1::AuditEvent& e : events->events()) {
    named = named || absl::StrContains(e.message(), "cancelled by otto");
  }
  EXPECT_TRUE(named) << events->DebugString();
}

TEST_F(ServerAuthTest, OnlyAnApproverReopensAFrozenPeriod) {
  v1::BackfillRequest request;
  request.set_dataset("daily_revenue");
  request.set_from_partition("2025-02-27");
  request.set_to_partition("2025-03-02");
  request.set_reason("late refunds");
  // Without the override the closed days are left out, and listed.
  auto plan = ClientOf("vera")->Plan(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GE(plan->datasets_size(), 1);
  EXPECT_THAT(plan->datasets(0).partitions(), ElementsAre("2025-03-01"));
  ASSERT_EQ(plan->frozen_size(), 1);
  EXPECT_EQ(plan->frozen(0).dataset(), "daily_revenue");
  EXPECT_EQ(plan->frozen(0).rule(), "frozen.before 2025-03-01");
  EXPECT_THAT(plan->frozen(0).partitions(),
              ElementsAre("2025-02-27", "2025-02-28"));
  EXPECT_FALSE(plan->frozen(0).overridden());

  // An operator may not reopen them; nothing is created.
  request.set_override_frozen(true);
  auto refused = ClientOf("otto")->Submit(request, "frozen-1");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied)
      << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("override_frozen (--override-frozen) needs the "
                        "approver role; otto holds operator"));
  v1::ListBackfillsRequest list;
  auto jobs = ClientOf("vera")->List(list);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->backfills_size(), 0);

  // olivia (operator and approver) may; the audit log keeps what she
  // reopened, and each such partition says so.
  auto made = ClientOf("olivia")->Submit(request, "frozen-2");
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(made->backfill().request().override_frozen());
  ASSERT_GE(made->backfill().plan_size(), 1);
  EXPECT_THAT(made->backfill().plan(0).partition_reasons(),
              ElementsAre("requested; frozen by frozen.before 2025-03-01, "
                          "overridden",
                          "requested; frozen by frozen.before 2025-03-01, "
                          "overridden",
                          "requested"));
  v1::ListAuditEventsRequest audit;
  audit.set_backfill_id(made->backfill().id());
  auto events = ClientOf("vera")->ListAuditEvents(audit);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_GE(events->events_size(), 1);
  EXPECT_THAT(events->events(0).message(),
              HasSubstr("overriding frozen partitions daily_revenue "
                        "2025-02-27,2025-02-28 (frozen.before 2025-03-01), "
                        "reason: late refunds"));
}

TEST_F(ServerAuthTest, ReplayPoliciesAreListedEvaluatedPausedAndResumed) {
  const auto call = [&](const std::string& who, const std::string& method,
                        const google::protobuf::Message& request,
                        google::protobuf::Message* response) {
    std::string bytes;
    const grpc::Status status =
        testing::RawCall(target_, absl::StrCat("/", kService, "/", method),
                         request.SerializeAsString(), &bytes,
                         {{"authorization", "Bearer " + tokens_.at(who)}});
    if (status.ok()) {
      EXPECT_TRUE(response->ParseFromString(bytes));
    }
    return status;
  };
  v1::ListReplayPoliciesResponse listed;
  ASSERT_TRUE(call("vera", "ListReplayPolicies",
                   v1::ListReplayPoliciesRequest(), &listed)
                  .ok());
  ASSERT_EQ(listed.policies_size(), 1);
  const v1::ReplayPolicy& policy = listed.policies(0);
  EXPECT_EQ(policy.dataset(), "daily_revenue");
  EXPECT_THAT(policy.triggers(), ElementsAre("input_change"));
  EXPECT_EQ(policy.window(), "3650d");
  EXPECT_EQ(policy.check_every(), "5m");
  EXPECT_EQ(policy.frozen(), "frozen.before 2025-03-01");
  EXPECT_FALSE(policy.paused());
  EXPECT_FALSE(policy.has_last_evaluation());

  // A look: nothing published yet, nothing due.
  v1::EvaluateReplayPolicyRequest look;
  look.set_dataset("daily_revenue");
  v1::ReplayEvaluation ev;
  ASSERT_TRUE(call("vera", "EvaluateReplayPolicy", look, &ev).ok());
  EXPECT_EQ(ev.outcome(), "nothing due");
  // Submitting needs an operator.
  look.set_submit(true);
  const grpc::Status viewer = call("vera", "EvaluateReplayPolicy", look, &ev);
  EXPECT_EQ(viewer.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(viewer.error_message(),
              HasSubstr("submitting a replay (`submit`) needs the operator "
                        "role; vera holds viewer"));
  ASSERT_TRUE(call("otto", "EvaluateReplayPolicy", look, &ev).ok());
  EXPECT_EQ(ev.outcome(), "nothing due");
  // The metrics of the two evaluations.
  const std::string scraped = prometheus::TextSerializer().Serialize(
      ReplayPolicyCollector(replay_.get()).Collect());
  EXPECT_THAT(scraped, HasSubstr("backfill_replay_due_partitions{dataset="
                                 "\"daily_revenue\"} 0"));
  EXPECT_THAT(scraped,
              HasSubstr("backfill_replay_evaluations_total{dataset="
                        "\"daily_revenue\",result=\"nothing_due\"} 2"));
  EXPECT_THAT(scraped, HasSubstr("backfill_replay_last_evaluation_timestamp_"
                                 "seconds{dataset=\"daily_revenue\"}"));
  // A dataset without a policy.
  look.set_dataset("customers");
  const grpc::Status none = call("otto", "EvaluateReplayPolicy", look, &ev);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(none.error_message(),
              HasSubstr("dataset \"customers\" declares no replay policy"));

  // Pausing needs a reason; the policy says it is paused, and why.
  v1::PauseReplayPolicyRequest pause;
  pause.set_dataset("daily_revenue");
  v1::ReplayPolicy paused;
  EXPECT_EQ(call("otto", "PauseReplayPolicy", pause, &paused).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  pause.set_reason("warehouse maintenance");
  ASSERT_TRUE(call("otto", "PauseReplayPolicy", pause, &paused).ok());
  EXPECT_TRUE(paused.paused());
  EXPECT_EQ(paused.paused_reason(), "paused by otto: warehouse maintenance");
  v1::ResumeReplayPolicyRequest resume;
  resume.set_dataset("daily_revenue");
  v1::ReplayPolicy resumed;
  ASSERT_TRUE(call("otto", "ResumeReplayPolicy", resume, &resumed).ok());
  EXPECT_FALSE(resumed.paused());
  EXPECT_EQ(resumed.paused_reason(), "");
}

// The same service on a port that serves TLS with the test CA's server
// certificate and requires client certificates of that CA; otto and olivia
// may also sign in with theirs.
class ServerTlsTest : public ServerAuthTest {
 protected:
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "backfill-pki-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    pki_ = tmpl;
    ASSERT_TRUE(testing::MakeTestPki(pki_, {"otto", "olivia", "carol"}));
    ASSERT_NO_FATAL_FAILURE(StartService());
  }
  void TearDown() override {
    ServerAuthTest::TearDown();
    std::error_code ec;
    fs::remove_all(pki_, ec);
  }
  std::shared_ptr<grpc::ServerCredentials> Credentials() override {
    grpc::SslServerCredentialsOptions ssl(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = Pem("ca.pem");
    ssl.pem_key_cert_pairs.push_back({Pem("server.key"), Pem("server.pem")});
    return grpc::SslServerCredentials(ssl);
  }
  bool ClientCertificates() override { return true; }

  std::string Pem(const std::string& name) {
    return testing::ReadPem(pki_ + "/" + name);
  }
  // TLS trusting `ca`, with `who`'s certificate ("" for none).
  ChannelSecurity Tls(const std::string& who, const std::string& ca = "ca") {
    ChannelSecurity security;
    security.tls = true;
    security.ca = Pem(ca + ".pem");
    if (!who.empty()) {
      security.cert = Pem(who + ".pem");
      security.key = Pem(who + ".key");
    }
    return security;
  }

  std::string pki_;
};

TEST_F(ServerTlsTest, OnlyAVerifiedClientOfTheRightCaConnects) {
  // Plaintext, TLS without a certificate, a certificate of another CA, and
  // a server certificate the client does not trust: no connection at all.
  struct Case {
    const char* what;
    ChannelSecurity security;
  };
  const std::vector<Case> cases = {
      {"plaintext", ChannelSecurity{}},
      {"no client certificate", Tls("")},
      {"a client certificate of another CA", Tls("stranger")},
      {"a server CA the client does not trust", Tls("otto", "other-ca")},
  };
  for (const Case& c : cases) {
    auto client = ClientOf("", c.security);
    client->set_rpc_timeout(absl::Seconds(10));
    auto datasets = client->ListDatasets();
    EXPECT_EQ(datasets.status().code(), absl::StatusCode::kUnavailable)
        << c.what << ": " << datasets.status();
  }
  auto otto = ClientOf("", Tls("otto"));
  EXPECT_TRUE(otto->ListDatasets().ok());
}

TEST_F(ServerTlsTest, ACertificateSignsInAsItsCommonName) {
  v1::BackfillRequest request;
  request.set_dataset("daily_revenue");
  request.set_from_partition("2025-03-01");
  request.set_to_partition("2025-03-02");
  request.set_reason("refunds were ignored");
  // otto (operator by the token file) submits with his certificate alone.
  auto otto = ClientOf("", Tls("otto"));
  auto submitted = otto->Submit(request, "key-tls-1");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->backfill().request().requested_by(), "otto");
  v1::ApproveBackfillRequest approve;
  approve.set_id(submitted->backfill().id());
  approve.set_reason("looks right");
  auto denied = otto->Approve(approve);
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.status().message(), HasSubstr("principal otto"));

  // carol's certificate is valid, but the token file does not list her.
  auto carol = ClientOf("", Tls("carol"))->ListDatasets();
  EXPECT_EQ(carol.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(carol.status().message(), HasSubstr("Common Name \"carol\""));

  // A token goes before the certificate: vera's token over otto's
  // certificate is vera, who may read but not submit.
  auto vera = ClientOf("vera", Tls("otto"));
  EXPECT_TRUE(vera->ListDatasets().ok());
  auto refused = vera->Submit(request, "key-tls-2");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.status().message(), HasSubstr("principal vera"));
}

TEST(TlsFilesTest, SaysWhichFileIsWrong) {
  std::string dir =
      (fs::temp_directory_path() / "backfill-pki-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  ASSERT_TRUE(testing::MakeTestPki(dir, {"otto"}));
  const std::string at = dir + "/";
  auto good = LoadTlsFiles(at + "server.pem", at + "server.key", at + "ca.pem");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_THAT(good->cert_chain, HasSubstr("BEGIN CERTIFICATE"));
  EXPECT_THAT(good->client_ca, HasSubstr("BEGIN CERTIFICATE"));
  struct Case {
    std::string cert, key, ca, says;
  };
  const std::vector<Case> cases = {
      {at + "missing.pem", at + "server.key", "", "--tls-cert: cannot read"},
      {at + "server.key", at + "server.key", "",
       "--tls-cert: " + at +
           "server.key holds no PEM "
           "certificate"},
      {at + "server.pem", at + "server.pem", "",
       "--tls-key: " + at +
           "server.pem holds no "
           "unencrypted PEM private "
           "key"},
      {at + "server.pem", at + "otto.key", "",
       "--tls-key: " + at + "otto.key is not the key of the certificate in " +
           at + "server.pem"},
      {at + "server.pem", at + "server.key", at + "ca.key",
       "--tls-client-ca: " + at + "ca.key holds no PEM certificate"},
  };
  for (const Case& c : cases) {
    auto files = LoadTlsFiles(c.cert, c.key, c.ca);
    EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument)
        << c.says;
    EXPECT_THAT(files.status().message(), HasSubstr(c.says));
  }

  // Which combinations may listen where.
  DaemonOptions options;
  options.listen = "0.0.0.0:50051";
  options.tls_cert_file = at + "server.pem";
  EXPECT_THAT(Daemon::CheckSecurityOptions(options).message(),
              HasSubstr("--tls-cert and --tls-key go together"));
  options.tls_key_file = at + "server.key";
  // Encrypted but anyone may call: refused.
  EXPECT_THAT(Daemon::CheckSecurityOptions(options).message(),
              HasSubstr("no caller is authenticated"));
  options.tls_client_ca_file = at + "ca.pem";
  EXPECT_TRUE(Daemon::CheckSecurityOptions(options).ok());
  // Tokens without TLS: they would cross the network in the clear.
  const std::string tokens = at + "tokens.yaml";
  {
    std::ofstream out(tokens);
    out << "tokens:\n  - {principal: otto, roles: [operator], "
           "client_certificate: true}\n";
  }
  DaemonOptions plain;
  plain.listen = "0.0.0.0:50051";
  plain.auth_tokens_file = tokens;
  EXPECT_THAT(Daemon::CheckSecurityOptions(plain).message(),
              HasSubstr("client_certificate: true, but without "
                        "--tls-client-ca"));
  options.auth_tokens_file = tokens;
  EXPECT_TRUE(Daemon::CheckSecurityOptions(options).ok());
  fs::remove_all(dir);
}

// The role docs/security.md gives each method: the row of its "Roles"
// table ("| `viewer` | `PlanBackfill`, ... |") whose second cell names the
// method in backquotes. Names in more than one row are in `twice`.
std::map<std::string, std::string> DocumentedRoles(
    std::set<std::string>* twice) {
  std::ifstream in(std::string(BACKFILL_SOURCE_DIR) + "/docs/security.md");
  std::map<std::string, std::string> roles;
  std::string line;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "## ")) in_section = line == "## Roles";
    if (!in_section || !absl::StartsWith(line, "| `")) continue;
    const std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() < 3) continue;
    const std::string role(
        absl::StripAsciiWhitespace(absl::StrReplaceAll(cells[1], {{"`", ""}})));
    // The backquoted words of the second cell that name a method (an
    // upper-case initial; `backfillctl plan` and the like are commands).
    const std::vector<std::string> quoted = absl::StrSplit(cells[2], '`');
    for (size_t i = 1; i < quoted.size(); i += 2) {
      const std::string& word = quoted[i];
      if (word.empty() || !absl::ascii_isupper(word[0])) continue;
      if (!roles.emplace(word, role).second) twice->insert(word);
    }
  }
  return roles;
}

TEST(AccessPolicyDocsTest, EveryMethodIsInTheRoleTableWithTheRoleEnforced) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          kService);
  ASSERT_NE(service, nullptr);
  std::set<std::string> twice;
  const std::map<std::string, std::string> documented = DocumentedRoles(&twice);
  ASSERT_FALSE(documented.empty()) << "no role table in docs/security.md";
  EXPECT_THAT(twice, ::testing::IsEmpty());
  std::set<std::string> methods;
  for (int m = 0; m < service->method_count(); ++m) {
    const std::string method = service->method(m)->name();
    methods.insert(method);
    // What CallAuth enforces: the method's role, admin for one the policy
    // does not name.
    const std::string enforced(
        RoleName(RequiredRole(method).value_or(Role::kAdmin)));
    const auto it = documented.find(method);
    if (enforced == "admin") {
      EXPECT_EQ(it, documented.end())
          << method << " is open to admins only, but docs/security.md lists "
          << "it for " << it->second;
      continue;
    }
    ASSERT_NE(it, documented.end())
        << method << " is missing from docs/security.md's role table (the "
        << "code requires the " << enforced << " role)";
    EXPECT_EQ(it->second, enforced)
        << method << ": docs/security.md says " << it->second
        << ", the code requires " << enforced;
  }
  for (const auto& [name, role] : documented) {
    EXPECT_TRUE(methods.count(name) > 0)
        << "docs/security.md lists " << name << " (" << role
        << "), which is no method of " << kService;
  }
}

TEST(BearerTokenOfTest, ReadsTheTokenOfABearerHeader) {
  EXPECT_EQ(*BearerTokenOf("Bearer abc"), "abc");
  EXPECT_EQ(*BearerTokenOf("  bearer \tabc\t "), "abc");
  EXPECT_FALSE(BearerTokenOf("Bearerabc").ok());
  EXPECT_FALSE(BearerTokenOf("Bearer").ok());
  EXPECT_FALSE(BearerTokenOf("Token abc").ok());
  EXPECT_FALSE(BearerTokenOf("").ok());
}

TEST(ListenSecurityTest, OnlyLoopbackAndUnixSocketsAreLocal) {
  for (const char* local : {"127.0.0.1:50051", "127.1.2.3:0", "localhost:50051",
                            "LOCALHOST:1", "[::1]:50051"}) {
    EXPECT_TRUE(IsLocalOnlyAddress(local)) << local;
  }
  for (const char* exposed :
       {"0.0.0.0:50051", "[::]:50051", "10.0.0.5:50051", "db.internal:50051",
        "128.0.0.1:1", "127.0.0:1", "127.0.0.256:1", "127.0.0.+1:1",
        "[::1:50051", "127.0.0.1.example.com:1", ":50051"}) {
    EXPECT_FALSE(IsLocalOnlyAddress(exposed)) << exposed;
  }
}

TEST(ListenSecurityTest, AnExposedPortNeedsInsecure) {
  DaemonOptions options;
  options.listen = "0.0.0.0:50051";
  absl::Status refused = Daemon::CheckSecurityOptions(options);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("--listen 0.0.0.0:50051"));
  EXPECT_THAT(refused.message(), HasSubstr("--insecure"));
  options.insecure = true;
  EXPECT_TRUE(Daemon::CheckSecurityOptions(options).ok());
  options.insecure = false;
  options.listen = "127.0.0.1:0";
  EXPECT_TRUE(Daemon::CheckSecurityOptions(options).ok());
  // A token file that does not load is a bad flag.
  options.auth_tokens_file = "/nonexistent/tokens.yaml";
  absl::Status bad = Daemon::CheckSecurityOptions(options);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("--auth-tokens: cannot read"));
}

TEST(ListenSecurityTest, TheHttpPortFollowsTheGrpcPortsRules) {
  DaemonOptions options;
  options.data_dir = "/tmp/unused";
  options.listen = "127.0.0.1:50051";
  options.http_listen = "0.0.0.0:8080";
  absl::Status refused = Daemon::CheckSecurityOptions(options);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("--http-listen 0.0.0.0:8080"));
  EXPECT_THAT(refused.message(), HasSubstr("not encrypted"));
  options.insecure = true;
  EXPECT_TRUE(Daemon::CheckSecurityOptions(options).ok());
  options.insecure = false;
  options.http_listen = "localhost:8080";
  EXPECT_TRUE(Daemon::CheckSecurityOptions(options).ok());
  // HOST:PORT, and a port of its own.
  for (const std::string bad : {"8080", "127.0.0.1:", "127.0.0.1:50051",
                                "127.0.0.1:9464", "127.0.0.1:70000"}) {
    options.http_listen = bad;
    absl::Status s = CheckServingOptions(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--http-listen")) << bad;
  }
  options.http_listen = "[::1]:8080";
  EXPECT_TRUE(CheckServingOptions(options).ok());
  options.http_listen = "";
  EXPECT_TRUE(CheckServingOptions(options).ok());
}

}  // namespace
}  // namespace server_auth_test
}  // namespace backfill
