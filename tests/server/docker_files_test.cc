// Static checks of docker/ (no Docker engine or cluster needed): the Dockerfile's COPY sources
// exist and are not excluded from the context, it builds with scripts/install-deps.sh and runs
// as non-root with EXPOSE/HEALTHCHECK; compose.yaml and the Kubernetes manifests parse, agree
// with each other (ports, labels, names) and carry a config that ParseConfig accepts.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "server/config.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = PAGODA_SOURCE_DIR;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Dockerfile instructions as (KEYWORD, arguments), continuation lines joined, comments dropped.
std::vector<std::pair<std::string, std::string>> Instructions(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line, pending;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    pending += line.substr(start);
    if (!pending.empty() && pending.back() == '\\') {
      pending.pop_back();
      continue;
    }
    const size_t space = pending.find(' ');
    out.emplace_back(pending.substr(0, space),
                     space == std::string::npos ? "" : pending.substr(space + 1));
    pending.clear();
  }
  return out;
}

std::vector<std::string> InstructionArgs(const std::string& keyword) {
  std::vector<std::string> args;
  for (const auto& [kw, arg] : Instructions(ReadFile(kRoot / "docker/Dockerfile"))) {
    if (kw == keyword) args.push_back(arg);
  }
  return args;
}

// Patterns of docker/Dockerfile.dockerignore (comments and blank lines dropped).
std::vector<std::string> IgnorePatterns() {
  std::vector<std::string> patterns;
  std::istringstream in(ReadFile(kRoot / "docker/Dockerfile.dockerignore"));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') patterns.push_back(line);
  }
  return patterns;
}

TEST(Dockerfile, CopiesOnlyFilesThatExistAndAreInTheContext) {
  const std::vector<std::string> copies = InstructionArgs("COPY");
  ASSERT_GE(copies.size(), 3u);
  int from_context = 0;
  for (const std::string& args : copies) {
    std::vector<std::string> words = Words(args);
    ASSERT_GE(words.size(), 2u) << args;
    if (words[0].starts_with("--from=")) {
      EXPECT_EQ(words[0], "--from=build") << args;
      continue;
    }
    words.pop_back();  // the destination
    for (const std::string& src : words) {
      ++from_context;
      EXPECT_TRUE(fs::exists(kRoot / src)) << "COPY source missing from the repo: " << src;
      for (const std::string& pattern : IgnorePatterns()) {
        EXPECT_FALSE(src == pattern || src.starts_with(pattern + "/"))
            << src << " is excluded by Dockerfile.dockerignore (" << pattern << ")";
      }
    }
  }
  EXPECT_GE(from_context, 3);
  EXPECT_TRUE(fs::exists(kRoot / "scripts/install-deps.sh"));
  EXPECT_TRUE(fs::exists(kRoot / "configs/docker.yaml"));
}

TEST(Dockerfile, BuildsWithTheProjectScriptsOnBookworm) {
  const std::vector<std::string> from = InstructionArgs("FROM");
  ASSERT_EQ(from.size(), 2u);
  for (const std::string& f : from) EXPECT_EQ(Words(f)[0], "debian:bookworm-slim");
  std::string runs;
  for (const std::string& r : InstructionArgs("RUN")) runs += r + "\n";
  EXPECT_NE(runs.find("scripts/install-deps.sh"), std::string::npos);
  EXPECT_NE(runs.find("make build"), std::string::npos);
  EXPECT_NE(runs.find("CMAKE_BUILD_TYPE=Release"), std::string::npos);
  // The build tree must not come from the host (its CMakeCache names the host checkout).
  const std::vector<std::string> ignored = IgnorePatterns();
  EXPECT_NE(std::find(ignored.begin(), ignored.end(), "build"), ignored.end());
}

TEST(Dockerfile, RunsAsNonRootWithPortsHealthcheckAndEntrypoint) {
  const std::vector<std::string> users = InstructionArgs("USER");
  ASSERT_FALSE(users.empty());
  const std::string user = users.back().substr(0, users.back().find(':'));
  EXPECT_NE(user, "root");
  EXPECT_NE(user, "0");
  EXPECT_TRUE(std::all_of(user.begin(), user.end(), ::isdigit))
      << "numeric UID, so Kubernetes runAsNonRoot can verify it: " << user;

  const std::vector<std::string> expose = InstructionArgs("EXPOSE");
  ASSERT_EQ(expose.size(), 1u);
  EXPECT_EQ(Words(expose[0]), (std::vector<std::string>{"50051", "8000", "9090"}));

  const std::vector<std::string> health = InstructionArgs("HEALTHCHECK");
  ASSERT_EQ(health.size(), 1u);
  EXPECT_NE(health[0].find(R"(CMD ["pagoda", "health", "--server", "127.0.0.1:50051"])"),
            std::string::npos)
      << health[0];

  const std::vector<std::string> entry = InstructionArgs("ENTRYPOINT");
  ASSERT_EQ(entry.size(), 1u);
  EXPECT_EQ(entry[0], R"(["pagoda", "serve", "--config", "/etc/pagoda/config.yaml"])");
  bool copies_config = false;
  for (const std::string& c : InstructionArgs("COPY")) {
    copies_config |= c == "configs/docker.yaml /etc/pagoda/config.yaml";
  }
  EXPECT_TRUE(copies_config);
}

