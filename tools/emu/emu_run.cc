// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/emu/emu_run.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "auth/proof.h"
#include "tools/emu/link_bound.h"
#include "tools/emu/tree_layout.h"
#include "tools/plot/line_plot.h"
#include "tools/process/cpu_time.h"
#include "tools/process/subprocess.h"

namespace optcast::tools::emu {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr int kRendezvousPort = 29500;
constexpr int kServerPort = 8918;

volatile std::sig_atomic_t g_interrupted = 0;
void OnInterrupt(int) { g_interrupted = 1; }

// ------------------------------------------------------------------------------------------
// Child processes inside the namespaces

// A child with what it is, for messages, and where its output goes.
struct Proc : Child {
  std::string what;  // "rank 3 (server 16 MiB)"
  std::string log;
};

// `ip netns exec NS argv...` with stdout and stderr in `log`. The child dies with us
// (PDEATHSIG survives exec of ip and of the program it runs).
Status Spawn(const std::string& netns, const std::vector<std::string>& argv, const std::string& log, bool verbose,
             Proc* proc) {
  std::vector<std::string> full = {"ip", "netns", "exec", netns};
  full.insert(full.end(), argv.begin(), argv.end());
  if (verbose) std::printf("+ %s > %s\n", JoinCommand(full).c_str(), log.c_str());
  SpawnOptions spawn;
  spawn.output_file = log;
  spawn.ignore_sigint = true;  // Ctrl-C goes to the launcher, which cleans up in order
  OPTCAST_RETURN_IF_ERROR(tools::Spawn(full, spawn, &proc->pid));
  proc->log = log;
  return Status::Ok();
}

std::string Tail(const std::string& path, size_t max_lines = 12) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(f, line)) {
    lines.push_back(line);
    if (lines.size() > max_lines) lines.erase(lines.begin());
  }
  std::string out;
  for (const auto& l : lines) out += "    | " + l + "\n";
  return out;
}

// Waits for every process in `procs`. The first failure (or the time limit, or Ctrl-C) kills the
// rest and comes back as an error that quotes the failing process's log.
Status WaitAll(std::vector<Proc>& procs, std::chrono::seconds limit) {
  std::vector<Child*> children;
  for (auto& p : procs) children.push_back(&p);
  WaitOptions wait;
  wait.limit = limit;
  wait.stop_at_first_failure = true;
  wait.interrupted = &g_interrupted;
  size_t failed = 0;
  switch (WaitChildren(children, wait, &failed)) {
    case WaitEnd::kAllDone: return Status::Ok();
    case WaitEnd::kFailed: {
      const Proc& p = procs[failed];
      return InternalError(p.what + " " + p.HowItEnded() + "; its log (" + p.log + "):\n" + Tail(p.log));
    }
    case WaitEnd::kInterrupted: return InternalError("interrupted");
    case WaitEnd::kTimedOut: break;
  }
  return TimeoutError("the ranks did not finish within " + std::to_string(limit.count()) + " s; last lines of " +
                      procs.front().log + ":\n" + Tail(procs.front().log));
}

