// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// deploy/ stays consistent with the code: the Kubernetes manifests parse and agree with each
// other (names, ports, labels), their embedded server configuration starts a real server, the
// systemd unit runs the shipped configuration, the stop timeouts exceed the drain time, the
// images run as a user, and the launch scripts are valid shell.

#include <gtest/gtest.h>
#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "auth/secret.h"
#include "process.h"
#include "tests/support/optcast_binary.h"

namespace optcast::tooltest {
namespace {

using std::chrono::milliseconds;

const std::string kDeploy = std::string(OPTCAST_SOURCE_DIR) + "/deploy";

std::map<std::string, YAML::Node> ByKind(const std::string& path) {
  std::map<std::string, YAML::Node> out;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(path)) out[doc["kind"].as<std::string>()] = doc;
  return out;
}

// The port of "HOST:PORT".
int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

TEST(Deploy, ServerManifestsAgreeWithEachOtherAndStartARealServer) {
  auto docs = ByKind(kDeploy + "/kubernetes/optcast-servers.yaml");
  ASSERT_TRUE(docs.count("ConfigMap") && docs.count("Service") && docs.count("StatefulSet"));
  const YAML::Node svc = docs["Service"], sts = docs["StatefulSet"];
  EXPECT_EQ(svc["spec"]["clusterIP"].as<std::string>(), "None") << "workers need one DNS name per server";
  EXPECT_EQ(sts["spec"]["serviceName"].as<std::string>(), svc["metadata"]["name"].as<std::string>());
  const YAML::Node pod_labels = sts["spec"]["template"]["metadata"]["labels"];
  for (const auto& kv : svc["spec"]["selector"]) {
    EXPECT_EQ(pod_labels[kv.first.as<std::string>()].as<std::string>(), kv.second.as<std::string>());
  }
  for (const auto& kv : sts["spec"]["selector"]["matchLabels"]) {
    EXPECT_EQ(pod_labels[kv.first.as<std::string>()].as<std::string>(), kv.second.as<std::string>());
  }

  // The configuration the pods mount, as a file: its ports are the ones the manifests expose.
  const std::string config_text = docs["ConfigMap"]["data"]["server.yaml"].as<std::string>();
  const YAML::Node config = YAML::Load(config_text);
  std::map<std::string, int> container_ports;
  const YAML::Node container = sts["spec"]["template"]["spec"]["containers"][0];
  for (const auto& p : container["ports"]) container_ports[p["name"].as<std::string>()] = p["containerPort"].as<int>();
  EXPECT_EQ(container_ports["optcast"], PortOf(config["listen"].as<std::string>()));
  EXPECT_EQ(container_ports["metrics"], PortOf(config["metrics-listen"].as<std::string>()));
  EXPECT_EQ(sts["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"].as<std::string>(),
            std::to_string(container_ports["metrics"]));
  EXPECT_EQ(container["readinessProbe"]["httpGet"]["path"].as<std::string>(), "/metrics");

  const std::string bin = testsupport::OptcastBinary();
  if (bin.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  TempDir dir;
  const std::string path = dir / "server.yaml";
  std::ofstream(path) << config_text;
  Process p({bin, "server", "--config", path, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
             "--secret-file", WriteSecretFile(dir / "secret")});
  ASSERT_TRUE(p.WaitForOutput("/metrics", milliseconds(10000))) << p.out() << p.err();
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(milliseconds(10000)), 0) << p.err();
}

TEST(Deploy, WorkerExampleNamesEveryServerAndSetsTheNcclVariables) {
  auto servers = ByKind(kDeploy + "/kubernetes/optcast-servers.yaml");
  auto workers = ByKind(kDeploy + "/kubernetes/worker-example.yaml");
  ASSERT_TRUE(workers.count("Job"));
  const YAML::Node sts = servers["StatefulSet"];
  const std::string svc = servers["Service"]["metadata"]["name"].as<std::string>();
  const YAML::Node pod = workers["Job"]["spec"]["template"]["spec"];
  std::map<std::string, std::string> env;
  for (const auto& e : pod["containers"][0]["env"]) env[e["name"].as<std::string>()] = e["value"].as<std::string>();
  EXPECT_EQ(env["NCCL_NET_PLUGIN"], "optcast");
  EXPECT_EQ(env["NCCL_COLLNET_ENABLE"], "1");
  // Workers prove the secret the servers were given.
  const YAML::Node config = YAML::Load(servers["ConfigMap"]["data"]["server.yaml"].as<std::string>());
  EXPECT_EQ(env["OPTCAST_SECRET_FILE"], config["secret-file"].as<std::string>());

  // OPTCAST_SERVERS lists each StatefulSet pod by its stable DNS name, in order.
  std::string want;
  for (int i = 0; i < sts["spec"]["replicas"].as<int>(); ++i) {
    want += (i ? "," : "") + sts["metadata"]["name"].as<std::string>() + "-" + std::to_string(i) + "." + svc + ":8918";
  }
  EXPECT_EQ(env["OPTCAST_SERVERS"], want);

  // The plugin lands where LD_LIBRARY_PATH points.
  const std::string plugin_dir = pod["initContainers"][0]["volumeMounts"][0]["mountPath"].as<std::string>();
  EXPECT_EQ(env["LD_LIBRARY_PATH"], plugin_dir);
  EXPECT_NE(pod["initContainers"][0]["command"][1].as<std::string>().find("libnccl-net-optcast.so"), std::string::npos);
}

TEST(Deploy, SystemdUnitRunsTheShippedConfiguration) {
  const std::string unit = ReadFile(kDeploy + "/systemd/optcast-server.service");
  EXPECT_NE(unit.find("ExecStart=/usr/local/bin/optcast server --config /etc/optcast/server.yaml"), std::string::npos);
  EXPECT_NE(unit.find("install -D -m 644 deploy/optcast-server.yaml /etc/optcast/server.yaml"), std::string::npos);
  EXPECT_NE(unit.find("LoadCredential=secret:/etc/optcast/secret"), std::string::npos);
  EXPECT_NE(unit.find("--secret-file %d/secret"), std::string::npos);
}

// The value of `key=` on its own line of a systemd unit ("45" for TimeoutStopSec=45), or "".
std::string UnitValue(const std::string& unit, const std::string& key) {
  const size_t at = unit.find("\n" + key + "=");
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size() + 2;
  return unit.substr(begin, unit.find('\n', begin) - begin);
}

// On SIGTERM the server drains for shutdown-timeout-ms; systemd and Kubernetes kill it after
// their stop timeouts, which must therefore be longer, everywhere, and say so alike.
// Every "at least N bytes" said of the secret, in deploy/ and the deployment guide, is the
// length the server and the workers require.
TEST(Deploy, TheSecretLengthTheFilesNameIsTheOneTheCodeRequires) {
  const std::regex at_least("at least ([0-9]+) bytes");
  int seen = 0;
  for (const std::string& path :
       {kDeploy + "/optcast-server.yaml", kDeploy + "/systemd/optcast-server.service",
        kDeploy + "/kubernetes/optcast-servers.yaml", kDeploy + "/kubernetes/worker-example.yaml",
        std::string(OPTCAST_SOURCE_DIR) + "/docs/deploying.md"}) {
    const std::string text = ReadFile(path);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), at_least); it != std::sregex_iterator(); ++it) {
      const size_t at = static_cast<size_t>(it->position());
      const std::string before = text.substr(at > 120 ? at - 120 : 0, std::min<size_t>(at, 120));
      if (before.find("secret") == std::string::npos) continue;
      ++seen;
      EXPECT_EQ(std::stoul((*it)[1].str()), auth::kMinSecretBytes) << path << ": \"" << it->str() << "\"";
    }
  }
  EXPECT_GE(seen, 2) << "the shipped configuration and the guide both state the length";
}

