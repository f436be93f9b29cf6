// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The Optcast client library: collectives of host buffers through reduction servers.
//
//   optcast::CommunicatorOptions opts;
//   opts.servers = {"10.0.0.1:8918", "10.0.0.2:8918"};
//   opts.job_id = id_shared_by_all_ranks;  opts.nranks = 4;  opts.rank = my_rank;
//   std::unique_ptr<optcast::Communicator> comm;
//   OPTCAST_RETURN_IF_ERROR(optcast::Communicator::Create(opts, &comm));
//   OPTCAST_RETURN_IF_ERROR(comm->AllReduce(buf, buf, n, DataType::kFloat32, RedOp::kSum));
//
// Every rank must issue the same collectives with the same arguments in the same order.
//
// Thread safety: a Communicator may be used from several threads. Its calls are serialized by
// one lock per communicator, so they are safe to make concurrently but do not run in parallel;
// Wait holds that lock until its request completes, so a thread that keeps several requests
// moving, or shares the communicator with others, should use Test or TestFor. rank() and
// nranks() never block. Distinct communicators share nothing but the process's log and trace,
// and may be used from different threads freely.
//
// Progress: there are no hidden threads. Collectives advance only inside calls on their
// communicator (the I* calls, Test, TestFor, Wait); any of these advances every request in
// flight, not only the one it names.
//
// Buffers: the caller owns sendbuf and recvbuf. From the I* call until the request completes
// (Test or TestFor sets *done, or Wait returns) the communicator may read sendbuf and write recvbuf at any
// time, so neither may be freed, and recvbuf not read or written; sendbuf must not change.
// Once the request has completed, with success or with an error, the communicator touches
// neither again.
//
// Requests: an I* call that succeeds hands out a Request owned by the communicator. It is
// released by the call that completes it: Test or TestFor when it sets *done, or Wait, whatever
// status they return. After that the pointer is dangling and must not be passed again; every
// request must be completed exactly once, by one thread. An I* call that fails hands out no
// request (*request is null).
//
// Errors: a failed collective's error is returned by the call that completes it. When a server
// connection is lost, or nothing progresses for CommunicatorOptions::timeout, the communicator
// is broken: requests that need that server (or, on a timeout, all) fail, and every later I* call
// returns the same error. Destroy it and create a new one.
//
// Lifetime: complete every request before destroying a communicator (one still in flight is
// never released, and its sendbuf may still be read while the destructor says goodbye to the
// servers). Destroying it closes the connections and ends the registrations still open.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "optcast/job_id.h"
#include "optcast/status.h"
#include "optcast/types.h"

namespace optcast {

struct CommunicatorOptions {
  std::vector<std::string> servers;  // "host:port"; every rank lists them in the same order
  JobId job_id;
  int nranks = 0;
  int rank = -1;
  // Any wait (connecting, a collective making no progress) fails after this long.
  std::chrono::milliseconds timeout{30000};
  // How long to keep retrying a server that refuses connections at start.
  std::chrono::milliseconds connect_timeout{30000};
  // Bytes per chunk; 0 picks from the message size. Must match on every rank.
  size_t chunk_bytes = 0;
  // Chunks in flight per server connection; 0 picks a default.
  int window = 0;
  // The deployment secret, when the servers require one (never pass it on a command line).
  std::string secret;
  // What carries the protocol: "tcp" (built in) or "ofi" (libfabric; the provider comes from
  // OPTCAST_OFI_PROVIDER). Empty: OPTCAST_TRANSPORT, else tcp. The servers must use the same.
  std::string transport;
  // Failover (docs/reliability.md): when a server dies the job goes on over the servers left.
  // Off, a dead server fails every collective that used it (OPTCAST_FAILOVER=0).
  bool failover = true;
  // A server that sends nothing for this long while this rank waits on it counts as dead (it
  // sends a heartbeat every 250 ms while it holds work of the job). Only with failover on.
  std::chrono::milliseconds heartbeat{3000};
  // The TCP congestion control of the connections to the servers (tcp transport): "" CUBIC where
  // the host offers it (the servers' many-to-one rounds run better under it than under BBR;
  // docs/benchmarks.md), "system" the host's default, or a name the host allows
  // (OPTCAST_TCP_CONGESTION).
  std::string tcp_congestion;
  // Latency-bound collectives (at most latency_bytes: count times the element size) send their
  // chunks marked with DSCP latency_dscp (tcp transport), so that a network that queues that
  // class ahead of bulk traffic does not keep them waiting behind another job's stream
  // (docs/deploying.md, "Traffic classes"). latency_dscp 0 marks nothing (OPTCAST_LATENCY_DSCP=off); 46 is
  // Expedited Forwarding. A network that does not honour it only carries the mark.
  size_t latency_bytes = 64 * 1024;
  int latency_dscp = 46;
  // The type float32 data travels in (docs/wire-dtype.md). kFloat32: as it is. kBFloat16 or
  // kFloat16: each rank rounds its float32 input to the 16-bit type once (half the bytes on the
  // wire), the servers sum in float32 and round once, and the rank widens the result back to
  // float32. Applies to float32 allreduce and reduce-scatter with sum, avg, min and max; other
  // types, prod and all-gather travel as they are. Must match on every rank
  // (OPTCAST_WIRE_DTYPE=bf16|fp16|off).
  DataType wire_dtype = DataType::kFloat32;
};

// What failover did so far.
struct FailoverStats {
  uint32_t failovers = 0;     // failovers applied: the job's epoch
  uint32_t servers_left = 0;  // servers this communicator still stripes over
};

// Fills options from OPTCAST_SERVERS, OPTCAST_TIMEOUT_MS, OPTCAST_CHUNK_BYTES, OPTCAST_WINDOW,
// OPTCAST_TRANSPORT, OPTCAST_FAILOVER (0 or 1), OPTCAST_HEARTBEAT_MS, OPTCAST_TCP_CONGESTION,
// OPTCAST_LATENCY_BYTES, OPTCAST_LATENCY_DSCP (0-63 or off), OPTCAST_WIRE_DTYPE (bf16, fp16 or off), and the secret from OPTCAST_SECRET_FILE (or
// OPTCAST_SECRET).
Status ApplyEnvironment(CommunicatorOptions* options);

// Reads a wire type for float32 data: "bf16"/"bfloat16", "fp16"/"float16"/"half", or
// "off"/"fp32"/"float32"/"" (as it is, kFloat32). `what` names the setting in the error.
Status ParseWireDtype(std::string_view text, std::string_view what, DataType* out);

// An in-flight collective. Owned by its communicator; released when Test or TestFor reports it
// done or when Wait returns (see "Requests" above).
class Request;

// A buffer registered with a communicator's transport (Communicator::RegisterMemory). Owned by
// its communicator.
class RegisteredMemory;

// What a communicator's transport has registered: registrations made so far (libfabric's
// fi_mr_reg calls, by RegisterMemory or, where the provider needs every buffer registered, on a
// buffer's first use) and those open now. Both 0 over TCP, which needs none.
struct TransportStats {
  uint64_t registrations_made = 0;
  uint64_t registrations_open = 0;
  bool registration_required = false;  // the provider needs every buffer registered (efa, verbs)
};

class Communicator {
 public:
  // Connects to every server in options.servers and joins the job there as options.rank; blocks
  // until all have welcomed it (dialing for up to connect_timeout, each answer within timeout).
  // The options are copied. On error *out is left unchanged.
  static Status Create(const CommunicatorOptions& options, std::unique_ptr<Communicator>* out);
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int nranks() const = 0;