// Waits until a freshly started server has printed that it listens (or has died).
Status WaitListening(const Proc& server, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline && !g_interrupted) {
    std::ifstream f(server.log);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (text.find("listening on") != std::string::npos) return Status::Ok();
    int status = 0;
    if (waitpid(server.pid, &status, WNOHANG) == server.pid) {
      return UnavailableError(server.what + " failed to start; its log (" + server.log + "):\n" + Tail(server.log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (g_interrupted) return InternalError("interrupted");
  return TimeoutError(server.what + " did not report listening within " + std::to_string(limit.count()) + " s");
}

// ------------------------------------------------------------------------------------------
// Results

struct Bounds {
  double rate_Bps = 0;                       // link rate in bytes/s
  double server_Bps = 0;                     // algbw bound of the reduction servers
  double ring_Bps = 0;                       // algbw bound of a ring (Optcast's and Gloo's)
  std::string server_busiest, ring_busiest;  // the link that sets each bound
  // "plugin" is the server path through the NCCL plugin: the same traffic, the same bound.
  // "server-bf16" sends float32 as bfloat16 (optcast bench --wire bf16) and "ring-bf16" reduces
  // bfloat16 data: half the bytes for the same elements, so twice the bound in float32 bytes/s
  // (their rows count the float32 bytes of the same element count).
  double For(const std::string& algo) const {
    return (UsesServers(algo) ? server_Bps : ring_Bps) * (HalfTheBytes(algo) ? 2.0 : 1.0);
  }
  static bool UsesServers(const std::string& algo) {
    return algo == "server" || algo == "plugin" || algo == "server-bf16";
  }
  static bool HalfTheBytes(const std::string& algo) { return algo == "server-bf16" || algo == "ring-bf16"; }
};

// From the traffic each algorithm makes (link_bound.h): the busiest host link or rack uplink.
Bounds ComputeBounds(const ClusterSpec& spec, const TreeLayout* tree) {
  Bounds b;
  b.rate_Bps = static_cast<double>(spec.rate_bits) / 8.0;
  const LinkBound ring = BoundOf(RingFlows(spec.workers), spec);
  b.ring_Bps = ring.algbw_Bps;
  b.ring_busiest = ring.busiest;
  if (spec.servers > 0) {
    const LinkBound server =
        BoundOf(tree != nullptr ? TreeFlows(*tree, spec.workers) : FlatServerFlows(spec.workers, spec.servers), spec);
    b.server_Bps = server.algbw_Bps;
    b.server_busiest = server.busiest;
  } else {
    b.server_Bps = b.rate_Bps;
  }
  return b;
}

// One datatype x op run of the type sweep (--check-types).
struct TypeCheck {
  std::string dtype;
  std::string op;
  uint64_t bytes = 0;
  uint64_t wrong = 0;
};

constexpr const char* kCheckTypes[] = {"float32", "float16", "bfloat16", "float64", "int8",
                                       "uint8",   "int32",   "uint32",   "int64",   "uint64"};
constexpr const char* kCheckOps[] = {"sum", "prod", "min", "max", "avg"};

// Names a phase's files: the algorithm and size, and the type and op of a type check.
std::string PhaseName(const std::string& algo, uint64_t bytes, const TypeCheck* check) {
  std::string name = algo + "-" + std::to_string(bytes);
  if (check != nullptr) name += "-" + check->dtype + "-" + check->op;
  return name;
}

struct Row {
  std::string algo;
  uint64_t bytes = 0;
  double time_us = 0;
  double algbw_gbps = 0;  // GB/s (1e9), as optcast bench and nccl-tests print it
  double busbw_gbps = 0;
  uint64_t wrong = 0;
  double cpu_machine = 0;  // busy fraction of all cores while this algorithm/size ran
  double cpu_emu = 0;      // our ranks, servers and packet forwarding, as a fraction of all cores
  double wall_s = 0;
};

std::string SizeLabel(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
    std::snprintf(buf, sizeof(buf), "%lluM", (unsigned long long)(bytes >> 20));
  else if (bytes >= 1024 && bytes % 1024 == 0)
    std::snprintf(buf, sizeof(buf), "%lluK", (unsigned long long)(bytes >> 10));
  else
    std::snprintf(buf, sizeof(buf), "%llu", (unsigned long long)bytes);
  return buf;
}

Status ReadBenchJson(const std::string& path, Row* row) {
  std::ifstream f(path);
  if (!f) return InternalError("rank 0 wrote no results to " + path);
  json j;
  try {
    f >> j;
    const json& r = j.at("results").at(0);
    row->bytes = r.at("bytes").get<uint64_t>();
    row->time_us = r.at("time_us").get<double>();
    row->algbw_gbps = r.at("algbw_gbps").get<double>();
    row->busbw_gbps = r.at("busbw_gbps").get<double>();
    row->wrong = r.at("wrong").get<uint64_t>();
  } catch (const std::exception& e) {
    return InternalError("cannot read " + path + ": " + e.what());
  }
  return Status::Ok();
}

std::string Now(const char* format) {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), format, std::localtime(&t));
  return buf;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) return Trimmed(line.substr(line.find(':') + 2));
  }
  return "unknown";
}

json MachineJson() {
  utsname u{};
  uname(&u);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return {{"date", Now("%Y-%m-%dT%H:%M:%S%z")},
          {"hostname", host},
          {"kernel", std::string(u.release)},
          {"cpus", sysconf(_SC_NPROCESSORS_ONLN)},
          {"cpu_model", CpuModel()}};
}

double Mbs(double gbps) { return gbps * 1e3; }  // GB/s -> MB/s

// The machine's busy fraction from which a row is marked as limited by this machine's CPU.
constexpr double kSaturatedMachine = 0.9;

