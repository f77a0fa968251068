// The Kubernetes manifests, checked against the binaries they run. Two
// kustomizations: deploy/k8s (one replica, a StatefulSet, the state store
// in the data dir) and deploy/k8s-replicas (a Deployment of three replicas
// sharing a state store in PostgreSQL, built on deploy/k8s). Each is read
// as kustomize builds it (resources, directories of other kustomizations,
// patches that merge into or delete a resource), and for both: every flag
// of the container's arguments is one `backfilld --help` lists (and every
// flag of the probes' backfillctl command one `backfillctl --help` and its
// subcommand's help list), every $(VAR) of the arguments is an environment
// variable of the container, the ports of --listen and --metrics-listen are
// the container's ports, the Service's target ports and the probes' port,
// every file or directory the flags name lies on a mounted volume that the
// pod declares, the pipelines ConfigMap is the demo pipeline of its
// warehouse, the drain ends before the kubelet kills the pod, and the pod
// runs as a non-root user with a read-only root file system and no
// capabilities. The StatefulSet runs exactly one replica and passes no
// --state-dsn; the Deployment runs three, rolled one at a time, spread over
// nodes, covered by a PodDisruptionBudget that selects its pods, passes
// --state-dsn and --node-name (the pod's name) and mirrors the StatefulSet's
// security settings, probes and resources. When kubectl is installed, its
// kustomize builds deploy/k8s-replicas into what this test reads.

#include <stdio.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
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
#include "tests/testing/executable_dir.h"
#include "yaml-cpp/yaml.h"

