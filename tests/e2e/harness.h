// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// End-to-end test harness: reduction servers on threads of the test process, ranks in forked
// child processes, shared memory for the children's results, and a reference implementation of
// every reduction that regenerates any rank's input from a seed.
//
// Rules for child code: no gtest assertions (report through Shared and the exit code), leave with
// _exit, never touch the parent's server objects.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "optcast/communicator.h"
#include "optcast/job_id.h"
#include "optcast/status.h"
#include "optcast/types.h"
#include "server/server.h"

namespace optcast::e2e {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ---------------------------------------------------------------------------------------------
// Servers

// Loopback servers on the transport OPTCAST_TRANSPORT names (tcp when unset): the suite runs
// once per transport (ctest labels e2e and e2e-ofi).
server::ServerOptions TestServerOptions();

// TestServerOptions with `lanes` event loops (--io-threads). Over ofi a server runs one lane
// whatever it is given (server.cc), so these tests check there that it still serves.
inline server::ServerOptions WithLanes(int lanes, server::ServerOptions o = TestServerOptions()) {
  o.io_threads = lanes;
  return o;
}

// True when the suite runs over libfabric (OPTCAST_TRANSPORT=ofi).
bool OverFabric();
// Why tests that write protocol bytes straight into a TCP socket do not run over libfabric.
inline constexpr const char* kRawBytesNeedTcp =
    "this test writes the built-in TCP framing byte by byte with a raw socket; over ofi the framing is "
    "libfabric's (the same server checks run through the tcp-transport run of this suite)";

// N servers on loopback, each running on its own thread of this process.
//
// Tests that fork rank processes call Bind(), fork every child they will need (gated, see
// Children), then Serve(): no fork ever happens while a server thread might hold a lock of the
// allocator or the logger, which would leave the child deadlocked (ASan's allocator does not
// survive such a fork). Clients may connect between Bind and Serve: the kernel queues them.
class ServerFarm {
 public:
  ServerFarm() = default;
  ~ServerFarm();
  ServerFarm(const ServerFarm&) = delete;
  ServerFarm& operator=(const ServerFarm&) = delete;

  // Creates and binds n servers; no threads yet.
  Status Bind(int n, server::ServerOptions options = TestServerOptions());
  // Runs every bound server on its own thread.
  void Serve();
  // Bind + Serve, for tests that do not fork.
  Status Start(int n, server::ServerOptions options = TestServerOptions());
  void Stop();

  int size() const { return static_cast<int>(servers_.size()); }
  server::Server& server(int i) { return *servers_[i]; }
  uint16_t port(int i) const { return servers_[i]->port(); }
  std::vector<std::string> addresses() const;

  // Polls every server until no job is active, no chunk buffer is outstanding and no connection
  // is open. Returns a description of what is left when `limit` passes, or "" when idle. Tests
  // call it before forking a second group of children, so that the forks find the servers idle.
  std::string WaitIdle(milliseconds limit = milliseconds(5000));

 private:
  std::vector<std::unique_ptr<server::Server>> servers_;
  std::vector<std::thread> threads_;
};

// ---------------------------------------------------------------------------------------------
// Shared memory between the test process and its children

inline constexpr int kMaxProcs = 32;
inline constexpr int kMaxHashes = 8;
inline constexpr int kMaxBarriers = 16;

struct SharedState {
  std::atomic<int> barrier[kMaxBarriers];
  std::atomic<int> flag[kMaxProcs];  // progress markers a child sets for the parent
  std::atomic<int> stop;             // parent -> children
  std::atomic<int> port;             // a server child's port
  uint64_t hash[kMaxProcs][kMaxHashes];
  int64_t t_ns[kMaxProcs][4];  // steady_clock timestamps (CLOCK_MONOTONIC: shared by processes)
  int64_t value[kMaxProcs][4];
  char msg[kMaxProcs][2048];
};

// An anonymous shared mapping that survives fork.
class Shared {
 public:
  Shared();
  ~Shared();
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;
  SharedState* operator->() { return state_; }
  SharedState& operator*() { return *state_; }

  // Child side: record a message for slot `slot` (also printed on stderr) and return 1.
  int Fail(int slot, const std::string& message);
  void Note(int slot, const std::string& message);
  std::string Message(int slot) const;
  // Child side: every participant calls Barrier(id, n); false when `limit` passed first.
  bool Barrier(int id, int n, milliseconds limit = milliseconds(30000));

 private:
  SharedState* state_;
};

int64_t NowNs();

// ---------------------------------------------------------------------------------------------
// Child processes

struct ChildResult {
  pid_t pid = -1;
  bool exited = false;
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  std::string Describe() const;
};

// Forks children and reaps them; kills and reaps whatever is left on destruction.
//
// Children wait at a start gate until Start() (or the first Wait/Kill) opens it, so that every
// fork of a group happens while the servers in this process are idle: a server thread that holds
// an allocator lock (ASan's in particular) at the moment of a fork leaves the child deadlocked.
class Children {
 public:
  Children();
  ~Children();
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;