void PrintTable(const RunOptions& o, const Bounds& b, const std::vector<std::string>& algos,
                const std::map<std::pair<std::string, uint64_t>, Row>& rows, const std::vector<uint64_t>& sizes) {
  const ClusterSpec& s = o.spec;
  const double ideal = b.server_Bps / b.ring_Bps;
  const std::string tree =
      !o.tree ? ""
      : s.racks > 0
          ? fmt::format(" ({} trees of a leaf per rack: servers 0..{} are their roots, spread over the racks)",
                        s.servers / (s.racks + 1), s.servers / (s.racks + 1) - 1)
          : fmt::format(" (a tree of depth {}: server 0 is the root)", o.tree_depth);
  std::printf("\n# emulated cluster: %d workers, %d servers%s, %s per link and direction (%.2f MB/s), %s\n", s.workers,
              s.servers, tree.c_str(), FormatBitRate(s.rate_bits).c_str(), b.rate_Bps / 1e6,
              DescribeNetwork(s).c_str());
  std::printf("# algbw bounds: server %.2f MB/s (%s), ring/gloo %.2f MB/s (%s); ideal optcast/gloo %.3f\n",
              b.server_Bps / 1e6, b.server_busiest.c_str(), b.ring_Bps / 1e6, b.ring_busiest.c_str(), ideal);
  // Per full frame: 14 bytes of Ethernet header on the wire (what HTB counts), 20 IP, 32 TCP with
  // timestamps inside the MTU.
  const double payload = static_cast<double>(s.mtu - 52) / static_cast<double>(s.mtu + 14);
  std::printf(
      "# (TCP over Ethernet at MTU %d carries %.3f of the link rate as payload: the ceiling for any %% below)\n", s.mtu,
      payload);
  std::printf("#%9s", "size");
  for (const auto& a : algos) std::printf(" %10s %6s", (a + " MB/s").c_str(), "%bnd");
  const bool ratio = std::count(algos.begin(), algos.end(), "server") &&
                     (std::count(algos.begin(), algos.end(), "gloo") || std::count(algos.begin(), algos.end(), "ring"));
  const std::string peer = std::count(algos.begin(), algos.end(), "gloo") ? "gloo" : "ring";
  if (ratio) std::printf(" %9s %6s", ("opt/" + peer).c_str(), "ideal");
  // The bfloat16 wire against the same run's float32 server path, the peer ring, and a ring over
  // bfloat16 data.
  const bool has_bf16 = std::count(algos.begin(), algos.end(), "server-bf16") > 0;
  std::vector<std::string> bf16_against;
  if (has_bf16) {
    for (const char* other : {"server", "gloo", "ring", "ring-bf16"}) {
      if (std::count(algos.begin(), algos.end(), other)) bf16_against.push_back(other);
    }
  }
  for (const auto& other : bf16_against) std::printf(" %9s", ("bf16/" + other.substr(0, 5)).c_str());
  std::printf("  cpu%% machine/ours:");
  for (const auto& a : algos) std::printf(" %7s", a.substr(0, 6).c_str());
  std::printf(" %6s\n", "#wrong");
  for (uint64_t bytes : sizes) {
    std::printf("%10s", SizeLabel(bytes).c_str());
    uint64_t wrong = 0;
    for (const auto& a : algos) {
      auto it = rows.find({a, bytes});
      if (it == rows.end()) {
        std::printf(" %10s %6s", "-", "-");
        continue;
      }
      std::printf(" %10.2f %5.1f%%", Mbs(it->second.algbw_gbps), 100.0 * it->second.algbw_gbps * 1e9 / b.For(a));
      wrong += it->second.wrong;
    }
    if (ratio) {
      auto sv = rows.find({"server", bytes});
      auto pr = rows.find({peer, bytes});
      if (sv != rows.end() && pr != rows.end() && pr->second.algbw_gbps > 0) {
        std::printf(" %9.3f %6.3f", sv->second.algbw_gbps / pr->second.algbw_gbps, ideal);
      } else {
        std::printf(" %9s %6.3f", "-", ideal);
      }
    }
    for (const auto& other : bf16_against) {
      auto bf = rows.find({"server-bf16", bytes});
      auto ot = rows.find({other, bytes});
      if (bf != rows.end() && ot != rows.end() && ot->second.algbw_gbps > 0) {
        std::printf(" %9.3f", bf->second.algbw_gbps / ot->second.algbw_gbps);
      } else {
        std::printf(" %9s", "-");
      }
    }
    std::printf("%20s", "");
    for (const auto& a : algos) {
      auto it = rows.find({a, bytes});
      if (it == rows.end()) {
        std::printf(" %7s", "-");
      } else {
        char cpu[32];
        std::snprintf(cpu, sizeof(cpu), "%.0f/%.0f", 100.0 * it->second.cpu_machine, 100.0 * it->second.cpu_emu);
        std::printf(" %7s", cpu);
      }
    }
    std::printf(" %6llu\n", static_cast<unsigned long long>(wrong));
  }
  // Every emulated host's processes and network stack share this machine's cores: a figure taken
  // while they were all but saturated measures the machine, not the emulated links.
  std::string saturated;
  for (const auto& a : algos) {
    std::string sizes_of_a;
    for (uint64_t bytes : sizes) {
      auto it = rows.find({a, bytes});
      // As the table rounds it: a row that reads 90 is in the note.
      if (it == rows.end() || std::lround(100 * it->second.cpu_machine) < std::lround(100 * kSaturatedMachine))
        continue;
      sizes_of_a += (sizes_of_a.empty() ? " " : ", ") + SizeLabel(bytes);
    }
    if (!sizes_of_a.empty()) saturated += (saturated.empty() ? "" : "; ") + a + sizes_of_a;
  }
  if (!saturated.empty()) {
    std::printf(
        "# note: this machine's %ld cores were at least %.0f%% busy during %s: every emulated host runs on them, so "
        "those figures are bounded by this machine's CPU rather than by the emulated links (a lower --rate, a "
        "larger --mtu or more cores measure the network)\n",
        sysconf(_SC_NPROCESSORS_ONLN), 100 * kSaturatedMachine, saturated.c_str());
  }
  std::fflush(stdout);
}