namespace backfill {
namespace deploy_k8s_manifests_test {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::IsEmpty;
using ::testing::Not;

const fs::path kDeployDir = fs::path(BACKFILL_SOURCE_DIR) / "deploy";
const fs::path kExamplesDir = fs::path(BACKFILL_SOURCE_DIR) / "examples/demo";

// The standard output of `command` (run by /bin/sh), and its exit code.
std::pair<std::string, int> RunCommand(const std::string& command) {
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

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
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
  auto [out, code] = RunCommand(command + " --help 2>&1");
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

// The items of a sequence; none for a missing or null node.
std::vector<YAML::Node> Items(const YAML::Node& list) {
  std::vector<YAML::Node> out;
  if (!list || !list.IsSequence()) return out;
  for (const YAML::Node& item : list) out.push_back(item);
  return out;
}

std::vector<std::string> Strings(const YAML::Node& list) {
  std::vector<std::string> out;
  for (const YAML::Node& item : Items(list)) {
    out.push_back(item.as<std::string>());
  }
  return out;
}

std::string AsText(const YAML::Node& node) {
  YAML::Emitter out;
  out << node;
  return out.c_str();
}

std::string KindAndName(const YAML::Node& doc) {
  return absl::StrCat(doc["kind"].as<std::string>(), "/",
                      doc["metadata"]["name"].as<std::string>());
}

// A strategic merge patch as these manifests use it: maps are merged key
// by key, anything else is replaced.
void Merge(YAML::Node target, const YAML::Node& patch) {
  for (const auto& entry : patch) {
    const std::string key = entry.first.as<std::string>();
    if (entry.second.IsMap() && target[key] && target[key].IsMap()) {
      Merge(target[key], entry.second);
    } else {
      target[key] = YAML::Clone(entry.second);
    }
  }
}

// What `kustomize build DIR` gives for the features these kustomizations
// use: `resources` (files, or directories holding a kustomization, built
// first) and `patches` by `path` (a patch with `$patch: delete` removes the
// resource of its kind and name, any other is merged into it). `files`:
// the files DIR's own kustomization names. Failures are test failures.
struct Build {
  std::vector<YAML::Node> docs;
  std::set<std::string> files;
};

Build BuildKustomization(const fs::path& dir) {
  Build build;
  const YAML::Node kustomization =
      YAML::LoadFile((dir / "kustomization.yaml").string());
  for (const std::string& resource : Strings(kustomization["resources"])) {
    const fs::path path = dir / resource;
    if (fs::is_directory(path)) {
      for (const YAML::Node& doc : BuildKustomization(path).docs) {
        build.docs.push_back(doc);
      }
      continue;
    }
    build.files.insert(resource);
    for (const YAML::Node& doc : YAML::LoadAllFromFile(path.string())) {
      if (doc.IsMap()) build.docs.push_back(YAML::Clone(doc));
    }
  }
  for (const YAML::Node& patch_entry : Items(kustomization["patches"])) {
    if (!patch_entry["path"]) {
      ADD_FAILURE() << dir << ": a patch without path: " << AsText(patch_entry);
      continue;
    }
    const std::string file = patch_entry["path"].as<std::string>();
    build.files.insert(file);
    for (const YAML::Node& patch :
         YAML::LoadAllFromFile((dir / file).string())) {
      if (!patch.IsMap()) continue;
      const std::string target = KindAndName(patch);
      auto it = build.docs.begin();
      while (it != build.docs.end() && KindAndName(*it) != target) ++it;
      if (it == build.docs.end()) {
        ADD_FAILURE() << dir / file << " patches " << target
                      << ", which no resource is";
        continue;
      }
      if (patch["$patch"] && patch["$patch"].as<std::string>() == "delete") {
        // Not vector::erase: assigning a YAML::Node changes the node it
        // refers to, not which node the handle refers to.
        std::vector<YAML::Node> kept;
        for (const YAML::Node& doc : build.docs) {
          if (KindAndName(doc) != target) kept.push_back(doc);
        }
        build.docs = std::move(kept);
      } else {
        Merge(*it, patch);
      }
    }
  }
  return build;
}

// One kustomization and the workload (StatefulSet or Deployment) it runs.
class Manifests {
 public:
  Manifests(const fs::path& dir, const std::string& workload_kind) : dir_(dir) {
    Build build = BuildKustomization(dir);
    docs_ = std::move(build.docs);
    files_ = std::move(build.files);
    std::vector<YAML::Node> workloads;
    for (const YAML::Node& doc : docs_) {
      const std::string kind = doc["kind"].as<std::string>();
      if (kind == workload_kind) workloads.push_back(doc);
      if (kind == "Service") services_.push_back(doc);
      if (kind == "ConfigMap") {
        config_maps_[doc["metadata"]["name"].as<std::string>()] = doc;
      }
    }
    EXPECT_EQ(workloads.size(), 1u) << dir << ": " << workload_kind << "s";
    EXPECT_EQ(services_.size(), 1u) << dir << ": Services";
    if (workloads.size() != 1 || services_.size() != 1) return;
    workload_ = workloads[0];
    pod_ = workload_["spec"]["template"]["spec"];
    EXPECT_EQ(Items(pod_["containers"]).size(), 1u) << dir;
    if (Items(pod_["containers"]).size() != 1) return;
    container_ = pod_["containers"][0];
    args_ = Strings(container_["args"]);
    flags_ = Flags(args_);
    ok_ = true;
  }

  // Whether the kustomization has one workload of one container and one
  // Service (else the constructor failed the test).
  bool ok() const { return ok_; }

  // The docs of a kind.
  std::vector<YAML::Node> OfKind(const std::string& kind) const {
    std::vector<YAML::Node> out;
    for (const YAML::Node& doc : docs_) {
      if (doc["kind"].as<std::string>() == kind) out.push_back(doc);
    }
    return out;
  }

  // The container port that `port` names (a number, or a port's name).
  int ContainerPort(const YAML::Node& port) const {
    int number = -1;
    if (absl::SimpleAtoi(port.as<std::string>(), &number)) return number;
    for (const YAML::Node& p : Items(container_["ports"])) {
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
    const std::string name = MountOf(path, file);
    if (name.empty()) {
      return absl::StrCat(flag, " ", path, " lies under no volume mount");
    }
    if (Volume(name)) return "";
    for (const YAML::Node& claim :
         Items(workload_["spec"]["volumeClaimTemplates"])) {
      if (claim["metadata"]["name"].as<std::string>() == name) return "";
    }
    return absl::StrCat(flag, " ", path, " is on mount ", name,
                        ", which no volume or claim template declares");
  }

  // The name of the volume mounted where `path` lies ("": none).
  std::string MountOf(const std::string& path, bool file) const {
    for (const YAML::Node& mount : Items(container_["volumeMounts"])) {
      std::string dir = mount["mountPath"].as<std::string>();
      while (dir.size() > 1 && absl::EndsWith(dir, "/")) dir.pop_back();
      const bool under = absl::StartsWith(path, dir + "/");
      if (under || (path == dir && !file)) {
        return mount["name"].as<std::string>();
      }
    }
    return "";
  }

  // The pod volume called `name` (an undefined node when there is none).
  YAML::Node Volume(const std::string& name) const {
    for (const YAML::Node& volume : Items(pod_["volumes"])) {
      if (volume["name"].as<std::string>() == name) return volume;
    }
    return YAML::Node(YAML::NodeType::Undefined);
  }

  // The container's environment variable called `name` (undefined when
  // there is none).
  YAML::Node Env(const std::string& name) const {
    for (const YAML::Node& env : Items(container_["env"])) {
      if (env["name"].as<std::string>() == name) return env;
    }
    return YAML::Node(YAML::NodeType::Undefined);
  }

  std::optional<std::string> Flag(const std::string& name) const {
    return FlagValue(flags_, name);
  }

  const fs::path& dir() const { return dir_; }
  const std::vector<YAML::Node>& docs() const { return docs_; }
  const std::set<std::string>& files() const { return files_; }
  // Handles on the documents: a missing key reads as an undefined node.
  YAML::Node workload() const { return workload_; }
  YAML::Node pod() const { return pod_; }
  YAML::Node container() const { return container_; }
  YAML::Node service() const { return services_[0]; }
  const std::map<std::string, YAML::Node>& config_maps() const {
    return config_maps_;
  }
  const std::vector<std::string>& args() const { return args_; }
  const std::vector<std::pair<std::string, std::string>>& flags() const {
    return flags_;
  }

 private:
  fs::path dir_;
  std::vector<YAML::Node> docs_;
  std::set<std::string> files_;
  std::vector<YAML::Node> services_;
  std::map<std::string, YAML::Node> config_maps_;
  YAML::Node workload_;
  YAML::Node pod_;
  YAML::Node container_;
  std::vector<std::string> args_;
  std::vector<std::pair<std::string, std::string>> flags_;
  bool ok_ = false;
};

struct Layout {
  const char* name;
  const char* dir;  // under deploy/
  const char* workload_kind;
  // The demo pipeline file the pipelines ConfigMap holds, and the dsn its
  // copy uses instead of the example's ("": the file as it is).
  const char* demo_pipeline;
  const char* demo_dsn;
};

// The layout's name in failure messages.
void PrintTo(const Layout& layout, std::ostream* out) { *out << layout.name; }

const Layout kSingle = {"single", "k8s", "StatefulSet", "pipelines/demo.yaml",
                        ""};
const Layout kReplicas = {
    "replicas", "k8s-replicas", "Deployment", "pipelines-postgres/demo.yaml",
    "host=postgres port=5432 dbname=warehouse user=backfill"};

// Every check both kustomizations must pass.
class K8sManifestsTest : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override {
    m_.emplace(kDeployDir / GetParam().dir, GetParam().workload_kind);
    ASSERT_TRUE(m_->ok());
  }
  std::optional<Manifests> m_;
};

TEST_P(K8sManifestsTest, KustomizationListsEveryManifest) {
  for (const fs::directory_entry& entry : fs::directory_iterator(m_->dir())) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".yaml" || name == "kustomization.yaml") {
      continue;
    }
    EXPECT_THAT(m_->files(), Contains(name))
        << m_->dir() << ": not in kustomization.yaml";
  }
}

TEST_P(K8sManifestsTest, EveryFlagIsOneBackfilldLists) {
  const std::set<std::string> known = HelpFlagsOf(
      absl::StrCat(::backfill::testing::ExecutableDir(), "/backfilld"));
  // The help lists the flags this test relies on (else it parsed nothing).
  ASSERT_THAT(known, Contains("--data-dir"));
  ASSERT_THAT(known, Contains("--listen"));
  EXPECT_EQ(m_->container()["command"][0].as<std::string>(), "backfilld");
  ASSERT_THAT(m_->flags(), Not(IsEmpty()));
  for (const auto& [flag, value] : m_->flags()) {
    EXPECT_THAT(known, Contains(flag)) << "backfilld --help lists no " << flag;
  }
  for (const std::string& arg : m_->args()) {
    EXPECT_TRUE(absl::StartsWith(arg, "--") && absl::StrContains(arg, "="))
        << "give each argument as --flag=value: " << arg;
  }
}

// Kubernetes replaces $(NAME) in the arguments with the container's
// variable NAME, and leaves it as it is when there is none.
TEST_P(K8sManifestsTest, EveryVariableOfTheArgumentsIsOneTheContainerSets) {
  for (const std::string& arg : m_->args()) {
    size_t at = 0;
    while ((at = arg.find("$(", at)) != std::string::npos) {
      const size_t end = arg.find(')', at);
      ASSERT_NE(end, std::string::npos) << arg;
      const std::string name = arg.substr(at + 2, end - at - 2);
      EXPECT_TRUE(m_->Env(name)) << arg << ": the container sets no " << name;
      at = end;
    }
  }
}

TEST_P(K8sManifestsTest, ListensOnThePodWithTlsAndAuthenticationNotInsecure) {
  EXPECT_FALSE(m_->Flag("--insecure").has_value());
  const std::optional<std::string> listen = m_->Flag("--listen");
  ASSERT_TRUE(listen.has_value());
  // Reachable from other pods, so the daemon's rule applies: TLS and
  // authentication.
  EXPECT_TRUE(absl::StartsWith(*listen, "0.0.0.0:")) << *listen;
  EXPECT_TRUE(m_->Flag("--tls-cert").has_value());
  EXPECT_TRUE(m_->Flag("--tls-key").has_value());
  EXPECT_TRUE(m_->Flag("--auth-tokens").has_value() ||
              m_->Flag("--tls-client-ca").has_value());
  // /metrics on the pod's interfaces: the daemon starts only with basic
  // auth on it.
  const std::optional<std::string> metrics = m_->Flag("--metrics-listen");
  ASSERT_TRUE(metrics.has_value());
  if (!absl::StartsWith(*metrics, "127.") &&
      !absl::StartsWith(*metrics, "localhost:") && *metrics != "none") {
    EXPECT_TRUE(m_->Flag("--metrics-basic-auth").has_value())
        << "--metrics-listen " << *metrics;
  }
}

TEST_P(K8sManifestsTest, PortsOfTheFlagsAreTheContainersServicesAndProbes) {
  const std::optional<std::string> listen = m_->Flag("--listen");
  const std::optional<std::string> metrics = m_->Flag("--metrics-listen");
  ASSERT_TRUE(listen.has_value());
  ASSERT_TRUE(metrics.has_value());
  const int grpc_port = PortOf(*listen);
  const int metrics_port = PortOf(*metrics);
  ASSERT_GT(grpc_port, 0);
  ASSERT_GT(metrics_port, 0);

  std::set<int> container_ports;
  for (const YAML::Node& port : Items(m_->container()["ports"])) {
    container_ports.insert(port["containerPort"].as<int>());
  }
  EXPECT_EQ(container_ports, (std::set<int>{grpc_port, metrics_port}));

  std::set<int> target_ports;
  for (const YAML::Node& port : Items(m_->service()["spec"]["ports"])) {
    const YAML::Node target =
        port["targetPort"] ? port["targetPort"] : port["port"];
    target_ports.insert(m_->ContainerPort(target));
  }
  EXPECT_EQ(target_ports, (std::set<int>{grpc_port, metrics_port}));

  // The Service selects the workload's pods.
  const YAML::Node labels =
      m_->workload()["spec"]["template"]["metadata"]["labels"];
  for (const auto& entry : m_->service()["spec"]["selector"]) {
    const std::string key = entry.first.as<std::string>();
    ASSERT_TRUE(labels[key]) << "the Service selects by " << key;
    EXPECT_EQ(labels[key].as<std::string>(), entry.second.as<std::string>());
  }

  // Prometheus' annotation names the metrics port.
  const YAML::Node annotations =
      m_->workload()["spec"]["template"]["metadata"]["annotations"];
  if (annotations && annotations["prometheus.io/port"]) {
    EXPECT_EQ(annotations["prometheus.io/port"].as<int>(), metrics_port);
  }

  int probes = 0;
  for (const char* kind : {"startupProbe", "readinessProbe", "livenessProbe"}) {
    const YAML::Node probe = m_->container()[kind];
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

TEST_P(K8sManifestsTest, ProbeCommandsAreOnesBackfillctlKnows) {
  const std::string backfillctl =
      absl::StrCat(::backfill::testing::ExecutableDir(), "/backfillctl");
  const std::set<std::string> globals = HelpFlagsOf(backfillctl);
  ASSERT_THAT(globals, Contains("--server"));
  for (const char* kind : {"startupProbe", "readinessProbe", "livenessProbe"}) {
    const YAML::Node probe = m_->container()[kind];
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
        EXPECT_EQ(m_->CheckMounted(flag, value, /*file=*/true), "") << kind;
      }
    }
  }
}

TEST_P(K8sManifestsTest, EveryPathOfTheFlagsIsOnAMountedVolume) {
  for (const char* flag : {"--data-dir", "--pipelines"}) {
    const std::optional<std::string> dir = m_->Flag(flag);
    ASSERT_TRUE(dir.has_value()) << flag;
    EXPECT_EQ(m_->CheckMounted(flag, *dir, /*file=*/false), "");
  }
  for (const char* flag :
       {"--auth-tokens", "--tls-cert", "--tls-key", "--tls-client-ca"}) {
    const std::optional<std::string> file = m_->Flag(flag);
    ASSERT_TRUE(file.has_value()) << flag;
    EXPECT_EQ(m_->CheckMounted(flag, *file, /*file=*/true), "");
  }
}

TEST_P(K8sManifestsTest, ThePipelinesAreAConfigMapAndTheCredentialsSecrets) {
  const std::string pipelines = *m_->Flag("--pipelines");
  const YAML::Node volume = m_->Volume(m_->MountOf(pipelines, false));
  ASSERT_TRUE(volume && volume["configMap"]) << "--pipelines is no ConfigMap";
  const std::string name = volume["configMap"]["name"].as<std::string>();
  ASSERT_EQ(m_->config_maps().count(name), 1u) << "no ConfigMap " << name;
  // The ConfigMap holds the demo pipeline of its warehouse as the
  // repository has it (after the example's opening comment when the copy
  // names another server).
  const YAML::Node data = m_->config_maps().at(name)["data"];
  ASSERT_TRUE(data["demo.yaml"]);
  std::string demo = ReadFile(kExamplesDir / GetParam().demo_pipeline);
  ASSERT_FALSE(demo.empty()) << GetParam().demo_pipeline;
  if (*GetParam().demo_dsn != '\0') {
    while (absl::StartsWith(demo, "#")) demo.erase(0, demo.find('\n') + 1);
    const size_t dsn = demo.find("dsn: \"");
    ASSERT_NE(dsn, std::string::npos) << "the example has no dsn";
    const size_t start = dsn + 6;
    demo.replace(start, demo.find('"', start) - start, GetParam().demo_dsn);
  }
  EXPECT_EQ(data["demo.yaml"].as<std::string>(), demo);

  for (const char* flag : {"--auth-tokens", "--tls-cert", "--tls-key",
                           "--tls-client-ca", "--metrics-basic-auth"}) {
    const std::string path = *m_->Flag(flag);
    EXPECT_TRUE(m_->Volume(m_->MountOf(path, true))["secret"])
        << flag << " is not from a Secret";
  }
}

TEST_P(K8sManifestsTest, TheDrainEndsBeforeTheKubeletKillsThePod) {
  const std::optional<std::string> drain = m_->Flag("--drain-timeout");
  ASSERT_TRUE(drain.has_value());
  double drain_seconds = 0;
  ASSERT_TRUE(absl::SimpleAtod(*drain, &drain_seconds)) << *drain;
  ASSERT_TRUE(m_->pod()["terminationGracePeriodSeconds"]);
  EXPECT_GT(m_->pod()["terminationGracePeriodSeconds"].as<double>(),
            drain_seconds);
}

TEST_P(K8sManifestsTest, RunsAsNonRootReadOnlyWithoutCapabilities) {
  const YAML::Node pod = m_->pod()["securityContext"];
  const YAML::Node container = m_->container()["securityContext"];
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
  EXPECT_FALSE(m_->pod()["automountServiceAccountToken"].as<bool>());
  ASSERT_TRUE(m_->container()["resources"]["requests"]);
  ASSERT_TRUE(m_->container()["resources"]["limits"]);
}

TEST_P(K8sManifestsTest, NoAutoscaler) {
  for (const YAML::Node& doc : m_->docs()) {
    EXPECT_NE(doc["kind"].as<std::string>(), "HorizontalPodAutoscaler");
  }
}

INSTANTIATE_TEST_SUITE_P(Kustomizations, K8sManifestsTest,
                         ::testing::Values(kSingle, kReplicas),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::string(info.param.name);
                         });