TEST(Deploy, StopTimeoutsExceedTheDrainTimeAndTheDocsSayTheSame) {
  const std::string unit = ReadFile(kDeploy + "/systemd/optcast-server.service");
  const std::string stop_text = UnitValue(unit, "TimeoutStopSec");
  ASSERT_FALSE(stop_text.empty()) << "the unit sets no TimeoutStopSec";
  const int unit_stop_s = std::stoi(stop_text);
  const YAML::Node shipped = YAML::LoadFile(kDeploy + "/optcast-server.yaml");
  ASSERT_TRUE(shipped["shutdown-timeout-ms"]) << "optcast-server.yaml should state the drain time the unit relies on";
  const int drain_ms = shipped["shutdown-timeout-ms"].as<int>();
  EXPECT_GT(unit_stop_s * 1000, drain_ms) << "systemd would kill the server mid-drain";

  auto docs = ByKind(kDeploy + "/kubernetes/optcast-servers.yaml");
  const YAML::Node config = YAML::Load(docs["ConfigMap"]["data"]["server.yaml"].as<std::string>());
  ASSERT_TRUE(config["shutdown-timeout-ms"]);
  const int k8s_drain_ms = config["shutdown-timeout-ms"].as<int>();
  const int grace_s = docs["StatefulSet"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"].as<int>();
  EXPECT_GT(grace_s * 1000, k8s_drain_ms) << "Kubernetes would kill the server mid-drain";
  EXPECT_EQ(k8s_drain_ms, drain_ms);
  EXPECT_EQ(grace_s, unit_stop_s);

  // The unit's comment and docs/deploying.md name the same figures.
  const std::string drain_s = std::to_string(drain_ms / 1000) + " s";
  EXPECT_NE(unit.find("shutdown-timeout-ms (" + drain_s), std::string::npos) << "the unit's comment";
  const std::string guide = ReadFile(std::string(OPTCAST_SOURCE_DIR) + "/docs/deploying.md");
  for (const std::string& figure :
       {"TimeoutStopSec=" + stop_text, "terminationGracePeriodSeconds: " + std::to_string(grace_s),
        "shutdown-timeout-ms: " + std::to_string(drain_ms)}) {
    EXPECT_NE(guide.find(figure), std::string::npos) << "docs/deploying.md does not say " << figure;
  }
}

// The image: built in one stage, run from another that has no compiler and runs as a user; the
// plugin image holds the file the workers' init container copies; the context leaves builds out.
TEST(Deploy, ImagesRunAsAUserAndShipWhatTheManifestsUse) {
  const std::string dockerfile = ReadFile(kDeploy + "/docker/Dockerfile");
  const size_t server = dockerfile.find("\nFROM debian:12-slim AS server");
  ASSERT_NE(server, std::string::npos) << "the last stage should be the server's";
  const std::string runtime = dockerfile.substr(server);
  EXPECT_EQ(runtime.find("\nFROM "), runtime.rfind("\nFROM ")) << "the server stage should be the last";
  EXPECT_NE(runtime.find("\nUSER 10001"), std::string::npos) << "the server should run as a user";
  EXPECT_EQ(runtime.find("setup.sh"), std::string::npos) << "no build dependencies in the server image";
  EXPECT_NE(runtime.find("rm -rf /var/lib/apt/lists/* /tmp/debs /etc/optcast/secret"), std::string::npos)
      << "no secret may stay in the image";

  auto servers = ByKind(kDeploy + "/kubernetes/optcast-servers.yaml");
  const YAML::Node security = servers["StatefulSet"]["spec"]["template"]["spec"]["securityContext"];
  EXPECT_EQ(security["runAsUser"].as<int>(), 10001);
  EXPECT_EQ(security["fsGroup"].as<int>(), 10001) << "the mounted secret reaches the user through its group";

  auto workers = ByKind(kDeploy + "/kubernetes/worker-example.yaml");
  const YAML::Node init = workers["Job"]["spec"]["template"]["spec"]["initContainers"][0];
  const std::string copied = init["command"][1].as<std::string>();
  EXPECT_NE(dockerfile.find("AS nccl-plugin\nCOPY --from=build /plugin/usr/lib/libnccl-net-optcast.so " + copied),
            std::string::npos)
      << "the init container copies " << copied << ", which the nccl-plugin image should hold";

  const std::string ignore = ReadFile(std::string(OPTCAST_SOURCE_DIR) + "/.dockerignore");
  for (const char* left_out : {"\n.git\n", "\nbuild\n", "\nbuild-*\n"}) {
    EXPECT_NE(ignore.find(left_out), std::string::npos) << ".dockerignore should leave out " << left_out;
  }
}

TEST(Deploy, LaunchScriptsAreValidShell) {
  for (const char* script : {"/slurm/optcast-bench.sbatch", "/slurm/optcast-bench-mpirun.sh"}) {
    RunResult r = RunToEnd({"/bin/bash", "-n", kDeploy + script}, milliseconds(10000));
    EXPECT_EQ(r.code, 0) << script << ": " << r.err;
  }
}

}  // namespace
}  // namespace optcast::tooltest
