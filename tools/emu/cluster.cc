// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/emu/cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tools/emu/host_queue.h"
#include "tools/process/subprocess.h"

namespace optcast::tools::emu {

namespace {

constexpr char kBridge[] = "br0";
constexpr char kHostIface[] = "eth0";

// ip and tc live in /usr/sbin, which is not in every user's PATH (sudo adds it).
std::string Tool(const char* name) { return FindExecutable(name); }

const std::string& Ip() {
  static const std::string path = Tool("ip");
  return path;
}
const std::string& Tc() {
  static const std::string path = Tool("tc");
  return path;
}

// Every step logs itself when asked, so a user can replay the setup by hand.
Status Step(const std::vector<std::string>& argv, bool verbose) {
  if (verbose) std::printf("+ %s\n", JoinCommand(argv).c_str());
  return RunChecked(argv);
}

// HTB on the egress of one veth end: a switch's port, one class (rate == ceil) over a FIFO of
// --queue-packets (else the device's), or two with a priority DSCP (host_queue.h). The host's own
// end gets HostEgress. Both ends shaped = full duplex at `rate_bits` each way.
Status Shape(const std::string& netns, const std::string& dev, uint64_t rate_bits, const ClusterSpec& spec,
             bool verbose) {
  for (auto& cmd :
       PortEgressCommands(dev, rate_bits, spec.mtu, spec.queue_packets, spec.burst_bytes, spec.priority_dscp)) {
    cmd.insert(cmd.begin(), {Tc(), "-n", netns});
    OPTCAST_RETURN_IF_ERROR(Step(cmd, verbose));
  }
  return Status::Ok();
}

// The host's NIC queue (host_queue.h). A fair queue is one class per other host: one `tc -batch`
// run, since a cluster of 16 hosts needs hundreds of commands.
Status ShapeHostEgress(const Host& h, const ClusterSpec& spec, bool verbose) {
  std::vector<std::string> destinations;
  for (const Host& other : Hosts(spec)) {
    if (other.address != h.address) destinations.push_back(other.address);
  }
  const auto cmds = HostEgressCommands(kHostIface, spec.rate_bits, spec.mtu, spec.host_queue, destinations,
                                       spec.burst_bytes, spec.priority_dscp);
  char path[] = "/tmp/optcast-emu-tc-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return InternalError(std::string("cannot create a tc batch file in /tmp: ") + std::strerror(errno));
  std::string text;
  for (const auto& cmd : cmds) {
    if (verbose) std::printf("+ %s -n %s %s\n", Tc().c_str(), h.netns.c_str(), JoinCommand(cmd).c_str());
    text += JoinCommand(cmd) + "\n";
  }
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  Status st = written ? RunChecked({Tc(), "-n", h.netns, "-batch", path})
                      : InternalError(std::string("cannot write the tc batch file ") + path);
  ::unlink(path);
  return st;
}

constexpr char kAllowedCcPath[] = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
// Where Up() keeps the machine's list of congestion controls that namespaces may choose, when it
// had to widen it, so that Down() puts it back.
constexpr char kSavedAllowedCcPath[] = "/run/optcast-emu-allowed-cc";

std::string ReadLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

Status WriteLine(const std::string& path, const std::string& line) {
  std::ofstream f(path);
  f << line << "\n";
  f.close();
  if (!f) return InternalError("cannot write " + path);
  return Status::Ok();
}

// A namespace other than the machine's may make only the congestion controls the machine lists
// as allowed its default (the kernel refuses the others with EPERM). Adds `cc` to that list
// until Down(); the machine's own default is not touched.
Status AllowCongestionControl(const std::string& cc, bool verbose) {
  const std::string allowed = ReadLine(kAllowedCcPath);
  std::istringstream names(allowed);
  std::string name;
  while (names >> name) {
    if (name == cc) return Status::Ok();
  }
  if (::access(kSavedAllowedCcPath, F_OK) != 0) OPTCAST_RETURN_IF_ERROR(WriteLine(kSavedAllowedCcPath, allowed));
  if (verbose) std::printf("+ echo '%s %s' > %s\n", allowed.c_str(), cc.c_str(), kAllowedCcPath);
  return WriteLine(kAllowedCcPath, allowed + " " + cc);
}

Status RestoreAllowedCongestionControls(bool verbose) {
  if (::access(kSavedAllowedCcPath, F_OK) != 0) return Status::Ok();
  const std::string saved = ReadLine(kSavedAllowedCcPath);
  if (verbose) std::printf("+ echo '%s' > %s\n", saved.c_str(), kAllowedCcPath);
  OPTCAST_RETURN_IF_ERROR(WriteLine(kAllowedCcPath, saved));
  ::unlink(kSavedAllowedCcPath);
  return Status::Ok();
}

// The bridge namespace a host's link plugs into: its rack's switch, or the one switch.
std::string SwitchOf(const ClusterSpec& spec, const Host& h) {
  const int rack = RackOf(spec, h);
  return rack < 0 ? std::string(kSwitchNamespace) : RackNamespace(rack);
}

constexpr char kUplink[] = "uplink";  // a rack switch's end of its uplink; the spine's end is rK

// A rack: its bridge namespace, and its uplink to the spine (a veth pair made in the spine with
// its peer put straight into the rack), shaped at the uplink rate on both ends, so full duplex
// like a switch's uplink port. Its queue is the device's FIFO, or --queue-packets.
Status AddRack(int rack, const ClusterSpec& spec, bool verbose) {
  const std::string ns = RackNamespace(rack);
  const std::string spine_port = "r" + std::to_string(rack);
  const std::string mtu_text = std::to_string(spec.mtu);
  OPTCAST_RETURN_IF_ERROR(Step({Ip(), "netns", "add", ns}, verbose));
  OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", ns, "link", "add", kBridge, "type", "bridge"}, verbose));
  OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", ns, "link", "set", kBridge, "up"}, verbose));
  OPTCAST_RETURN_IF_ERROR(Step(
      {Ip(), "-n", kSwitchNamespace, "link", "add", spine_port, "type", "veth", "peer", "name", kUplink, "netns", ns},
      verbose));
  for (const auto& [where, dev] : {std::pair<std::string, std::string>{kSwitchNamespace, spine_port}, {ns, kUplink}}) {
    OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", where, "link", "set", dev, "mtu", mtu_text}, verbose));
    OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", where, "link", "set", dev, "master", kBridge}, verbose));
    OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", where, "link", "set", dev, "up"}, verbose));
    OPTCAST_RETURN_IF_ERROR(Shape(where, dev, spec.uplink_bits, spec, verbose));
  }
  return Status::Ok();
}

Status AddHost(const Host& h, const ClusterSpec& spec, bool verbose) {
  const uint64_t rate_bits = spec.rate_bits;
  const int mtu = spec.mtu;
  const std::string sw = SwitchOf(spec, h);
  OPTCAST_RETURN_IF_ERROR(Step({Ip(), "netns", "add", h.netns}, verbose));
  // Created inside the switch namespace with its peer placed straight into the host namespace,
  // so no interface ever appears in the caller's namespace.
  OPTCAST_RETURN_IF_ERROR(Step(
      {Ip(), "-n", sw, "link", "add", h.name, "type", "veth", "peer", "name", kHostIface, "netns", h.netns}, verbose));
  const std::string mtu_text = std::to_string(mtu);
  OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", sw, "link", "set", h.name, "mtu", mtu_text}, verbose));
  OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", h.netns, "link", "set", kHostIface, "mtu", mtu_text}, verbose));
  OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", sw, "link", "set", h.name, "master", kBridge}, verbose));
  OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", sw, "link", "set", h.name, "up"}, verbose));
  OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", h.netns, "addr", "add", h.address + "/24", "dev", kHostIface}, verbose));
  OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", h.netns, "link", "set", "lo", "up"}, verbose));
  OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", h.netns, "link", "set", kHostIface, "up"}, verbose));
  OPTCAST_RETURN_IF_ERROR(Shape(sw, h.name, rate_bits, spec, verbose));
  OPTCAST_RETURN_IF_ERROR(ShapeHostEgress(h, spec, verbose));
  if (spec.tcp_cc.empty()) return Status::Ok();
  // Per namespace since Linux 4.15: every socket the host's processes open uses it.
  return Step({Ip(), "netns", "exec", h.netns, "sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=" + spec.tcp_cc},
              verbose);
}

std::vector<pid_t> NamespacePids(const std::string& netns) {
  std::vector<pid_t> pids;
  CommandResult r = RunCommand({Ip(), "netns", "pids", netns});
  std::stringstream in(r.out);
  long pid = 0;
  while (in >> pid) {
    if (pid > 1 && pid != getpid()) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

std::string Comm(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string s;
  std::getline(f, s);
  return s;
}

}  // namespace

Host WorkerHost(int i) {
  return {Role::kWorker, i, "w" + std::to_string(i), std::string(kNamespacePrefix) + "w" + std::to_string(i),
          "10.99.0." + std::to_string(1 + i)};
}

Host ServerHost(int j) {
  return {Role::kServer, j, "s" + std::to_string(j), std::string(kNamespacePrefix) + "s" + std::to_string(j),
          "10.99.0." + std::to_string(101 + j)};
}

std::vector<Host> Hosts(const ClusterSpec& spec) {
  std::vector<Host> hosts;
  for (int i = 0; i < spec.workers; ++i) hosts.push_back(WorkerHost(i));
  for (int j = 0; j < spec.servers; ++j) hosts.push_back(ServerHost(j));
  return hosts;
}

int ClusterSpec::TotalRacks() const {
  if (racks <= 0) return 0;
  if (!server_rack.empty() || servers == 0) return racks;
  return racks + (servers + RackSize() - 1) / RackSize();
}

int RackOf(const ClusterSpec& spec, const Host& h) {
  if (spec.racks <= 0) return -1;
  if (h.role == Role::kWorker) return h.index / spec.RackSize();
  if (!spec.server_rack.empty()) return spec.server_rack[h.index];
  return spec.racks + h.index / spec.RackSize();
}

std::string RackNamespace(int rack) { return std::string(kNamespacePrefix) + "r" + std::to_string(rack); }

Status CheckBurst(const ClusterSpec& spec) {
  if (spec.burst_bytes == 0 || spec.burst_bytes >= static_cast<uint64_t>(spec.mtu) + 14) return Status::Ok();
  return InvalidArgument("--burst " + std::to_string(spec.burst_bytes) +
                         ": a link must be able to send one whole frame; use at least the MTU + 14 (" +
                         std::to_string(spec.mtu + 14) + ")");
}

Status CheckRacks(const ClusterSpec& spec) {
  if (spec.racks == 0) {
    if (spec.uplink_bits != 0) return InvalidArgument("--uplink needs --racks (the uplink joins a rack to the spine)");
    return Status::Ok();
  }
  if (spec.racks < 1 || spec.racks > kMaxRacks || spec.workers % spec.racks != 0) {
    return InvalidArgument("--racks " + std::to_string(spec.racks) + " must divide --workers (" +
                           std::to_string(spec.workers) + ") and be at most " + std::to_string(kMaxRacks) +
                           ": every rack holds workers / racks workers");
  }
  if (spec.TotalRacks() > kMaxRacks) {
    return InvalidArgument("the servers would need " + std::to_string(spec.TotalRacks() - spec.racks) +
                           " racks of their own beside " + std::to_string(spec.racks) + " worker racks; at most " +
                           std::to_string(kMaxRacks) + " racks in all: use fewer servers or larger racks");
  }
  if (spec.uplink_bits == 0) return InvalidArgument("racks need an uplink rate (--uplink)");
  for (size_t j = 0; j < spec.server_rack.size(); ++j) {
    if (spec.server_rack[j] < 0 || spec.server_rack[j] >= spec.racks) {
      return InvalidArgument("server " + std::to_string(j) + " is placed outside the racks");
    }
  }
  return Status::Ok();
}

Status CheckPrivileges() {
  if (geteuid() != 0) {
    return UnavailableError(
        "the emulated cluster needs root: it creates network namespaces, veth links and tc qdiscs. "
        "Run it as `sudo optcast emu ...` (or as root).");
  }
  for (const char* tool : {"ip", "tc"}) {
    if (Tool(tool).find('/') == std::string::npos && !InPath(tool)) {
      return UnavailableError(std::string("`") + tool + "` was not found: install iproute2 (apt-get install iproute2)");
    }
  }
  CommandResult r = RunCommand({Ip(), "netns", "list"});
  if (r.exit_code != 0) {
    return UnavailableError("`ip netns list` failed: " + r.err + " (does this kernel support network namespaces?)");
  }
  return Status::Ok();
}

Status ListNamespaces(std::vector<std::string>* names) {
  names->clear();
  std::string out;
  OPTCAST_RETURN_IF_ERROR(RunChecked({Ip(), "netns", "list"}, &out));
  std::stringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::string name = line.substr(0, line.find(' '));  // "name (id: 3)"
    if (name.rfind(kNamespacePrefix, 0) == 0) names->push_back(name);
  }
  std::sort(names->begin(), names->end());
  return Status::Ok();
}

Status Down(bool verbose) {
  std::vector<std::string> names;
  OPTCAST_RETURN_IF_ERROR(ListNamespaces(&names));
  // Processes keep a namespace's network alive after `ip netns del`, so stop them first:
  // SIGTERM, a grace period, then SIGKILL. They are ours: only optcast-emu namespaces are searched.
  std::vector<pid_t> pids;
  for (const auto& ns : names) {
    for (pid_t p : NamespacePids(ns)) pids.push_back(p);
  }
  for (pid_t p : pids) {
    if (verbose) std::printf("+ kill %d  # %s\n", static_cast<int>(p), Comm(p).c_str());
    kill(p, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!pids.empty() && std::chrono::steady_clock::now() < deadline && std::any_of(pids.begin(), pids.end(), Alive)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t p : pids) {
    if (Alive(p)) kill(p, SIGKILL);
  }
  Status first = Status::Ok();
  for (const auto& ns : names) {
    Status st = Step({Ip(), "netns", "del", ns}, verbose);
    if (!st.ok() && first.ok()) first = st;
  }
  if (!first.ok()) return first;
  OPTCAST_RETURN_IF_ERROR(RestoreAllowedCongestionControls(verbose));
  OPTCAST_RETURN_IF_ERROR(ListNamespaces(&names));
  if (!names.empty()) return InternalError("namespaces still present after down: " + names.front());
  return Status::Ok();
}

Status CheckTcpCongestionControl(const std::string& cc) {
  std::string known;
  for (const char* k : kTcpCongestionControls) known += (known.empty() ? "" : ", ") + std::string(k);
  if (std::find(std::begin(kTcpCongestionControls), std::end(kTcpCongestionControls), cc) ==
      std::end(kTcpCongestionControls)) {
    return InvalidArgument("--tcp-cc '" + cc + "' is not one of " + known);
  }
  std::ifstream f("/proc/sys/net/ipv4/tcp_available_congestion_control");
  std::string name;
  while (f >> name) {
    if (name == cc) return Status::Ok();
  }
  return UnavailableError("this kernel does not offer TCP congestion control '" + cc +
                          "' (see /proc/sys/net/ipv4/tcp_available_congestion_control); load it with: modprobe tcp_" +
                          cc);
}

std::string DescribeNetwork(const ClusterSpec& spec) {
  std::string text = "MTU " + std::to_string(spec.mtu);
  text += ", TCP " + (spec.tcp_cc.empty() ? std::string("default congestion control") : spec.tcp_cc);
  text += spec.queue_packets > 0 ? ", switch queues of " + std::to_string(spec.queue_packets) + " packets"
                                 : ", default switch queues";
  text += std::string(", ") + HostQueueName(spec.host_queue) + " host queues";
  text += spec.priority_dscp > 0 ? ", DSCP " + std::to_string(spec.priority_dscp) + " served first"
                                 : ", no priority queues";
  if (spec.burst_bytes > 0) text += ", link burst " + std::to_string(spec.burst_bytes) + " bytes";
  if (spec.racks > 0) {
    char ratio[64];
    std::snprintf(ratio, sizeof(ratio), "%.3g:1",
                  static_cast<double>(spec.RackSize()) * static_cast<double>(spec.rate_bits) /
                      static_cast<double>(spec.uplink_bits));
    text += ", " + std::to_string(spec.racks) + " racks of " + std::to_string(spec.RackSize()) + " workers";
    if (spec.TotalRacks() > spec.racks) {
      text += " + " + std::to_string(spec.TotalRacks() - spec.racks) + " of servers";
    }
    text += " behind " + FormatBitRate(spec.uplink_bits) + " uplinks (" + ratio + ")";
  }
  return text;
}

Status Up(const ClusterSpec& spec, bool verbose) {
  if (spec.workers < 1 || spec.workers > kMaxWorkers || spec.servers < 0 || spec.servers > kMaxServers) {
    return InvalidArgument("need 1 <= --workers <= " + std::to_string(kMaxWorkers) +
                           " and 0 <= --servers <= " + std::to_string(kMaxServers));
  }
  if (!spec.tcp_cc.empty()) OPTCAST_RETURN_IF_ERROR(CheckTcpCongestionControl(spec.tcp_cc));
  if (spec.queue_packets < 0) return InvalidArgument("--queue-packets must be 0 (device default) or more");
  OPTCAST_RETURN_IF_ERROR(CheckBurst(spec));
  OPTCAST_RETURN_IF_ERROR(CheckRacks(spec));
  OPTCAST_RETURN_IF_ERROR(Down(verbose));
  Status st = [&]() -> Status {
    if (!spec.tcp_cc.empty()) OPTCAST_RETURN_IF_ERROR(AllowCongestionControl(spec.tcp_cc, verbose));
    OPTCAST_RETURN_IF_ERROR(Step({Ip(), "netns", "add", kSwitchNamespace}, verbose));
    OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", kSwitchNamespace, "link", "add", kBridge, "type", "bridge"}, verbose));
    OPTCAST_RETURN_IF_ERROR(Step({Ip(), "-n", kSwitchNamespace, "link", "set", kBridge, "up"}, verbose));
    for (int k = 0; k < spec.TotalRacks(); ++k) OPTCAST_RETURN_IF_ERROR(AddRack(k, spec, verbose));
    for (const Host& h : Hosts(spec)) OPTCAST_RETURN_IF_ERROR(AddHost(h, spec, verbose));
    return Status::Ok();
  }();
  if (!st.ok()) {
    (void)Down(false);  // never leave half a cluster behind
    return st;
  }
  return Status::Ok();
}

namespace {

// A link's rate from `tc class show`: its root HTB class's. The fair host queue's per-destination
// classes below it only guarantee a minimum (8Kbit) and borrow up to the root's rate.
std::string LinkRate(const std::string& classes) {
  std::istringstream in(classes);
  std::string line, first;
  while (std::getline(in, line)) {
    const size_t p = line.find(" rate ");
    if (p == std::string::npos) continue;
    const std::string rate = line.substr(p + 6, line.find(' ', p + 6) - p - 6);
    if (line.find(" root ") != std::string::npos) return rate;
    if (first.empty()) first = rate;
  }
  return first.empty() ? "-" : first;
}

}  // namespace

Status Describe(std::string* text) {
  std::vector<std::string> names;
  OPTCAST_RETURN_IF_ERROR(ListNamespaces(&names));
  std::ostringstream out;
  if (names.empty()) {
    *text = "no emulated cluster (no optcast-emu-* network namespaces)\n";
    return Status::Ok();
  }
  char line[256];
  std::snprintf(line, sizeof(line), "%-18s %-14s %-10s %s\n", "namespace", "address", "rate", "processes");
  out << line;
  for (const auto& ns : names) {
    std::string addr = "-", rate = "-", procs;
    const bool rack = ns.rfind(std::string(kNamespacePrefix) + "r", 0) == 0;
    if (rack) {
      addr = "(bridge br0)";
      std::string c;
      if (RunChecked({Tc(), "-n", ns, "class", "show", "dev", kUplink}, &c).ok()) rate = LinkRate(c) + " up";
    } else if (ns != kSwitchNamespace) {
      std::string a;
      if (RunChecked({Ip(), "-n", ns, "-4", "-o", "addr", "show", "dev", kHostIface}, &a).ok()) {
        size_t p = a.find("inet ");
        if (p != std::string::npos) addr = a.substr(p + 5, a.find(' ', p + 5) - p - 5);
      }
      std::string c;
      if (RunChecked({Tc(), "-n", ns, "class", "show", "dev", kHostIface}, &c).ok()) rate = LinkRate(c);
    } else {
      addr = "(bridge br0)";  // the one switch, or the spine
    }
    for (pid_t p : NamespacePids(ns)) procs += (procs.empty() ? "" : " ") + Comm(p) + "[" + std::to_string(p) + "]";
    std::snprintf(line, sizeof(line), "%-18s %-14s %-10s %s\n", ns.c_str(), addr.c_str(), rate.c_str(),
                  procs.empty() ? "-" : procs.c_str());
    out << line;
  }
  *text = out.str();
  return Status::Ok();
}

}  // namespace optcast::tools::emu
