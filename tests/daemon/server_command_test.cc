// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// `optcast server` as a real process: its YAML configuration file, its metrics endpoint scraped over
// HTTP, its trace file; and the example configuration shipped in deploy/.

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string_view>
#include <thread>

#include "process.h"
#include "raw_client.h"
#include "tests/support/optcast_binary.h"

namespace optcast::tooltest {
namespace {

using std::chrono::milliseconds;
using testsupport::OptcastBinary;

std::string Write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

class ServerCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (bin_.empty()) GTEST_SKIP() << "OPTCAST_BIN is not set (run through ctest)";
  }
  const std::string bin_ = OptcastBinary();
  TempDir dir_;
};

struct BadConfig {
  const char* yaml;
  const char* expect;  // after "FILE:"
};

TEST_F(ServerCommandTest, ConfigRefusesUnknownKeysAndBadValuesWithLineAndReason) {
  const BadConfig cases[] = {
      {"listen: 127.0.0.1:0\nlisen: 1.2.3.4:5\n", ":2: unknown key 'lisen'; the keys are: listen, "},
      {"# timeouts\ntimeout-ms: -5\n", ":2: bad value for 'timeout-ms': '-5' is not a positive number of milliseconds"},
      {"timeout-ms: soon\n", ":1: bad value for 'timeout-ms'"},
      {"max-chunk: 64Q\n", ":1: bad value for 'max-chunk': '64Q' is not a size like 64M"},
      {"log-level: loud\n", ":1: bad value for 'log-level': 'loud' is not a log level"},
      {"\nmetrics-listen: nowhere:port\n", ":2: bad value for 'metrics-listen'"},
      {"listen: [a, b]\n", ":1: 'listen' takes one value, not a list"},
      {"config: other.yaml\n", ":1: unknown key 'config'"},
      {"transport: udp\n", ":1: bad value for 'transport'"},
      {"link-rate: 100mbps\n",
       ":1: bad value for 'link-rate': '100mbps' is not a rate like 100mbit or 25gbit, 'auto' or 'unknown'"},
      // One flag under both spellings, and a flag's value that is not a boolean.
      {"max_chunk: 4M\ntimeout-ms: 100\nmax-chunk: 8M\n",
       ":3: 'max-chunk' sets --max-chunk, which 'max_chunk' on line 1 sets already; keep one"},
      {"timeout_ms: 100\ntimeout_ms: 200\n", ":2: 'timeout_ms' is set twice (first on line 1); keep one"},
      {"insecure: maybe\n",
       ":1: bad value for 'insecure': 'maybe' is not true or false; write `insecure: true` or "
       "`insecure: false`"},
      {"transport: ofi\nofi_provider: nosuch\n",
       ":2: bad value for 'ofi_provider': 'nosuch' is not a libfabric provider on this machine; available: "},
      // Without libfabric built in, no provider is on offer: the first part is refused already.
      {"ofi-provider: tcp;nosuch\n", OPTCAST_WITH_OFI
                                         ? ":1: bad value for 'ofi-provider': 'nosuch' is not a libfabric provider"
                                         : ":1: bad value for 'ofi-provider': 'tcp' is not a libfabric provider"},
  };
  for (const BadConfig& c : cases) {
    const std::string path = Write(dir_ / "bad.yaml", c.yaml);
    RunResult r = RunToEnd({bin_, "server", "--config", path}, milliseconds(10000));
    EXPECT_EQ(r.code, 2) << c.yaml << r.err;
    EXPECT_NE(r.err.find(path + c.expect), std::string::npos) << "config:\n" << c.yaml << "stderr:\n" << r.err;
  }
}

// Starts `optcast server` with `args`, waits until it listens; fills the ports it printed.
bool StartServer(Process& p, uint16_t* port, uint16_t* metrics_port) {
  if (!p.WaitForOutput("listening on", milliseconds(10000))) return false;
  if (metrics_port && !p.WaitForOutput("/metrics", milliseconds(5000))) return false;
  std::smatch m;
  const std::string out = p.out();
  if (!std::regex_search(out, m, std::regex("listening on [^:]+:(\\d+)"))) return false;
  *port = static_cast<uint16_t>(std::stoi(m[1]));
  if (metrics_port) {
    if (!std::regex_search(out, m, std::regex("metrics on http://[^:]+:(\\d+)/metrics"))) return false;
    *metrics_port = static_cast<uint16_t>(std::stoi(m[1]));
  }
  return true;
}

