// The Kubernetes manifests in deploy/k8s, checked against the binaries
// they run: every flag of the container's arguments is one `backfilld
// --help` lists (and every flag of the probes' backfillctl command one
// `backfillctl --help` and its subcommand's help list), the ports of
// --listen and --metrics-listen are the container's ports, the Service's
// target ports and the probes' port, every file or directory the flags
// name lies on a mounted volume that the pod declares, the StatefulSet
// runs exactly one replica, and the pod runs as a non-root user with a
// read-only root file system and no capabilities.

#include <stdio.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace backfill {
namespace deploy_k8s_manifests_test {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::IsEmpty;
using ::testing::Not;

const fs::path kManifestDir = fs::path(BACKFILL_SOURCE_DIR) / "deploy/k8s";

// The standard output of `command` (run by /bin/sh), and its exit code.
std::pair<std::string, int> Run(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {"", -1};
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  const int status = pclose(pipe);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

// The long flags a CLI11 help text lists: the words "--name" that open an
// option's line.
std::set<std::string> HelpFlags(const std::string& help) {
  std::set<std::string> flags;
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    for (absl::string_view word : absl::StrSplit(line, absl::ByAnyChar(" ,"))) {
      if (absl::StartsWith(word, "--") && word.size() > 2) {
        flags.insert(std::string(word));
        continue;
      }
      if (absl::StartsWith(word, "-") && word.size() == 2) continue;  // -h
      break;
    }
  }
  return flags;
}

std::set<std::string> HelpFlagsOf(const std::string& command) {
  auto [out, code] = Run(command + " --help 2>&1");
  EXPECT_EQ(code, 0) << command << " --help:\n" << out;
  return HelpFlags(out);
}

// `--flag=value` or `--flag value` pairs of an argument list ("" for a
// flag without value); `words` gets the arguments that are no flag.
std::vector<std::pair<std::string, std::string>> Flags(
    const std::vector<std::string>& args,
    std::vector<std::string>* words = nullptr) {
  std::vector<std::pair<std::string, std::string>> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "--")) {
      if (words != nullptr) words->push_back(arg);
      continue;
    }
    const size_t equals = arg.find('=');
    if (equals != std::string::npos) {
      flags.emplace_back(arg.substr(0, equals), arg.substr(equals + 1));
    } else {
      flags.emplace_back(arg, "");
    }
  }
  return flags;
}

std::optional<std::string> FlagValue(
    const std::vector<std::pair<std::string, std::string>>& flags,
    const std::string& name) {
  for (const auto& [flag, value] : flags) {
    if (flag == name) return value;
  }
  return std::nullopt;
}

// The port of "HOST:PORT"; -1 when there is none.
int PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return -1;
  }
  return port;
}

std::vector<std::string> Strings(const YAML::Node& list) {
  std::vector<std::string> out;
  for (const YAML::Node& item : list) out.push_back(item.as<std::string>());
  return out;
}

