// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// deploy/ stays consistent with the code: the Kubernetes manifests parse and agree with each
// other (names, ports, labels), their embedded server configuration starts a real server, the
// systemd unit runs the shipped configuration, and the launch scripts are valid shell.

#include <gtest/gtest.h>
#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <set>

#include "process.h"

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

  const char* bin = std::getenv("OPTCAST_BIN");
  if (bin == nullptr) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
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

TEST(Deploy, LaunchScriptsAreValidShell) {
  for (const char* script : {"/slurm/optcast-bench.sbatch", "/slurm/optcast-bench-mpirun.sh"}) {
    RunResult r = RunToEnd({"/bin/bash", "-n", kDeploy + script}, milliseconds(10000));
    EXPECT_EQ(r.code, 0) << script << ": " << r.err;
  }
}

}  // namespace
}  // namespace optcast::tooltest