TEST_F(ServerCommandTest, ConfigFileSetsFlagsMetricsAreScrapedAndTheTraceIsWritten) {
  const std::string trace = dir_ / "server-trace.json";
  const std::string cfg = Write(dir_ / "server.yaml",
                                "listen: 127.0.0.1:0\n"
                                "timeout_ms: 4000\n"  // underscores work too
                                "metrics-listen: 127.0.0.1:0\n"
                                "log-level: warn\n"
                                "trace: " +
                                    trace + "\n");
  // The command line wins over the file.
  Process p({bin_, "server", "--config", cfg, "--log-level", "info"});
  uint16_t port = 0, mport = 0;
  ASSERT_TRUE(StartServer(p, &port, &mport)) << p.out() << p.err();
  EXPECT_NE(p.err().find("listening on 127.0.0.1:"), std::string::npos) << "info logging is on: " << p.err();

  httplib::Client cli("127.0.0.1", mport);
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(5, 0);
  auto res = cli.Get("/metrics");
  ASSERT_TRUE(res) << "no answer from the metrics endpoint";
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("# TYPE optcast_server_chunk_latency_seconds histogram"), std::string::npos);
  EXPECT_NE(res->body.find("optcast_server_jobs_active 0"), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("optcast_server_errors_total{kind=\"timeout\"} 0"), std::string::npos);

  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(milliseconds(10000)), 0) << p.err();
  nlohmann::json t = nlohmann::json::parse(ReadFile(trace));
  bool named = false;
  for (const auto& e : t["traceEvents"]) {
    if (e["name"] == "process_name") named = e["args"]["name"] == "optcast server :" + std::to_string(port);
  }
  EXPECT_TRUE(named) << t.dump();
}

// The trace file keeps up with a running server (about once a second), so that a server killed
// with SIGKILL still leaves a complete trace of what it did.
TEST_F(ServerCommandTest, ARunningServerKeepsItsTraceCurrentAndAKilledOneLeavesItWhole) {
  const std::string trace = dir_ / "live-trace.json";
  Process srv({bin_, "server", "--listen", "127.0.0.1:0", "--trace", trace});
  uint16_t port = 0;
  ASSERT_TRUE(StartServer(srv, &port, nullptr)) << srv.out() << srv.err();
  RunResult bench = RunToEnd({bin_, "bench", "--nranks", "2", "--servers", "127.0.0.1:" + std::to_string(port), "-b",
                              "256K", "-e", "256K", "-n", "2", "-w", "1"},
                             milliseconds(60000));
  ASSERT_EQ(bench.code, 0) << bench.out << bench.err;
  // What the trace must hold: the event loop's name, and the chunks it received from the bench.
  auto complete = [&](std::string* why) {
    nlohmann::json t = nlohmann::json::parse(ReadFile(trace), nullptr, /*allow_exceptions=*/false);
    if (t.is_discarded()) {
      *why = "not valid JSON";
      return false;
    }
    bool loop = false;
    int recvs = 0;
    for (const auto& e : t["traceEvents"]) {
      if (e["name"] == "thread_name" && e["args"]["name"] == "server event loop") loop = true;
      if (e["name"] == "recv" && e["cat"] == "server") ++recvs;
    }
    *why = "event loop named: " + std::to_string(loop) + ", recv events: " + std::to_string(recvs);
    return loop && recvs > 0;
  };
  std::string why;
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(5000);
  bool current = false;
  while (!(current = complete(&why)) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(current) << "the running server's trace lags more than 5 s: " << why;
  srv.Signal(SIGKILL);
  srv.Wait(milliseconds(10000));
  EXPECT_TRUE(complete(&why)) << "after SIGKILL: " << why;
}

// `transport:` and `ofi_provider:` pick what carries the protocol; the command line wins over both.
TEST_F(ServerCommandTest, ConfigPicksTheTransportAndProviderAndFlagsWin) {
  if (!OPTCAST_WITH_OFI) GTEST_SKIP() << "built without libfabric (OPTCAST_WITH_OFI=OFF)";
  const std::string ofi = Write(dir_ / "ofi.yaml",
                                "listen: 127.0.0.1:0\n"
                                "transport: ofi\n"
                                "ofi_provider: tcp;ofi_rxm\n");
  {
    Process p({bin_, "server", "--config", ofi, "--log-level", "info"});
    uint16_t port = 0;
    ASSERT_TRUE(StartServer(p, &port, nullptr)) << p.out() << p.err();
    EXPECT_NE(p.err().find("over ofi (provider tcp;ofi_rxm)"), std::string::npos) << p.err();
    p.Signal(SIGTERM);
    EXPECT_EQ(p.Wait(milliseconds(10000)), 0) << p.err();
  }
  {
    Process p({bin_, "server", "--config", ofi, "--log-level", "info", "--transport", "tcp"});
    // --transport tcp wins, and then the file's provider has nothing to apply to: a clear refusal.
    EXPECT_EQ(p.Wait(milliseconds(10000)), 2) << p.err();
    EXPECT_NE(p.err().find("applies to the ofi transport only"), std::string::npos) << p.err();
  }
  {
    // The flag's provider wins over the file's (udp gets its reliable datagrams from ofi_rxd).
    Process p({bin_, "server", "--config", ofi, "--log-level", "info", "--ofi-provider", "udp"});
    uint16_t port = 0;
    ASSERT_TRUE(StartServer(p, &port, nullptr)) << p.out() << p.err();
    EXPECT_NE(p.err().find("over ofi (provider udp"), std::string::npos) << p.err();
    p.Signal(SIGTERM);
    EXPECT_EQ(p.Wait(milliseconds(10000)), 0) << p.err();
  }
  const std::string tcp = Write(dir_ / "tcp.yaml",
                                "listen: 127.0.0.1:0\n"
                                "transport: tcp\n");
  Process p({bin_, "server", "--config", tcp, "--log-level", "info", "--transport", "ofi"});
  uint16_t port = 0;
  ASSERT_TRUE(StartServer(p, &port, nullptr)) << p.out() << p.err();
  EXPECT_NE(p.err().find("over ofi"), std::string::npos) << p.err();
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(milliseconds(10000)), 0) << p.err();
}