class K8sManifestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const YAML::Node kustomization =
        YAML::LoadFile((kManifestDir / "kustomization.yaml").string());
    for (const std::string& file : Strings(kustomization["resources"])) {
      resources_.insert(file);
      for (const YAML::Node& doc :
           YAML::LoadAllFromFile((kManifestDir / file).string())) {
        if (!doc.IsMap()) continue;
        docs_.push_back(doc);
      }
    }
    for (const YAML::Node& doc : docs_) {
      const std::string kind = doc["kind"].as<std::string>();
      if (kind == "StatefulSet") stateful_sets_.push_back(doc);
      if (kind == "Service") services_.push_back(doc);
      if (kind == "ConfigMap") {
        config_maps_[doc["metadata"]["name"].as<std::string>()] = doc;
      }
    }
    ASSERT_EQ(stateful_sets_.size(), 1u);
    ASSERT_EQ(services_.size(), 1u);
    pod_ = stateful_sets_[0]["spec"]["template"]["spec"];
    ASSERT_TRUE(pod_["containers"].IsSequence());
    ASSERT_EQ(pod_["containers"].size(), 1u);
    container_ = pod_["containers"][0];
    args_ = Strings(container_["args"]);
    flags_ = Flags(args_);
  }

  // The container port that `port` names (a number, or a port's name).
  int ContainerPort(const YAML::Node& port) const {
    int number = -1;
    if (absl::SimpleAtoi(port.as<std::string>(), &number)) return number;
    for (const YAML::Node& p : container_["ports"]) {
      if (p["name"] && p["name"].as<std::string>() == port.as<std::string>()) {
        return p["containerPort"].as<int>();
      }
    }
    return -1;
  }

  // The volume mount of the container under which `path` lies (`file`:
  // strictly inside it), with the pod volume or claim template it mounts;
  // a failure message otherwise.
  std::string CheckMounted(const std::string& flag, const std::string& path,
                           bool file) const {
    if (!absl::StartsWith(path, "/")) {
      return absl::StrCat(flag, " ", path, " is not an absolute path");
    }
    for (const YAML::Node& mount : container_["volumeMounts"]) {
      std::string dir = mount["mountPath"].as<std::string>();
      while (dir.size() > 1 && absl::EndsWith(dir, "/")) dir.pop_back();
      const bool under = absl::StartsWith(path, dir + "/");
      if (!under && !(path == dir && !file)) continue;
      const std::string name = mount["name"].as<std::string>();
      for (const YAML::Node& volume : pod_["volumes"]) {
        if (volume["name"].as<std::string>() == name) return "";
      }
      for (const YAML::Node& claim :
           stateful_sets_[0]["spec"]["volumeClaimTemplates"]) {
        if (claim["metadata"]["name"].as<std::string>() == name) return "";
      }
      return absl::StrCat(flag, " ", path, " is on mount ", name,
                          ", which no volume or claim template declares");
    }
    return absl::StrCat(flag, " ", path, " lies under no volume mount");
  }

  // The pod volume called `name` (a null node when there is none).
  YAML::Node Volume(const std::string& name) const {
    for (const YAML::Node& volume : pod_["volumes"]) {
      if (volume["name"].as<std::string>() == name) return volume;
    }
    return YAML::Node();
  }

  std::set<std::string> resources_;
  std::vector<YAML::Node> docs_;
  std::vector<YAML::Node> stateful_sets_;
  std::vector<YAML::Node> services_;
  std::map<std::string, YAML::Node> config_maps_;
  YAML::Node pod_;
  YAML::Node container_;
  std::vector<std::string> args_;
  std::vector<std::pair<std::string, std::string>> flags_;
};

TEST_F(K8sManifestsTest, KustomizationListsEveryManifest) {
  for (const fs::directory_entry& entry :
       fs::directory_iterator(kManifestDir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".yaml" || name == "kustomization.yaml") {
      continue;
    }
    EXPECT_THAT(resources_, Contains(name)) << "not in kustomization.yaml";
  }
}

TEST_F(K8sManifestsTest, EveryFlagIsOneBackfilldLists) {
  const std::set<std::string> known =
      HelpFlagsOf(absl::StrCat(BACKFILL_BIN_DIR, "/backfilld"));
  // The help lists the flags this test relies on (else it parsed nothing).
  ASSERT_THAT(known, Contains("--data-dir"));
  ASSERT_THAT(known, Contains("--listen"));
  EXPECT_EQ(container_["command"][0].as<std::string>(), "backfilld");
  ASSERT_THAT(flags_, Not(IsEmpty()));
  for (const auto& [flag, value] : flags_) {
    EXPECT_THAT(known, Contains(flag)) << "backfilld --help lists no " << flag;
  }
  for (const std::string& arg : args_) {
    EXPECT_TRUE(absl::StartsWith(arg, "--") && absl::StrContains(arg, "="))
        << "give each argument as --flag=value: " << arg;
  }
}

TEST_F(K8sManifestsTest, ListensOnThePodWithTlsAndAuthenticationNotInsecure) {
  EXPECT_FALSE(FlagValue(flags_, "--insecure").has_value());
  const std::optional<std::string> listen = FlagValue(flags_, "--listen");
  ASSERT_TRUE(listen.has_value());
  // Reachable from other pods, so the daemon's rule applies: TLS and
  // authentication.
  EXPECT_TRUE(absl::StartsWith(*listen, "0.0.0.0:")) << *listen;
  EXPECT_TRUE(FlagValue(flags_, "--tls-cert").has_value());
  EXPECT_TRUE(FlagValue(flags_, "--tls-key").has_value());
  EXPECT_TRUE(FlagValue(flags_, "--auth-tokens").has_value() ||
              FlagValue(flags_, "--tls-client-ca").has_value());
  // /metrics on the pod's interfaces: the daemon starts only with basic
  // auth on it.
  const std::optional<std::string> metrics =
      FlagValue(flags_, "--metrics-listen");
  ASSERT_TRUE(metrics.has_value());
  if (!absl::StartsWith(*metrics, "127.") &&
      !absl::StartsWith(*metrics, "localhost:") && *metrics != "none") {
    EXPECT_TRUE(FlagValue(flags_, "--metrics-basic-auth").has_value())
        << "--metrics-listen " << *metrics;
  }
}