// deploy/k8s: one replica, its state in the data dir.
class K8sSingleReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_.emplace(kDeployDir / kSingle.dir, kSingle.workload_kind);
    ASSERT_TRUE(m_->ok());
  }
  std::optional<Manifests> m_;
};

TEST_F(K8sSingleReplicaTest, ExactlyOneReplica) {
  ASSERT_TRUE(m_->workload()["spec"]["replicas"]);
  EXPECT_EQ(m_->workload()["spec"]["replicas"].as<int>(), 1);
}

TEST_F(K8sSingleReplicaTest, TheStateStoreIsInTheDataDirOnAClaim) {
  // No --state-dsn: state.db in the data dir, which is the claim template.
  EXPECT_FALSE(m_->Flag("--state-dsn").has_value());
  const std::string data_mount = m_->MountOf(*m_->Flag("--data-dir"), false);
  bool claimed = false;
  for (const YAML::Node& claim :
       Items(m_->workload()["spec"]["volumeClaimTemplates"])) {
    claimed =
        claimed || claim["metadata"]["name"].as<std::string>() == data_mount;
  }
  EXPECT_TRUE(claimed) << "--data-dir is not the volume claim template";
}

// deploy/k8s-replicas: three replicas, their state in PostgreSQL.
class K8sReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_.emplace(kDeployDir / kReplicas.dir, kReplicas.workload_kind);
    single_.emplace(kDeployDir / kSingle.dir, kSingle.workload_kind);
    ASSERT_TRUE(m_->ok());
    ASSERT_TRUE(single_->ok());
  }
  std::optional<Manifests> m_;
  std::optional<Manifests> single_;
};

