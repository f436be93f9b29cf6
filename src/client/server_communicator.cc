// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The client side of the reduction-server protocol, over any transport (transport/kind.h). Progress is driven by the
// caller (Test/Wait), as NCCL's proxy thread and MPI programs expect; no hidden threads.

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "auth/secret.h"
#include "client/copy_buffer.h"
#include "client/handshake.h"
#include "client/plan.h"
#include "client/send_window.h"
#include "client/stall_query.h"
#include "client/transport_options.h"
#include "common/env.h"
#include "common/log.h"
#include "observe/trace.h"
#include "optcast/communicator.h"
#include "transport/dialer.h"
#include "transport/kind.h"
#include "transport/posix/congestion.h"
#include "transport/posix/traffic_class.h"
#include "wire/protocol.h"

namespace optcast {

// What RegisterMemory hands out: the transport's registration, held until DeregisterMemory.
class RegisteredMemory {
 public:
  std::unique_ptr<transport::MemoryRegistration> registration;
};

// One chunk of a collective, for failover: which collective and server carry it now, and whether
// its answer is in. Every rank holds the same pieces for a collective (an all-gather's include
// the other ranks' chunks, which this rank only receives), so that all move them alike.
struct Piece {
  wire::ChunkRef ref;
  uint64_t coll_seq = 0;    // the request's own, or a re-run's (wire::RecoverySeq)
  uint32_t link = 0;        // the server that answers it
  bool awaiting = false;    // a result or an ack is due from `link` for `coll_seq`
  bool due = false;         // counted in the request's outstanding and pending_link[link]
  bool have = false;        // its result is in the receive buffer, or its ack came (a re-run keeps it)
  bool input_lost = false;  // in place, a result cut short by a dead server overwrote its input
};

class Request {
 public:
  uint64_t seq = 0;
  wire::CollDesc desc;
  const uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  size_t esize = 0;
  uint64_t outstanding = 0;            // results + acks still to come
  std::vector<uint64_t> pending_link;  // of which from each server link
  bool done = false;
  Status status;
  uint64_t trace_id = 0;             // nonzero: its request span is open in the trace
  bool retained = false;             // a copy of a completed allreduce kept for a failover's re-run (no caller)
  client::CopyBuffer copy;           // when retained: what a re-run may need from this rank
  client::CopyBuffer own_input;      // an in-place reduce-scatter's own segment, as it was sent
  uint32_t stale_rx = 0;             // results of its old stripes still landing (an all-gather)
  bool planned = false;              // striped over the servers (not while a failover is being agreed)
  std::vector<Piece> pieces;         // allreduce: every chunk, by offset
  std::vector<uint64_t> rerun_seqs;  // collectives that re-run its dead servers' shares
};

namespace client {
namespace {

// A collective's chunks still to be sent to one server.
struct PendingSends {
  Request* req;
  wire::CollDesc desc;
  std::vector<wire::ChunkRef> chunks;
  size_t next = 0;
  std::vector<uint8_t> flags;  // per chunk (wire::kChunkResultCopy...), or empty: none
};

struct ServerLink {
  size_t index = 0;
  bool failed = false;
  std::string address;
  std::unique_ptr<transport::Connection> conn;
  uint64_t max_payload = 0;
  SendWindow window;  // chunks sent whose result/ack has not come back, and how many may be
  std::deque<PendingSends> queue;
  Request* rx_req = nullptr;
  bool rx_credit = false;
  uint64_t rx_bytes = 0;
  // Tracing: this link's track, when the result being received began, when the last send ended.
  int trace_track = 0;     // results arriving
  int trace_track_tx = 0;  // chunks leaving (overlaps the other in time)
  double rx_start_us = 0;
  double tx_free_us = 0;
  // Failover: the piece whose result is arriving, and when the server was last heard from while
  // this rank waited on it.
  size_t rx_piece = SIZE_MAX;
  bool rx_stale = false;      // the result arriving belongs to stripes a failover replaced
  bool rx_into_copy = false;  // it lands in the request's kept copy, and reaches the caller's buffer whole
  Clock::time_point last_heard = Clock::now();
  bool busy = false;
  // The last failover the server applied (it says so in an Epoch message): answers it sent
  // before that may still belong to stripes the failover replaced.
  uint32_t server_epoch = 0;
  std::vector<uint8_t> sink;  // where results nobody needs any more land
  // Aggregation tree: the job dropped this server's tree while its connection still worked; the
  // server was told, and what it sends is thrown away until it closes (LoseServer).
  bool leaving = false;
  // What the server sent right behind its welcome (JoinedServer::early), handled first.
  std::vector<std::vector<uint8_t>> early;
};

// Request spans of every communicator in the process share one trace: ids carry the communicator.
std::atomic<uint64_t> g_next_trace_comm{1};

class ServerCommunicator final : public Communicator, public transport::MessageHandler {
 public:
  ServerCommunicator(CommunicatorOptions o, transport::Kind kind) : opts_(std::move(o)), transport_(kind) {}

  ~ServerCommunicator() override {
    // A process may end without running static destructors (NCCL, _exit): leave a complete trace.
    if (observe::TraceOn()) observe::FlushTrace();
    // Say goodbye so the server retires the job without logging a failure.
    const auto bye = wire::EncodeBye();
    for (auto& s : servers_) {
      if (!s.conn || s.failed) continue;
      s.conn->Send(transport::MakeOutMessage(bye, nullptr, 0));
      Deadline d = Deadline::After(std::chrono::milliseconds(200));
      while (s.conn->HasPendingWrites() && !d.Expired()) {
        if (!s.conn->Flush().ok()) break;
        if (s.conn->HasPendingWrites()) {
          pollfd p{s.conn->fd(), static_cast<short>(s.conn->WritesSignalReadable() ? POLLIN : POLLOUT), 0};
          ::poll(&p, 1, 10);
        }
      }
    }
  }

  Status Connect() {
    const Deadline connect_deadline = Deadline::After(opts_.connect_timeout);
    OPTCAST_RETURN_IF_ERROR(transport::Dialer::Create(TransportOptionsFor(opts_, transport_), &dialer_));
    for (const std::string& addr : opts_.servers) {
      JoinedServer joined;
      OPTCAST_RETURN_IF_ERROR(JoinServer(*dialer_, addr, opts_, connect_deadline, &joined));
      ServerLink link;
      link.window = SendWindow(opts_.window, SteadyWindowChunks(opts_.nranks, static_cast<int>(opts_.servers.size())));
      link.address = std::move(joined.address);
      link.max_payload = joined.max_payload;
      if (joined.link_rate_bits != 0 && (link_rate_bits_ == 0 || joined.link_rate_bits < link_rate_bits_)) {
        link_rate_bits_ = joined.link_rate_bits;
      }
      in_tree_ = in_tree_ || joined.in_tree;
      link.conn = std::move(joined.conn);
      link.early = std::move(joined.early);
      servers_.push_back(std::move(link));
    }
    min_max_payload_ = UINT64_MAX;
    for (auto& s : servers_) min_max_payload_ = std::min(min_max_payload_, s.max_payload);
    for (size_t i = 0; i < servers_.size(); ++i) {
      servers_[i].index = i;
      servers_[i].conn->user_data = &servers_[i];
      if (observe::TraceOn()) {
        const std::string who = fmt::format("rank {}, server {}", opts_.rank, servers_[i].address);
        servers_[i].trace_track = observe::NewTraceTrack(who + " results");
        servers_[i].trace_track_tx = observe::NewTraceTrack(who + " send");
      }
    }
    return Status::Ok();
  }

  int rank() const override { return opts_.rank; }
  int nranks() const override { return opts_.nranks; }

  Status IAllReduce(const void* sendbuf, void* recvbuf, size_t count, DataType dtype, RedOp op,
                    Request** request) override {
    return Issue(CollType::kAllReduce, sendbuf, recvbuf, count, dtype, op, request);
  }
  Status IReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType dtype, RedOp op,
                        Request** request) override {
    return Issue(CollType::kReduceScatter, sendbuf, recvbuf, recvcount, dtype, op, request);
  }
  Status IAllGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType dtype, Request** request) override {
    return Issue(CollType::kAllGather, sendbuf, recvbuf, sendcount, dtype, RedOp::kSum, request);
  }

  Status Test(Request* req, bool* done) override {
    std::lock_guard<std::mutex> lock(mu_);
    *done = false;
    if (req == nullptr) return InvalidArgument("Test called with a null request");
    if (!req->done) Progress(0);
    if (!req->done) return Status::Ok();
    *done = true;
    return Release(req);
  }