Status WritePlot(const std::string& path, const RunOptions& o, const Bounds& b, const std::vector<std::string>& algos,
                 const std::map<std::pair<std::string, uint64_t>, Row>& rows) {
  LinePlot plot;
  plot.title = "AllReduce float32 sum, " + Counted(o.spec.workers, "worker") + ", " +
               Counted(o.spec.servers, "server") + ", " + FormatBitRate(o.spec.rate_bits) + " links (emulated)";
  PlotPanel panel;
  panel.title = "algbw against message size";
  panel.ylabel = "algbw (MB/s)";
  double top = 0;
  for (const auto& a : algos) top = std::max(top, b.For(a));
  panel.ymax = 1.1 * top / 1e6;
  double lo = 0, hi = 0;
  for (const auto& a : algos) {
    PlotSeries s;
    s.title = a == "server"        ? "optcast (servers)"
              : a == "plugin"      ? "optcast (servers, NCCL plugin)"
              : a == "server-bf16" ? "optcast (servers, bf16 wire)"
              : a == "ring"        ? "optcast ring"
              : a == "ring-bf16"   ? "optcast ring, bf16 data"
                                   : "gloo ring";
    s.color = PlotColor(panel.series.size());
    for (const auto& [key, row] : rows) {
      if (key.first != a) continue;
      s.points.emplace_back(static_cast<double>(row.bytes), Mbs(row.algbw_gbps));
      lo = lo == 0 ? row.bytes : std::min<double>(lo, row.bytes);
      hi = std::max<double>(hi, row.bytes);
    }
    panel.series.push_back(std::move(s));
  }
  // The bounds as dashed lines across the plot, in the colours of the algorithms they bound.
  panel.series.push_back(
      {"server bound", PlotColor(0), {{lo / 1.5, b.server_Bps / 1e6}, {hi * 1.5, b.server_Bps / 1e6}}, true, false});
  panel.series.push_back(
      {"ring bound", PlotColor(1), {{lo / 1.5, b.ring_Bps / 1e6}, {hi * 1.5, b.ring_Bps / 1e6}}, true, false});
  plot.panels.push_back(std::move(panel));
  plot.key = "bottom right";  // the measured lines run just under the bounds, at the top
  plot.panel_width = 960;
  plot.height = 600;
  return WriteLinePlot(path, plot);
}

// ------------------------------------------------------------------------------------------
// The run

class Emulation {
 public:
  explicit Emulation(const RunOptions& o) : o_(o) {}
  ~Emulation() { StopServers(); }

  int Run();

 private:
  Status Prepare();
  Status StartServers();
  Status RunPhase(const std::string& algo, uint64_t bytes, int phase, Row* row, const TypeCheck* check = nullptr);
  std::vector<std::string> RankArgs(const std::string& algo, uint64_t bytes, int rank, int phase,
                                    const TypeCheck* check) const;
  Status CheckEveryType(uint64_t bytes, int* phase);
  void StopServers();
  Status WriteJson(const std::vector<uint64_t>& sizes) const;

  RunOptions o_;
  TreeLayout tree_;
  Bounds bounds_;
  std::vector<TypeCheck> checks_;
  std::string workdir_;
  std::string optcast_;
  std::string gloo_;
  std::vector<std::string> algos_;
  std::vector<Proc> servers_;
  std::map<std::pair<std::string, uint64_t>, Row> rows_;
  double busy_before_ = 0;  // machine CPU use before we started anything
};

Status Emulation::Prepare() {
  if (o_.spec.workers < 2) return InvalidArgument("run needs --workers >= 2");
  if (o_.tree && o_.spec.racks > 0) {
    if (o_.tree_depth != 2)
      return InvalidArgument("--racks builds trees of depth 2 (leaves in the racks, roots spread)");
    OPTCAST_RETURN_IF_ERROR(TreeLayout::MakeRacked(o_.spec.servers, o_.spec.workers, o_.spec.racks, &tree_));
    o_.spec.server_rack = tree_.server_rack;
  } else if (o_.tree) {
    OPTCAST_RETURN_IF_ERROR(TreeLayout::Make(o_.spec.servers, o_.spec.workers, o_.tree_depth, &tree_));
  }
  OPTCAST_RETURN_IF_ERROR(CheckRacks(o_.spec));
  bounds_ = ComputeBounds(o_.spec, o_.tree ? &tree_ : nullptr);
  if (o_.min_bytes < 4 || o_.max_bytes < o_.min_bytes || o_.factor < 2 || o_.iters < 1 || o_.warmup < 0) {
    return InvalidArgument("need 4 <= -b <= -e, -f >= 2, -n >= 1, -w >= 0");
  }
  optcast_ = o_.optcast_binary;
  if (optcast_.empty()) {
    std::error_code ec;
    optcast_ = fs::read_symlink("/proc/self/exe", ec).string();
    if (ec) return InternalError("cannot find this executable: " + ec.message());
  }
  for (const auto& a : o_.algos) {
    if (a != "server" && a != "plugin" && a != "ring" && a != "gloo" && a != "server-bf16" && a != "ring-bf16") {
      return InvalidArgument("unknown algorithm '" + a + "'; use server, plugin, ring, gloo, server-bf16, ring-bf16");
    }
    if (Bounds::UsesServers(a) && o_.spec.servers < 1) return InvalidArgument("--algo " + a + " needs --servers >= 1");
    if (a == "gloo") {
      gloo_ = FindGlooBench(o_.gloo_binary);
      if (gloo_.empty()) {
        std::fprintf(stderr,
                     "optcast emu: optcast-gloo-bench not found (build it with libgloo-dev installed, or pass "
                     "--gloo-bench PATH); skipping the Gloo baseline\n");
        continue;
      }
    }
    if (std::find(algos_.begin(), algos_.end(), a) == algos_.end()) algos_.push_back(a);
  }
  if (algos_.empty()) return InvalidArgument("no algorithm to run");
  char templ[] = "/tmp/optcast-emu-XXXXXX";
  if (mkdtemp(templ) == nullptr) return InternalError(std::string("mkdtemp: ") + std::strerror(errno));
  workdir_ = templ;
  chmod(workdir_.c_str(), 0755);
  // The emulated hosts talk over a (virtual) network, so servers and ranks share a fresh secret,
  // handed over in a file only root can read, as a deployment would.
  const std::string secret_path = workdir_ + "/secret";
  wire::Nonce key = auth::NewNonce();
  static const char* kHex = "0123456789abcdef";
  std::string secret;
  for (uint8_t b : key) secret += {kHex[b >> 4], kHex[b & 15]};
  const int fd = ::open(secret_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, secret.data(), secret.size()) != static_cast<ssize_t>(secret.size())) {
    if (fd >= 0) ::close(fd);
    return InternalError("cannot write " + secret_path + ": " + std::strerror(errno));
  }
  ::close(fd);
  setenv("OPTCAST_SECRET_FILE", secret_path.c_str(), 1);
  return Status::Ok();
}