// ofi_rxm's bounce buffers may differ between the ends (a host with RDMA devices keeps larger ones
// by default); its eager limit may not, and ofi_rxm then drops the connection without a word: the
// rank's timeout must say so and name the settings, not just "no answer".
TEST_F(ServerCommandTest, OfiEndsWithOtherBuffersWorkAndAnotherEagerLimitIsNamed) {
  if (!OPTCAST_WITH_OFI) GTEST_SKIP() << "built without libfabric (OPTCAST_WITH_OFI=OFF)";
  // The children inherit this environment: ofi_rxm settings in it would replace the defaults
  // under test.
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with("FI_OFI_RXM_")) GTEST_SKIP() << "unset " << *e << " to test the defaults";
  }
  const auto bench = [&](uint16_t port, int timeout_ms) {
    return std::vector<std::string>{bin_,           "bench",
                                    "--transport",  "ofi",
                                    "--algo",       "server",
                                    "--nranks",     "2",
                                    "-b",           "16K",
                                    "-e",           "1M",
                                    "-f",           "4",
                                    "-n",           "2",
                                    "-w",           "1",
                                    "--progress",   "off",
                                    "--timeout-ms", std::to_string(timeout_ms),
                                    "--servers",    "127.0.0.1:" + std::to_string(port)};
  };
  const std::vector<std::string> env = {"FI_TCP_IFACE=lo", "OPTCAST_OFI_PROVIDER=tcp;ofi_rxm"};
  {
    // 16 KiB bounce buffers at the server (as a host might set), the default 1 KiB at the ranks:
    // eager payloads and rendezvous (1 MiB: 256 KiB chunks) both work.
    std::vector<std::string> server_env = env;
    server_env.push_back("FI_OFI_RXM_BUFFER_SIZE=16384");
    Process srv({bin_, "server", "--listen", "127.0.0.1:0", "--transport", "ofi"}, server_env);
    uint16_t port = 0;
    ASSERT_TRUE(StartServer(srv, &port, nullptr)) << srv.out() << srv.err();
    const RunResult r = RunToEnd(bench(port, 30000), milliseconds(90000), env);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    // Every size ran and was checked (the #wrong column).
    for (const char* size : {"16384", "65536", "262144", "1048576"}) {
      EXPECT_TRUE(std::regex_search(r.out, std::regex(std::string(R"(\n +)") + size +
                                                      R"( +[0-9]+ +float32 +sum +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 )")))
          << size << " missing or wrong:\n"
          << r.out;
    }
  }
  std::vector<std::string> server_env = env;
  server_env.push_back("FI_OFI_RXM_EAGER_LIMIT=4096");
  Process srv({bin_, "server", "--listen", "127.0.0.1:0", "--transport", "ofi"}, server_env);
  uint16_t port = 0;
  ASSERT_TRUE(StartServer(srv, &port, nullptr)) << srv.out() << srv.err();
  const RunResult r = RunToEnd(bench(port, 10000), milliseconds(90000), env);
  EXPECT_NE(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("no answer to the hello in time"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("has left over the fabric"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("FI_OFI_RXM_EAGER_LIMIT"), std::string::npos) << r.err;
}

// A build without libfabric refuses the ofi transport however it is asked for, and says how to get it.
TEST_F(ServerCommandTest, OfiWithoutLibfabricIsRefusedWithTheFix) {
  if (OPTCAST_WITH_OFI) GTEST_SKIP() << "built with libfabric";
  const std::string ofi = Write(dir_ / "ofi.yaml", "listen: 127.0.0.1:0\ntransport: ofi\n");
  const RunResult runs[] = {
      RunToEnd({bin_, "server", "--listen", "127.0.0.1:0", "--transport", "ofi"}, milliseconds(10000)),
      RunToEnd({bin_, "server", "--config", ofi}, milliseconds(10000)),
      RunToEnd({bin_, "server", "--listen", "127.0.0.1:0"}, milliseconds(10000), {"OPTCAST_TRANSPORT=ofi"}),
  };
  for (const RunResult& r : runs) {
    EXPECT_NE(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("no libfabric support"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("-DOPTCAST_WITH_OFI=ON"), std::string::npos) << r.err;
  }
}

// The rate a server announces in its welcome, as its flag gives it. On loopback `auto` finds no
// speed to report.
TEST_F(ServerCommandTest, LinkRateFlagReachesTheWelcome) {
  for (const auto& [flag, want] : {std::pair<const char*, uint64_t>{"100mbit", 100'000'000},
                                   {"25gbit", 25'000'000'000},
                                   {"auto", 0},
                                   {"unknown", 0}}) {
    Process p({bin_, "server", "--listen", "127.0.0.1:0", "--link-rate", flag});
    uint16_t port = 0;
    ASSERT_TRUE(StartServer(p, &port, nullptr)) << p.out() << p.err();
    const int fd = e2e::RawConnect(port);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(e2e::SendRaw(fd, e2e::Frame(e2e::HelloMeta(JobId::Random(), 2, 0), 0)));
    const e2e::RawReply r = e2e::ReadReply(fd);
    ASSERT_EQ(r.kind, e2e::RawReply::kFrame) << flag << ": " << r.detail;
    ASSERT_EQ(r.msg.type, wire::MsgType::kWelcome) << flag;
    EXPECT_EQ(r.msg.welcome.link_rate_bits, want) << flag;
    ::close(fd);
    p.Signal(SIGTERM);
    EXPECT_EQ(p.Wait(milliseconds(10000)), 0) << p.err();
  }
}

TEST_F(ServerCommandTest, ShippedExampleConfigLoads) {
  // deploy/'s file as is; only the addresses move to free loopback ports (the command line wins).
  const std::string cfg = std::string(OPTCAST_SOURCE_DIR) + "/deploy/optcast-server.yaml";
  Process p({bin_, "server", "--config", cfg, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
             "--secret-file", WriteSecretFile(dir_ / "secret")});
  uint16_t port = 0, mport = 0;
  ASSERT_TRUE(StartServer(p, &port, &mport)) << p.out() << p.err();
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(milliseconds(10000)), 0) << p.err();
}

}  // namespace
}  // namespace optcast::tooltest
