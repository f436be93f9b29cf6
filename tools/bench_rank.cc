// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/bench_rank.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/env.h"
#include "optcast/communicator.h"
#include "ring/ring_allreduce.h"
#include "tools/bench_check.h"
#include "tools/bench_plot.h"
#include "tools/bench_progress.h"
#include "tools/nccl_driver/proxy_collnet.h"
#include "tools/process/cpu_time.h"
#include "transport/fabric_info.h"

namespace optcast::tools {

namespace {

using Clock = std::chrono::steady_clock;

// Runs one AllReduce with the chosen algorithm.
class Algo {
 public:
  virtual ~Algo() = default;
  virtual Status Run(const void* send, void* recv, size_t count, DataType dt, RedOp op) = 0;
  // What the header says about how the algorithm runs, beyond its name ("" for nothing).
  virtual std::string Describe() const { return ""; }
  // A line for after the algorithm's rows ("" for none).
  virtual std::string Footer() const { return ""; }
  // Failovers so far, and the servers left (servers = 0: not known).
  virtual FailoverStats Failovers() const { return {}; }
};

class ServerAlgo : public Algo {
 public:
  explicit ServerAlgo(std::unique_ptr<Communicator> c) : comm_(std::move(c)) {}
  Status Run(const void* send, void* recv, size_t count, DataType dt, RedOp op) override {
    return comm_->AllReduce(send, recv, count, dt, op);
  }
  FailoverStats Failovers() const override { return comm_->failover_stats(); }

 private:
  std::unique_ptr<Communicator> comm_;
};

class RingAlgo : public Algo {
 public:
  explicit RingAlgo(std::unique_ptr<ring::RingAllReduce> r) : ring_(std::move(r)) {}
  Status Run(const void* send, void* recv, size_t count, DataType dt, RedOp op) override {
    return ring_->AllReduce(send, recv, count, dt, op);
  }

 private:
  std::unique_ptr<ring::RingAllReduce> ring_;
};

// The server path through libnccl-net-optcast.so's CollNet, as NCCL's proxy drives it. The
// bench's buffers are registered (regMr) on first use, as NCCL registers its buffers once.
class PluginAlgo : public Algo {
 public:
  PluginAlgo(std::unique_ptr<nccl_driver::ProxyCollNet> p, size_t max_bytes)
      : plugin_(std::move(p)), max_bytes_(max_bytes) {}
  Status Run(const void* send, void* recv, size_t count, DataType dt, RedOp op) override {
    // NCCL's CollNet takes a non-const send buffer; the plugin only reads it.
    void* s = const_cast<void*>(send);
    OPTCAST_RETURN_IF_ERROR(Registered(s, &send_));
    OPTCAST_RETURN_IF_ERROR(Registered(recv, &recv_));
    return plugin_->AllReduce(s, recv, count, dt, op, send_.mhandle, recv_.mhandle);
  }
  std::string Describe() const override { return plugin_->Describe(); }
  std::string Footer() const override {
    const uint64_t n = plugin_->null_requests();
    return n == 0 ? "" : fmt::format("rank 0 was told {} times to call iallreduce again later (null request)", n);
  }

 private:
  struct Region {
    void* base = nullptr;
    void* mhandle = nullptr;
  };
  Status Registered(void* p, Region* r) {
    if (r->base == p) return Status::Ok();
    if (r->mhandle != nullptr) OPTCAST_RETURN_IF_ERROR(plugin_->Deregister(r->mhandle));
    r->base = p;
    return plugin_->Register(p, max_bytes_, &r->mhandle);
  }

