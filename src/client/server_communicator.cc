// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The communicator's own work: joining the servers, issuing collectives, completing them, and
// the calls of the public API. What the servers send is answers.cc; moving bytes, polling,
// timeouts and failures are progress.cc.

#include "client/server_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "client/handshake.h"
#include "client/transport_options.h"
#include "common/log.h"

namespace optcast::client {
namespace {

// Request spans of every communicator in the process share one trace: ids carry the communicator.
std::atomic<uint64_t> g_next_trace_comm{1};

}  // namespace

ServerCommunicator::ServerCommunicator(CommunicatorOptions o, transport::Kind kind)
    : trace_comm_(g_next_trace_comm.fetch_add(1)), opts_(std::move(o)), transport_(kind) {}

ServerCommunicator::~ServerCommunicator() {
  // A process may end without running static destructors (NCCL, _exit): leave a complete trace.
  if (observe::TraceOn()) observe::FlushTrace();
  // Say goodbye so the server retires the job without logging a failure.
  const auto bye = wire::EncodeBye();
  for (auto& s : servers_) {
    if (!s.conn || s.failed) continue;
    s.SayGoodbye(bye, std::chrono::milliseconds(200));
  }
}

Status ServerCommunicator::Connect() {
  const Deadline connect_deadline = Deadline::After(opts_.connect_timeout);
  OPTCAST_RETURN_IF_ERROR(transport::Dialer::Create(TransportOptionsFor(opts_, transport_), &dialer_));
  // Each server's lane 0 first: its welcome says how many lanes it has, each joined on a
  // connection of its own.
  std::vector<std::vector<JoinedServer>> joined(opts_.servers.size());
  size_t links = 0;
  for (size_t i = 0; i < opts_.servers.size(); ++i) {
    JoinedServer first;
    OPTCAST_RETURN_IF_ERROR(JoinServer(*dialer_, opts_.servers[i], 0, opts_, connect_deadline, &first));
    // A server in a tree relays a job through its lane 0 only (the server runs one lane there).
    const uint32_t lanes = first.in_tree ? 1 : first.lanes;
    joined[i].push_back(std::move(first));
    for (uint32_t lane = 1; lane < lanes; ++lane) {
      JoinedServer more;
      OPTCAST_RETURN_IF_ERROR(JoinServer(*dialer_, opts_.servers[i], lane, opts_, connect_deadline, &more));
      joined[i].push_back(std::move(more));
    }
    links += lanes;
  }
  // Failover names dead links in a 64-bit mask (wire::FailoverReport).
  if (links > 64) {
    return InvalidArgument(
        fmt::format("the {} servers have {} lanes in all; a communicator takes at most 64 (start "
                    "servers with fewer --io-threads, or give fewer servers)",
                    opts_.servers.size(), links));
  }
  // Lane-major: lane 0 of every server, then lane 1..., so that a collective striped over fewer
  // links than there are (a small one) still spreads over servers first.
  for (uint32_t lane = 0; servers_.size() < links; ++lane) {
    for (size_t i = 0; i < joined.size(); ++i) {
      if (lane >= joined[i].size()) continue;
      JoinedServer& j = joined[i][lane];
      ServerLink link;
      link.window = SendWindow(opts_.window, SteadyWindowChunks(opts_.nranks, static_cast<int>(links)));
      link.server = i;
      link.lane = lane;
      link.address = lane == 0 ? std::move(j.address) : fmt::format("{} (lane {})", j.address, lane);
      link.max_payload = j.max_payload;
      // The lanes of a server share its port.
      const uint64_t rate = j.link_rate_bits / joined[i].size();
      if (rate != 0 && (link_rate_bits_ == 0 || rate < link_rate_bits_)) link_rate_bits_ = rate;
      in_tree_ = in_tree_ || j.in_tree;
      link.conn = std::move(j.conn);
      link.early = std::move(j.early);
      servers_.push_back(std::move(link));
    }
  }
  uint64_t min_max_payload = UINT64_MAX;
  for (auto& s : servers_) min_max_payload = std::min(min_max_payload, s.max_payload);
  for (size_t i = 0; i < servers_.size(); ++i) {
    servers_[i].index = i;
    servers_[i].conn->user_data = &servers_[i];
    if (observe::TraceOn()) {
      const std::string who = fmt::format("rank {}, server {}", opts_.rank, servers_[i].address);
      servers_[i].trace_track = observe::NewTraceTrack(who + " results");
      servers_[i].trace_track_tx = observe::NewTraceTrack(who + " send");
    }
  }
  // A tree's leaf carries its own members' shards, not the job's, and the rank does not know
  // how many: the rate rules are for flat servers, whose ports carry every rank's.
  const uint64_t rate_bits = in_tree_ ? 0 : link_rate_bits_;
  const ChunkPolicy chunks = transport_ == transport::Kind::kOfi ? kFabricChunks
                             : in_tree_                          ? kTreeStreamChunks
                                                                 : kStreamChunks;
  striping_ = Striping(opts_.nranks, opts_.rank, opts_.failover, opts_.chunk_bytes, min_max_payload, rate_bits, chunks);
  failover_.set_tells_leaving(in_tree_ && transport_ != transport::Kind::kOfi);
  return Status::Ok();
}

Status ServerCommunicator::IAllReduce(const void* sendbuf, void* recvbuf, size_t count, DataType dtype, RedOp op,
                                      Request** request) {
  return Issue(CollType::kAllReduce, sendbuf, recvbuf, count, dtype, op, request);
}

Status ServerCommunicator::IReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType dtype,
                                          RedOp op, Request** request) {
  return Issue(CollType::kReduceScatter, sendbuf, recvbuf, recvcount, dtype, op, request);
}