Status Emulation::StartServers() {
  if (std::none_of(algos_.begin(), algos_.end(), Bounds::UsesServers)) return Status::Ok();
  // A stuck collective fails after this long; leave room for the slowest op at the largest size.
  const double op_s = static_cast<double>(o_.max_bytes) / std::min(bounds_.server_Bps, bounds_.ring_Bps);
  const int timeout_ms = static_cast<int>(std::max(30000.0, 5000.0 * op_s));
  // Servers and ranks mark with the DSCP the emulated queues serve first (OPTCAST_LATENCY_DSCP,
  // when the user set it, wins, for runs where the two differ on purpose).
  if (o_.spec.priority_dscp > 0 && std::getenv("OPTCAST_LATENCY_DSCP") == nullptr) {
    setenv("OPTCAST_LATENCY_DSCP", std::to_string(o_.spec.priority_dscp).c_str(), 1);
  }
  const char* latency_dscp = std::getenv("OPTCAST_LATENCY_DSCP");
  for (int j = 0; j < o_.spec.servers; ++j) {
    const Host h = ServerHost(j);
    Proc p;
    p.what = "server " + std::to_string(j) + " (" + h.netns + ")";
    std::vector<std::string> args = {
        optcast_, "server", "--listen", h.address + ":" + std::to_string(kServerPort), "--timeout-ms",
        std::to_string(timeout_ms), "--log-level", "warn",
        // The emulated port's rate: veth reports none of its shaping.
        "--link-rate", o_.server_link_rate.empty() ? FormatBitRate(o_.spec.rate_bits) : o_.server_link_rate};
    if (latency_dscp != nullptr) args.insert(args.end(), {"--latency-dscp", latency_dscp});
    if (o_.tree && tree_.parent[j] >= 0) {
      args.insert(args.end(), {"--upstream", ServerHost(tree_.parent[j]).address + ":" + std::to_string(kServerPort)});
    }
    OPTCAST_RETURN_IF_ERROR(Spawn(h.netns, args, workdir_ + "/server-" + std::to_string(j) + ".log", o_.verbose, &p));
    servers_.push_back(p);
  }
  for (const auto& s : servers_) OPTCAST_RETURN_IF_ERROR(WaitListening(s, std::chrono::seconds(15)));
  return Status::Ok();
}

void Emulation::StopServers() {
  for (auto& s : servers_) kill(s.pid, SIGTERM);
  for (auto& s : servers_) waitpid(s.pid, nullptr, 0);
  servers_.clear();
}

