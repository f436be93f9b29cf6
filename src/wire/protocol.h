// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The Optcast protocol: the meta block of every message (see transport/message.h for framing).
// Little-endian, fixed layouts, explicit lengths; every decode is bounds-checked.
//
//   common prefix : version u16, type u16
//   Hello    (c->s): job_id[16] nranks u32 rank u32 flags u32 lane u32
//   Welcome  (s->c): max_payload u64 job_timeout_ms u32 flags u32 (kWelcomeInTree) link_rate_bits u64 lanes u32
//   Error    (both): code u32 coll_seq u64 text_len u32 text[text_len]
//   Chunk    (c->s): CollDesc segment u32 offset u64 count u32      + payload (count elements)
//   Result   (s->c): coll_seq u64 segment u32 offset u64 count u32  + payload
//   Ack      (s->c): coll_seq u64 segment u32 offset u64 count u32  (a chunk done, no data for you)
//   Bye      (c->s): (nothing)  the rank leaves the job cleanly
//   Challenge(s->c): nonce[32]  the server wants proof of the deployment secret before Welcome
//   Proof    (c->s): mac[32]    HMAC-SHA256(secret, nonce and the hello), see auth/proof.h
//   Grow     (s->s): weight u32 min_rank u32  a downstream server now carries `weight` ranks
//   Sealed   (s->s): nranks u32  every rank of the job has joined the tree (see docs/tree.md)
//   StallQuery (c->s): coll_seq u64  which ranks is this collective waiting for? (a client's timeout)
//   StallReport(s->c): coll_seq u64 text_len u32 text[text_len]  the server's answer, for the error
//   Failover (c->s): epoch u32 server_index u32 dead_mask u64 first_unplanned u64 n u32 seqs u64[n]
//   Agreed   (s->c): epoch u32 dead_mask u64 boundary u64 n u32 seqs u64[n]
//   Notice   (s->c): dead_mask u64   another rank reported these servers dead
//   Epoch    (c->s): epoch u32 dead_mask u64 boundary u64   the rank applied an agreed failover
//   Heartbeat(s->c): (nothing)  the server is alive while a rank waits on it
//   CollDesc        : coll_seq u64 coll u8 dtype u8 op u8 flags u8 count u64 server_elems u64 epoch u32
// (docs/reliability.md, "Failover", describes the failover messages.)

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "optcast/status.h"
#include "optcast/types.h"