  // Asynchronous collectives: they queue the collective, send what fits at once, and return.
  // Buffers must stay valid until the request completes (see "Buffers" above).
  // sendbuf == recvbuf is allowed (in place).
  virtual Status IAllReduce(const void* sendbuf, void* recvbuf, size_t count, DataType dtype, RedOp op,
                            Request** request) = 0;
  // sendbuf holds recvcount * nranks elements; rank r receives the reduced part r. In place:
  // recvbuf == sendbuf + rank * recvcount elements.
  virtual Status IReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType dtype, RedOp op,
                                Request** request) = 0;
  // recvbuf receives sendcount * nranks elements, rank r's part at offset r * sendcount. In
  // place: sendbuf == recvbuf + rank * sendcount elements.
  virtual Status IAllGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType dtype,
                            Request** request) = 0;

  // Makes progress without blocking. When *done is set the request is released and the returned
  // status is the collective's result; otherwise the request stays in flight and the status is OK
  // (or InvalidArgument for a null request).
  virtual Status Test(Request* request, bool* done) = 0;
  // Like Test, but waits up to max_wait for progress first: lets a caller that must also drive
  // another library's progress (MPI) poll both without spinning.
  virtual Status TestFor(Request* request, std::chrono::milliseconds max_wait, bool* done) {
    return Test(request, done);
  }
  // Blocks until the request completes (or fails, or times out) and releases it; returns the
  // collective's result. Holds the communicator's lock meanwhile (see "Thread safety" above).
  virtual Status Wait(Request* request) = 0;

  // Registers a buffer that collectives will use again and again (NCCL's regMr), so that the
  // transport need not register it when a collective first uses it: over libfabric it is
  // registered (fi_mr_reg) here, once, in the domain of every server connection, and every send
  // and receive from it reuses that registration. Over TCP there is nothing to register.
  // Collectives take registered and unregistered buffers alike.
  virtual Status RegisterMemory(const void* data, size_t size, RegisteredMemory** out) = 0;
  // Ends a registration (the buffer may be freed afterwards; a collective still using it keeps
  // the registration until it completes). Registrations left at the end go with the communicator.
  virtual Status DeregisterMemory(RegisteredMemory* registration) = 0;
  virtual TransportStats transport_stats() const = 0;
  virtual FailoverStats failover_stats() const { return {}; }
  // Changes CommunicatorOptions::wire_dtype for the collectives issued from now on (those in
  // flight keep theirs). Every rank must change it at the same point of the sequence.
  // InvalidArgument for a type that is not a wire type.
  virtual Status SetWireDtype(DataType wire) = 0;

  // Blocking forms.
  Status AllReduce(const void* sendbuf, void* recvbuf, size_t count, DataType dtype, RedOp op);
  Status ReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType dtype, RedOp op);
  Status AllGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType dtype);
};

}  // namespace optcast
