// The Grafana dashboard in deploy/grafana, checked for what a reader of
// each panel sees: a value shown as a duration measures seconds, a
// consumer's health shows red when it is unhealthy and green when it is
// healthy (by Grafana's rules: value mappings first, then thresholds, and
// Grafana's default thresholds when a panel declares none), and the gRPC
// error ratio is 0, not "No data", for methods called without errors
// (evaluated by promtool on series written here). That every metric of
// the dashboard is exported and every expression parses is checked against
// a real scrape by server_observability_test.

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace backfill {
namespace deploy_grafana_dashboard_test {
namespace {

namespace fs = std::filesystem;

// The dashboard; JSON is YAML, so yaml-cpp reads it.
YAML::Node Dashboard() {
  return YAML::LoadFile(std::string(BACKFILL_SOURCE_DIR) +
                        "/deploy/grafana/backfilld.json");
}

// Every panel, rows' nested panels included.
std::vector<YAML::Node> Panels(const YAML::Node& dashboard) {
  std::vector<YAML::Node> out;
  for (const YAML::Node& panel : dashboard["panels"]) {
    out.push_back(panel);
    if (panel["panels"]) {
      for (const YAML::Node& nested : panel["panels"]) out.push_back(nested);
    }
  }
  return out;
}

std::string Title(const YAML::Node& panel) {
  return panel["title"] ? panel["title"].as<std::string>() : "(untitled)";
}

// The panel with a target whose expression contains `text`.
std::optional<YAML::Node> PanelWithExpr(const std::string& text) {
  for (const YAML::Node& panel : Panels(Dashboard())) {
    if (!panel["targets"]) continue;
    for (const YAML::Node& target : panel["targets"]) {
      if (target["expr"] &&
          absl::StrContains(target["expr"].as<std::string>(), text)) {
        return panel;
      }
    }
  }
  return std::nullopt;
}

// The unit Grafana shows `target` of `panel` in: an override matching the
// target's query (byFrameRefID) or its series name (byName, the legend),
// else the panel's default; "" when none is set.
std::string UnitOf(const YAML::Node& panel, const YAML::Node& target) {
  std::string unit;
  const YAML::Node config = panel["fieldConfig"];
  if (config && config["defaults"] && config["defaults"]["unit"]) {
    unit = config["defaults"]["unit"].as<std::string>();
  }
  if (!config || !config["overrides"]) return unit;
  const std::string ref =
      target["refId"] ? target["refId"].as<std::string>() : std::string();
  const std::string legend = target["legendFormat"]
                                 ? target["legendFormat"].as<std::string>()
                                 : std::string();
  for (const YAML::Node& override_node : config["overrides"]) {
    const std::string id = override_node["matcher"]["id"].as<std::string>();
    const std::string options =
        override_node["matcher"]["options"].as<std::string>();
    const bool matches = (id == "byFrameRefID" && options == ref) ||
                         (id == "byName" && options == legend);
    if (!matches) continue;
    for (const YAML::Node& property : override_node["properties"]) {
      if (property["id"].as<std::string>() == "unit") {
        unit = property["value"].as<std::string>();
      }
    }
  }
  return unit;
}

TEST(GrafanaDashboardTest, OnlySecondsAreShownAsDurations) {
  // Grafana's time units.
  const std::set<std::string> durations = {
      "ns", "µs",          "ms",           "s",      "m",      "h",
      "d",  "dtdurations", "dtdurationms", "dtdhms", "clocks", "clockms"};
  int checked = 0;
  for (const YAML::Node& panel : Panels(Dashboard())) {
    if (!panel["targets"]) continue;
    for (const YAML::Node& target : panel["targets"]) {
      const std::string expr = target["expr"].as<std::string>();
      const std::string unit = UnitOf(panel, target);
      ++checked;
      if (durations.count(unit) == 0) continue;
      EXPECT_TRUE(absl::StrContains(expr, "_seconds"))
          << "panel \"" << Title(panel) << "\", query "
          << target["refId"].as<std::string>() << " (" << expr
          << ") is shown in unit " << unit << " but measures no seconds metric";
    }
  }
  EXPECT_GE(checked, 20);
}

// The color Grafana gives a stat panel's value `value`: a value mapping
// that matches it, else the last threshold step at or below it (Grafana's
// default steps, green then red from 80, when the panel declares none).
std::string ColorOf(const YAML::Node& panel, double value) {
  const YAML::Node defaults = panel["fieldConfig"]["defaults"];
  std::ostringstream text;
  text << value;
  if (defaults && defaults["mappings"]) {
    for (const YAML::Node& mapping : defaults["mappings"]) {
      if (mapping["type"].as<std::string>() != "value") continue;
      const YAML::Node result = mapping["options"][text.str()];
      if (result && result["color"]) return result["color"].as<std::string>();
    }
  }
  std::vector<std::pair<std::optional<double>, std::string>> steps = {
      {std::nullopt, "green"}, {80, "red"}};
  if (defaults && defaults["thresholds"] && defaults["thresholds"]["steps"]) {
    steps.clear();
    for (const YAML::Node& step : defaults["thresholds"]["steps"]) {
      std::optional<double> from;
      if (step["value"] && !step["value"].IsNull()) {
        from = step["value"].as<double>();
      }
      steps.emplace_back(from, step["color"].as<std::string>());
    }
  }
  std::string color;
  for (const auto& [from, step_color] : steps) {
    if (!from.has_value() || *from <= value) color = step_color;
  }
  return color;
}

TEST(GrafanaDashboardTest, AnUnhealthyConsumerIsRedAndAHealthyOneGreen) {
  const std::optional<YAML::Node> panel =
      PanelWithExpr("backfill_downstream_healthy{");
  ASSERT_TRUE(panel.has_value());
  // backfill_downstream_healthy: 1 healthy, 0 unhealthy.
  EXPECT_THAT(ColorOf(*panel, 0), ::testing::HasSubstr("red"))
      << "an unhealthy consumer (0)";
  EXPECT_THAT(ColorOf(*panel, 1), ::testing::HasSubstr("green"))
      << "a healthy consumer (1)";
}

TEST(GrafanaDashboardTest, AReplayPolicyNotEvaluatedForAnHourIsRed) {
  const std::optional<YAML::Node> panel =
      PanelWithExpr("backfill_replay_last_evaluation_timestamp_seconds");
  ASSERT_TRUE(panel.has_value());
  // Seconds since the last evaluation: BackfillReplayEvaluationsStopped
  // fires past an hour.
  EXPECT_THAT(ColorOf(*panel, 60), ::testing::HasSubstr("green"));
  EXPECT_THAT(ColorOf(*panel, 3600), ::testing::HasSubstr("red"));
}

TEST(GrafanaDashboardTest, AReplicaThatIsDownIsRedAndOneThatIsUpGreen) {
  const std::optional<YAML::Node> panel = PanelWithExpr("up{job=");
  ASSERT_TRUE(panel.has_value());
  // up: 1 scraped, 0 not (BackfilldReplicaMissingHeartbeats).
  EXPECT_THAT(ColorOf(*panel, 0), ::testing::HasSubstr("red"));
  EXPECT_THAT(ColorOf(*panel, 1), ::testing::HasSubstr("green"));
}

TEST(GrafanaDashboardTest, TheReplicasRowShowsLeasesTakeoversAndWhoIsUp) {
  const std::optional<YAML::Node> leases =
      PanelWithExpr("sum by (instance, kind) (backfill_node_leases{");
  ASSERT_TRUE(leases.has_value());
  EXPECT_EQ(Title(*leases), "Replicas: leases held per replica and kind");
  const std::optional<YAML::Node> takeovers =
      PanelWithExpr("increase(backfill_lease_takeovers_total{");
  ASSERT_TRUE(takeovers.has_value());
  EXPECT_THAT((*takeovers)["targets"][0]["expr"].as<std::string>(),
              ::testing::HasSubstr("[15m]"));
  bool row = false;
  for (const YAML::Node& panel : Panels(Dashboard())) {
    row = row || (panel["type"].as<std::string>() == "row" &&
                  Title(panel) == "Replicas");
  }
  EXPECT_TRUE(row) << "no row \"Replicas\"";
}

// The output of `command` (stdout and stderr) and its exit status.
std::pair<std::string, int> RunCommand(const std::string& command,
                                       const fs::path& output) {
  const int status = std::system(
      absl::StrCat(command, " >", output.string(), " 2>&1").c_str());
  std::ifstream in(output);
  std::stringstream text;
  text << in.rdbuf();
  return {text.str(), WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

TEST(GrafanaDashboardTest, TheErrorRatioIsZeroForMethodsWithoutErrors) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed";
  }
  const std::optional<YAML::Node> panel = PanelWithExpr("grpc_code=~");
  ASSERT_TRUE(panel.has_value());
  ASSERT_EQ((*panel)["targets"].size(), 1u);
  // Grafana's variables as the dashboard's defaults would fill them in.
  const std::string expr =
      absl::StrReplaceAll((*panel)["targets"][0]["expr"].as<std::string>(),
                          {{"$instance", ".*"}, {"$__rate_interval", "5m"}});

  // GetBackfill: 4 calls a minute, all OK. SubmitBackfill: 1 OK, 1
  // INTERNAL and 2 NOT_FOUND (the caller's error, no server error) a
  // minute: a ratio of 1/4.
  const std::string series_prefix =
      "grpc_server_handled_total{instance=\"localhost:9464\", "
      "job=\"backfilld\", grpc_service=\"backfill.v1.BackfillService\", "
      "grpc_type=\"unary\", ";
  YAML::Emitter tests;
  tests << YAML::BeginMap << YAML::Key << "evaluation_interval" << YAML::Value
        << "1m" << YAML::Key << "tests" << YAML::Value << YAML::BeginSeq
        << YAML::BeginMap << YAML::Key << "interval" << YAML::Value << "1m"
        << YAML::Key << "input_series" << YAML::Value << YAML::BeginSeq;
  for (const auto& [labels, values] :
       std::vector<std::pair<std::string, std::string>>{
           {"grpc_method=\"GetBackfill\", grpc_code=\"OK\"", "0+4x30"},
           {"grpc_method=\"SubmitBackfill\", grpc_code=\"OK\"", "0+1x30"},
           {"grpc_method=\"SubmitBackfill\", grpc_code=\"INTERNAL\"", "0+1x30"},
           {"grpc_method=\"SubmitBackfill\", grpc_code=\"NOT_FOUND\"",
            "0+2x30"}}) {
    tests << YAML::BeginMap << YAML::Key << "series" << YAML::Value
          << absl::StrCat(series_prefix, labels, "}") << YAML::Key << "values"
          << YAML::Value << values << YAML::EndMap;
  }
  tests << YAML::EndSeq << YAML::Key << "promql_expr_test" << YAML::Value
        << YAML::BeginSeq << YAML::BeginMap << YAML::Key << "expr"
        << YAML::Value << expr << YAML::Key << "eval_time" << YAML::Value
        << "20m" << YAML::Key << "exp_samples" << YAML::Value << YAML::BeginSeq
        << YAML::BeginMap << YAML::Key << "labels" << YAML::Value
        << "{grpc_method=\"GetBackfill\"}" << YAML::Key << "value"
        << YAML::Value << 0 << YAML::EndMap << YAML::BeginMap << YAML::Key
        << "labels" << YAML::Value << "{grpc_method=\"SubmitBackfill\"}"
        << YAML::Key << "value" << YAML::Value << 0.25 << YAML::EndMap
        << YAML::EndSeq << YAML::EndMap << YAML::EndSeq << YAML::EndMap
        << YAML::EndSeq << YAML::EndMap;
  ASSERT_TRUE(tests.good()) << tests.GetLastError();

  std::string dir =
      (fs::temp_directory_path() / "backfill-dashboard-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const fs::path file = fs::path(dir) / "error-ratio.test.yml";
  std::ofstream(file) << tests.c_str() << "\n";
  auto [out, code] =
      RunCommand(absl::StrCat("promtool test rules ", file.string()),
                 fs::path(dir) / "promtool.out");
  EXPECT_EQ(code, 0) << "promtool on " << expr << ":\n" << out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace deploy_grafana_dashboard_test
}  // namespace backfill