TEST(Compose, BuildsFromTheRepoAndPublishesThePorts) {
  const YAML::Node doc = YAML::LoadFile(kRoot / "docker/compose.yaml");
  const YAML::Node svc = doc["services"]["pagoda"];
  ASSERT_TRUE(svc.IsMap());
  EXPECT_EQ(svc["build"]["context"].as<std::string>(), "..");
  EXPECT_EQ(svc["build"]["dockerfile"].as<std::string>(), "docker/Dockerfile");
  EXPECT_TRUE(fs::exists(kRoot / "docker" / ".." / svc["build"]["dockerfile"].as<std::string>()));
  std::string ports;
  for (const YAML::Node& p : svc["ports"]) ports += p.as<std::string>() + " ";
  EXPECT_NE(ports.find(":50051:50051"), std::string::npos) << ports;
  EXPECT_NE(ports.find(":8000:8000"), std::string::npos) << ports;
  EXPECT_NE(ports.find(":9090:9090"), std::string::npos) << ports;
  ASSERT_EQ(svc["volumes"].size(), 1u);
  EXPECT_NE(svc["volumes"][0].as<std::string>().find(":/models"), std::string::npos);
  const YAML::Node test = svc["healthcheck"]["test"];
  ASSERT_TRUE(test.IsSequence());
  EXPECT_EQ(test.as<std::vector<std::string>>(),
            (std::vector<std::string>{"CMD", "pagoda", "health", "--server", "127.0.0.1:50051"}));
}

YAML::Node Container(const YAML::Node& deployment) {
  return deployment["spec"]["template"]["spec"]["containers"][0];
}

TEST(Kubernetes, DeploymentUsesGrpcProbesResourcesAndMounts) {
  const YAML::Node d = YAML::LoadFile(kRoot / "docker/k8s/deployment.yaml");
  EXPECT_EQ(d["apiVersion"].as<std::string>(), "apps/v1");
  EXPECT_EQ(d["kind"].as<std::string>(), "Deployment");
  const YAML::Node c = Container(d);
  ASSERT_TRUE(c.IsMap());
  for (const char* probe : {"startupProbe", "readinessProbe", "livenessProbe"}) {
    EXPECT_EQ(c[probe]["grpc"]["port"].as<int>(), 50051) << probe;
  }
  std::vector<int> ports;
  for (const YAML::Node& p : c["ports"]) ports.push_back(p["containerPort"].as<int>());
  EXPECT_EQ(ports, (std::vector<int>{50051, 8000, 9090}));
  for (const char* kind : {"requests", "limits"}) {
    EXPECT_TRUE(c["resources"][kind]["cpu"].IsScalar()) << kind;
    EXPECT_TRUE(c["resources"][kind]["memory"].IsScalar()) << kind;
  }
  const YAML::Node pod = d["spec"]["template"]["spec"];
  EXPECT_TRUE(pod["securityContext"]["runAsNonRoot"].as<bool>());
  std::map<std::string, std::string> mounts;
  for (const YAML::Node& m : c["volumeMounts"]) {
    mounts[m["name"].as<std::string>()] = m["mountPath"].as<std::string>();
  }
  EXPECT_EQ(mounts["config"], "/etc/pagoda");  // the ENTRYPOINT's /etc/pagoda/config.yaml
  EXPECT_EQ(mounts["models"], "/models");
  std::map<std::string, YAML::Node> volumes;
  for (const YAML::Node& v : pod["volumes"]) volumes[v["name"].as<std::string>()] = v;
  EXPECT_EQ(volumes["config"]["configMap"]["name"].as<std::string>(), "pagoda-config");
  EXPECT_TRUE(volumes["models"].IsMap());
  for (const auto& kv : d["spec"]["selector"]["matchLabels"]) {
    EXPECT_EQ(
        d["spec"]["template"]["metadata"]["labels"][kv.first.as<std::string>()].as<std::string>(),
        kv.second.as<std::string>());
  }
}