TEST_F(K8sManifestsTest, PortsOfTheFlagsAreTheContainersServicesAndProbes) {
  const std::optional<std::string> listen = FlagValue(flags_, "--listen");
  const std::optional<std::string> metrics =
      FlagValue(flags_, "--metrics-listen");
  ASSERT_TRUE(listen.has_value());
  ASSERT_TRUE(metrics.has_value());
  const int grpc_port = PortOf(*listen);
  const int metrics_port = PortOf(*metrics);
  ASSERT_GT(grpc_port, 0);
  ASSERT_GT(metrics_port, 0);

  std::set<int> container_ports;
  for (const YAML::Node& port : container_["ports"]) {
    container_ports.insert(port["containerPort"].as<int>());
  }
  EXPECT_EQ(container_ports, (std::set<int>{grpc_port, metrics_port}));

  std::set<int> target_ports;
  for (const YAML::Node& port : services_[0]["spec"]["ports"]) {
    const YAML::Node target =
        port["targetPort"] ? port["targetPort"] : port["port"];
    target_ports.insert(ContainerPort(target));
  }
  EXPECT_EQ(target_ports, (std::set<int>{grpc_port, metrics_port}));

  // Prometheus' annotation names the metrics port.
  const YAML::Node annotations =
      stateful_sets_[0]["spec"]["template"]["metadata"]["annotations"];
  if (annotations && annotations["prometheus.io/port"]) {
    EXPECT_EQ(annotations["prometheus.io/port"].as<int>(), metrics_port);
  }

  int probes = 0;
  for (const char* kind : {"startupProbe", "readinessProbe", "livenessProbe"}) {
    const YAML::Node probe = container_[kind];
    if (!probe) continue;
    ++probes;
    if (probe["grpc"]) {
      EXPECT_EQ(probe["grpc"]["port"].as<int>(), grpc_port) << kind;
      continue;
    }
    ASSERT_TRUE(probe["exec"]) << kind << " is neither grpc nor exec";
    const std::optional<std::string> server =
        FlagValue(Flags(Strings(probe["exec"]["command"])), "--server");
    ASSERT_TRUE(server.has_value()) << kind;
    EXPECT_EQ(PortOf(*server), grpc_port) << kind;
  }
  EXPECT_GE(probes, 2);  // readiness and liveness at least
}

TEST_F(K8sManifestsTest, ProbeCommandsAreOnesBackfillctlKnows) {
  const std::string backfillctl =
      absl::StrCat(BACKFILL_BIN_DIR, "/backfillctl");
  const std::set<std::string> globals = HelpFlagsOf(backfillctl);
  ASSERT_THAT(globals, Contains("--server"));
  for (const char* kind : {"startupProbe", "readinessProbe", "livenessProbe"}) {
    const YAML::Node probe = container_[kind];
    if (!probe || !probe["exec"]) continue;
    const std::vector<std::string> command = Strings(probe["exec"]["command"]);
    ASSERT_THAT(command, Not(IsEmpty()));
    EXPECT_EQ(command[0], "backfillctl") << kind;
    std::vector<std::string> words;
    const auto flags = Flags(
        std::vector<std::string>(command.begin() + 1, command.end()), &words);
    ASSERT_EQ(words.size(), 1u) << kind << ": one subcommand, flags as --f=v";
    EXPECT_EQ(words[0], "health") << kind;
    std::set<std::string> known =
        HelpFlagsOf(absl::StrCat(backfillctl, " ", words[0]));
    known.insert(globals.begin(), globals.end());
    for (const auto& [flag, value] : flags) {
      EXPECT_THAT(known, Contains(flag))
          << kind << ": backfillctl " << words[0] << " knows no " << flag;
      if (flag == "--tls-ca" || flag == "--tls-cert" || flag == "--tls-key") {
        EXPECT_EQ(CheckMounted(flag, value, /*file=*/true), "") << kind;
      }
    }
  }
}

