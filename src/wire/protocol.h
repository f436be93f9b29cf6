// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The Optcast protocol: the meta block of every message (see transport/message.h for framing).
// Little-endian, fixed layouts, explicit lengths; every decode is bounds-checked.
//
//   common prefix : version u16, type u16
//   Hello    (c->s): job_id[16] nranks u32 rank u32 flags u32
//   Welcome  (s->c): max_payload u64 job_timeout_ms u32
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
//   CollDesc        : coll_seq u64 coll u8 dtype u8 op u8 pad u8 count u64 server_elems u64

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "optcast/status.h"
#include "optcast/types.h"

namespace optcast::wire {

inline constexpr uint16_t kProtocolVersion = 1;
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
};

struct Welcome {
  uint64_t max_payload = 0;
  uint32_t job_timeout_ms = 0;
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
  bool operator==(const CollDesc&) const = default;
};

struct ChunkRef {
  uint32_t segment = 0;  // 0 for allreduce; the owning rank for reduce-scatter / all-gather
  uint64_t offset = 0;   // first element, in the collective's logical buffer
  uint32_t count = 0;    // elements
};

struct Chunk {
  CollDesc desc;
  ChunkRef ref;
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
};

std::vector<uint8_t> EncodeHello(const Hello& m);
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

// The per-chunk messages have fixed sizes; these write them into the caller's buffer so the data
// path allocates nothing. `type` of EncodeDoneTo is kResult or kAck.
inline constexpr size_t kChunkMetaBytes = 48;
inline constexpr size_t kDoneMetaBytes = 28;
void EncodeChunkTo(const Chunk& m, uint8_t* out);
void EncodeDoneTo(MsgType type, const ChunkDone& m, uint8_t* out);

// Decodes and validates one meta block: version, type, exact length, enum ranges.
Status Decode(std::span<const uint8_t> meta, Message* out);

// Payload bytes a Chunk/Result of `ref` carries; fails on overflow.
Status PayloadBytes(DataType dtype, const ChunkRef& ref, uint64_t* bytes);

std::string JobIdHex(const JobIdBytes& id);

}  // namespace optcast::wire