  Status TestFor(Request* req, std::chrono::milliseconds max_wait, bool* done) override {
    std::lock_guard<std::mutex> lock(mu_);
    *done = false;
    if (req == nullptr) return InvalidArgument("TestFor called with a null request");
    if (!req->done) Progress(static_cast<int>(std::min<int64_t>(max_wait.count(), 1000)));
    if (!req->done) return Status::Ok();
    *done = true;
    return Release(req);
  }

  Status Wait(Request* req) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (req == nullptr) return InvalidArgument("Wait called with a null request");
    observe::TraceSpan span("wait", "client");
    while (!req->done) Progress(50);
    return Release(req);
  }

  Status RegisterMemory(const void* data, size_t size, RegisteredMemory** out) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (out == nullptr) return InvalidArgument("RegisterMemory called without a place for the registration");
    *out = nullptr;
    auto reg = std::make_unique<RegisteredMemory>();
    OPTCAST_RETURN_IF_ERROR(dialer_->Register(data, size, &reg->registration));
    *out = reg.get();
    registered_.emplace(reg.get(), std::move(reg));
    return Status::Ok();
  }

  Status DeregisterMemory(RegisteredMemory* registration) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (registered_.erase(registration) == 0) {
      return InvalidArgument("DeregisterMemory with a registration that this communicator did not make (or ended)");
    }
    return Status::Ok();
  }

  FailoverStats failover_stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return {epoch_, static_cast<uint32_t>(ServersLeft(agreed_mask_).size())};
  }

  TransportStats transport_stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return {dialer_->registrations_made(), dialer_->registrations_open(), dialer_->registration_required()};
  }

  // ---- MessageHandler ----

  Status OnMessageMeta(transport::Connection& c, std::span<const uint8_t> meta, uint64_t payload_len,
                       uint8_t** payload_dst) override {
    auto* link = static_cast<ServerLink*>(c.user_data);
    wire::Message msg;
    OPTCAST_RETURN_IF_ERROR(wire::Decode(meta, &msg));
    link->last_heard = Clock::now();
    if (msg.type == wire::MsgType::kHeartbeat) return Status::Ok();     // alive, but no progress
    if (msg.type == wire::MsgType::kStallReport && payload_len == 0) {  // an answer, not progress
      stall_.OnReport(link->index, msg.stall_report.coll_seq, std::move(msg.stall_report.waiting_for));
      return Status::Ok();
    }
    last_progress_ = link->last_heard;
    if (msg.type == wire::MsgType::kError) {
      return Status(msg.error.code, "server " + link->address + ": " + msg.error.text);
    }
    if (msg.type == wire::MsgType::kNotice || msg.type == wire::MsgType::kAgreed) {
      if (!opts_.failover || payload_len != 0) {
        return ProtocolError(
            fmt::format("server {} sent a failover message to a rank with failover off", link->address));
      }
      const uint64_t mask = msg.type == wire::MsgType::kNotice ? msg.notice_mask : msg.agreed.dead_mask;
      if ((mask >> link->index) & 1 || (servers_.size() < 64 && (mask >> servers_.size()) != 0)) {
        return ProtocolError(fmt::format("server {} (server {} of {}) announced dead servers {:#x}", link->address,
                                         link->index, servers_.size(), mask));
      }
      if (msg.type == wire::MsgType::kNotice) {
        notice_mask_ |= mask;
      } else {
        agreed_.push_back(std::move(msg.agreed));
      }
      return Status::Ok();
    }
    if (msg.type == wire::MsgType::kEpoch) {
      if (!opts_.failover || payload_len != 0) {
        return ProtocolError(fmt::format("server {} sent a failover epoch to a rank with failover off", link->address));
      }
      link->server_epoch = std::max(link->server_epoch, msg.epoch.epoch);
      ForgetRestriped();
      return Status::Ok();
    }
    if (msg.type != wire::MsgType::kResult && msg.type != wire::MsgType::kAck) {
      return ProtocolError(
          fmt::format("server {} sent unexpected message type {}", link->address, static_cast<int>(msg.type)));
    }
    if (IsStaleAnswer(*link, msg.done.coll_seq)) {
      // An all-gather chunk of stripes a failover replaced: the same bytes come again.
      Log().debug("rank {}: server {} answered all-gather #{} on stripes a failover replaced; discarded", opts_.rank,
                  link->address, msg.done.coll_seq);
      link->sink.resize(std::max<size_t>(payload_len, 1));
      *payload_dst = link->sink.data();
      return Status::Ok();
    }
    auto it = active_.find(msg.done.coll_seq);
    if (it == active_.end()) {
      return ProtocolError(
          fmt::format("server {} answered collective #{}, which is not in flight", link->address, msg.done.coll_seq));
    }
    Request* req = it->second;
    const wire::ChunkRef& ref = msg.done.ref;
    if (msg.type == wire::MsgType::kAck) {
      if (payload_len != 0) return ProtocolError("ack with a payload");
      if (!req->pieces.empty()) {
        const size_t i = FindPiece(*req, ref.offset);
        if (i == SIZE_MAX || req->pieces[i].ref.count != ref.count || req->pieces[i].coll_seq != msg.done.coll_seq ||
            req->pieces[i].link != link->index || !req->pieces[i].awaiting) {
          return ProtocolError(fmt::format("server {} acked a chunk [{}, +{}) of collective #{} that it does not owe",
                                           link->address, ref.offset, ref.count, req->seq));
        }
        req->pieces[i].awaiting = false;
        req->pieces[i].due = false;
        req->pieces[i].have = true;
      }
      ReturnCredit(link, ref.count * req->esize);
      Complete(req, link->index);
      return Status::Ok();
    }
    const uint64_t count = req->desc.count;
    const uint64_t me = static_cast<uint64_t>(opts_.rank);
    uint64_t dst_elem = 0;
    bool ok = false;
    switch (req->desc.coll) {
      case CollType::kAllReduce:
        ok = ref.segment == 0 && ref.offset <= count && ref.count <= count - ref.offset;
        dst_elem = ref.offset;
        break;
      case CollType::kReduceScatter:
        ok = ref.segment == me && ref.offset >= me * count && ref.offset - me * count <= count &&
             ref.count <= count - (ref.offset - me * count);
        dst_elem = ref.offset - me * count;
        break;
      case CollType::kAllGather:
        ok = ref.segment != me && ref.segment < static_cast<uint64_t>(opts_.nranks) &&
             ref.offset >= ref.segment * count && ref.offset - ref.segment * count <= count &&
             ref.count <= count - (ref.offset - ref.segment * count);
        dst_elem = ref.offset;
        break;
    }
    if (!ok || payload_len != static_cast<uint64_t>(ref.count) * req->esize) {
      return ProtocolError(fmt::format("server {} sent a result [{}, +{}) that does not fit collective #{}",
                                       link->address, ref.offset, ref.count, req->seq));
    }
    link->rx_piece = SIZE_MAX;
    if (!req->pieces.empty()) {
      const size_t i = FindPiece(*req, ref.offset);
      if (i == SIZE_MAX || req->pieces[i].ref.count != ref.count || req->pieces[i].coll_seq != msg.done.coll_seq ||
          req->pieces[i].link != link->index || !req->pieces[i].awaiting) {
        return ProtocolError(fmt::format("server {} sent a result [{}, +{}) of collective #{} that it does not owe",
                                         link->address, ref.offset, ref.count, req->seq));
      }
      req->pieces[i].awaiting = false;
      link->rx_piece = i;
    }
    link->rx_into_copy = false;
    if (req->retained) {
      // A kept copy re-sends what another rank lacks; what comes back is already handed back.
      link->sink.resize(std::max<size_t>(payload_len, 1));
      *payload_dst = link->sink.data();
    } else if (req->desc.coll == CollType::kAllReduce && !req->copy.empty() && req->send == req->recv) {
      // In place, a result written straight into the caller's buffer destroys this rank's input
      // as it lands, and a server that dies halfway leaves neither. It lands in the copy kept for
      // failover instead and is copied over whole (the one copy either way), so a re-run still
      // has the input.
      *payload_dst = req->copy.data() + dst_elem * req->esize;
      link->rx_into_copy = true;
    } else {
      *payload_dst = req->recv + dst_elem * req->esize;
    }
    if (link->trace_track != 0) link->rx_start_us = observe::TraceNowUs();
    link->rx_req = req;
    link->rx_credit = req->desc.coll != CollType::kAllGather;
    link->rx_bytes = payload_len;
    return Status::Ok();
  }

  Status OnMessageComplete(transport::Connection& c) override {
    auto* link = static_cast<ServerLink*>(c.user_data);
    if (link->rx_req == nullptr) return Status::Ok();
    if (link->rx_credit) ReturnCredit(link, link->rx_bytes);
    Request* req = link->rx_req;
    link->rx_req = nullptr;
    if (link->rx_stale) {  // a result of replaced stripes (Unplan): it landed, and counts for nothing
      link->rx_stale = false;
      link->rx_piece = SIZE_MAX;
      --req->stale_rx;
      MaybeFinish(req);
      return Status::Ok();
    }
    if (link->rx_piece != SIZE_MAX) {
      const Piece& p = req->pieces[link->rx_piece];
      req->pieces[link->rx_piece].have = true;
      req->pieces[link->rx_piece].due = false;
      // The copy a completed allreduce keeps (Retain) is taken chunk by chunk, while each is hot.
      if (!req->copy.empty() && !req->retained) {
        uint8_t* const kept = req->copy.data() + p.ref.offset * req->esize;
        uint8_t* const caller = req->recv + p.ref.offset * req->esize;
        const uint64_t bytes = p.ref.count * req->esize;
        link->rx_into_copy ? std::memcpy(caller, kept, bytes) : std::memcpy(kept, caller, bytes);
      }
    }
    link->rx_piece = SIZE_MAX;
    link->rx_into_copy = false;
    last_progress_ = Clock::now();
    if (link->trace_track != 0) {
      observe::TraceArgs a;
      a.Add("seq", req->seq).Add("bytes", link->rx_bytes);
      observe::TraceComplete("result", "client", link->rx_start_us, observe::TraceNowUs(), a, link->trace_track);
    }
    Complete(req, link->index);
    return Status::Ok();
  }

 private:
  Status Issue(CollType coll, const void* sendbuf, void* recvbuf, size_t count, DataType dtype, RedOp op,
               Request** request) {
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
    req->seq = next_seq_++;
    req->esize = DataTypeSize(dtype);
    req->send = static_cast<const uint8_t*>(sendbuf);
    req->recv = static_cast<uint8_t*>(recvbuf);
    req->desc.coll_seq = req->seq;
    req->desc.coll = coll;
    req->desc.dtype = dtype;
    req->desc.op = op;
    req->desc.count = count;
    req->pending_link.assign(servers_.size(), 0);
    if (coll == CollType::kAllGather && count > 0) {
      uint8_t* mine = req->recv + static_cast<uint64_t>(opts_.rank) * count * req->esize;
      if (mine != req->send) std::memmove(mine, req->send, count * req->esize);
    }
    if (coll == CollType::kReduceScatter && count > 0 && opts_.failover && servers_.size() >= 2) {
      // In place, this rank's results overwrite its own segment's input, which a re-run after a
      // failover may need again (a result cut short by a dead server): it is kept.
      const uint8_t* own = req->send + static_cast<uint64_t>(opts_.rank) * count * req->esize;
      const uint64_t bytes = count * req->esize;
      if (own < req->recv + bytes && req->recv < own + bytes) {
        req->own_input = copy_pool_.Take(bytes);
        std::memcpy(req->own_input.data(), own, bytes);
      }
    }
    if (coll == CollType::kAllReduce && count > 0 && opts_.failover && servers_.size() >= 2 &&
        count * req->esize <= kRetainBytes) {
      req->copy = TakeCopyBuffer(count * req->esize);
    }
    Request* raw = req.release();
    // While a failover is being agreed, new collectives wait to be striped over the servers left.
    if (count > 0 && dead_mask_ == agreed_mask_) Plan(raw);
    if (span.on()) TraceRequestBegin(raw, span.args());
    if (count == 0) {
      raw->done = true;
      TraceRequestEnd(raw);
    } else {
      if (active_.empty()) last_progress_ = Clock::now();
      active_.emplace(raw->seq, raw);
      Progress(0);
    }
    *request = raw;
    return Status::Ok();
  }

  // Stripes a collective over the servers of the job's epoch and queues its chunks.
  void Plan(Request* req) {
    const std::vector<uint32_t> alive = ServersLeft(agreed_mask_);
    const int nservers = static_cast<int>(alive.size());
    const CollType coll = req->desc.coll;
    const DataType dtype = req->desc.dtype;
    const uint64_t count = req->desc.count;
    // A tree's leaf carries its own members' shards, not the job's, and the rank does not know
    // how many: the rate rules are for flat servers, whose ports carry every rank's.
    const uint64_t rate_bits = in_tree_ ? 0 : link_rate_bits_;
    const int used = ServersToUse(dtype, count, nservers, opts_.nranks, rate_bits);
    // Small collectives use fewer servers; rotating the first one spreads them over all.
    const int first = static_cast<int>(req->seq % static_cast<uint64_t>(nservers));
    const ChunkPolicy policy = ForLinkRate(transport_ == transport::Kind::kOfi ? kFabricChunks
                                           : in_tree_                          ? kTreeStreamChunks
                                                                               : kStreamChunks,
                                           opts_.nranks, rate_bits);
    const uint64_t chunk_elems = ChooseChunkElems(dtype, count, used, opts_.chunk_bytes, min_max_payload_, policy);
    req->desc.epoch = epoch_;
    for (int j = 0; j < used; ++j) {
      ServerPlan plan = PlanForServer(coll, count, opts_.nranks, opts_.rank, used, j, chunk_elems);
      if (plan.server_elems == 0) continue;
      PendingSends ps{req, req->desc, std::move(plan.sends), 0, {}};
      ps.desc.server_elems = plan.server_elems;
      const uint32_t link = alive[static_cast<size_t>((first + j) % nservers)];
      if (opts_.failover) AddPieces(req, ps.chunks, link);
      req->outstanding += plan.expected_replies;
      req->pending_link[link] += plan.expected_replies;
      // A server this rank saw die, which the job has not agreed on yet: its share waits for
      // the failover that moves it.
      if (!servers_[link].failed) servers_[link].queue.push_back(std::move(ps));
    }
    std::sort(req->pieces.begin(), req->pieces.end(),
              [](const Piece& a, const Piece& b) { return a.ref.offset < b.ref.offset; });
    req->planned = true;
  }

  // The pieces of one server's share: the chunks this rank sends, and for an all-gather the same
  // chunks of every other rank's segment, which it receives.
  void AddPieces(Request* req, const std::vector<wire::ChunkRef>& sends, uint32_t link) {
    if (req->desc.coll != CollType::kAllGather) {
      for (const wire::ChunkRef& ref : sends) req->pieces.push_back(Piece{ref, req->seq, link, true, true});
      return;
    }
    const uint64_t count = req->desc.count;
    const uint64_t me = static_cast<uint64_t>(opts_.rank);
    for (uint32_t seg = 0; seg < static_cast<uint32_t>(opts_.nranks); ++seg) {
      for (wire::ChunkRef ref : sends) {
        ref.offset = ref.offset - me * count + seg * count;
        ref.segment = seg;
        req->pieces.push_back(Piece{ref, req->seq, link, true, true});
      }
    }
  }

  // Whether this rank sends the chunk `ref` (an all-gather's other segments it only receives).
  bool Sends(const Request& req, const wire::ChunkRef& ref) const {
    return req.desc.coll != CollType::kAllGather || ref.segment == static_cast<uint32_t>(opts_.rank);
  }

  // Where the bytes of chunk `ref` that this rank sends are: its input, or with `flags` holding
  // kChunkResultCopy, the result it received.
  const uint8_t* ChunkSource(const Request& req, const wire::ChunkRef& ref, uint8_t flags) const {
    const uint64_t own_begin = static_cast<uint64_t>(opts_.rank) * req.desc.count;
    switch (req.desc.coll) {
      case CollType::kAllReduce:
        return ((flags & wire::kChunkResultCopy) != 0 ? req.recv : req.send) + ref.offset * req.esize;
      case CollType::kReduceScatter:
        if ((flags & wire::kChunkResultCopy) != 0) return req.recv + (ref.offset - own_begin) * req.esize;
        if (ref.segment == static_cast<uint32_t>(opts_.rank) && !req.own_input.empty()) {
          return req.own_input.data() + (ref.offset - own_begin) * req.esize;
        }
        return req.send + ref.offset * req.esize;
      case CollType::kAllGather: return req.send + (ref.offset - own_begin) * req.esize;
    }
    return req.send;
  }

  static size_t FindPiece(const Request& req, uint64_t offset) {
    auto it = std::lower_bound(req.pieces.begin(), req.pieces.end(), offset,
                               [](const Piece& p, uint64_t off) { return p.ref.offset < off; });
    if (it == req.pieces.end() || it->ref.offset != offset) return SIZE_MAX;
    return static_cast<size_t>(it - req.pieces.begin());
  }

  std::vector<uint32_t> ServersLeft(uint64_t dead) const {
    std::vector<uint32_t> alive;
    for (uint32_t i = 0; i < servers_.size(); ++i) {
      if (((dead >> i) & 1) == 0) alive.push_back(i);
    }
    return alive;
  }

  void Complete(Request* req, size_t link) {
    if (req->pending_link[link] > 0) --req->pending_link[link];
    if (req->outstanding > 0) --req->outstanding;
    MaybeFinish(req);
  }

  void MaybeFinish(Request* req) {
    // Not while a failover is moving it (Unplan): it is striped again first.
    if (req->outstanding == 0 && req->stale_rx == 0 && req->planned && !req->done) {
      req->done = true;
      active_.erase(req->seq);
      for (uint64_t rerun : req->rerun_seqs) active_.erase(rerun);
      TraceRequestEnd(req);
      if (req->retained) {
        GiveBackCopyBuffer(std::move(req->copy));
        delete req;
      } else {
        Retain(*req);
      }
    }
  }

  Status Release(Request* req) {
    Status st = req->status;
    GiveBackCopyBuffer(std::move(req->copy));  // a copy it did not hand to Retain
    GiveBackCopyBuffer(std::move(req->own_input));
    delete req;
    return st;
  }

  // Hands each link's messages that came behind its welcome to the handler, as if read now.
  void ReadEarlyMessages() {
    for (ServerLink& s : servers_) {
      if (s.early.empty()) continue;
      std::vector<std::vector<uint8_t>> early;
      early.swap(s.early);
      for (const std::vector<uint8_t>& meta : early) {
        if (s.failed) break;
        uint8_t* unused = nullptr;
        Status st = OnMessageMeta(*s.conn, meta, 0, &unused);
        if (st.ok()) st = OnMessageComplete(*s.conn);
        if (!st.ok()) FailLink(s, st);
      }
    }
  }

  static void ReturnCredit(ServerLink* link, uint64_t bytes) { link->window.OnReturned(bytes); }

  // The traffic class of a collective of `bytes` per rank: latency-bound ones get the latency
  // class (transport/traffic_class.h), the rest bulk.
  transport::TrafficClass TrafficClassOf(uint64_t bytes) const {
    return bytes <= opts_.latency_bytes ? transport::TrafficClass::kLatency : transport::TrafficClass::kBulk;
  }

  // Sends chunks up to the window on every link, one chunk per link per round, so that every
  // server gets chunk k before any gets chunk k+1, and every rank goes round the links in the
  // same order, so that a server has chunk k from every rank soon after the first one. Each
  // chunk is handed to its connection at once: the host sends the links' bytes in the order they
  // were written, and a link written in one piece goes out whole before the next link's first
  // chunk, so that every server waits for the last link's turn (docs/benchmarks.md).
  void FillWindows() {
    const size_t n = servers_.size();
    for (bool sent = true; sent;) {
      sent = false;
      for (size_t i = 0; i < n; ++i) {
        ServerLink& s = servers_[i];
        if (s.failed) continue;
        while (!s.queue.empty() && s.queue.front().next == s.queue.front().chunks.size()) s.queue.pop_front();
        if (s.queue.empty()) continue;
        PendingSends& ps = s.queue.front();
        const wire::ChunkRef& ref = ps.chunks[ps.next];
        const uint64_t bytes = static_cast<uint64_t>(ref.count) * ps.req->esize;
        if (!s.window.HasRoom(bytes)) continue;
        const uint8_t flags = ps.flags.empty() ? 0 : ps.flags[ps.next];
        ++ps.next;
        const uint8_t* src = ChunkSource(*ps.req, ref, flags);
        wire::Chunk chunk{ps.desc, ref, flags};
        transport::OutMessage msg;
        wire::EncodeChunkTo(chunk, transport::StartOutMessage(&msg, wire::kChunkMetaBytes, src, bytes));
        msg.tag = ps.req->seq;
        msg.traffic_class = TrafficClassOf(ps.desc.count * ps.req->esize);
        if (s.trace_track != 0) TraceSend(&s, &msg);
        s.window.OnSent(bytes);
        if (ps.next == ps.chunks.size()) s.queue.pop_front();
        s.conn->Send(std::move(msg));
        FlushLink(s);  // may fail the link, and with it requests queued on other links
        sent = true;
      }
    }
  }

  void Progress(int timeout_ms) {
    ReadEarlyMessages();
    FillWindows();
    FlushAll();
    if (active_.empty()) return;
    pollfd fds[64];
    const size_t n = std::min<size_t>(servers_.size(), 64);
    for (size_t i = 0; i < n; ++i) {
      // A failed link is polled for nothing (fd -1), so it cannot wake us.
      const ServerLink& s = servers_[i];
      fds[i] = {
          s.failed ? -1 : s.conn->fd(),
          static_cast<short>(
              s.failed ? 0 : POLLIN | (s.conn->HasPendingWrites() && !s.conn->WritesSignalReadable() ? POLLOUT : 0)),
          0};
    }
    int rc = ::poll(fds, n, timeout_ms);
    if (rc > 0) {
      for (size_t i = 0; i < n; ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
          if (servers_[i].failed) continue;
          Status st = servers_[i].conn->ReadAvailable(*this);
          if (!st.ok()) {
            if (st.code() == Code::kUnavailable) {
              st = UnavailableError("lost the connection to server " + servers_[i].address + ": " + st.message() +
                                    "; the server may have died or dropped this job");
            }
            FailLink(servers_[i], st);
          }
        }
      }
      FillWindows();
      FlushAll();
    }
    if (opts_.failover && broken_.ok()) {
      AdvanceFailover();
      FillWindows();
      FlushAll();
    }
    // Once the communicator has failed, what is still in flight may yet finish on servers that
    // had every rank's input (FailLink), but not after a pause: it then fails with the reason
    // already known (a rank that gave up names the server it lost), not with a timeout's guess.
    const auto limit = broken_.ok() ? opts_.timeout : std::min(opts_.timeout, kBrokenGrace);
    if (active_.empty() || Clock::now() - last_progress_ <= limit) {
      stall_.Reset();  // progress resumed: a later timeout asks afresh
      return;
    }
    if (!broken_.ok()) {
      const Status why = broken_;
      Break(why);
      return;
    }
    const Request* oldest = active_.begin()->second;
    for (auto& [seq, r] : active_) {
      if (seq < oldest->seq) oldest = r;
    }
    if (!stall_.asked() || stall_.coll_seq() != oldest->seq) {
      const uint64_t oldest_seq = oldest->seq;
      AskWhatStalls(*oldest);
      // Asking flushes, and a failed flush reads what the server sent last, which may finish (and
      // free) requests, this one among them, or break the communicator: look it up again.
      if (!broken_.ok()) return;
      const auto again = active_.find(oldest_seq);
      if (again == active_.end()) return;
      oldest = again->second;
    }
    if (!stall_.Done(Clock::now())) return;
    Break(TimeoutError(fmt::format(
        "collective #{} ({} of {} {}) made no progress for {} ms; {}{} (set "
        "OPTCAST_TIMEOUT_MS to wait longer)",
        oldest->seq, CollTypeName(oldest->desc.coll), oldest->desc.count, DataTypeName(oldest->desc.dtype),
        opts_.timeout.count(), stall_.Describe(std::min(opts_.timeout, kStallAnswerWait)), FailoverPending())));
    stall_.Reset();
  }

  // For a timeout: the servers this rank lost that the job has not agreed a failover on yet (the
  // other ranks have not all reported them), or nothing.
  std::string FailoverPending() const {
    std::string lost;
    for (const auto& s : servers_) {
      if (((dead_mask_ & ~agreed_mask_) >> s.index) & 1) lost += (lost.empty() ? "" : ", ") + s.address;
    }
    if (lost.empty()) return "";
    return fmt::format("; this rank lost server(s) {} and the job had not agreed on a failover yet", lost);
  }

  // The client's timeout fired: asks every live server that owes `req` a reply which ranks it is
  // waiting for (stall_query.h); Progress reads the answers like any other message. After a
  // failover a server may owe only a re-run of the dead servers' share: it is asked about that.
  void AskWhatStalls(const Request& req) {
    std::vector<StallQuery::Server> asked;
    for (auto& s : servers_) {
      if (s.failed || req.pending_link[s.index] == 0) continue;
      uint64_t seq = UINT64_MAX;
      for (const Piece& p : req.pieces) {
        if (p.awaiting && p.link == s.index) seq = std::min(seq, p.coll_seq);
      }
      if (seq == UINT64_MAX) seq = req.seq;
      s.conn->Send(transport::MakeOutMessage(wire::EncodeStallQuery(seq), nullptr, 0));
      asked.push_back({s.index, s.address, seq});
    }
    stall_.Begin(req.seq, std::move(asked), Clock::now() + std::min(opts_.timeout, kStallAnswerWait));
    FlushAll();
  }

  void FlushAll() {
    for (auto& s : servers_) FlushLink(s);
  }

  void FlushLink(ServerLink& s) {
    if (s.failed || !s.conn->HasPendingWrites()) return;
    Status st = s.conn->Flush();
    if (!st.ok()) {
      // The server may have closed after sending an error: that error is the better news.
      Status why = UnavailableError("lost the connection to server " + s.address + ": " + st.message());
      Status read = s.conn->ReadAvailable(*this);
      if (!read.ok() && read.code() != Code::kUnavailable) why = read;
      FailLink(s, why);
    }
  }

  // One server link is gone: collectives that still wait on it fail with `why`; collectives that
  // only need other servers may still finish; no new collective can start.
  void FailLink(ServerLink& link, const Status& why) {
    if (link.failed) return;
    if (opts_.failover && broken_.ok() && why.code() == Code::kUnavailable) {
      LoseServer(link, why);
      return;
    }
    link.failed = true;
    link.queue.clear();
    link.rx_req = nullptr;
    link.rx_stale = false;
    link.rx_into_copy = false;
    if (link.conn) link.conn->DropPendingWrites();
    if (dead_mask_ != agreed_mask_) {
      // A lost server's share waits for a failover that can no longer be agreed (this error ends
      // failover): nothing in flight can finish.
      Break(why);
      return;
    }
    if (broken_.ok()) {
      broken_ = why;
      Log().error("rank {}: {}", opts_.rank, why.message());
    }
    std::vector<Request*> failed;
    for (auto it = active_.begin(); it != active_.end();) {
      Request* req = it->second;
      if (req->pending_link[link.index] > 0) {
        if (it->first == req->seq) failed.push_back(req);
        it = active_.erase(it);
      } else {
        ++it;
      }
    }
    Abandon(failed, why);
    TellServersWhy();
  }

  // This rank gives up because it lost a server: the servers left fail the job with its reason,
  // so that every other rank's error names the dead server and not only this rank's departure
  // (which another rank may hear of first). Once. (A timeout is not sent: the other ranks wait
  // on the same collective, and their own timeouts name what it waits for.)
  void TellServersWhy() {
    if (told_servers_ || broken_.code() != Code::kUnavailable) return;
    told_servers_ = true;
    const auto text = wire::EncodeError({broken_.code(), 0, broken_.message()});
    for (auto& s : servers_) {
      if (s.failed || !s.conn) continue;
      s.conn->Send(transport::MakeOutMessage(text, nullptr, 0));
      // Out now, while the process may still be about to exit; a failure here is found by the
      // next read of this link.
      (void)s.conn->Flush();
    }
  }

  // Fails these requests. Their buffers go back to the caller, so nothing may read them later:
  // unsent chunks are forgotten and a chunk half written on a live link is finished from a copy.
  void Abandon(const std::vector<Request*>& reqs, const Status& why) {
    if (reqs.empty()) return;
    std::unordered_map<uint64_t, bool> seqs;
    for (Request* r : reqs) seqs[r->seq] = true;
    for (auto& s : servers_) {
      for (auto it = s.queue.begin(); it != s.queue.end();) {
        it = seqs.count(it->req->seq) ? s.queue.erase(it) : it + 1;
      }
      if (s.failed) continue;
      if (s.rx_req != nullptr && seqs.count(s.rx_req->seq) != 0) {
        // A result is still landing in a buffer that goes back to the caller: the connection
        // goes, so that nothing writes there any more, and with it what else waited on it.
        s.conn.reset();
        FailLink(s, why);
        continue;
      }
      s.conn->DetachPayloads([&](uint64_t tag) { return seqs.count(tag) > 0; });
    }
    for (Request* r : reqs) {
      r->status = why;
      r->done = true;
      TraceRequestEnd(r);
    }
  }

  // The communicator cannot continue: every collective in flight fails with `why`, and so will
  // every later call.
  void Break(const Status& why) {
    if (broken_.ok()) {
      broken_ = why;
      Log().error("rank {}: {}", opts_.rank, why.message());
    }
    std::vector<Request*> failed;
    for (auto& [seq, req] : active_) {
      if (seq == req->seq) failed.push_back(req);  // not again for its re-runs
    }
    active_.clear();
    Abandon(failed, why);
    TellServersWhy();
  }

  // ---- failover (docs/reliability.md) ----
  //
  // A rank that sees a server die stops striping new collectives and reports what it saw to the
  // servers left: the dead set, its first collective not striped, and the collectives that lack
  // results from a dead server. Once every rank reported the same dead set, the first server left
  // announces to all: collectives from the lowest unstriped one on are striped again over the
  // servers left (epoch + 1), and the dead servers' shares of the earlier ones that any rank
  // lacks are re-run there, each rank sending its input or, for a chunk whose result it already
  // holds, that result. Every rank applies the same announcements in the same order.

  // Another rank may still lack a result this rank already handed back, when a server dies with
  // it in one rank's socket and not another's. The last few completed collectives keep what a
  // re-run needs from this rank (up to kRetainBytes each): an allreduce its result; a
  // reduce-scatter its input, with its own segment's result in place of that segment's input
  // (a re-run recomputes another rank's segment from every rank's input); an all-gather its own
  // input. An allreduce's copy is taken as its results arrive (OnMessageComplete), and the copies'
  // buffers are used again: a fresh one costs a page fault per page, which cost far more than
  // the copy itself (docs/reliability.md).
  static constexpr uint64_t kRetainBytes = 16u << 20;
  // How long collectives still in flight on a failed communicator may go without progress.
  static constexpr std::chrono::milliseconds kBrokenGrace{3000};
  static constexpr size_t kRetainCount = 4;
  static constexpr size_t kSpareCopies = 4;
  void Retain(Request& req) {
    if (!opts_.failover || req.pieces.empty() || !req.status.ok() || servers_.size() < 2) return;
    const uint64_t seg_bytes = req.desc.count * req.esize;
    const uint64_t own = static_cast<uint64_t>(opts_.rank) * seg_bytes;
    const uint64_t bytes =
        req.desc.coll == CollType::kReduceScatter ? seg_bytes * static_cast<uint64_t>(opts_.nranks) : seg_bytes;
    if (bytes > kRetainBytes) return;
    auto r = std::make_unique<Request>();
    r->seq = req.seq;
    r->desc = req.desc;
    r->esize = req.esize;
    switch (req.desc.coll) {
      case CollType::kAllReduce:
        if (!req.copy.empty()) {
          r->copy = std::move(req.copy);
        } else {
          r->copy = TakeCopyBuffer(bytes);
          std::memcpy(r->copy.data(), req.recv, bytes);
        }
        break;
      case CollType::kReduceScatter:
        r->copy = TakeCopyBuffer(bytes);
        std::memcpy(r->copy.data(), req.send, own);
        std::memcpy(r->copy.data() + own, req.recv, seg_bytes);
        std::memcpy(r->copy.data() + own + seg_bytes, req.send + own + seg_bytes, bytes - own - seg_bytes);
        break;
      case CollType::kAllGather:
        r->copy = TakeCopyBuffer(bytes);
        std::memcpy(r->copy.data(), req.recv + own, seg_bytes);
        break;
    }
    r->pieces = req.pieces;
    r->pending_link.assign(servers_.size(), 0);
    r->planned = true;
    r->retained = true;
    retained_.push_back(std::move(r));
    if (retained_.size() > kRetainCount) {
      GiveBackCopyBuffer(std::move(retained_.front()->copy));
      retained_.pop_front();
    }
  }

  // A buffer of at least `bytes` (it may be larger: only its first `bytes` are used).
  CopyBuffer TakeCopyBuffer(uint64_t bytes) { return copy_pool_.Take(bytes); }
  void GiveBackCopyBuffer(CopyBuffer&& b) { copy_pool_.GiveBack(std::move(b)); }

  // A retained copy takes part in a re-run as a request of its own, sending the results it holds.
  Request* Revive(uint64_t seq) {
    for (auto it = retained_.begin(); it != retained_.end(); ++it) {
      if ((*it)->seq != seq) continue;
      Request* r = it->release();
      retained_.erase(it);
      r->send = r->copy.data();
      r->recv = r->copy.data();
      if (r->desc.coll == CollType::kReduceScatter) {
        r->recv += static_cast<uint64_t>(opts_.rank) * r->desc.count * r->esize;
      }
      Log().info("rank {}: {} #{} had completed here; it takes part in its re-run from the copy kept", opts_.rank,
                 CollTypeName(r->desc.coll), seq);
      active_.emplace(r->seq, r);
      return r;
    }
    return nullptr;
  }

  // A server is gone: its share waits for the job to agree on a failover. `tell`: its connection
  // still works (the other ranks lost it, or it is silent), so in a tree it is told (TellLeaving).
  void LoseServer(ServerLink& link, const Status& why, bool tell = false) {
    if (link.failed) return;
    link.failed = true;
    link.queue.clear();
    const bool leave = tell && in_tree_ && transport_ != transport::Kind::kOfi && link.conn != nullptr;
    if (link.rx_req != nullptr && link.rx_piece != SIZE_MAX && link.rx_req->desc.coll == CollType::kAllReduce &&
        link.rx_req->send == link.rx_req->recv && !link.rx_into_copy) {
      link.rx_req->pieces[link.rx_piece].input_lost = true;
    }
    link.rx_into_copy = false;
    Request* stale = link.rx_stale ? link.rx_req : nullptr;
    link.rx_stale = false;
    link.rx_req = nullptr;
    link.rx_piece = SIZE_MAX;
    if (leave) {
      link.conn->DetachPayloads([](uint64_t) { return true; });  // a message half sent is finished from a copy
    } else if (link.conn) {
      link.conn->DropPendingWrites();
    }
    if (dead_mask_ == agreed_mask_) first_unplanned_ = next_seq_;
    dead_mask_ |= uint64_t{1} << link.index;
    if (leave) TellLeaving(link);
    const size_t left = ServersLeft(dead_mask_).size();
    if (left == 0) {
      Break(UnavailableError(why.message() + "; no server of the job is left"));
      return;
    }
    if (stale != nullptr) {
      --stale->stale_rx;
      MaybeFinish(stale);
    }
    ForgetRestriped();
    Log().warn("rank {}: {}; failing over to the {} server(s) left", opts_.rank, why.message(), left);
    if (observe::TraceOn()) {
      observe::TraceArgs a;
      a.Add("server", link.address).Add("why", why.message());
      observe::TraceInstant("server lost", "client", a);
    }
    report_due_ = true;
  }

  // In an aggregation tree a server of the tree the job drops may still be alive, with ranks of
  // other racks still on it: were this rank to close its connection, that server would fail the
  // job for them as a rank that died. So it is told instead (a report naming itself dead), and gives
  // the job up without error to anyone (docs/tree.md, "Failure"); the connection stays open and
  // what comes on it is thrown away until the server closes it, so that no reset can drop the word.
  void TellLeaving(ServerLink& link) {
    wire::FailoverReport r;
    r.epoch = epoch_;
    r.server_index = static_cast<uint32_t>(link.index);
    r.dead_mask = dead_mask_;
    r.first_unplanned = first_unplanned_;
    link.conn->Send(transport::MakeOutMessage(wire::EncodeFailover(r), nullptr, 0));
    if (!link.conn->Flush().ok()) {
      link.conn.reset();
      return;
    }
    link.leaving = true;
  }

  void AdvanceFailover() {
    for (uint32_t i = 0; i < servers_.size() && notice_mask_ != 0; ++i) {
      if (((notice_mask_ >> i) & 1) && !servers_[i].failed) {
        LoseServer(servers_[i], UnavailableError(fmt::format("other ranks lost server {}", servers_[i].address)),
                   /*tell=*/true);
      }
    }
    notice_mask_ = 0;
    for (size_t i = 0; i < agreed_.size() && broken_.ok(); ++i) {
      if (agreed_[i].epoch <= epoch_) continue;  // the same announcement from another survivor
      if (agreed_[i].epoch != epoch_ + 1) {
        Break(ProtocolError(
            fmt::format("a server announced failover {} while this rank is at {}", agreed_[i].epoch, epoch_)));
        break;
      }
      ApplyAgreed(agreed_[i]);
    }
    agreed_.clear();
    if (report_due_ && broken_.ok()) SendReports();
    if (broken_.ok()) CheckHeartbeats();
    // A dead server's connection goes now, with whatever it had posted into our buffers; one that
    // was told this rank leaves it once it has closed its end (TellLeaving).
    for (auto& s : servers_) {
      if (!s.failed || !s.conn) continue;
      if (s.leaving && (!s.conn->HasPendingWrites() || s.conn->Flush().ok()) && s.conn->DiscardAvailable()) continue;
      s.conn.reset();
    }
  }

  void SendReports() {
    report_due_ = false;
    wire::FailoverReport r;
    r.epoch = epoch_;
    r.dead_mask = dead_mask_;
    r.first_unplanned = first_unplanned_;
    for (const auto& [seq, req] : active_) {
      if (seq != req->seq || !req->planned) continue;
      for (const Piece& p : req->pieces) {
        if (p.due && servers_[p.link].failed) {
          r.needing.push_back(seq);
          break;
        }
      }
    }
    if (r.needing.size() > wire::kMaxFailoverSeqs) {
      Break(UnavailableError(fmt::format("{} collectives lack results from a dead server; failover re-runs at most {}",
                                         r.needing.size(), wire::kMaxFailoverSeqs)));
      return;
    }
    std::sort(r.needing.begin(), r.needing.end());
    for (auto& s : servers_) {
      if (s.failed) continue;
      r.server_index = static_cast<uint32_t>(s.index);
      s.conn->Send(transport::MakeOutMessage(wire::EncodeFailover(r), nullptr, 0));
    }
    FlushAll();
  }

  void ApplyAgreed(const wire::FailoverAgreed& a) {
    for (uint32_t i = 0; i < servers_.size(); ++i) {
      if (((a.dead_mask >> i) & 1) && !servers_[i].failed) {
        LoseServer(servers_[i],
                   UnavailableError(fmt::format("the job agreed that server {} is dead", servers_[i].address)),
                   /*tell=*/true);
      }
    }
    if (!broken_.ok()) return;
    const uint64_t newly = a.dead_mask & ~agreed_mask_;
    if ((a.dead_mask & agreed_mask_) != agreed_mask_ || newly == 0 || a.boundary > first_unplanned_) {
      Break(
          ProtocolError(fmt::format("failover {} announced dead servers {:#x} from #{}, which does not follow this "
                                    "rank's view (dead {:#x}, agreed {:#x}, first unstriped #{})",
                                    a.epoch, a.dead_mask, a.boundary, dead_mask_, agreed_mask_, first_unplanned_)));
      return;
    }
    std::vector<Request*> roots;
    for (const auto& [seq, req] : active_) {
      if (seq == req->seq) roots.push_back(req);
    }
    std::sort(roots.begin(), roots.end(), [](const Request* x, const Request* y) { return x->seq < y->seq; });
    // Collectives from the boundary on never completed a chunk (the rank that stopped first never
    // sent them): forget their old stripes.
    for (Request* req : roots) {
      if (req->seq >= a.boundary && req->planned && !Unplan(req, a.epoch)) return;
    }
    for (uint64_t seq : a.recover) {
      auto it = active_.find(seq);
      if (it == active_.end() && Revive(seq) != nullptr) it = active_.find(seq);
      if (it == active_.end() || !it->second->planned || it->second->pieces.empty()) {
        Break(Status(Code::kPeerFailed,
                     fmt::format("collective #{} had already completed on rank {} when server(s) {:#x} died, while "
                                 "another rank still lacked part of its result; it cannot be re-run exactly",
                                 seq, opts_.rank, newly)));
        return;
      }
      PlanRerun(it->second, a.epoch, newly, a.dead_mask);
    }
    agreed_mask_ = a.dead_mask;
    epoch_ = a.epoch;
    const auto epoch_meta = wire::EncodeEpoch({a.epoch, a.dead_mask, a.boundary});
    for (auto& s : servers_) {
      if (!s.failed) s.conn->Send(transport::MakeOutMessage(epoch_meta, nullptr, 0));
    }
    const bool more_dead = dead_mask_ != agreed_mask_;
    for (Request* req : roots) {
      if (!req->planned && (req->seq < first_unplanned_ || !more_dead)) Plan(req);
    }
    if (more_dead) report_due_ = true;
    last_progress_ = Clock::now();
    const size_t left = ServersLeft(agreed_mask_).size();
    Log().warn(
        "rank {}: failover {}: {} server(s) left; {} collective(s) re-run the dead servers' shares, "
        "collectives from #{} are striped over the servers left",
        opts_.rank, a.epoch, left, a.recover.size(), a.boundary);
    if (observe::TraceOn()) {
      observe::TraceArgs t;
      t.Add("epoch", a.epoch).Add("servers_left", left).Add("rerun", a.recover.size()).Add("boundary", a.boundary);
      observe::TraceInstant("failover", "client", t);
    }
  }

  // Forgets a collective's stripes so it can be striped again at `epoch`. Chunks already handed
  // to a connection took window credit that no answer will return (the server drops them). An
  // all-gather chunk needs no other rank's, so one may have reached this rank already, and more
  // may still come until each server applied the failover: they are the same bytes as the new
  // stripes bring, and land without counting (IsStaleAnswer).
  bool Unplan(Request* req, uint32_t epoch) {
    if (req->pieces.empty()) {
      Break(InternalError(fmt::format("collective #{} cannot be striped again", req->seq)));
      return false;
    }
    const bool gather = req->desc.coll == CollType::kAllGather;
    for (const Piece& p : req->pieces) {
      if (p.have && !gather) {
        Break(InternalError(fmt::format("collective #{} got a result before a failover striped it again", req->seq)));
        return false;
      }
    }
    if (gather) {
      restriped_[req->seq] = epoch;
      for (auto& s : servers_) {
        if (s.rx_req == req && !s.rx_stale) {
          s.rx_stale = true;
          ++req->stale_rx;
        }
      }
    }
    for (auto& s : servers_) {
      std::unordered_map<uint64_t, bool> unsent;
      for (auto it = s.queue.begin(); it != s.queue.end();) {
        if (it->req != req) {
          ++it;
          continue;
        }
        for (size_t k = it->next; k < it->chunks.size(); ++k) unsent[it->chunks[k].offset] = true;
        it = s.queue.erase(it);
      }
      if (s.failed) continue;
      for (const Piece& p : req->pieces) {
        if (p.link == s.index && !p.have && Sends(*req, p.ref) && unsent.count(p.ref.offset) == 0) {
          ReturnCredit(&s, p.ref.count * req->esize);
        }
      }
    }
    req->pieces.clear();
    req->pending_link.assign(servers_.size(), 0);
    req->outstanding = 0;
    req->planned = false;
    return true;
  }

  // The dead servers' chunks of `req` become one collective over the servers left, round robin.
  void PlanRerun(Request* req, uint32_t epoch, uint64_t newly_dead, uint64_t dead) {
    const std::vector<uint32_t> alive = ServersLeft(dead);
    const uint64_t rseq = wire::RecoverySeq(epoch, req->seq);
    std::vector<PendingSends> per(alive.size(), PendingSends{req, req->desc, {}, 0, {}});
    for (auto& ps : per) {
      ps.desc.coll_seq = rseq;
      ps.desc.server_elems = 0;
      ps.desc.epoch = epoch;
    }
    // Round robin within each segment, so that an all-gather's re-run gives every server it uses
    // a chunk of every rank (a server forwards a chunk only to ranks that joined it there).
    size_t k = 0;
    uint32_t segment = 0;
    for (Piece& p : req->pieces) {
      if (((newly_dead >> p.link) & 1) == 0) continue;
      if (p.ref.segment != segment) {
        segment = p.ref.segment;
        k = 0;
      }
      const size_t j = static_cast<size_t>((k++ + req->seq) % alive.size());
      // Still counted as due from the dead server. Not `!p.have`: a piece this rank had from the
      // first server, whose re-run then died too, has its result but waits for an answer.
      if (p.due) {
        --req->pending_link[p.link];
        --req->outstanding;
      }
      p.link = alive[j];
      p.coll_seq = rseq;
      p.awaiting = true;
      p.due = true;
      ++req->pending_link[p.link];
      ++req->outstanding;
      per[j].desc.server_elems += p.ref.count;
      if (!Sends(*req, p.ref)) continue;
      per[j].chunks.push_back(p.ref);
      per[j].flags.push_back(RerunFlags(*req, p));
    }
    for (size_t j = 0; j < alive.size(); ++j) {
      if (!per[j].chunks.empty() && !servers_[alive[j]].failed) servers_[alive[j]].queue.push_back(std::move(per[j]));
    }
    active_.emplace(rseq, req);
    req->rerun_seqs.push_back(rseq);
  }

  // How a re-run sends a piece: the result this rank holds, which every rank that holds it has
  // alike (an allreduce's, or a reduce-scatter's own segment), or its input.
  uint8_t RerunFlags(const Request& req, const Piece& p) const {
    switch (req.desc.coll) {
      case CollType::kAllReduce:
        return p.have ? wire::kChunkResultCopy : p.input_lost ? wire::kChunkInputLost : uint8_t{0};
      case CollType::kReduceScatter:
        return p.have && p.ref.segment == static_cast<uint32_t>(opts_.rank) ? wire::kChunkResultCopy : uint8_t{0};
      case CollType::kAllGather: return 0;
    }
    return 0;
  }

  // An answer from `link` to an all-gather that a failover striped again, sent before that
  // server applied the failover: it belongs to the replaced stripes.
  bool IsStaleAnswer(const ServerLink& link, uint64_t coll_seq) const {
    if (restriped_.empty()) return false;
    auto it = restriped_.find(coll_seq);
    return it != restriped_.end() && it->second > link.server_epoch;
  }

  // Once every server left applied a failover, none sends answers to the stripes it replaced.
  void ForgetRestriped() {
    if (restriped_.empty()) return;
    uint32_t applied = UINT32_MAX;
    for (const auto& s : servers_) {
      if (!s.failed) applied = std::min(applied, s.server_epoch);
    }
    std::erase_if(restriped_, [&](const auto& kv) { return kv.second <= applied; });
  }

  // A server that sends nothing, not even a heartbeat, while this rank waits on it is dead.
  void CheckHeartbeats() {
    const auto now = Clock::now();
    for (auto& s : servers_) {
      if (s.failed) continue;
      bool busy = !s.queue.empty();
      for (auto it = active_.begin(); !busy && it != active_.end(); ++it) busy = it->second->pending_link[s.index] > 0;
      if (busy && !s.busy) s.last_heard = now;
      s.busy = busy;
      if (busy && now - s.last_heard > opts_.heartbeat) {
        LoseServer(s,
                   UnavailableError(fmt::format(
                       "server {} sent nothing for {} ms while this rank waited on it; it may be frozen "
                       "(OPTCAST_HEARTBEAT_MS sets the bound)",
                       s.address, std::chrono::duration_cast<std::chrono::milliseconds>(now - s.last_heard).count())),
                   /*tell=*/true);
      }
    }
  }

  // ---- tracing (only called when it is on) ----

  // A request is one span from issue to completion on the process's "requests" tracks.
  void TraceRequestBegin(Request* req, observe::TraceArgs& issue_args) {
    req->trace_id = (trace_comm_ << 40) | req->seq;
    observe::TraceArgs a;
    a.Add("seq", req->seq).Add("count", req->desc.count).Add("dtype", DataTypeName(req->desc.dtype));
    a.Add("op", RedOpName(req->desc.op)).Add("bytes", req->desc.count * req->esize);
    a.Add("replies", req->outstanding);
    issue_args = a;
    observe::TraceAsyncBegin(CollTypeName(req->desc.coll), "request", req->trace_id, observe::TraceNowUs(), a);
  }

  void TraceRequestEnd(Request* req) {
    if (req->trace_id == 0) return;
    observe::TraceArgs a;
    if (!req->status.ok()) a.Add("error", req->status.message());
    observe::TraceAsyncEnd(CollTypeName(req->desc.coll), "request", req->trace_id, observe::TraceNowUs(), a);
    req->trace_id = 0;
  }

  // A chunk's time on the wire, on its link's track: from when the link was free to write it
  // (messages go out in order) until its last byte left.
  static void TraceSend(ServerLink* link, transport::OutMessage* msg) {
    const double queued = observe::TraceNowUs();
    msg->on_done = [link, queued, seq = msg->tag, bytes = msg->payload_len, then = std::move(msg->on_done)] {
      const double now = observe::TraceNowUs();
      const double start = std::max(queued, link->tx_free_us);
      link->tx_free_us = now;
      observe::TraceArgs a;
      a.Add("seq", seq).Add("bytes", bytes);
      observe::TraceComplete("send chunk", "client", start, now, a, link->trace_track_tx);
      if (then) then();
    };
  }

  const uint64_t trace_comm_ = g_next_trace_comm.fetch_add(1);
  CommunicatorOptions opts_;
  const transport::Kind transport_;
  mutable std::mutex mu_;
  // Declared before the connections it dials and the registrations it makes: destroyed after.
  std::unique_ptr<transport::Dialer> dialer_;
  std::vector<ServerLink> servers_;
  std::unordered_map<RegisteredMemory*, std::unique_ptr<RegisteredMemory>> registered_;
  uint64_t min_max_payload_ = 0;
  // A server welcomed this rank into an aggregation tree: every server of a tree job says so,
  // so every rank cuts its stripes alike.
  bool in_tree_ = false;
  bool told_servers_ = false;  // TellServersWhy has run
  // The slowest port rate the servers announced (bit/s; 0: none did). Fixed at the join, so a
  // failover never changes how a size is striped.
  uint64_t link_rate_bits_ = 0;
  std::unordered_map<uint64_t, Request*> active_;
  uint64_t next_seq_ = 1;
  Status broken_;
  // Failover (docs/reliability.md). Server sets are bit masks over servers_.
  uint64_t dead_mask_ = 0;        // the servers this rank saw die
  uint64_t agreed_mask_ = 0;      // those the job agreed on: collectives stripe over the rest
  uint32_t epoch_ = 0;            // failovers applied
  uint64_t first_unplanned_ = 0;  // the first collective not striped since a server died
  uint64_t notice_mask_ = 0;      // deaths other ranks saw, from the servers' notices
  std::vector<wire::FailoverAgreed> agreed_;
  bool report_due_ = false;
  std::deque<std::unique_ptr<Request>> retained_;     // see Retain()
  CopyBufferPool copy_pool_{kSpareCopies};            // their buffers, for the next ones
  std::unordered_map<uint64_t, uint32_t> restriped_;  // all-gathers striped again, and at which epoch
  Clock::time_point last_progress_ = Clock::now();
  StallQuery stall_;
};

}  // namespace
}  // namespace client