TEST_F(K8sManifestsTest, EveryPathOfTheFlagsIsOnAMountedVolume) {
  for (const char* flag : {"--data-dir", "--pipelines"}) {
    const std::optional<std::string> dir = FlagValue(flags_, flag);
    ASSERT_TRUE(dir.has_value()) << flag;
    EXPECT_EQ(CheckMounted(flag, *dir, /*file=*/false), "");
  }
  for (const char* flag :
       {"--auth-tokens", "--tls-cert", "--tls-key", "--tls-client-ca"}) {
    const std::optional<std::string> file = FlagValue(flags_, flag);
    ASSERT_TRUE(file.has_value()) << flag;
    EXPECT_EQ(CheckMounted(flag, *file, /*file=*/true), "");
  }
}

TEST_F(K8sManifestsTest, TheDataDirIsAClaimAndThePipelinesAConfigMap) {
  const std::string data_dir = *FlagValue(flags_, "--data-dir");
  const std::string pipelines = *FlagValue(flags_, "--pipelines");
  std::string data_mount;
  std::string pipelines_mount;
  for (const YAML::Node& mount : container_["volumeMounts"]) {
    const std::string path = mount["mountPath"].as<std::string>();
    if (path == data_dir) data_mount = mount["name"].as<std::string>();
    if (path == pipelines) pipelines_mount = mount["name"].as<std::string>();
  }
  bool claimed = false;
  for (const YAML::Node& claim :
       stateful_sets_[0]["spec"]["volumeClaimTemplates"]) {
    claimed =
        claimed || claim["metadata"]["name"].as<std::string>() == data_mount;
  }
  EXPECT_TRUE(claimed) << "--data-dir is not the volume claim template";

  const YAML::Node volume = Volume(pipelines_mount);
  ASSERT_TRUE(volume && volume["configMap"]) << "--pipelines is no ConfigMap";
  const std::string name = volume["configMap"]["name"].as<std::string>();
  ASSERT_EQ(config_maps_.count(name), 1u) << "no ConfigMap " << name;
  // The ConfigMap holds the demo pipeline as the repository has it.
  const YAML::Node data = config_maps_[name]["data"];
  ASSERT_TRUE(data["demo.yaml"]);
  std::ifstream in(fs::path(BACKFILL_SOURCE_DIR) /
                   "examples/demo/pipelines/demo.yaml");
  std::stringstream demo;
  demo << in.rdbuf();
  EXPECT_EQ(data["demo.yaml"].as<std::string>(), demo.str());

  for (const char* flag :
       {"--auth-tokens", "--tls-cert", "--tls-key", "--tls-client-ca"}) {
    const std::string path = *FlagValue(flags_, flag);
    for (const YAML::Node& mount : container_["volumeMounts"]) {
      if (!absl::StartsWith(path, mount["mountPath"].as<std::string>() + "/")) {
        continue;
      }
      EXPECT_TRUE(Volume(mount["name"].as<std::string>())["secret"])
          << flag << " is not from a Secret";
    }
  }
}

TEST_F(K8sManifestsTest, ExactlyOneReplica) {
  ASSERT_TRUE(stateful_sets_[0]["spec"]["replicas"]);
  EXPECT_EQ(stateful_sets_[0]["spec"]["replicas"].as<int>(), 1);
  for (const YAML::Node& doc : docs_) {
    EXPECT_NE(doc["kind"].as<std::string>(), "HorizontalPodAutoscaler");
  }
}

TEST_F(K8sManifestsTest, RunsAsNonRootReadOnlyWithoutCapabilities) {
  const YAML::Node pod = pod_["securityContext"];
  const YAML::Node container = container_["securityContext"];
  ASSERT_TRUE(pod);
  ASSERT_TRUE(container);
  EXPECT_TRUE(pod["runAsNonRoot"].as<bool>());
  EXPECT_NE(pod["runAsUser"].as<int>(), 0);
  EXPECT_TRUE(container["runAsNonRoot"].as<bool>());
  EXPECT_NE(container["runAsUser"].as<int>(), 0);
  EXPECT_TRUE(container["readOnlyRootFilesystem"].as<bool>());
  EXPECT_FALSE(container["allowPrivilegeEscalation"].as<bool>());
  EXPECT_FALSE(container["privileged"] && container["privileged"].as<bool>());
  EXPECT_THAT(Strings(container["capabilities"]["drop"]), Contains("ALL"));
  EXPECT_FALSE(container["capabilities"]["add"]);
  ASSERT_TRUE(container_["resources"]["requests"]);
  ASSERT_TRUE(container_["resources"]["limits"]);
}

}  // namespace
}  // namespace deploy_k8s_manifests_test
}  // namespace backfill