TEST_F(K8sReplicasTest, ThreeReplicasReplacedOneAtATime) {
  const YAML::Node spec = m_->workload()["spec"];
  ASSERT_TRUE(spec["replicas"]);
  EXPECT_EQ(spec["replicas"].as<int>(), 3);
  EXPECT_EQ(spec["strategy"]["type"].as<std::string>(), "RollingUpdate");
  EXPECT_EQ(spec["strategy"]["rollingUpdate"]["maxUnavailable"].as<int>(), 1);
  EXPECT_EQ(spec["strategy"]["rollingUpdate"]["maxSurge"].as<int>(), 1);
  // The group replaces the StatefulSet, which is left out.
  EXPECT_THAT(m_->OfKind("StatefulSet"), IsEmpty());
}

TEST_F(K8sReplicasTest, TheDisruptionBudgetSelectsTheDeploymentsPods) {
  const std::vector<YAML::Node> budgets = m_->OfKind("PodDisruptionBudget");
  ASSERT_EQ(budgets.size(), 1u);
  const YAML::Node spec = budgets[0]["spec"];
  // At most one replica evicted at a time: two of three keep serving.
  const int replicas = m_->workload()["spec"]["replicas"].as<int>();
  if (spec["maxUnavailable"]) {
    EXPECT_EQ(spec["maxUnavailable"].as<int>(), 1);
  } else {
    ASSERT_TRUE(spec["minAvailable"]);
    EXPECT_EQ(spec["minAvailable"].as<int>(), replicas - 1);
  }
  const YAML::Node selector = spec["selector"]["matchLabels"];
  ASSERT_TRUE(selector && selector.IsMap() && selector.size() > 0);
  EXPECT_EQ(AsText(selector),
            AsText(m_->workload()["spec"]["selector"]["matchLabels"]));
  const YAML::Node labels =
      m_->workload()["spec"]["template"]["metadata"]["labels"];
  for (const auto& entry : selector) {
    const std::string key = entry.first.as<std::string>();
    ASSERT_TRUE(labels[key]) << "the pods have no label " << key;
    EXPECT_EQ(labels[key].as<std::string>(), entry.second.as<std::string>());
  }
}