std::vector<std::string> Emulation::RankArgs(const std::string& algo, uint64_t bytes, int rank, int phase,
                                             const TypeCheck* check) const {
  const Host me = WorkerHost(rank);
  const std::string size = std::to_string(bytes);
  const std::string json_path = workdir_ + "/" + PhaseName(algo, bytes, check) + ".json";
  const double op_s = static_cast<double>(bytes) / bounds_.For(algo);
  const std::string timeout_ms = std::to_string(static_cast<int>(std::max(30000.0, 5000.0 * op_s)));
  std::vector<std::string> args;
  if (algo == "gloo") {
    args = {gloo_,
            "--rank",
            std::to_string(rank),
            "--nranks",
            std::to_string(o_.spec.workers),
            "--store",
            workdir_ + "/gloo-store-" + std::to_string(phase),
            "--host",
            me.address,
            "--timeout-ms",
            timeout_ms};
  } else {
    std::string servers;
    for (int j = 0; j < o_.spec.servers; ++j) {
      servers += (j ? "," : "") + ServerHost(j).address + ":" + std::to_string(kServerPort);
    }
    // In a tree a worker knows only its own leaf; the leaf knows the root.
    if (o_.tree) {
      servers.clear();
      for (int leaf : tree_.worker_servers[rank]) {
        servers += (servers.empty() ? "" : ",") + ServerHost(leaf).address + ":" + std::to_string(kServerPort);
      }
    }
    // A fresh rendezvous port per phase: the previous phase's sockets may still be in TIME_WAIT.
    args = {optcast_,       "bench",
            "--rank",       std::to_string(rank),
            "--nranks",     std::to_string(o_.spec.workers),
            "--rendezvous", WorkerHost(0).address + ":" + std::to_string(kRendezvousPort + phase % 400),
            "--algo",       algo == "plugin" || algo == "server-bf16" ? "server" : algo == "ring-bf16" ? "ring" : algo,
            "--timeout-ms", timeout_ms};
    if (algo == "server-bf16") args.insert(args.end(), {"--wire", "bf16"});
    if (algo == "ring-bf16") args.insert(args.end(), {"-d", "bfloat16"});
    // The plugin path: libnccl-net-optcast.so's CollNet driven as NCCL's proxy does.
    if (algo == "plugin") {
      args.insert(args.end(), {"--through", "nccl-plugin", "--proxy-idle-us", std::to_string(o_.proxy_idle_us)});
    }
    if (Bounds::UsesServers(algo)) args.insert(args.end(), {"--servers", servers});
    if (Bounds::UsesServers(algo) && !o_.chunk.empty()) args.insert(args.end(), {"--chunk", o_.chunk});
    if (check != nullptr) args.insert(args.end(), {"-d", check->dtype, "-o", check->op, "-c", "1"});
  }
  if (check != nullptr) {
    args.insert(args.end(), {"-b", size, "-e", size, "-f", "2", "-n", "1", "-w", "0"});
  } else if (algo == "ring-bf16") {  // the same elements as the float32 rows, in half the bytes
    const std::string half = std::to_string(bytes / 2);
    args.insert(args.end(),
                {"-b", half, "-e", half, "-f", "2", "-n", std::to_string(o_.iters), "-w", std::to_string(o_.warmup)});
  } else {
    args.insert(args.end(),
                {"-b", size, "-e", size, "-f", "2", "-n", std::to_string(o_.iters), "-w", std::to_string(o_.warmup)});
  }
  if (rank == 0) args.insert(args.end(), {"--json", json_path});
  return args;
}

Status Emulation::RunPhase(const std::string& algo, uint64_t bytes, int phase, Row* row, const TypeCheck* check) {
  std::vector<Proc> ranks(o_.spec.workers);
  const std::string name = PhaseName(algo, bytes, check);
  // Generous: three times the ideal time of every iteration, plus setup.
  const double ideal_s = static_cast<double>(bytes) * (o_.iters + o_.warmup + 1) / bounds_.For(algo);
  const auto limit = std::chrono::seconds(60 + static_cast<int>(3 * ideal_s));
  std::vector<double> server_cpu0;
  for (const auto& s : servers_) server_cpu0.push_back(ProcessCpuSeconds(s.pid));
  const MachineCpu cpu0 = ReadMachineCpu();
  const auto t0 = Clock::now();
  for (int r = 0; r < o_.spec.workers; ++r) {
    ranks[r].what = algo + " rank " + std::to_string(r) + " at " + SizeLabel(bytes) +
                    (check != nullptr ? " (" + check->dtype + " " + check->op + ")" : "");
    Status st = Spawn(WorkerHost(r).netns, RankArgs(algo, bytes, r, phase, check),
                      workdir_ + "/" + name + "-rank" + std::to_string(r) + ".log", o_.verbose, &ranks[r]);
    if (!st.ok()) {
      for (int k = 0; k < r; ++k) {
        kill(ranks[k].pid, SIGKILL);
        waitpid(ranks[k].pid, nullptr, 0);
      }
      return st;
    }
  }
  OPTCAST_RETURN_IF_ERROR(WaitAll(ranks, limit));
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const MachineCpu cpu1 = ReadMachineCpu();
  // Ours = our processes' user+system time plus all softirq time: packet forwarding through the
  // veths and the bridge runs in softirq context, charged to no process of ours (nothing else
  // here moves much traffic, so the machine-wide softirq figure is nearly all ours).
  double emu_cpu = static_cast<double>(cpu1.softirq - cpu0.softirq) / static_cast<double>(sysconf(_SC_CLK_TCK));
  for (const auto& r : ranks) emu_cpu += r.cpu_seconds;
  for (size_t j = 0; j < servers_.size(); ++j) emu_cpu += ProcessCpuSeconds(servers_[j].pid) - server_cpu0[j];
  row->algo = algo;
  OPTCAST_RETURN_IF_ERROR(ReadBenchJson(workdir_ + "/" + name + ".json", row));
  if (algo == "ring-bf16") {  // in float32 bytes of the same elements, as the other rows
    row->bytes *= 2;
    row->algbw_gbps *= 2;
    row->busbw_gbps *= 2;
  }
  row->algo = algo;
  row->cpu_machine = BusyFraction(cpu0, cpu1);
  row->cpu_emu = emu_cpu / wall / static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
  row->wall_s = wall;
  return Status::Ok();
}

