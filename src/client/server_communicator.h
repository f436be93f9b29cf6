// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The client side of the reduction-server protocol, over any transport (transport/kind.h): what
// Communicator::Create makes. Progress is driven by the caller (Test/Wait), as NCCL's proxy
// thread and MPI programs expect; no hidden threads.
//
// It owns one of each part and wires them together (docs/architecture.md, "Inside the client"):
//   RequestTable  the collectives in flight, by sequence number        request_table.h
//   ServerLink    one per server: connection, queue, send window       server_link.h
//   Striping      a collective's chunks over the servers                striping.h (plan.h)
//   Failover      a dead server's share moved to the servers left       failover.h
//   StallQuery    on a timeout, which ranks the servers wait for        stall_query.h
// and its own work is split by job: server_communicator.cc (issue, complete, the API),
// answers.cc (what the servers send), progress.cc (sending, polling, timeouts, failures),
// request_trace.cc (the trace's request spans).

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "client/failover.h"
#include "client/request.h"
#include "client/request_table.h"
#include "client/server_link.h"
#include "client/stall_query.h"
#include "client/striping.h"
#include "observe/trace.h"
#include "optcast/communicator.h"
#include "transport/dialer.h"
#include "transport/kind.h"
#include "transport/message.h"
#include "transport/traffic_class.h"

namespace optcast {

// What RegisterMemory hands out: the transport's registration, held until DeregisterMemory.
class RegisteredMemory {
 public:
  std::unique_ptr<transport::MemoryRegistration> registration;
};

namespace client {

class ServerCommunicator final : public Communicator, public transport::MessageHandler, private Failover::Host {
 public:
  ServerCommunicator(CommunicatorOptions o, transport::Kind kind);
  ~ServerCommunicator() override;

  // Dials and joins every server of the options.
  Status Connect();

  int rank() const override { return opts_.rank; }
  int nranks() const override { return opts_.nranks; }
  Status IAllReduce(const void* sendbuf, void* recvbuf, size_t count, DataType dtype, RedOp op,
                    Request** request) override;
  Status IReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType dtype, RedOp op,
                        Request** request) override;
  Status IAllGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType dtype, Request** request) override;
  Status Test(Request* req, bool* done) override;
  Status TestFor(Request* req, std::chrono::milliseconds max_wait, bool* done) override;
  Status Wait(Request* req) override;
  Status RegisterMemory(const void* data, size_t size, RegisteredMemory** out) override;
  Status DeregisterMemory(RegisteredMemory* registration) override;
  FailoverStats failover_stats() const override;
  TransportStats transport_stats() const override;
  Status SetWireDtype(DataType wire) override;

  // transport::MessageHandler: what the servers send (answers.cc).
  Status OnMessageMeta(transport::Connection& c, std::span<const uint8_t> meta, uint64_t payload_len,
                       uint8_t** payload_dst) override;
  Status OnMessageComplete(transport::Connection& c) override;

 private:
  // How long collectives still in flight on a failed communicator may go without progress.
  static constexpr std::chrono::milliseconds kBrokenGrace{3000};

  // ---- issue and complete (server_communicator.cc) ----
  Status Issue(CollType coll, const void* sendbuf, void* recvbuf, size_t count, DataType dtype, RedOp op,
               Request** request);
  // float32 on a 16-bit wire: `req` goes over the staging buffer (wire_narrowing.h).
  void NarrowOnTheWire(Request* req);
  // An answer for `req` came from `link`.
  void Complete(Request* req, size_t link);
  Status Release(Request* req);

  // ---- answers (answers.cc) ----
  // A failover message (Notice, Agreed, Epoch) from `link`.
  Status OnFailoverMessage(ServerLink& link, wire::Message& msg, uint64_t payload_len);
  // A Result or an Ack from `link`; where its payload lands.
  Status OnAnswer(ServerLink& link, const wire::Message& msg, uint64_t payload_len, uint8_t** payload_dst);
  // Hands each link's messages that came behind its welcome to the handler, as if read now.
  void ReadEarlyMessages();

  // ---- progress (progress.cc) ----
  void Progress(int timeout_ms);
  // Sends chunks up to the window on every link.
  void FillWindows();
  void FlushLink(ServerLink& s);
  // The client's timeout fired: asks the servers that owe `req` a reply which ranks they wait for.
  void AskWhatStalls(const Request& req);
  // Gives up on the oldest collective once the servers said what it waits for.
  void CheckTimeout();
  // One server link is gone: collectives that still wait on it fail with `why`.
  void FailLink(ServerLink& link, const Status& why);
  void TellServersWhy();
  // Fails these requests; nothing may read or write their buffers afterwards.
  void Abandon(const std::vector<Request*>& reqs, const Status& why);
  // The traffic class of a collective of `bytes` per rank: latency-bound ones go in the latency
  // class (transport/traffic_class.h), the rest in the bulk class.
  transport::TrafficClass TrafficClassOf(uint64_t bytes) const {
    return bytes <= opts_.latency_bytes ? transport::TrafficClass::kLatency : transport::TrafficClass::kBulk;
  }

  // ---- Failover::Host ----
  const Status& broken() const override { return broken_; }
  void Break(const Status& why) override;
  void Restripe(Request* req) override { striping_.Stripe(req, failover_.Alive(), failover_.epoch(), servers_); }
  void MaybeFinish(Request* req) override;
  void FlushAll() override;
  void NoteProgress() override { last_progress_ = Clock::now(); }

  // ---- tracing (request_trace.cc; only called when it is on) ----
  void TraceRequestBegin(Request* req, observe::TraceArgs& issue_args);
  static void TraceRequestEnd(Request* req);
  static void TraceSend(ServerLink* link, transport::OutMessage* msg);

  const uint64_t trace_comm_;
  CommunicatorOptions opts_;
  const transport::Kind transport_;
  mutable std::mutex mu_;
  // Declared before the connections it dials and the registrations it makes: destroyed after.
  std::unique_ptr<transport::Dialer> dialer_;
  std::vector<ServerLink> servers_;
  std::unordered_map<RegisteredMemory*, std::unique_ptr<RegisteredMemory>> registered_;
  // A server welcomed this rank into an aggregation tree: every server of a tree job says so,
  // so every rank cuts its stripes alike.
  bool in_tree_ = false;
  bool told_servers_ = false;  // TellServersWhy has run
  // The slowest port rate the servers announced (bit/s; 0: none did). Fixed at the join, so a
  // failover never changes how a size is striped.
  uint64_t link_rate_bits_ = 0;
  RequestTable requests_;
  Striping striping_;  // set once the servers are joined
  Failover failover_{opts_, servers_, requests_, striping_, *this};
  Status broken_;
  Clock::time_point last_progress_ = Clock::now();
  StallQuery stall_;
};

}  // namespace client
}  // namespace optcast
