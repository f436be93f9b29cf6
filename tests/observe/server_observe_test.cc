// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// A real reduction server on loopback, real clients on threads: the metrics it serves over HTTP
// and the trace it writes agree with what the clients did.

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "observe/metrics_http.h"
#include "observe/trace.h"
#include "optcast/communicator.h"
#include "server/server.h"
#include "transport/posix/socket.h"

namespace optcast {
namespace {

using std::chrono::milliseconds;
namespace fs = std::filesystem;

// A server on its own thread with its metrics endpoint.
class ObservedServer {
 public:
  Status Start() {
    server::ServerOptions o;
    o.listen = {"127.0.0.1", 0};
    o.job_timeout = milliseconds(5000);
    server_ = std::make_unique<server::Server>(o);
    OPTCAST_RETURN_IF_ERROR(server_->Start());
    http_ = std::make_unique<observe::MetricsHttpServer>(server_->metrics());
    OPTCAST_RETURN_IF_ERROR(http_->Start({"127.0.0.1", 0}));
    thread_ = std::thread([this] { (void)server_->Run(); });
    return Status::Ok();
  }
  ~ObservedServer() {
    if (http_) http_->Stop();
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }
  uint16_t metrics_port() const { return http_->port(); }

  // GET /metrics over HTTP and parse every sample line into series -> value.
  std::map<std::string, double> Scrape(std::string* body_out = nullptr) {
    httplib::Client cli("127.0.0.1", metrics_port());
    cli.set_connection_timeout(5, 0);
    cli.set_read_timeout(5, 0);
    auto res = cli.Get("/metrics");
    std::map<std::string, double> out;
    if (!res || res->status != 200) {
      ADD_FAILURE() << "scrape failed";
      return out;
    }
    EXPECT_NE(res->get_header_value("Content-Type").find("text/plain; version=0.0.4"), std::string::npos);
    if (body_out) *body_out = res->body;
    std::istringstream in(res->body);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      const size_t sp = line.rfind(' ');
      out[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
    }
    return out;
  }

