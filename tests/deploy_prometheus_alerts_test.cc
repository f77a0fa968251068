// The alert rules in deploy/prometheus against their promtool unit tests
// (backfilld-alerts.test.yml, run by the ctest deploy.alert_rules): every
// alert of the rules has a test case where it fires and one where it does
// not, and every alert a test names is one the rules define. Whether the
// cases pass is promtool's to say; this checks that they exist, so that an
// alert added without tests fails here.

#include <map>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace backfill {
namespace deploy_prometheus_alerts_test {
namespace {

const std::string kDir =
    std::string(BACKFILL_SOURCE_DIR) + "/deploy/prometheus";

std::set<std::string> RuleAlerts() {
  std::set<std::string> alerts;
  const YAML::Node rules = YAML::LoadFile(kDir + "/backfilld-alerts.yml");
  for (const YAML::Node& group : rules["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      if (rule["alert"]) alerts.insert(rule["alert"].as<std::string>());
    }
  }
  return alerts;
}

struct Coverage {
  bool fires = false;
  bool quiet = false;
};

// Per alert named by an alert_rule_test: whether some case expects it to
// fire (exp_alerts not empty) and some case expects it not to.
std::map<std::string, Coverage> TestedAlerts() {
  std::map<std::string, Coverage> tested;
  const YAML::Node file = YAML::LoadFile(kDir + "/backfilld-alerts.test.yml");
  for (const YAML::Node& test : file["tests"]) {
    if (!test["alert_rule_test"]) continue;
    for (const YAML::Node& check : test["alert_rule_test"]) {
      Coverage& coverage = tested[check["alertname"].as<std::string>()];
      const YAML::Node expected = check["exp_alerts"];
      if (expected && expected.size() > 0) {
        coverage.fires = true;
      } else {
        coverage.quiet = true;
      }
    }
  }
  return tested;
}

TEST(PrometheusAlertsTest, EveryAlertHasAFiringAndAQuietTestCase) {
  const std::set<std::string> alerts = RuleAlerts();
  ASSERT_THAT(alerts, ::testing::Contains("BackfilldDown"));
  const std::map<std::string, Coverage> tested = TestedAlerts();
  for (const std::string& alert : alerts) {
    const auto it = tested.find(alert);
    const Coverage coverage = it == tested.end() ? Coverage{} : it->second;
    EXPECT_TRUE(coverage.fires) << alert << " has no test case where it fires";
    EXPECT_TRUE(coverage.quiet)
        << alert << " has no test case where it does not fire";
  }
  for (const auto& [alert, coverage] : tested) {
    EXPECT_TRUE(alerts.count(alert) > 0)
        << "the tests name " << alert << ", which the rules do not define";
  }
}

}  // namespace
}  // namespace deploy_prometheus_alerts_test
}  // namespace backfill