  std::unique_ptr<nccl_driver::ProxyCollNet> plugin_;
  size_t max_bytes_;
  Region send_, recv_;
};

// Hands the plugin what it reads from the environment: the servers, and the bench's settings
// for the client inside it, so that both paths of one run see the same ones.
void SetPluginEnvironment(const BenchOptions& o, const std::vector<std::string>& servers) {
  std::string list;
  for (const auto& s : servers) list += (list.empty() ? "" : ",") + s;
  setenv("OPTCAST_SERVERS", list.c_str(), 1);
  setenv("OPTCAST_TIMEOUT_MS", std::to_string(o.timeout_ms).c_str(), 1);
  if (!o.transport.empty()) setenv("OPTCAST_TRANSPORT", o.transport.c_str(), 1);
  if (o.chunk_bytes != 0) setenv("OPTCAST_CHUNK_BYTES", std::to_string(o.chunk_bytes).c_str(), 1);
  if (!o.failover) setenv("OPTCAST_FAILOVER", "0", 1);
  if (!o.wire.empty()) setenv("OPTCAST_WIRE_DTYPE", o.wire.c_str(), 1);
}

void PrintHeader(const BenchOptions& o, const std::string& algo, int nranks, size_t nservers, const std::string& how) {
  std::string transport = o.transport.empty() ? GetEnv("OPTCAST_TRANSPORT").value_or("tcp") : o.transport;
  if (transport == "ofi") {
    const std::string provider = transport::RequestedFabricProvider();
    transport += " (provider " + (provider.empty() ? std::string("automatic") : provider) + ")";
  }
  const bool servers = algo == "server" || algo == "plugin" || algo == "server-bf16";
  std::printf(
      "# algo: %s   ranks: %d   %s\n", algo.c_str(), nranks,
      servers ? fmt::format("servers: {}   transport: {}", nservers, transport).c_str() : "(peer-to-peer ring)");
  if (!how.empty()) std::printf("# through %s\n", how.c_str());
  // After the nccl-tests columns, the CPU cost: bytes the servers aggregated (every rank's
  // input) per server CPU-second, the ranks' CPU per byte of input, and the CPU-seconds of
  // servers and ranks together per AllReduce.
  std::printf("#%11s %12s %8s %6s %10s %8s %8s %7s %9s %8s %9s\n", "size", "count", "type", "redop", "time", "algbw",
              "busbw", "#wrong", "srv_agg", "cli_cpu", "cpu");
  std::printf("#%11s %12s %8s %6s %10s %8s %8s %7s %9s %8s %9s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
              "(GB/s)", "", "(GB/cpus)", "(ns/B)", "(ms/op)");
  std::fflush(stdout);
}

Status Fail(const std::string& what, const Status& st) { return Status(st.code(), what + ": " + st.message()); }

}  // namespace

int RunBenchRank(const BenchOptions& opts, bootstrap::Rendezvous& rv, const std::vector<std::string>& servers) {
  const int rank = rv.rank();
  const int nranks = rv.nranks();
  const size_t esize = DataTypeSize(opts.dtype);
  auto report = [&](const Status& st) {
    std::fprintf(stderr, "optcast bench: rank %d: %s\n", rank, st.ToString().c_str());
    return 1;
  };

  // Rank 0 names the job; all ranks join it.
  // A job per algorithm: the server path and the server path on a bfloat16 wire each join the
  // servers as every rank, and a rank may be in a job once.
  std::string job_hexes;
  if (rank == 0) {
    for (size_t i = 0; i < opts.algos.size(); ++i) job_hexes += (i ? " " : "") + JobId::Random().ToHex();
  }
  if (Status st = rv.Broadcast(&job_hexes); !st.ok()) return report(st);

  std::vector<std::pair<std::string, std::unique_ptr<Algo>>> algos;
  std::map<std::string, DataType> wire_of;  // the type float32 travels in, per algorithm
  for (size_t algo_index = 0; algo_index < opts.algos.size(); ++algo_index) {
    const std::string& name = opts.algos[algo_index];
    const std::string job_hex = job_hexes.substr(algo_index * 33, 32);
    if (name == "server" || name == "server-bf16") {
      CommunicatorOptions co;
      co.servers = servers;
      co.job_id = *JobId::FromHex(job_hex);
      co.nranks = nranks;
      co.rank = rank;
      co.timeout = std::chrono::milliseconds(opts.timeout_ms);
      co.chunk_bytes = opts.chunk_bytes;
      if (Status st = ApplyEnvironment(&co); !st.ok()) return report(st);
      if (!opts.wire.empty()) {
        if (Status st = ParseWireDtype(opts.wire, "--wire", &co.wire_dtype); !st.ok()) return report(st);
      }
      if (name == "server-bf16") co.wire_dtype = DataType::kBFloat16;  // the server path on a bfloat16 wire
      wire_of[name] = co.wire_dtype;
      co.servers = servers;
      if (!opts.failover) co.failover = false;
      if (!opts.transport.empty()) co.transport = opts.transport;
      std::unique_ptr<Communicator> comm;
      if (Status st = Communicator::Create(co, &comm); !st.ok()) return report(Fail("connecting to the servers", st));
      algos.emplace_back(name, std::make_unique<ServerAlgo>(std::move(comm)));
    } else if (name == "ring") {
      std::unique_ptr<ring::RingAllReduce> ring;
      Status st = ring::RingAllReduce::Create(rv, rv.local_host(), std::chrono::milliseconds(opts.timeout_ms), &ring);
      if (!st.ok()) return report(Fail("building the ring", st));
      algos.emplace_back(name, std::make_unique<RingAlgo>(std::move(ring)));
    } else if (name == "plugin") {
      SetPluginEnvironment(opts, servers);
      CommunicatorOptions plugin_options;  // what the plugin's communicator will read
      if (Status st = ApplyEnvironment(&plugin_options); !st.ok()) return report(st);
      wire_of[name] = plugin_options.wire_dtype;
      nccl_driver::ProxyOptions po;
      po.channels = opts.channels;
      po.chunk_bytes = opts.plugin_chunk_bytes;
      po.idle_sleep = std::chrono::microseconds(opts.proxy_idle_us);
      po.timeout = std::chrono::milliseconds(opts.timeout_ms) + std::chrono::seconds(10);
      // NCCL's bootstrap all-gather of the listen handles is the bench's rendezvous.
      auto allgather = [&rv](const std::string& mine, std::vector<std::string>* all) {
        return rv.AllGather(mine, all);
      };
      std::unique_ptr<nccl_driver::ProxyCollNet> plugin;
      Status st = nccl_driver::ProxyCollNet::Create(opts.plugin_path, rank, nranks, allgather, po, &plugin);
      if (!st.ok()) return report(Fail("setting up the NCCL plugin's CollNet", st));
      algos.emplace_back(
          name, std::make_unique<PluginAlgo>(std::move(plugin), std::max<uint64_t>(1, opts.max_bytes / esize) * esize));
    } else {
      return report(InvalidArgument("unknown algorithm '" + name + "'; use server, server-bf16, plugin or ring"));
    }
  }

  const uint64_t max_count = std::max<uint64_t>(1, opts.max_bytes / esize);
  std::vector<uint8_t> send(max_count * esize);
  std::vector<uint8_t> recv(max_count * esize);
  FillBenchInput(opts.dtype, opts.op, rank, send.data(), max_count);

  std::vector<uint64_t> sizes;
  for (uint64_t bytes = opts.min_bytes; bytes <= opts.max_bytes; bytes *= opts.factor) {
    sizes.push_back(std::max<uint64_t>(1, bytes / esize) * esize);
    if (opts.factor < 2) break;
  }
  const bool show_progress =
      rank == 0 && (opts.progress == "on" || (opts.progress == "auto" && ::isatty(STDERR_FILENO)));
  BenchProgress progress(show_progress, ::isatty(STDERR_FILENO), opts.algos, sizes,
                         opts.warmup + opts.iters + (opts.check ? 1 : 0));

  std::unique_ptr<FILE, int (*)(FILE*)> iteration_file(nullptr, &std::fclose);
  if (rank == 0 && !opts.iteration_times_path.empty()) {
    iteration_file.reset(std::fopen(opts.iteration_times_path.c_str(), "w"));
    if (!iteration_file) {
      return report(InvalidArgument(fmt::format("--iteration-times {}: cannot open it for writing: {}",
                                                opts.iteration_times_path, std::strerror(errno))));
    }
  }
  FILE* const iteration_times = iteration_file.get();

  std::vector<BenchRow> rows;
  const double bus_factor = nranks > 1 ? 2.0 * (nranks - 1) / nranks : 0.0;
  for (auto& [name, algo] : algos) {
    if (rank == 0 && !opts.quiet) {
      PrintHeader(opts, name, nranks, servers.size(), algo->Describe());
      const auto wire = wire_of.find(name);
      if (opts.dtype == DataType::kFloat32 && wire != wire_of.end() && wire->second != DataType::kFloat32) {
        std::printf("# float32 on a %s wire: results checked within the bound the format allows\n",
                    DataTypeName(wire->second));
      }
    }
    for (uint64_t bytes = opts.min_bytes; bytes <= opts.max_bytes; bytes *= opts.factor) {
      const uint64_t count = std::max<uint64_t>(1, bytes / esize);
      progress.StartSize(name, count * esize);
      const uint32_t failovers_before = algo->Failovers().failovers;
      for (int i = 0; i < opts.warmup; ++i) {
        if (Status st = algo->Run(send.data(), recv.data(), count, opts.dtype, opts.op); !st.ok()) return report(st);
        progress.Round(i + 1);
      }
      if (Status st = rv.Barrier(); !st.ok()) return report(st);
      const bool servers_measured = rank == 0 && name != "ring" && !opts.server_pids.empty();
      const double server_cpu0 = servers_measured ? ProcessesCpuSeconds(opts.server_pids) : 0;
      const double my_cpu0 = SelfCpuSeconds();
      const auto t0 = Clock::now();
      for (int i = 0; i < opts.iters; ++i) {
        const auto it0 = Clock::now();
        if (Status st = algo->Run(send.data(), recv.data(), count, opts.dtype, opts.op); !st.ok()) return report(st);
        if (iteration_times != nullptr) {
          const double us = std::chrono::duration<double, std::micro>(Clock::now() - it0).count();
          const double end_s =
              std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
          std::fprintf(iteration_times, "%s %llu %d %.6f %.1f %u\n", name.c_str(),
                       static_cast<unsigned long long>(count * esize), i, end_s, us, algo->Failovers().failovers);
          std::fflush(iteration_times);  // readable while the run goes on
        }
        progress.Round(opts.warmup + i + 1);
      }
      const double my_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / opts.iters;
      const double my_cpu = (SelfCpuSeconds() - my_cpu0) / opts.iters;
      // Every rank has its results, so the servers are done with this step.
      const double server_cpu =
          servers_measured ? (ProcessesCpuSeconds(opts.server_pids) - server_cpu0) / opts.iters : -1;
      uint64_t wrong = 0;
      if (opts.check) {
        std::memset(recv.data(), 0xa5, count * esize);
        if (Status st = algo->Run(send.data(), recv.data(), count, opts.dtype, opts.op); !st.ok()) return report(st);
        const auto wire = wire_of.find(name);
        wrong = CountWrong(opts.dtype, opts.op, nranks, recv.data(), count,
                           wire == wire_of.end() ? DataType::kFloat32 : wire->second);
      }
      const FailoverStats fo = algo->Failovers();
      std::vector<std::string> all;
      if (Status st = rv.AllGather(
              fmt::format("{} {} {} {} {}", my_us, wrong, my_cpu, fo.failovers - failovers_before, fo.servers_left),
              &all);
          !st.ok()) {
        return report(st);
      }
      progress.FinishSize();
      if (rank == 0) {
        BenchRow row;
        row.algo = name;
        row.bytes = count * esize;
        row.count = count;
        unsigned failovers = 0, servers_left = 0;
        for (const auto& s : all) {
          double us = 0, cpu = 0;
          unsigned long long w = 0;
          unsigned f = 0, left = 0;
          std::sscanf(s.c_str(), "%lf %llu %lf %u %u", &us, &w, &cpu, &f, &left);
          failovers = std::max(failovers, f);
          servers_left = std::max(servers_left, left);
          row.time_us = std::max(row.time_us, us);  // the slowest rank sets the pace
          row.wrong += w;
          row.client_cpu_s += cpu;
        }
        row.server_cpu_s = server_cpu;
        row.algbw_gbps = row.bytes / row.time_us / 1e3;
        row.busbw_gbps = row.algbw_gbps * bus_factor;
        rows.push_back(row);
        if (!opts.quiet) {
          const double input_bytes = static_cast<double>(row.bytes) * nranks;
          const std::string server_rate =
              row.server_cpu_s > 0 ? fmt::format("{:.3f}", input_bytes / row.server_cpu_s / 1e9) : "-";
          const double total_cpu = row.client_cpu_s + std::max(0.0, row.server_cpu_s);
          std::printf("%12llu %12llu %8s %6s %10.2f %8.3f %8.3f %7llu %9s %8.3f %9.3f\n",
                      static_cast<unsigned long long>(row.bytes), static_cast<unsigned long long>(row.count),
                      DataTypeName(opts.dtype), RedOpName(opts.op), row.time_us, row.algbw_gbps, row.busbw_gbps,
                      static_cast<unsigned long long>(row.wrong), server_rate.c_str(),
                      row.client_cpu_s / input_bytes * 1e9, total_cpu * 1e3);
          if (failovers > 0) {
            std::printf("# failover during this size: %u failover(s); %u server(s) left, its time included above\n",
                        failovers, servers_left);
          }
          std::fflush(stdout);
        }
      }
      if (opts.factor < 2) break;
    }
    if (rank == 0 && !opts.quiet && !algo->Footer().empty()) std::printf("# %s\n", algo->Footer().c_str());
  }
  progress.Finish();
  if (rank == 0) {
    uint64_t total_wrong = 0;
    for (const auto& r : rows) total_wrong += r.wrong;
    if (!opts.quiet)
      std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(total_wrong),
                  total_wrong ? "FAILED" : "OK");
    if (!opts.json_path.empty()) {
      nlohmann::json j;
      j["nranks"] = nranks;
      j["nservers"] = servers.size();
      j["dtype"] = DataTypeName(opts.dtype);
      j["op"] = RedOpName(opts.op);
      j["iters"] = opts.iters;
      j["results"] = nlohmann::json::array();
      for (const auto& r : rows) {
        j["results"].push_back({{"algo", r.algo},
                                {"bytes", r.bytes},
                                {"count", r.count},
                                {"time_us", r.time_us},
                                {"algbw_gbps", r.algbw_gbps},
                                {"busbw_gbps", r.busbw_gbps},
                                {"wrong", r.wrong},
                                {"server_cpu_s", r.server_cpu_s},
                                {"client_cpu_s", r.client_cpu_s}});
      }
      std::ofstream out(opts.json_path);
      out << j.dump(2) << "\n";
      if (!out.good()) {
        std::fprintf(stderr, "optcast bench: cannot write --json %s\n", opts.json_path.c_str());
        return 1;
      }
    }
    if (!opts.plot_path.empty()) {
      if (Status st = WriteBenchPlot(opts.plot_path, opts, nranks,
                                     opts.algos.size() == 1 && opts.algos[0] == "ring" ? 0 : servers.size(), rows);
          !st.ok()) {
        std::fprintf(stderr, "optcast bench: --plot: %s\n", st.message().c_str());
        return 1;
      }
      if (!opts.quiet) std::printf("# plot: %s\n", opts.plot_path.c_str());
    }
    if (total_wrong > 0) return 2;
  }
  return 0;
}

}  // namespace optcast::tools