  // Forks a process that runs `body` once the gate opens; its return value is the exit code.
  // Returns the index.
  int Spawn(std::function<int()> body);
  // Opens the start gate for every child spawned so far (and any spawned later).
  void Start();
  pid_t pid(int i) const { return pids_[i]; }
  size_t size() const { return pids_.size(); }
  // Waits for child i alone (up to `limit`, then SIGKILL).
  ChildResult Wait(int i, milliseconds limit = milliseconds(60000));
  // Waits for all children not yet reaped (up to `limit` in total, then SIGKILL).
  std::vector<ChildResult> WaitAll(milliseconds limit = milliseconds(60000));
  void Kill(int i, int sig);
  // Child i's state now, without waiting or killing: reaped once it has ended.
  ChildResult Peek(int i);

 private:
  std::atomic<int>* gate_;
  std::vector<pid_t> pids_;
  std::vector<ChildResult> results_;
  std::vector<bool> reaped_;
};

// ---------------------------------------------------------------------------------------------
// Ranks

struct CommConfig {
  milliseconds timeout{20000};
  milliseconds connect_timeout{10000};
  size_t chunk_bytes = 0;
  int window = 0;
  std::string secret;
  bool failover = true;
  milliseconds heartbeat{3000};
  std::string tcp_congestion;
  size_t latency_bytes = 64 * 1024;
  int latency_dscp = 46;
  DataType wire_dtype = DataType::kFloat32;
};

// Calls `visit(fd, "localport->peerport")` for every connected TCP socket of this process with one
// end on one of `ports` (both ends of a connection between in-process ranks and servers).
void ForEachConnectionTo(const std::vector<uint16_t>& ports,
                         const std::function<void(int fd, const std::string& key)>& visit);

Status MakeComm(const std::vector<std::string>& servers, const JobId& job, int nranks, int rank,
                const CommConfig& config, std::unique_ptr<Communicator>* out);

// Runs `body` for every rank of one new job, each on a thread of this process with a communicator
// of its own made from `config`; returns each rank's status: its communicator's creation error,
// else what `body` returned.
std::vector<Status> RunRanksOnThreads(const std::vector<std::string>& servers, int nranks, const CommConfig& config,
                                      const std::function<Status(int rank, Communicator& comm)>& body);

// Runs every rank of one new job on a thread of this process: `count` float32 summed by
// allreduce, checked against the reference. Returns each rank's status.
// Every status is OK; each failure is reported with its rank.
void ExpectAllOk(const std::vector<Status>& statuses);

// Polls `cond` every 2 ms; false when `limit` passes first.
bool WaitFor(const std::function<bool()>& cond, milliseconds limit = milliseconds(5000));

std::vector<Status> RunAllReduceOnThreads(const std::vector<std::string>& servers, int nranks, size_t count,
                                          const CommConfig& config, uint64_t seed);

// ---------------------------------------------------------------------------------------------
// Data and reference

// The input of `rank` at logical element `index` (the index into the rank's send buffer) for a
// collective seeded with `seed`. Values suit `op` (products stay near 1; no NaN, no overflow for
// floats).
void FillInput(DataType dtype, RedOp op, uint64_t seed, int rank, uint64_t first, size_t n, void* out);

// What every rank must receive at logical elements [first, first + n) of a reduction over
// `nranks` ranks' inputs: combined in rank order in the server's precision (float32 for 16-bit
// floats, rounded once; integers wrap; avg as in reduce/combine.h).
void FillReference(DataType dtype, RedOp op, uint64_t seed, int nranks, uint64_t first, size_t n, void* out);

// Compares `got` with the reference, block by block; "" or a description of the first mismatch.
std::string VerifyReduction(const void* got, DataType dtype, RedOp op, uint64_t seed, int nranks, uint64_t first,
                            size_t n);
// Compares an all-gather result (nranks * sendcount elements) with every rank's input.
std::string VerifyAllGather(const void* got, DataType dtype, uint64_t seed, int nranks, size_t sendcount);

uint64_t HashBytes(const void* data, size_t n, uint64_t h = 0x6a09e667f3bcc909ull);
std::string Hex(uint64_t v);
std::string ValueString(DataType dtype, const void* p);

// A heap buffer with guard bytes on both sides to catch writes past either end.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes);
  uint8_t* data() { return storage_.data() + kGuard; }
  size_t size() const { return bytes_; }
  bool GuardsIntact() const;

 private:
  static constexpr size_t kGuard = 256;
  size_t bytes_;
  std::vector<uint8_t> storage_;
};

}  // namespace optcast::e2e