Status Communicator::Create(const CommunicatorOptions& options, std::unique_ptr<Communicator>* out) {
  if (options.servers.empty()) {
    return InvalidArgument("no reduction servers given; set OPTCAST_SERVERS=host:port[,host:port...]");
  }
  if (options.nranks < 1) return InvalidArgument("nranks must be at least 1");
  if (options.rank < 0 || options.rank >= options.nranks) {
    return InvalidArgument(fmt::format("rank {} is out of range for {} ranks", options.rank, options.nranks));
  }
  if (options.servers.size() > 64) return InvalidArgument("at most 64 servers per communicator");
  if (options.latency_dscp < 0 || options.latency_dscp > transport::posix::kMaxDscp) {
    return InvalidArgument(
        fmt::format("latency_dscp {} is not a DSCP; use 0-63 (0: mark nothing)", options.latency_dscp));
  }
  OPTCAST_RETURN_IF_ERROR(
      observe::StartTraceFromEnv("OPTCAST_TRACE", options.rank, fmt::format("optcast rank {}", options.rank)));
  transport::Kind kind = transport::Kind::kTcp;
  if (options.transport.empty()) {
    OPTCAST_RETURN_IF_ERROR(transport::KindFromEnvironment(transport::Kind::kTcp, &kind));
  } else {
    OPTCAST_RETURN_IF_ERROR(transport::ParseKind(options.transport, "CommunicatorOptions::transport", &kind));
  }
  auto comm = std::make_unique<client::ServerCommunicator>(options, kind);
  OPTCAST_RETURN_IF_ERROR(comm->Connect());
  *out = std::move(comm);
  return Status::Ok();
}