Status ServerCommunicator::IAllGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType dtype,
                                      Request** request) {
  return Issue(CollType::kAllGather, sendbuf, recvbuf, sendcount, dtype, RedOp::kSum, request);
}

Status ServerCommunicator::Test(Request* req, bool* done) {
  std::lock_guard<std::mutex> lock(mu_);
  *done = false;
  if (req == nullptr) return InvalidArgument("Test called with a null request");
  if (!req->done) Progress(0);
  if (!req->done) return Status::Ok();
  *done = true;
  return Release(req);
}

Status ServerCommunicator::TestFor(Request* req, std::chrono::milliseconds max_wait, bool* done) {
  std::lock_guard<std::mutex> lock(mu_);
  *done = false;
  if (req == nullptr) return InvalidArgument("TestFor called with a null request");
  if (!req->done) Progress(static_cast<int>(std::min<int64_t>(max_wait.count(), 1000)));
  if (!req->done) return Status::Ok();
  *done = true;
  return Release(req);
}

Status ServerCommunicator::Wait(Request* req) {
  std::lock_guard<std::mutex> lock(mu_);
  if (req == nullptr) return InvalidArgument("Wait called with a null request");
  observe::TraceSpan span("wait", "client");
  while (!req->done) Progress(50);
  return Release(req);
}

Status ServerCommunicator::RegisterMemory(const void* data, size_t size, RegisteredMemory** out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (out == nullptr) return InvalidArgument("RegisterMemory called without a place for the registration");
  *out = nullptr;
  auto reg = std::make_unique<RegisteredMemory>();
  OPTCAST_RETURN_IF_ERROR(dialer_->Register(data, size, &reg->registration));
  *out = reg.get();
  registered_.emplace(reg.get(), std::move(reg));
  return Status::Ok();
}

Status ServerCommunicator::DeregisterMemory(RegisteredMemory* registration) {
  std::lock_guard<std::mutex> lock(mu_);
  if (registered_.erase(registration) == 0) {
    return InvalidArgument("DeregisterMemory with a registration that this communicator did not make (or ended)");
  }
  return Status::Ok();
}

FailoverStats ServerCommunicator::failover_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failover_.stats();
}

Status ServerCommunicator::SetWireDtype(DataType wire) {
  std::lock_guard<std::mutex> lock(mu_);
  OPTCAST_RETURN_IF_ERROR(WireNarrowing::CheckWireDtype(wire));
  opts_.wire_dtype = wire;
  return Status::Ok();
}

TransportStats ServerCommunicator::transport_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {dialer_->registrations_made(), dialer_->registrations_open(), dialer_->registration_required()};
}