TEST_F(K8sReplicasTest, PassesTheStateDsnAndThePodsNameFromItsEnvironment) {
  const std::optional<std::string> dsn = m_->Flag("--state-dsn");
  ASSERT_TRUE(dsn.has_value());
  ASSERT_TRUE(absl::StartsWith(*dsn, "$(") && absl::EndsWith(*dsn, ")"))
      << "--state-dsn from a Secret through the environment: " << *dsn;
  const YAML::Node dsn_env = m_->Env(dsn->substr(2, dsn->size() - 3));
  ASSERT_TRUE(dsn_env);
  EXPECT_TRUE(dsn_env["valueFrom"]["secretKeyRef"]) << AsText(dsn_env);

  EXPECT_EQ(m_->Flag("--node-name"), "$(POD_NAME)");
  const YAML::Node pod_name = m_->Env("POD_NAME");
  ASSERT_TRUE(pod_name);
  EXPECT_EQ(pod_name["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(),
            "metadata.name");

  // The password is libpq's, from a Secret, never a value in the manifest.
  const YAML::Node password = m_->Env("PGPASSWORD");
  ASSERT_TRUE(password);
  EXPECT_FALSE(password["value"]);
  EXPECT_TRUE(password["valueFrom"]["secretKeyRef"]);

  const std::optional<std::string> lease = m_->Flag("--lease-seconds");
  ASSERT_TRUE(lease.has_value());
  int lease_seconds = 0;
  ASSERT_TRUE(absl::SimpleAtoi(*lease, &lease_seconds)) << *lease;
  EXPECT_GE(lease_seconds, 2);
  EXPECT_LE(lease_seconds, 3600);

  // The warehouse is PostgreSQL: backfilld refuses a SQLite one with
  // --state-dsn.
  for (const auto& [name, config_map] : m_->config_maps()) {
    for (const auto& entry : config_map["data"]) {
      const YAML::Node pipeline = YAML::Load(entry.second.as<std::string>());
      if (!pipeline["warehouse"]) continue;
      EXPECT_EQ(pipeline["warehouse"]["engine"].as<std::string>(), "postgres")
          << name << "/" << entry.first.as<std::string>();
    }
  }
}

TEST_F(K8sReplicasTest, TheDataDirIsAnEmptyDir) {
  // Replicas keep nothing they cannot lose: the data dir holds only the
  // process's lock.
  const std::string data_dir = *m_->Flag("--data-dir");
  const YAML::Node volume = m_->Volume(m_->MountOf(data_dir, false));
  ASSERT_TRUE(volume);
  EXPECT_TRUE(volume["emptyDir"]) << AsText(volume);
  EXPECT_THAT(Items(m_->workload()["spec"]["volumeClaimTemplates"]), IsEmpty());
}

TEST_F(K8sReplicasTest, PrefersToSpreadTheReplicasOverNodes) {
  const std::vector<YAML::Node> terms =
      Items(m_->pod()["affinity"]["podAntiAffinity"]
                     ["preferredDuringSchedulingIgnoredDuringExecution"]);
  ASSERT_EQ(terms.size(), 1u);
  const YAML::Node term = terms[0]["podAffinityTerm"];
  EXPECT_EQ(term["topologyKey"].as<std::string>(), "kubernetes.io/hostname");
  EXPECT_EQ(AsText(term["labelSelector"]["matchLabels"]),
            AsText(m_->workload()["spec"]["selector"]["matchLabels"]));
  // Preferred, not required: three replicas still run on fewer nodes.
  EXPECT_FALSE(m_->pod()["affinity"]["podAntiAffinity"]
                        ["requiredDuringSchedulingIgnoredDuringExecution"]);
}

TEST_F(K8sReplicasTest, MirrorsTheStatefulSetsSecurityProbesAndResources) {
  for (const char* key : {"securityContext", "automountServiceAccountToken",
                          "terminationGracePeriodSeconds"}) {
    EXPECT_EQ(AsText(m_->pod()[key]), AsText(single_->pod()[key])) << key;
  }
  for (const char* key :
       {"securityContext", "resources", "startupProbe", "readinessProbe",
        "livenessProbe", "ports", "command", "image", "imagePullPolicy"}) {
    EXPECT_EQ(AsText(m_->container()[key]), AsText(single_->container()[key]))
        << key;
  }
  // A preStop hook exactly when the StatefulSet has one.
  EXPECT_EQ(AsText(m_->container()["lifecycle"]),
            AsText(single_->container()["lifecycle"]));
  EXPECT_EQ(
      AsText(m_->workload()["spec"]["template"]["metadata"]["annotations"]),
      AsText(
          single_->workload()["spec"]["template"]["metadata"]["annotations"]));
  // The same flags, but for the group's own.
  std::vector<std::pair<std::string, std::string>> shared;
  for (const auto& flag : m_->flags()) {
    if (flag.first != "--state-dsn" && flag.first != "--node-name" &&
        flag.first != "--lease-seconds") {
      shared.push_back(flag);
    }
  }
  EXPECT_EQ(shared, single_->flags());
  // The same Secrets on the same mounts.
  for (const YAML::Node& mount : Items(single_->container()["volumeMounts"])) {
    const std::string name = mount["name"].as<std::string>();
    const YAML::Node volume = single_->Volume(name);
    if (!volume || !volume["secret"]) continue;
    EXPECT_EQ(AsText(m_->Volume(name)), AsText(volume)) << name;
    bool mounted = false;
    for (const YAML::Node& m : Items(m_->container()["volumeMounts"])) {
      mounted = mounted || AsText(m) == AsText(mount);
    }
    EXPECT_TRUE(mounted) << "the Deployment does not mount " << AsText(mount);
  }
}

TEST_F(K8sReplicasTest, TheStatefulSetPassesNoGroupFlags) {
  for (const char* flag : {"--state-dsn", "--node-name", "--lease-seconds"}) {
    EXPECT_FALSE(single_->Flag(flag).has_value()) << flag;
  }
}

TEST_F(K8sReplicasTest, KubectlBuildsWhatThisTestReads) {
  if (RunCommand("command -v kubectl >/dev/null 2>&1").second != 0) {
    GTEST_SKIP() << "kubectl is not installed";
  }
  auto [out, code] = RunCommand(
      absl::StrCat("kubectl kustomize ", m_->dir().string(), " 2>&1"));
  ASSERT_EQ(code, 0) << out;
  std::map<std::string, YAML::Node> built;
  for (const YAML::Node& doc : YAML::LoadAll(out)) {
    if (doc.IsMap()) built[KindAndName(doc)] = doc;
  }
  std::set<std::string> read;
  for (const YAML::Node& doc : m_->docs()) read.insert(KindAndName(doc));
  std::set<std::string> names;
  for (const auto& [name, doc] : built) names.insert(name);
  EXPECT_EQ(names, read);
  const std::string workload = KindAndName(m_->workload());
  ASSERT_EQ(built.count(workload), 1u);
  EXPECT_EQ(
      Strings(
          built[workload]["spec"]["template"]["spec"]["containers"][0]["args"]),
      m_->args());
  EXPECT_EQ(built[workload]["spec"]["replicas"].as<int>(), 3);
  ASSERT_EQ(built.count("ConfigMap/backfilld-pipelines"), 1u);
  EXPECT_EQ(AsText(built["ConfigMap/backfilld-pipelines"]["data"]),
            AsText(m_->config_maps().at("backfilld-pipelines")["data"]));
}

}  // namespace
}  // namespace deploy_k8s_manifests_test
}  // namespace backfill