  // Scrapes until `series` reaches `want` (gauges are refreshed every 100 ms) or 3 s pass.
  double WaitFor(const std::string& series, double want) {
    double v = -1;
    for (int i = 0; i < 60; ++i) {
      v = Scrape()[series];
      if (v == want) break;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return v;
  }

 private:
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<observe::MetricsHttpServer> http_;
  std::thread thread_;
};

CommunicatorOptions Options(const std::string& server, const JobId& job, int nranks, int rank) {
  CommunicatorOptions o;
  o.servers = {server};
  o.job_id = job;
  o.nranks = nranks;
  o.rank = rank;
  o.timeout = milliseconds(10000);
  o.connect_timeout = milliseconds(5000);
  o.chunk_bytes = 64 << 10;
  return o;
}

// Runs `ops` AllReduces of `count` float32 on `nranks` threads; checks each result (rank r
// contributes r + 1 at every element, so every element sums to n(n+1)/2).
void RunAllReduces(const std::string& server, int nranks, size_t count, int ops) {
  const JobId job = JobId::Random();
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(nranks);
  for (int r = 0; r < nranks; ++r) {
    ranks.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm;
      Status st = Communicator::Create(Options(server, job, nranks, r), &comm);
      std::vector<float> send(count, static_cast<float>(r + 1)), recv(count);
      for (int i = 0; st.ok() && i < ops; ++i) {
        st = comm->AllReduce(send.data(), recv.data(), count, DataType::kFloat32, RedOp::kSum);
        const float want = nranks * (nranks + 1) / 2.0f;
        for (size_t k = 0; st.ok() && k < count; ++k) {
          if (recv[k] != want) st = InternalError("wrong sum at " + std::to_string(k));
        }
      }
      if (!st.ok()) errors[r] = st.message();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(ServerMetrics, CountWhatTheClientsDid) {
  ObservedServer srv;
  ASSERT_TRUE(srv.Start().ok());
  constexpr int kRanks = 3, kOps = 2;
  constexpr size_t kCount = 100000;  // 400000 bytes: 7 chunks of at most 64 KiB
  RunAllReduces(srv.address(), kRanks, kCount, kOps);

  // A send completes on the server a moment after the client may already have read it: wait for
  // the last chunk's count before reading the rest.
  EXPECT_EQ(srv.WaitFor("optcast_server_chunks_total", kOps * 7), kOps * 7);
  std::string body;
  auto m = srv.Scrape(&body);
  const double bytes = kCount * sizeof(float);
  EXPECT_EQ(m["optcast_server_received_bytes_total"], kRanks * kOps * bytes) << body;
  EXPECT_EQ(m["optcast_server_sent_bytes_total"], kRanks * kOps * bytes);
  EXPECT_EQ(m["optcast_server_collectives_total{type=\"allreduce\"}"], kOps);
  EXPECT_EQ(m["optcast_server_collectives_total{type=\"allgather\"}"], 0);
  EXPECT_EQ(m["optcast_server_jobs_created_total"], 1);
  const double chunks = m["optcast_server_chunks_total"];
  EXPECT_EQ(chunks, kOps * 7);
  EXPECT_EQ(m["optcast_server_chunk_latency_seconds_count"], chunks);
  EXPECT_EQ(m["optcast_server_chunk_latency_seconds_bucket{le=\"+Inf\"}"], chunks);
  EXPECT_GT(m["optcast_server_chunk_latency_seconds_sum"], 0);
  EXPECT_EQ(m["optcast_server_reduce_seconds_count"], chunks);
  EXPECT_EQ(m["optcast_server_errors_total{kind=\"mismatch\"}"], 0);
  // Every rank has said goodbye: the job and its connections are gone.
  EXPECT_EQ(srv.WaitFor("optcast_server_jobs_active", 0), 0);
  EXPECT_EQ(srv.WaitFor("optcast_server_connections", 0), 0);
  EXPECT_EQ(srv.WaitFor("optcast_server_buffer_bytes", 0), 0);
}

TEST(ServerMetrics, GaugesShowConnectedRanksAndErrorsCountByKind) {
  ObservedServer srv;
  ASSERT_TRUE(srv.Start().ok());
  const JobId job = JobId::Random();
  std::unique_ptr<Communicator> a, b;
  ASSERT_TRUE(Communicator::Create(Options(srv.address(), job, 2, 0), &a).ok());
  ASSERT_TRUE(Communicator::Create(Options(srv.address(), job, 2, 1), &b).ok());
  EXPECT_EQ(srv.WaitFor("optcast_server_ranks_connected", 2), 2);
  EXPECT_EQ(srv.WaitFor("optcast_server_jobs_active", 1), 1);

  // The two ranks disagree on the count: the job fails with a mismatch, counted once.
  std::vector<float> x(1000, 1.0f), y(1000);
  Request *ra = nullptr, *rb = nullptr;
  ASSERT_TRUE(a->IAllReduce(x.data(), y.data(), 1000, DataType::kFloat32, RedOp::kSum, &ra).ok());
  ASSERT_TRUE(b->IAllReduce(x.data(), y.data(), 999, DataType::kFloat32, RedOp::kSum, &rb).ok());
  EXPECT_EQ(b->Wait(rb).code(), Code::kMismatch);
  EXPECT_FALSE(a->Wait(ra).ok());
  EXPECT_EQ(srv.WaitFor("optcast_server_errors_total{kind=\"mismatch\"}", 1), 1);

  // Bytes that are not Optcast: refused as a protocol error.
  transport::posix::Socket s;
  transport::Endpoint ep;
  ASSERT_TRUE(transport::ParseEndpoint(srv.address(), &ep).ok());
  ASSERT_TRUE(transport::posix::Connect(ep, Deadline::After(milliseconds(2000)), &s).ok());
  const char junk[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(::write(s.fd(), junk, sizeof(junk) - 1), static_cast<ssize_t>(sizeof(junk) - 1));
  EXPECT_EQ(srv.WaitFor("optcast_server_errors_total{kind=\"protocol\"}", 1), 1);
  auto m = srv.Scrape();
  EXPECT_EQ(m["optcast_server_errors_total{kind=\"timeout\"}"], 0);
  EXPECT_EQ(m["optcast_server_collectives_total{type=\"allreduce\"}"], 0);
}

TEST(ServerMetrics, BusyPortIsAClearError) {
  ObservedServer srv;
  ASSERT_TRUE(srv.Start().ok());
  server::Server other(server::ServerOptions{});
  observe::MetricsHttpServer http(other.metrics());
  Status st = http.Start({"127.0.0.1", srv.metrics_port()});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("127.0.0.1:" + std::to_string(srv.metrics_port())), std::string::npos) << st.message();
}

// X events of one track must nest or follow each other, or viewers draw them wrongly.
std::string CheckNesting(const nlohmann::json& trace) {
  std::map<int, std::vector<std::pair<double, double>>> by_tid;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X")
      by_tid[e["tid"].get<int>()].emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
  }
  for (auto& [tid, spans] : by_tid) {
    std::sort(spans.begin(), spans.end(),
              [](auto& a, auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
    std::vector<double> open;  // ends of enclosing spans
    for (auto& [s, e] : spans) {
      while (!open.empty() && open.back() <= s + 0.0015) open.pop_back();
      if (!open.empty() && e > open.back() + 0.0015) {
        return "track " + std::to_string(tid) + ": span [" + std::to_string(s) + ", " + std::to_string(e) +
               "] overlaps the end of its enclosing span at " + std::to_string(open.back());
      }
      open.push_back(e);
    }
  }
  return "";
}

TEST(ServerTrace, ShowsEveryChunksReceiveReduceAndSend) {
  const std::string path =
      (fs::temp_directory_path() / ("optcast-server-trace-" + std::to_string(::getpid()) + ".json")).string();
  ASSERT_TRUE(observe::StartTrace(path, "server and clients").ok());
  constexpr int kRanks = 2, kOps = 3;
  double chunks = 0;
  {
    ObservedServer srv;
    ASSERT_TRUE(srv.Start().ok());
    RunAllReduces(srv.address(), kRanks, 100000, kOps);
    chunks = srv.WaitFor("optcast_server_chunks_total", kOps * 7);
  }  // the server stops here, after its last send completed
  observe::StopTrace();

  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json t = nlohmann::json::parse(ss.str());
  std::map<std::string, int> count;
  std::map<std::string, int> async_open;
  for (const auto& e : t["traceEvents"]) {
    const std::string name = e["name"];
    if (e["ph"] == "X") ++count[name];
    if (e["ph"] == "b") ++async_open[name + "#" + e["id"].get<std::string>()];
    if (e["ph"] == "e") --async_open[name + "#" + e["id"].get<std::string>()];
  }
  EXPECT_EQ(chunks, kOps * 7);
  // Server: each rank's chunk received, each chunk reduced once, each result sent to each rank.
  EXPECT_EQ(count["recv"], kRanks * chunks);
  EXPECT_EQ(count["reduce"], chunks);
  EXPECT_EQ(count["send"], kRanks * chunks);
  // Clients: each request issued and waited for; each chunk sent and its result received.
  EXPECT_EQ(count["issue"], kRanks * kOps);
  EXPECT_EQ(count["wait"], kRanks * kOps);
  EXPECT_EQ(count["send chunk"], kRanks * chunks);
  EXPECT_EQ(count["result"], kRanks * chunks);
  int requests = 0;
  for (const auto& [key, open] : async_open) {
    EXPECT_EQ(open, 0) << key << " begins and ends do not pair up";
    requests += key.rfind("allreduce#", 0) == 0;
  }
  EXPECT_EQ(requests, kRanks * kOps);
  EXPECT_EQ(CheckNesting(t), "");
  fs::remove(path);
}

}  // namespace
}  // namespace optcast