TEST(Kubernetes, ServiceExposesGrpcAndMetricsToThePods) {
  const YAML::Node s = YAML::LoadFile(kRoot / "docker/k8s/service.yaml");
  const YAML::Node d = YAML::LoadFile(kRoot / "docker/k8s/deployment.yaml");
  EXPECT_EQ(s["kind"].as<std::string>(), "Service");
  EXPECT_EQ(s["spec"]["type"].as<std::string>(), "ClusterIP");
  std::vector<int> ports;
  std::vector<std::string> port_names;
  for (const YAML::Node& p : s["spec"]["ports"]) {
    ports.push_back(p["port"].as<int>());
    port_names.push_back(p["targetPort"].as<std::string>());
  }
  EXPECT_EQ(ports, (std::vector<int>{50051, 8000, 9090}));
  std::vector<std::string> container_port_names;
  for (const YAML::Node& p : Container(d)["ports"]) {
    container_port_names.push_back(p["name"].as<std::string>());
  }
  EXPECT_EQ(port_names, container_port_names);
  for (const auto& kv : s["spec"]["selector"]) {
    EXPECT_EQ(
        d["spec"]["template"]["metadata"]["labels"][kv.first.as<std::string>()].as<std::string>(),
        kv.second.as<std::string>());
  }
}

TEST(Kubernetes, ConfigMapHoldsAValidConfigMatchingTheDeployment) {
  const YAML::Node cm = YAML::LoadFile(kRoot / "docker/k8s/configmap.yaml");
  const YAML::Node d = YAML::LoadFile(kRoot / "docker/k8s/deployment.yaml");
  EXPECT_EQ(cm["kind"].as<std::string>(), "ConfigMap");
  EXPECT_EQ(cm["metadata"]["name"].as<std::string>(), "pagoda-config");
  Result<PagodaConfig> config =
      ParseConfig(cm["data"]["config.yaml"].as<std::string>(), "configmap.yaml:config.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server.listen_address, "0.0.0.0:50051");
  EXPECT_EQ(config->server.metrics_address, "0.0.0.0:9090");
  EXPECT_EQ(config->server.http_address, "0.0.0.0:8000");
  EXPECT_EQ(config->server.metrics_names, "vllm");  // what the InferencePool's picker reads
  // 0.0.0.0 without a token starts only with allow_unauthenticated.
  EXPECT_TRUE(config->server.allow_unauthenticated);
  EXPECT_EQ(config->model.path.rfind("/models/", 0), 0u);
  EXPECT_EQ(config->runtime.cpu.threads,
            std::stoi(Container(d)["resources"]["limits"]["cpu"].as<std::string>()));
  EXPECT_LT(config->server.shutdown_grace_seconds,
            d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"].as<int>());
}

// inferencepool.yaml: the InferencePool selects the Deployment's pods on its HTTP API port, and
// the HTTPRoute sends traffic to that pool.
TEST(Kubernetes, InferencePoolTargetsTheHttpApiOfThePods) {
  const std::vector<YAML::Node> docs =
      YAML::LoadAllFromFile(kRoot / "docker/k8s/inferencepool.yaml");
  ASSERT_EQ(docs.size(), 2u);
  const YAML::Node& pool = docs[0];
  const YAML::Node& route = docs[1];
  const YAML::Node d = YAML::LoadFile(kRoot / "docker/k8s/deployment.yaml");
  EXPECT_EQ(pool["apiVersion"].as<std::string>(), "inference.networking.k8s.io/v1");
  EXPECT_EQ(pool["kind"].as<std::string>(), "InferencePool");
  for (const auto& kv : pool["spec"]["selector"]["matchLabels"]) {
    EXPECT_EQ(
        d["spec"]["template"]["metadata"]["labels"][kv.first.as<std::string>()].as<std::string>(),
        kv.second.as<std::string>());
  }
  ASSERT_EQ(pool["spec"]["targetPorts"].size(), 1u);
  const int target = pool["spec"]["targetPorts"][0]["number"].as<int>();
  int http_port = 0;
  for (const YAML::Node& p : Container(d)["ports"]) {
    if (p["name"].as<std::string>() == "http") http_port = p["containerPort"].as<int>();
  }
  EXPECT_EQ(target, http_port);
  EXPECT_TRUE(pool["spec"]["endpointPickerRef"]["name"].IsScalar());
  EXPECT_EQ(route["kind"].as<std::string>(), "HTTPRoute");
  const YAML::Node backend = route["spec"]["rules"][0]["backendRefs"][0];
  EXPECT_EQ(backend["kind"].as<std::string>(), "InferencePool");
  EXPECT_EQ(backend["group"].as<std::string>(), "inference.networking.k8s.io");
  EXPECT_EQ(backend["name"].as<std::string>(), pool["metadata"]["name"].as<std::string>());
}

TEST(DockerConfig, ImageConfigParses) {
  Result<PagodaConfig> config = LoadConfigFile(kRoot / "configs/docker.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server.listen_address, "0.0.0.0:50051");
  EXPECT_EQ(config->model.path, "/models/model.gguf");
  // Safe by default: on 0.0.0.0 the image needs a token (PAGODA_API_KEY) to start.
  EXPECT_FALSE(config->server.allow_unauthenticated);
  EXPECT_TRUE(config->server.auth.bearer_token.empty());
}

}  // namespace
}  // namespace pagoda