Status Emulation::WriteJson(const std::vector<uint64_t>& sizes) const {
  json j;
  j["machine"] = MachineJson();
  j["machine"]["cpu_busy_before_run"] = busy_before_;
  j["cluster"] = {{"workers", o_.spec.workers},
                  {"servers", o_.spec.servers},
                  {"tree", o_.tree},
                  {"tree_depth", o_.tree ? o_.tree_depth : 0},
                  {"rate", FormatBitRate(o_.spec.rate_bits)},
                  {"rate_bits", o_.spec.rate_bits},
                  {"mtu", o_.spec.mtu},
                  {"tcp_cc", o_.spec.tcp_cc.empty() ? "default" : o_.spec.tcp_cc},
                  {"queue_packets", o_.spec.queue_packets},
                  {"burst_bytes", o_.spec.burst_bytes},
                  {"host_queue", HostQueueName(o_.spec.host_queue)},
                  {"priority_dscp", o_.spec.priority_dscp},
                  {"racks", o_.spec.racks},
                  {"uplink_bits", o_.spec.uplink_bits},
                  {"rate_Bps", bounds_.rate_Bps},
                  {"shaping", "HTB on the egress of both veth ends, Linux bridge in its own namespace"}};
  j["dtype"] = "float32";
  j["op"] = "sum";
  j["iters"] = o_.iters;
  j["warmup"] = o_.warmup;
  j["bounds_gbps"] = {{"server", bounds_.server_Bps / 1e9}, {"ring", bounds_.ring_Bps / 1e9}};
  j["bound_set_by"] = {{"server", bounds_.server_busiest}, {"ring", bounds_.ring_busiest}};
  if (o_.spec.racks > 0) {
    json placement = {{"workers", json::array()}, {"servers", json::array()}};
    for (int i = 0; i < o_.spec.workers; ++i) placement["workers"].push_back(RackOf(o_.spec, WorkerHost(i)));
    for (int k = 0; k < o_.spec.servers; ++k) placement["servers"].push_back(RackOf(o_.spec, ServerHost(k)));
    j["cluster"]["rack_of"] = placement;
  }
  j["ideal_optcast_over_gloo"] = bounds_.server_Bps / bounds_.ring_Bps;
  j["note"] = "bounds are computed from the link rate; TCP/IP/Ethernet headers leave ~0.95 of it as payload";
  j["results"] = json::array();
  for (const auto& [key, r] : rows_) {
    j["results"].push_back({{"algo", r.algo},
                            {"bytes", r.bytes},
                            {"time_us", r.time_us},
                            {"algbw_gbps", r.algbw_gbps},
                            {"busbw_gbps", r.busbw_gbps},
                            {"wrong", r.wrong},
                            {"bound_gbps", bounds_.For(r.algo) / 1e9},
                            {"fraction_of_bound", r.algbw_gbps * 1e9 / bounds_.For(r.algo)},
                            {"cpu_machine", r.cpu_machine},
                            {"cpu_emu", r.cpu_emu},
                            {"wall_s", r.wall_s}});
  }
  j["type_checks"] = json::array();
  for (const TypeCheck& c : checks_) {
    j["type_checks"].push_back({{"dtype", c.dtype}, {"op", c.op}, {"bytes", c.bytes}, {"wrong", c.wrong}});
  }
  j["ratios"] = json::array();
  for (uint64_t bytes : sizes) {
    auto sv = rows_.find({"server", bytes});
    if (sv == rows_.end()) continue;
    json ratio = {{"bytes", bytes}};
    for (const char* peer : {"gloo", "ring"}) {
      auto pr = rows_.find({peer, bytes});
      if (pr != rows_.end() && pr->second.algbw_gbps > 0) {
        ratio[std::string("optcast_over_") + peer] = sv->second.algbw_gbps / pr->second.algbw_gbps;
      }
    }
    j["ratios"].push_back(ratio);
  }
  std::ofstream f(o_.json_path);
  if (!f) return InternalError("cannot write " + o_.json_path);
  f << j.dump(2) << "\n";
  return Status::Ok();
}

// Every datatype x op once through the servers (the tree, with --tree), each result checked by the
// ranks against the bench's reference.
Status Emulation::CheckEveryType(uint64_t bytes, int* phase) {
  if (std::find(algos_.begin(), algos_.end(), "server") == algos_.end()) {
    return InvalidArgument("--check-types needs --algo server");
  }
  bytes = std::max<uint64_t>(bytes / 8 * 8, 8);  // whole elements of every type
  uint64_t wrong = 0;
  for (const char* dtype : kCheckTypes) {
    for (const char* op : kCheckOps) {
      if (g_interrupted) return InternalError("interrupted");
      TypeCheck c{dtype, op, bytes, 0};
      Row row;
      OPTCAST_RETURN_IF_ERROR(RunPhase("server", bytes, (*phase)++, &row, &c));
      c.wrong = row.wrong;
      wrong += c.wrong;
      checks_.push_back(c);
    }
  }
  std::printf("# checked every datatype and op through the %s at %s: %zu pairs, %llu wrong values\n",
              o_.tree ? "tree" : "servers", SizeLabel(bytes).c_str(), checks_.size(),
              static_cast<unsigned long long>(wrong));
  std::fflush(stdout);
  return Status::Ok();
}