Status ServerCommunicator::Issue(CollType coll, const void* sendbuf, void* recvbuf, size_t count, DataType dtype,
                                 RedOp op, Request** request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (request == nullptr) return InvalidArgument("request pointer is null");
  *request = nullptr;
  if (!broken_.ok()) return broken_;
  if (!IsValidDataType(static_cast<uint8_t>(dtype))) return InvalidArgument("unknown data type");
  if (!IsValidRedOp(static_cast<uint8_t>(op))) return InvalidArgument("unknown reduction op");
  if (coll != CollType::kAllGather && !IsRedOpDefinedFor(op, dtype)) {
    return InvalidArgument(UndefinedRedOpMessage(op, dtype));
  }
  if (count > 0 && (sendbuf == nullptr || recvbuf == nullptr)) {
    return InvalidArgument(fmt::format("{} of {} elements with a null buffer", CollTypeName(coll), count));
  }
  if (count > (uint64_t{1} << 40)) return InvalidArgument("count above 2^40 elements");
  observe::TraceSpan span("issue", "client");
  auto req = std::make_unique<Request>();
  req->seq = requests_.TakeSeq();
  req->esize = DataTypeSize(dtype);
  req->send = static_cast<const uint8_t*>(sendbuf);
  req->recv = static_cast<uint8_t*>(recvbuf);
  req->desc.coll_seq = req->seq;
  req->desc.coll = coll;
  req->desc.dtype = dtype;
  req->desc.op = op;
  req->desc.count = count;
  req->pending_link.assign(servers_.size(), 0);
  if (count > 0 && WireNarrowing::Applies(opts_.wire_dtype, coll, dtype, op)) NarrowOnTheWire(req.get());
  if (coll == CollType::kAllGather && count > 0) {
    uint8_t* mine = req->recv + static_cast<uint64_t>(opts_.rank) * count * req->esize;
    if (mine != req->send) std::memmove(mine, req->send, count * req->esize);
  }
  failover_.PrepareRequest(req.get());
  Request* raw = req.release();
  // While a failover is being agreed, new collectives wait to be striped over the servers left.
  if (count > 0 && failover_.settled()) Restripe(raw);
  if (span.on()) TraceRequestBegin(raw, span.args());
  if (count == 0) {
    raw->done = true;
    TraceRequestEnd(raw);
  } else {
    if (requests_.empty()) last_progress_ = Clock::now();
    requests_.Add(raw->seq, raw);
    Progress(0);
  }
  *request = raw;
  return Status::Ok();
}

// The request becomes a collective of the wire type over a staging buffer in the caller's layout
// (wire_narrowing.h).
void ServerCommunicator::NarrowOnTheWire(Request* req) {
  const uint64_t count = req->desc.count;
  const bool scatter = req->desc.coll == CollType::kReduceScatter;
  const uint64_t send_elems = scatter ? count * static_cast<uint64_t>(opts_.nranks) : count;
  const uint64_t recv_offset = scatter ? static_cast<uint64_t>(opts_.rank) * count : 0;
  const auto* user_send = reinterpret_cast<const float*>(req->send);
  auto* user_recv = reinterpret_cast<float*>(req->recv);
  const bool in_place = user_recv == user_send + recv_offset;
  CopyBuffer staging = failover_.TakeCopyBuffer(WireNarrowing::StagingBytes(send_elems, count, in_place));
  req->narrowing = std::make_unique<WireNarrowing>(opts_.wire_dtype, user_send, user_recv, send_elems, count, in_place,
                                                   recv_offset, std::move(staging));
  req->desc.dtype = opts_.wire_dtype;
  req->esize = DataTypeSize(opts_.wire_dtype);
  req->send = req->narrowing->send_staging();
  req->recv = req->narrowing->recv_staging();
  // In place, a reduce-scatter keeps its own segment's input before anything is sent
  // (Failover::PrepareRequest): that segment is rounded first.
  if (in_place && scatter) req->narrowing->NarrowForSend(recv_offset, count);
}

void ServerCommunicator::Complete(Request* req, size_t link) {
  if (req->pending_link[link] > 0) --req->pending_link[link];
  if (req->outstanding > 0) --req->outstanding;
  MaybeFinish(req);
}

void ServerCommunicator::MaybeFinish(Request* req) {
  // Not while a failover is moving it (Unplan): it is striped again first.
  if (req->outstanding == 0 && req->stale_rx == 0 && req->planned && !req->done) {
    req->done = true;
    requests_.Remove(*req);
    TraceRequestEnd(req);
    if (req->retained) {
      failover_.GiveBackCopyBuffer(std::move(req->copy));
      delete req;
    } else {
      failover_.Retain(*req);
    }
  }
}

Status ServerCommunicator::Release(Request* req) {
  Status st = req->status;
  failover_.GiveBackCopyBuffer(std::move(req->copy));  // a copy it did not hand to Retain
  failover_.GiveBackCopyBuffer(std::move(req->own_input));
  if (req->narrowing) failover_.GiveBackCopyBuffer(req->narrowing->TakeStaging());
  delete req;
  return st;
}

}  // namespace optcast::client
