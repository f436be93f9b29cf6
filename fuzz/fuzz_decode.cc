// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// wire::Decode on arbitrary meta blocks. For every accepted message: the re-encoding decodes to
// the same message and reproduces the input bytes (up to the fields the decoder normalises), and
// for chunks, server::ValidateChunk agrees with an independent 128-bit re-statement of its rules.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "frames.h"
#include "optcast/status.h"
#include "optcast/types.h"
#include "server/job.h"
#include "wire/protocol.h"

namespace optcast::fuzz {
namespace {

using u128 = unsigned __int128;

// The server refuses a hello with more ranks than this (server.cc, OnHello), so ValidateChunk is
// only ever called with nranks <= kMaxRanks. OPTCAST_FUZZ_STRICT=1 checks it beyond that too: it
// then wraps segment * count around 2^64 for nranks > 2^24 and accepts chunks outside their
// segment (a latent bug, see docs/testing.md).
constexpr uint32_t kMaxRanks = 1u << 20;
const bool g_strict = [] {
  const char* v = std::getenv("OPTCAST_FUZZ_STRICT");
  return v != nullptr && v[0] == '1';
}();

std::vector<uint8_t> Encode(const wire::Message& m) {
  switch (m.type) {
    case wire::MsgType::kHello: return wire::EncodeHello(m.hello);
    case wire::MsgType::kWelcome: return wire::EncodeWelcome(m.welcome);
    case wire::MsgType::kError: return wire::EncodeError(m.error);
    case wire::MsgType::kChunk: return wire::EncodeChunk(m.chunk);
    case wire::MsgType::kResult: return wire::EncodeResult(m.done);
    case wire::MsgType::kAck: return wire::EncodeAck(m.done);
    case wire::MsgType::kBye: return wire::EncodeBye();
    case wire::MsgType::kChallenge: return wire::EncodeChallenge(m.challenge);
    case wire::MsgType::kProof: return wire::EncodeProof(m.proof);
    case wire::MsgType::kGrow: return wire::EncodeGrow(m.grow);
    case wire::MsgType::kSealed: return wire::EncodeSealed(m.sealed_nranks);
    case wire::MsgType::kStallQuery: return wire::EncodeStallQuery(m.stall_query_seq);
    case wire::MsgType::kStallReport: return wire::EncodeStallReport(m.stall_report);
    case wire::MsgType::kFailover: return wire::EncodeFailover(m.report);
    case wire::MsgType::kAgreed: return wire::EncodeAgreed(m.agreed);
    case wire::MsgType::kNotice: return wire::EncodeNotice(m.notice_mask);
    case wire::MsgType::kEpoch: return wire::EncodeEpoch(m.epoch);
    case wire::MsgType::kHeartbeat: return wire::EncodeHeartbeat();
    case wire::MsgType::kFailoverRelay: return wire::EncodeFailoverRelay(m.relay_rank, m.report);
  }
  FUZZ_CHECK(false, "Decode accepted unknown type %u", static_cast<unsigned>(m.type));
  return {};
}

bool SameRef(const wire::ChunkRef& a, const wire::ChunkRef& b) {
  return a.segment == b.segment && a.offset == b.offset && a.count == b.count;
}

bool Same(const wire::Message& a, const wire::Message& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case wire::MsgType::kHello:
      return a.hello.job_id == b.hello.job_id && a.hello.nranks == b.hello.nranks && a.hello.rank == b.hello.rank &&
             a.hello.flags == b.hello.flags;
    case wire::MsgType::kWelcome:
      return a.welcome.max_payload == b.welcome.max_payload && a.welcome.job_timeout_ms == b.welcome.job_timeout_ms;
    case wire::MsgType::kError:
      return a.error.code == b.error.code && a.error.coll_seq == b.error.coll_seq && a.error.text == b.error.text;
    case wire::MsgType::kChunk:
      return a.chunk.desc == b.chunk.desc && SameRef(a.chunk.ref, b.chunk.ref) && a.chunk.flags == b.chunk.flags;
    case wire::MsgType::kResult:
    case wire::MsgType::kAck: return a.done.coll_seq == b.done.coll_seq && SameRef(a.done.ref, b.done.ref);
    case wire::MsgType::kBye: return true;
    case wire::MsgType::kChallenge: return a.challenge == b.challenge;
    case wire::MsgType::kProof: return a.proof == b.proof;
    case wire::MsgType::kGrow: return a.grow.weight == b.grow.weight && a.grow.min_rank == b.grow.min_rank;
    case wire::MsgType::kSealed: return a.sealed_nranks == b.sealed_nranks;
    case wire::MsgType::kStallQuery: return a.stall_query_seq == b.stall_query_seq;
    case wire::MsgType::kStallReport:
      return a.stall_report.coll_seq == b.stall_report.coll_seq &&
             a.stall_report.waiting_for == b.stall_report.waiting_for;
    case wire::MsgType::kFailoverRelay:
      if (a.relay_rank != b.relay_rank) return false;
      [[fallthrough]];
    case wire::MsgType::kFailover:
      return a.report.epoch == b.report.epoch && a.report.server_index == b.report.server_index &&
             a.report.dead_mask == b.report.dead_mask && a.report.first_unplanned == b.report.first_unplanned &&
             a.report.needing == b.report.needing;
    case wire::MsgType::kAgreed:
      return a.agreed.epoch == b.agreed.epoch && a.agreed.dead_mask == b.agreed.dead_mask &&
             a.agreed.boundary == b.agreed.boundary && a.agreed.recover == b.agreed.recover;
    case wire::MsgType::kNotice: return a.notice_mask == b.notice_mask;
    case wire::MsgType::kEpoch:
      return a.epoch.epoch == b.epoch.epoch && a.epoch.dead_mask == b.epoch.dead_mask &&
             a.epoch.boundary == b.epoch.boundary;
    case wire::MsgType::kHeartbeat: return true;
  }
  return false;
}

// ValidateChunk's rules, restated without any wrap-around.
bool ShouldAccept(const wire::Chunk& c, uint32_t nranks, uint32_t sender) {
  const wire::CollDesc& d = c.desc;
  const wire::ChunkRef& r = c.ref;
  if (d.count == 0 || d.count > (uint64_t{1} << 40)) return false;
  // Bitwise ops combine the bits of integers: a reduction of a floating-point type with one is
  // refused (an all-gather combines nothing, so its op does not matter).
  const bool bitwise = d.op == RedOp::kBand || d.op == RedOp::kBor || d.op == RedOp::kBxor;
  const bool floating = d.dtype == DataType::kFloat32 || d.dtype == DataType::kFloat16 ||
                        d.dtype == DataType::kBFloat16 || d.dtype == DataType::kFloat64;
  if (bitwise && floating && d.coll != CollType::kAllGather) return false;
  const bool segmented = d.coll != CollType::kAllReduce;
  if (segmented && r.segment >= nranks) return false;
  if (!segmented && r.segment != 0) return false;
  if (d.coll == CollType::kAllGather && r.segment != sender) return false;
  const u128 begin = segmented ? u128{r.segment} * d.count : 0;
  const u128 end = begin + d.count;
  if (u128{r.offset} < begin || u128{r.offset} + r.count > end) return false;
  return r.count <= d.server_elems;
}

void CheckChunk(const wire::Chunk& c) {
  FUZZ_CHECK(c.ref.count != 0, "Decode accepted a chunk of zero elements");
  uint64_t bytes = 0;
  Status st = wire::PayloadBytes(c.desc.dtype, c.ref, &bytes);
  FUZZ_CHECK(st.ok() && bytes == uint64_t{c.ref.count} * DataTypeSize(c.desc.dtype), "PayloadBytes");

  const uint32_t nranks_choices[] = {1, 2, 3, 8, kMaxRanks, c.ref.segment, c.ref.segment + 1u};
  for (uint32_t nranks : nranks_choices) {
    if (nranks == 0 || (nranks > kMaxRanks && !g_strict)) continue;
    const uint32_t senders[] = {0, nranks - 1, c.ref.segment < nranks ? c.ref.segment : 0};
    for (uint32_t sender : senders) {
      Status v = server::ValidateChunk(c, nranks, sender);
      const bool want = ShouldAccept(c, nranks, sender);
      FUZZ_CHECK(v.ok() == want,
                 "ValidateChunk(coll=%d count=%llu server_elems=%llu segment=%u offset=%llu n=%u, nranks=%u, "
                 "sender=%u) = %s, expected %s",
                 static_cast<int>(c.desc.coll), static_cast<unsigned long long>(c.desc.count),
                 static_cast<unsigned long long>(c.desc.server_elems), c.ref.segment,
                 static_cast<unsigned long long>(c.ref.offset), c.ref.count, nranks, sender,
                 v.ok() ? "ok" : v.message().c_str(), want ? "ok" : "a rejection");
      FUZZ_CHECK(v.ok() || (v.code() == Code::kProtocol && !v.message().empty()), "rejection without a message");
    }
  }
  // The error texts must be producible for any accepted description.
  FUZZ_CHECK(!server::DescribeColl(c.desc).empty(), "DescribeColl");
  wire::CollDesc other = c.desc;
  other.server_elems ^= 1;
  FUZZ_CHECK(!server::DescribeMismatch(c.desc, 0, other, 1).empty(), "DescribeMismatch");
  other.count ^= 1;
  FUZZ_CHECK(!server::DescribeMismatch(c.desc, 0, other, 1).empty(), "DescribeMismatch");
}

}  // namespace
}  // namespace optcast::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace optcast;
  const std::span<const uint8_t> in(data, size);
  wire::Message m;
  Status st = wire::Decode(in, &m);
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == Code::kProtocol && !st.message().empty(), "Decode failed with code %d: %s",
               static_cast<int>(st.code()), st.message().c_str());
    return 0;
  }

  const std::vector<uint8_t> re = fuzz::Encode(m);
  wire::Message m2;
  Status st2 = wire::Decode(re, &m2);
  FUZZ_CHECK(st2.ok(), "re-encoded message does not decode: %s", st2.message().c_str());
  FUZZ_CHECK(fuzz::Same(m, m2), "round trip changed a message of type %u", static_cast<unsigned>(m.type));
  FUZZ_CHECK(fuzz::Encode(m2) == re, "encoding is not stable");

  // Byte-exact round trip, except what Decode normalises: an unknown error code reads as
  // kInternal, and an Error of another protocol version (read, since its layout is the same in
  // every version) is re-encoded in this one. (The chunk's flags byte, once padding, round-trips:
  // Decode refuses unknown flags.)
  FUZZ_CHECK(re.size() == size, "re-encoding has %zu bytes, input %zu", re.size(), size);
  std::vector<uint8_t> expect(data, data + size);
  if (m.type == wire::MsgType::kError) {
    uint32_t code = 0;
    std::memcpy(&code, data + 4, 4);  // little-endian host (x86-64, aarch64)
    if (code > static_cast<uint32_t>(Code::kCancelled)) {
      const uint32_t internal = static_cast<uint32_t>(Code::kInternal);
      std::memcpy(expect.data() + 4, &internal, 4);
    }
    expect[0] = static_cast<uint8_t>(wire::kProtocolVersion);
    expect[1] = static_cast<uint8_t>(wire::kProtocolVersion >> 8);
  }
  FUZZ_CHECK(re == expect, "re-encoding differs from the input for type %u", static_cast<unsigned>(m.type));

  switch (m.type) {
    case wire::MsgType::kChunk: fuzz::CheckChunk(m.chunk); break;
    case wire::MsgType::kHello: FUZZ_CHECK(wire::JobIdHex(m.hello.job_id).size() == 32, "JobIdHex"); break;
    case wire::MsgType::kError:
      FUZZ_CHECK(m.error.text.size() <= 4096, "error text of %zu bytes", m.error.text.size());
      break;
    default: break;
  }
  return 0;
}