int Emulation::Run() {
  if (Status st = Prepare(); !st.ok()) {
    std::fprintf(stderr, "optcast emu run: %s\n", st.message().c_str());
    return 2;
  }
  std::vector<uint64_t> sizes;
  for (uint64_t b = o_.min_bytes; b <= o_.max_bytes; b *= o_.factor) sizes.push_back(b / 4 * 4);  // whole floats
  const int phases = static_cast<int>(sizes.size() * algos_.size());

  std::printf("# optcast emu: %d workers, %d servers, %s links (%s); logs in %s\n", o_.spec.workers, o_.spec.servers,
              FormatBitRate(o_.spec.rate_bits).c_str(), DescribeNetwork(o_.spec).c_str(), workdir_.c_str());
  std::fflush(stdout);
  // The cluster shares the CPUs with whatever else runs here; say so when that is a lot, since
  // waiting for a CPU delays every hop of a pipelined collective.
  const MachineCpu before0 = ReadMachineCpu();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  busy_before_ = BusyFraction(before0, ReadMachineCpu());
  if (busy_before_ > 0.25) {
    std::printf(
        "# warning: the machine was %.0f%% busy before the run (load from other processes); the figures "
        "will be noisy and lower than on an idle machine\n",
        100 * busy_before_);
  }
  Status st = Up(o_.spec, o_.verbose);
  if (st.ok()) st = StartServers();
  int phase = 0;
  for (const auto& algo : algos_) {
    for (uint64_t bytes : sizes) {
      if (st.ok() && g_interrupted) st = InternalError("interrupted");
      if (!st.ok()) break;
      Row row;
      st = RunPhase(algo, bytes, phase++, &row);
      if (!st.ok()) break;
      rows_[{algo, row.bytes}] = row;
      std::printf("# [%d/%d] %-6s %6s: %8.2f MB/s = %5.1f%% of bound, %llu wrong, cpu %3.0f%% (ours %3.0f%%), %.1f s\n",
                  phase, phases, algo.c_str(), SizeLabel(bytes).c_str(), Mbs(row.algbw_gbps),
                  100.0 * row.algbw_gbps * 1e9 / bounds_.For(algo), static_cast<unsigned long long>(row.wrong),
                  100 * row.cpu_machine, 100 * row.cpu_emu, row.wall_s);
      std::fflush(stdout);
    }
  }
  if (st.ok() && o_.check_types) st = CheckEveryType(sizes.front(), &phase);
  StopServers();
  Status down = Down(o_.verbose);
  if (!down.ok()) std::fprintf(stderr, "optcast emu: cleaning up: %s\n", down.message().c_str());
  if (!st.ok()) {
    std::fprintf(stderr, "optcast emu run: %s\n(logs kept in %s)\n", st.message().c_str(), workdir_.c_str());
    return 1;
  }

  PrintTable(o_, bounds_, algos_, rows_, sizes);
  int rc = 0;
  uint64_t wrong = 0;
  for (const auto& [k, r] : rows_) wrong += r.wrong;
  for (const TypeCheck& c : checks_) wrong += c.wrong;
  if (wrong > 0) {
    std::fprintf(stderr, "optcast emu run: %llu wrong values\n", static_cast<unsigned long long>(wrong));
    rc = 2;
  }
  if (!o_.json_path.empty()) {
    if (Status js = WriteJson(sizes); !js.ok()) {
      std::fprintf(stderr, "optcast emu run: %s\n", js.message().c_str());
      rc = rc ? rc : 1;
    } else {
      std::printf("# results: %s\n", o_.json_path.c_str());
    }
  }
  if (!o_.plot_path.empty()) {
    if (Status ps = WritePlot(o_.plot_path, o_, bounds_, algos_, rows_); !ps.ok()) {
      std::fprintf(stderr, "optcast emu run: plot: %s\n", ps.message().c_str());
      rc = rc ? rc : 1;
    } else {
      std::printf("# plot: %s\n", o_.plot_path.c_str());
    }
  }
  if (!o_.keep_logs && rc == 0) {
    std::error_code ec;
    fs::remove_all(workdir_, ec);
  }
  return rc;
}

}  // namespace

std::string FindGlooBench(const std::string& hint) {
  if (!hint.empty()) return access(hint.c_str(), X_OK) == 0 ? hint : std::string();
  if (const char* env = std::getenv("OPTCAST_GLOO_BENCH"); env != nullptr && *env != '\0') {
    return access(env, X_OK) == 0 ? std::string(env) : std::string();
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& p :
         {self.parent_path() / "gloo" / "optcast-gloo-bench", self.parent_path() / "optcast-gloo-bench"}) {
      if (access(p.c_str(), X_OK) == 0) return p.string();
    }
  }
  if (InPath("optcast-gloo-bench")) return "optcast-gloo-bench";
  return "";
}

int RunEmulation(const RunOptions& opts) {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  Emulation emu(opts);
  return emu.Run();
}

}  // namespace optcast::tools::emu