namespace optcast::wire {

// 5: the hello names a lane, the welcome says how many the server has (server/lane.h).
inline constexpr uint16_t kProtocolVersion = 5;
inline constexpr uint16_t kDefaultPort = 8918;

enum class MsgType : uint16_t {
  kHello = 1,
  kWelcome = 2,
  kError = 3,
  kChunk = 4,
  kResult = 5,
  kAck = 6,
  kBye = 7,
  kChallenge = 8,
  kProof = 9,
  kGrow = 10,
  kSealed = 11,
  kStallQuery = 12,
  kStallReport = 13,
  kFailover = 14,
  kAgreed = 15,
  kNotice = 16,
  kEpoch = 17,
  kHeartbeat = 18,
  // A downstream server passes one of its ranks' Failover reports up its tree (docs/tree.md).
  kFailoverRelay = 19,
};

// Hello flags. A downstream reduction server joins its parent's job as one member: its `rank` is
// the first rank that joined it (unique in the job), its ranks are counted by Grow messages, and
// its chunks carry partial results in the partial type (server/tree_math.h).
inline constexpr uint32_t kHelloFromServer = 1u << 0;

using JobIdBytes = std::array<uint8_t, 16>;
using Nonce = std::array<uint8_t, 32>;
using Mac = std::array<uint8_t, 32>;

struct Hello {
  JobIdBytes job_id{};
  uint32_t nranks = 0;
  uint32_t rank = 0;
  uint32_t flags = 0;
  // The server's event loop this connection is for (0..Welcome::lanes-1): a server of k lanes
  // serves like k servers behind one port, and a rank joins each lane on a connection of its own.
  uint32_t lane = 0;
};

// Welcome flags. The server is part of an aggregation tree (it has a parent, or children): a
// chunk crosses two or more servers there, so the client cuts its stripes finer (client/plan.h).
inline constexpr uint32_t kWelcomeInTree = 1u << 0;

struct Welcome {
  uint64_t max_payload = 0;
  uint32_t job_timeout_ms = 0;
  uint32_t flags = 0;
  // The rate of the server's port, bit/s each way, as its operator gave it or its interface
  // reports it; 0 when unknown. Ranks stripe small collectives by it (client/plan.h).
  uint64_t link_rate_bits = 0;
  // The server's lanes (event loops); at least 1. A rank that joined lane 0 joins the others too.
  uint32_t lanes = 1;
};

struct ErrorMsg {
  Code code = Code::kInternal;
  uint64_t coll_seq = 0;
  std::string text;
};

// What every rank must agree on for one collective.
struct CollDesc {
  uint64_t coll_seq = 0;  // position of the collective in the communicator's sequence
  CollType coll = CollType::kAllReduce;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  uint64_t count = 0;         // the collective's count argument (per-rank count for RS/AG)
  uint64_t server_elems = 0;  // elements this server handles for this collective
  uint32_t epoch = 0;         // failovers the job had applied when the collective was striped
  bool operator==(const CollDesc&) const = default;
};

struct ChunkRef {
  uint32_t segment = 0;  // 0 for allreduce; the owning rank for reduce-scatter / all-gather
  uint64_t offset = 0;   // first element, in the collective's logical buffer
  uint32_t count = 0;    // elements
};

// Chunk flags. A result copy carries the chunk's result, which the rank already received, in place
// of its input (which an in-place collective overwrote): the server forwards it unreduced.
inline constexpr uint8_t kChunkResultCopy = 1u << 0;
// The rank's input for this chunk was overwritten in place by a result that a dead server cut
// short: only a result copy from another rank can complete the chunk exactly.
inline constexpr uint8_t kChunkInputLost = 1u << 1;

struct Chunk {
  CollDesc desc;
  ChunkRef ref;
  uint8_t flags = 0;
};

struct ChunkDone {  // Result and Ack
  uint64_t coll_seq = 0;
  ChunkRef ref;
};

// Membership of an aggregation tree (docs/tree.md).
struct Grow {
  uint32_t weight = 0;    // ranks the downstream server carries now
  uint32_t min_rank = 0;  // the lowest of them: orders the server among its siblings
};

// A client whose collective made no progress for its timeout asks each server it waits on what
// that server waits for, so that its error can name the ranks (the server's own timeout does).
struct StallReport {
  uint64_t coll_seq = 0;
  std::string waiting_for;  // the ranks, "1,3", or a sentence saying why none are named
};

// Failover (docs/reliability.md). Server sets are bit masks over the ranks' server list.
inline constexpr size_t kMaxFailoverSeqs = 1024;

// A failover re-runs the shares of collective `root` that dead servers held as one collective
// of its own, numbered from the epoch it starts and the root (roots stay below 2^56).
inline constexpr uint64_t kRecoverySeqBit = uint64_t{1} << 63;
inline constexpr uint64_t kRootSeqMask = (uint64_t{1} << 56) - 1;
inline uint64_t RecoverySeq(uint32_t epoch, uint64_t root) {
  return kRecoverySeqBit | (static_cast<uint64_t>(epoch & 0x7f) << 56) | (root & kRootSeqMask);
}
inline bool IsRecoverySeq(uint64_t seq) { return (seq & kRecoverySeqBit) != 0; }
inline uint64_t RootSeq(uint64_t seq) { return seq & kRootSeqMask; }

struct FailoverReport {           // a rank's view after it saw servers die
  uint32_t epoch = 0;             // failovers the rank has applied
  uint32_t server_index = 0;      // the receiving server's place in the rank's list
  uint64_t dead_mask = 0;         // the servers the rank knows dead
  uint64_t first_unplanned = 0;   // its first collective not yet striped (none striped since)
  std::vector<uint64_t> needing;  // collectives that lack results from a server in dead_mask
};

struct FailoverAgreed {  // every rank reported the same dead servers: what all ranks do now
  uint32_t epoch = 0;    // the epoch this failover starts
  uint64_t dead_mask = 0;
  uint64_t boundary = 0;          // collectives from here on are striped again over the survivors
  std::vector<uint64_t> recover;  // earlier collectives whose dead servers' shares are re-run
};

struct EpochChange {  // a rank applied an agreed failover
  uint32_t epoch = 0;
  uint64_t dead_mask = 0;
  uint64_t boundary = 0;
};

// A decoded meta block.
struct Message {
  MsgType type = MsgType::kHello;
  Hello hello;
  Welcome welcome;
  ErrorMsg error;
  Chunk chunk;
  ChunkDone done;
  Nonce challenge{};
  Mac proof{};
  Grow grow;
  uint32_t sealed_nranks = 0;
  uint64_t stall_query_seq = 0;
  StallReport stall_report;
  FailoverReport report;
  FailoverAgreed agreed;
  uint64_t notice_mask = 0;
  uint32_t relay_rank = 0;  // FailoverRelay: the rank whose report `report` is
  EpochChange epoch;
};

std::vector<uint8_t> EncodeHello(const Hello& m);
// The protocol version a meta block says it speaks (0 if it is shorter than its prefix).
uint16_t VersionOf(std::span<const uint8_t> meta);
// An Error framed as protocol version `version` speaks, for a peer of another release: the Error's
// layout is the same in every version, so that peer can read why it was refused.
std::vector<uint8_t> EncodeErrorForVersion(const ErrorMsg& m, uint16_t version);
std::vector<uint8_t> EncodeWelcome(const Welcome& m);
std::vector<uint8_t> EncodeError(const ErrorMsg& m);
std::vector<uint8_t> EncodeChunk(const Chunk& m);
std::vector<uint8_t> EncodeResult(const ChunkDone& m);
std::vector<uint8_t> EncodeAck(const ChunkDone& m);
std::vector<uint8_t> EncodeBye();
std::vector<uint8_t> EncodeChallenge(const Nonce& nonce);
std::vector<uint8_t> EncodeProof(const Mac& mac);
std::vector<uint8_t> EncodeGrow(const Grow& m);
std::vector<uint8_t> EncodeSealed(uint32_t nranks);
std::vector<uint8_t> EncodeStallQuery(uint64_t coll_seq);
std::vector<uint8_t> EncodeStallReport(const StallReport& m);
std::vector<uint8_t> EncodeFailover(const FailoverReport& m);
std::vector<uint8_t> EncodeAgreed(const FailoverAgreed& m);
std::vector<uint8_t> EncodeNotice(uint64_t dead_mask);
std::vector<uint8_t> EncodeEpoch(const EpochChange& m);
std::vector<uint8_t> EncodeHeartbeat();
std::vector<uint8_t> EncodeFailoverRelay(uint32_t rank, const FailoverReport& m);

// The per-chunk messages have fixed sizes; these write them into the caller's buffer so the data
// path allocates nothing. `type` of EncodeDoneTo is kResult or kAck.
inline constexpr size_t kChunkMetaBytes = 52;
inline constexpr size_t kDoneMetaBytes = 28;
void EncodeChunkTo(const Chunk& m, uint8_t* out);
void EncodeDoneTo(MsgType type, const ChunkDone& m, uint8_t* out);

// Decodes and validates one meta block: version, type, exact length, enum ranges.
Status Decode(std::span<const uint8_t> meta, Message* out);

// Payload bytes a Chunk/Result of `ref` carries; fails on overflow.
Status PayloadBytes(DataType dtype, const ChunkRef& ref, uint64_t* bytes);

std::string JobIdHex(const JobIdBytes& id);

}  // namespace optcast::wire