Status Communicator::AllReduce(const void* sendbuf, void* recvbuf, size_t count, DataType dtype, RedOp op) {
  Request* req = nullptr;
  OPTCAST_RETURN_IF_ERROR(IAllReduce(sendbuf, recvbuf, count, dtype, op, &req));
  return Wait(req);
}

Status Communicator::ReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType dtype, RedOp op) {
  Request* req = nullptr;
  OPTCAST_RETURN_IF_ERROR(IReduceScatter(sendbuf, recvbuf, recvcount, dtype, op, &req));
  return Wait(req);
}

Status Communicator::AllGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType dtype) {
  Request* req = nullptr;
  OPTCAST_RETURN_IF_ERROR(IAllGather(sendbuf, recvbuf, sendcount, dtype, &req));
  return Wait(req);
}

Status ApplyEnvironment(CommunicatorOptions* o) {
  if (auto servers = GetEnv("OPTCAST_SERVERS")) {
    o->servers.clear();
    size_t start = 0;
    while (start <= servers->size()) {
      size_t comma = servers->find(',', start);
      if (comma == std::string::npos) comma = servers->size();
      if (comma > start) o->servers.push_back(servers->substr(start, comma - start));
      start = comma + 1;
    }
  }
  int64_t v = 0;
  OPTCAST_RETURN_IF_ERROR(GetEnvInt("OPTCAST_TIMEOUT_MS", o->timeout.count(), &v));
  if (v <= 0) return InvalidArgument("OPTCAST_TIMEOUT_MS must be positive");
  o->timeout = std::chrono::milliseconds(v);
  OPTCAST_RETURN_IF_ERROR(GetEnvInt("OPTCAST_CONNECT_TIMEOUT_MS", o->connect_timeout.count(), &v));
  o->connect_timeout = std::chrono::milliseconds(v);
  if (auto chunk = GetEnv("OPTCAST_CHUNK_BYTES")) {
    auto bytes = ParseByteSize(*chunk);
    if (!bytes || *bytes == 0) {
      return InvalidArgument("OPTCAST_CHUNK_BYTES='" + *chunk + "' is not a size; write e.g. 512K or 1M");
    }
    o->chunk_bytes = *bytes;
  }
  if (auto t = GetEnv("OPTCAST_TRANSPORT")) o->transport = *t;
  OPTCAST_RETURN_IF_ERROR(GetEnvInt("OPTCAST_WINDOW", o->window, &v));
  o->window = static_cast<int>(v);
  if (auto f = GetEnv("OPTCAST_FAILOVER")) {
    if (*f != "0" && *f != "1") return InvalidArgument("OPTCAST_FAILOVER='" + *f + "' must be 0 (off) or 1 (on)");
    o->failover = *f == "1";
  }
  OPTCAST_RETURN_IF_ERROR(GetEnvInt("OPTCAST_HEARTBEAT_MS", o->heartbeat.count(), &v));
  if (v <= 0) return InvalidArgument("OPTCAST_HEARTBEAT_MS must be positive");
  o->heartbeat = std::chrono::milliseconds(v);
  OPTCAST_RETURN_IF_ERROR(transport::posix::CongestionControlFromEnvironment(&o->tcp_congestion));
  if (auto bytes = GetEnv("OPTCAST_LATENCY_BYTES")) {
    auto parsed = ParseByteSize(*bytes);
    if (!parsed) {
      return InvalidArgument("OPTCAST_LATENCY_BYTES='" + *bytes + "' is not a size; write e.g. 64K, or 0 for none");
    }
    o->latency_bytes = *parsed;
  }
  if (auto dscp = GetEnv("OPTCAST_LATENCY_DSCP")) {
    OPTCAST_RETURN_IF_ERROR(transport::posix::ParseDscp(*dscp, "OPTCAST_LATENCY_DSCP", &o->latency_dscp));
  }
  std::string secret;
  OPTCAST_RETURN_IF_ERROR(auth::SecretFromEnvironment(&secret));
  if (!secret.empty()) o->secret = std::move(secret);
  return Status::Ok();
}

}  // namespace optcast
