// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The wire protocol: every message round-trips, and decoding rejects every malformed meta block.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "optcast/job_id.h"
#include "wire/protocol.h"

namespace optcast::wire {
namespace {

// Sizes fixed by the layout comment in wire/protocol.h.
constexpr size_t kPrefixBytes = 4;
constexpr size_t kHelloBytes = kPrefixBytes + 16 + 4 + 4 + 4 + 4;
constexpr size_t kWelcomeBytes = kPrefixBytes + 8 + 4 + 4 + 8 + 4;
constexpr size_t kCollDescBytes = 8 + 1 + 1 + 1 + 1 + 8 + 8 + 4;
constexpr size_t kChunkRefBytes = 4 + 8 + 4;
constexpr size_t kChunkBytes = kPrefixBytes + kCollDescBytes + kChunkRefBytes;
constexpr size_t kDoneBytes = kPrefixBytes + 8 + kChunkRefBytes;
constexpr size_t kErrorHeadBytes = kPrefixBytes + 4 + 8 + 4;
constexpr size_t kMaxErrorText = 4096;

// Offsets inside an encoded Chunk meta.
constexpr size_t kChunkCollOffset = kPrefixBytes + 8;
constexpr size_t kChunkDtypeOffset = kChunkCollOffset + 1;
constexpr size_t kChunkOpOffset = kChunkCollOffset + 2;
constexpr size_t kChunkRefCountOffset = kChunkBytes - 4;

Status DecodeBytes(const std::vector<uint8_t>& bytes, Message* out) {
  return Decode(std::span<const uint8_t>(bytes.data(), bytes.size()), out);
}

uint16_t GetU16(const std::vector<uint8_t>& b, size_t at) { return static_cast<uint16_t>(b[at] | (b[at + 1] << 8)); }

void PutU16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}

void PutU32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

Chunk SampleChunk() {
  Chunk c;
  c.desc.coll_seq = 0x0102030405060708ull;
  c.desc.coll = CollType::kReduceScatter;
  c.desc.dtype = DataType::kBFloat16;
  c.desc.op = RedOp::kMax;
  c.desc.count = 0x1122334455ull;
  c.desc.server_elems = 0x99aabbccull;
  c.ref.segment = 3;
  c.ref.offset = 0x0a0b0c0d0e0full;
  c.ref.count = 0xfedcba98u;
  return c;
}

std::vector<std::vector<uint8_t>> AllValidMessages() {
  Hello h;
  h.nranks = 4;
  h.rank = 2;
  ErrorMsg e{Code::kMismatch, 9, "boom"};
  ChunkDone d{5, {1, 2, 3}};
  return {EncodeHello(h),
          EncodeWelcome({1u << 20, 30000, kWelcomeInTree}),
          EncodeError(e),
          EncodeChunk(SampleChunk()),
          EncodeResult(d),
          EncodeAck(d),
          EncodeBye(),
          EncodeStallQuery(5),
          EncodeStallReport(StallReport{5, "1,3"}),
          EncodeFailover(FailoverReport{1, 0, 0x2, 6, {5}}),
          EncodeAgreed(FailoverAgreed{1, 0x2, 6, {5}}),
          EncodeNotice(0x2),
          EncodeEpoch(EpochChange{1, 0x2, 6}),
          EncodeHeartbeat()};
}

// ---- Round trips ----

TEST(WireRoundTrip, Hello) {
  Hello in;
  for (size_t i = 0; i < in.job_id.size(); ++i) in.job_id[i] = static_cast<uint8_t>(0xf0 + i);
  in.nranks = 0xdeadbeef;
  in.rank = 0x12345678;
  in.flags = 0x80000001;
  in.lane = 0x0badcafe;
  const auto bytes = EncodeHello(in);
  EXPECT_EQ(bytes.size(), kHelloBytes);
  EXPECT_EQ(GetU16(bytes, 0), kProtocolVersion);
  EXPECT_EQ(GetU16(bytes, 2), static_cast<uint16_t>(MsgType::kHello));
  Message out;
  ASSERT_TRUE(DecodeBytes(bytes, &out).ok());
  EXPECT_EQ(out.type, MsgType::kHello);
  EXPECT_EQ(out.hello.job_id, in.job_id);
  EXPECT_EQ(out.hello.nranks, in.nranks);
  EXPECT_EQ(out.hello.rank, in.rank);
  EXPECT_EQ(out.hello.flags, in.flags);
  EXPECT_EQ(out.hello.lane, in.lane);
}

TEST(WireRoundTrip, Welcome) {
  for (uint32_t flags : {0u, kWelcomeInTree, 0xffffffffu}) {
    Welcome in{0x0123456789abcdefull, 0xfffffffeu, flags, 0xfedcba9876543210ull ^ flags, 0x87654321u};
    const auto bytes = EncodeWelcome(in);
    EXPECT_EQ(bytes.size(), kWelcomeBytes);
    Message out;
    ASSERT_TRUE(DecodeBytes(bytes, &out).ok());
    EXPECT_EQ(out.type, MsgType::kWelcome);
    EXPECT_EQ(out.welcome.max_payload, in.max_payload);
    EXPECT_EQ(out.welcome.job_timeout_ms, in.job_timeout_ms);
    EXPECT_EQ(out.welcome.flags, in.flags);
    EXPECT_EQ(out.welcome.link_rate_bits, in.link_rate_bits);
    EXPECT_EQ(out.welcome.lanes, in.lanes);
  }
}

TEST(WireRoundTrip, ErrorEveryCode) {
  for (int code = 0; code <= static_cast<int>(Code::kCancelled); ++code) {
    ErrorMsg in{static_cast<Code>(code), 0xabcdef0123ull + static_cast<uint64_t>(code),
                "rank 3 disagrees about \"data type\" \xe2\x9c\x93 #" + std::to_string(code)};
    const auto bytes = EncodeError(in);
    EXPECT_EQ(bytes.size(), kErrorHeadBytes + in.text.size());
    Message out;
    ASSERT_TRUE(DecodeBytes(bytes, &out).ok()) << code;
    EXPECT_EQ(out.type, MsgType::kError);
    EXPECT_EQ(out.error.code, in.code);
    EXPECT_EQ(out.error.coll_seq, in.coll_seq);
    EXPECT_EQ(out.error.text, in.text);
  }
}

TEST(WireRoundTrip, ErrorEmptyTextAndEmbeddedNul) {
  for (const std::string& text : {std::string(), std::string("a\0b", 3)}) {
    ErrorMsg in{Code::kTimeout, 1, text};
    Message out;
    ASSERT_TRUE(DecodeBytes(EncodeError(in), &out).ok());
    EXPECT_EQ(out.error.text, text);
  }
}

TEST(WireRoundTrip, ChunkEveryCollDtypeOp) {
  for (int coll = 0; coll <= static_cast<int>(CollType::kAllGather); ++coll) {
    for (int dt = 0; dt < kNumDataTypes; ++dt) {
      for (int op = 0; op < kNumRedOps; ++op) {
        Chunk in = SampleChunk();
        in.desc.coll = static_cast<CollType>(coll);
        in.desc.dtype = static_cast<DataType>(dt);
        in.desc.op = static_cast<RedOp>(op);
        in.desc.coll_seq = static_cast<uint64_t>(coll * 100 + dt * 10 + op);
        const auto bytes = EncodeChunk(in);
        ASSERT_EQ(bytes.size(), kChunkBytes);
        Message out;
        ASSERT_TRUE(DecodeBytes(bytes, &out).ok()) << coll << " " << dt << " " << op;
        EXPECT_EQ(out.type, MsgType::kChunk);
        EXPECT_EQ(out.chunk.desc, in.desc);
        EXPECT_EQ(out.chunk.ref.segment, in.ref.segment);
        EXPECT_EQ(out.chunk.ref.offset, in.ref.offset);
        EXPECT_EQ(out.chunk.ref.count, in.ref.count);
      }
    }
  }
}

TEST(WireRoundTrip, ChunkExtremeValues) {
  Chunk in;
  in.desc.coll_seq = UINT64_MAX;
  in.desc.count = UINT64_MAX;
  in.desc.server_elems = UINT64_MAX;
  in.ref.segment = UINT32_MAX;
  in.ref.offset = UINT64_MAX;
  in.ref.count = 1;
  Message out;
  ASSERT_TRUE(DecodeBytes(EncodeChunk(in), &out).ok());
  EXPECT_EQ(out.chunk.desc, in.desc);
  EXPECT_EQ(out.chunk.ref.segment, UINT32_MAX);
  EXPECT_EQ(out.chunk.ref.offset, UINT64_MAX);
  EXPECT_EQ(out.chunk.ref.count, 1u);
}

TEST(WireRoundTrip, ResultAndAck) {
  ChunkDone in{0x1122334455667788ull, {7, 0x8877665544332211ull, 0xffffffffu}};
  for (bool result : {true, false}) {
    const auto bytes = result ? EncodeResult(in) : EncodeAck(in);
    EXPECT_EQ(bytes.size(), kDoneBytes);
    Message out;
    ASSERT_TRUE(DecodeBytes(bytes, &out).ok());
    EXPECT_EQ(out.type, result ? MsgType::kResult : MsgType::kAck);
    EXPECT_EQ(out.done.coll_seq, in.coll_seq);
    EXPECT_EQ(out.done.ref.segment, in.ref.segment);
    EXPECT_EQ(out.done.ref.offset, in.ref.offset);
    EXPECT_EQ(out.done.ref.count, in.ref.count);
  }
}

TEST(WireRoundTrip, ResultAndAckMayCarryZeroCount) {
  // Only chunks are required to be non-empty; a zero-count result is left to the client to judge.
  ChunkDone in{1, {0, 0, 0}};
  Message out;
  EXPECT_TRUE(DecodeBytes(EncodeResult(in), &out).ok());
  EXPECT_TRUE(DecodeBytes(EncodeAck(in), &out).ok());
}

TEST(WireRoundTrip, Bye) {
  const auto bytes = EncodeBye();
  EXPECT_EQ(bytes.size(), kPrefixBytes);
  Message out;
  ASSERT_TRUE(DecodeBytes(bytes, &out).ok());
  EXPECT_EQ(out.type, MsgType::kBye);
}

TEST(WireRoundTrip, GrowAndSealed) {
  Message out;
  ASSERT_TRUE(DecodeBytes(EncodeGrow(Grow{0x01020304u, 0x0a0b0c0du}), &out).ok());
  EXPECT_EQ(out.type, MsgType::kGrow);
  EXPECT_EQ(out.grow.weight, 0x01020304u);
  EXPECT_EQ(out.grow.min_rank, 0x0a0b0c0du);
  ASSERT_TRUE(DecodeBytes(EncodeSealed(4096), &out).ok());
  EXPECT_EQ(out.type, MsgType::kSealed);
  EXPECT_EQ(out.sealed_nranks, 4096u);
  // Exact lengths: a Grow cut short or a Sealed with a trailing byte is refused.
  auto grow = EncodeGrow(Grow{1, 2});
  grow.pop_back();
  EXPECT_EQ(DecodeBytes(grow, &out).code(), Code::kProtocol);
  auto sealed = EncodeSealed(1);
  sealed.push_back(0);
  EXPECT_EQ(DecodeBytes(sealed, &out).code(), Code::kProtocol);
}

TEST(WireRoundTrip, StallQueryAndReport) {
  Message out;
  const auto query = EncodeStallQuery(0x0102030405060708ull);
  EXPECT_EQ(query.size(), kPrefixBytes + 8);
  ASSERT_TRUE(DecodeBytes(query, &out).ok());
  EXPECT_EQ(out.type, MsgType::kStallQuery);
  EXPECT_EQ(out.stall_query_seq, 0x0102030405060708ull);
  ASSERT_TRUE(DecodeBytes(EncodeStallReport(StallReport{77, "1,3"}), &out).ok());
  EXPECT_EQ(out.type, MsgType::kStallReport);
  EXPECT_EQ(out.stall_report.coll_seq, 77u);
  EXPECT_EQ(out.stall_report.waiting_for, "1,3");
  // A long answer is cut to the error-text limit, as errors are.
  ASSERT_TRUE(DecodeBytes(EncodeStallReport(StallReport{1, std::string(kMaxErrorText + 10, 'x')}), &out).ok());
  EXPECT_EQ(out.stall_report.waiting_for.size(), kMaxErrorText);
  // Exact lengths: a query with a trailing byte, a report whose text is shorter than it says.
  auto longer = query;
  longer.push_back(0);
  EXPECT_EQ(DecodeBytes(longer, &out).code(), Code::kProtocol);
  auto report = EncodeStallReport(StallReport{1, "2"});
  report.pop_back();
  EXPECT_EQ(DecodeBytes(report, &out).code(), Code::kProtocol);
}

TEST(WireRoundTrip, FailoverMessages) {
  Message out;
  FailoverReport r;
  r.epoch = 2;
  r.server_index = 5;
  r.dead_mask = 0x9;
  r.first_unplanned = 0x0102030405060708ull;
  r.needing = {3, 7, 0xffffffffffull};
  ASSERT_TRUE(DecodeBytes(EncodeFailover(r), &out).ok());
  EXPECT_EQ(out.type, MsgType::kFailover);
  EXPECT_EQ(out.report.epoch, 2u);
  EXPECT_EQ(out.report.server_index, 5u);
  EXPECT_EQ(out.report.dead_mask, 0x9u);
  EXPECT_EQ(out.report.first_unplanned, r.first_unplanned);
  EXPECT_EQ(out.report.needing, r.needing);
  // A downstream server passes a rank's report up its tree with the rank's number.
  ASSERT_TRUE(DecodeBytes(EncodeFailoverRelay(77, r), &out).ok());
  EXPECT_EQ(out.type, MsgType::kFailoverRelay);
  EXPECT_EQ(out.relay_rank, 77u);
  EXPECT_EQ(out.report.server_index, 5u);
  EXPECT_EQ(out.report.first_unplanned, r.first_unplanned);
  EXPECT_EQ(out.report.needing, r.needing);
  FailoverAgreed a{3, 0x30, 99, {1, 2}};
  ASSERT_TRUE(DecodeBytes(EncodeAgreed(a), &out).ok());
  EXPECT_EQ(out.type, MsgType::kAgreed);
  EXPECT_EQ(out.agreed.epoch, 3u);
  EXPECT_EQ(out.agreed.dead_mask, 0x30u);
  EXPECT_EQ(out.agreed.boundary, 99u);
  EXPECT_EQ(out.agreed.recover, (std::vector<uint64_t>{1, 2}));
  ASSERT_TRUE(DecodeBytes(EncodeNotice(0x4), &out).ok());
  EXPECT_EQ(out.notice_mask, 0x4u);
  ASSERT_TRUE(DecodeBytes(EncodeEpoch({1, 0x2, 17}), &out).ok());
  EXPECT_EQ(out.epoch.boundary, 17u);
  ASSERT_TRUE(DecodeBytes(EncodeHeartbeat(), &out).ok());
  EXPECT_EQ(out.type, MsgType::kHeartbeat);
  // A list whose length disagrees with the bytes, or a report naming a 65th server, is refused.
  auto bytes = EncodeFailover(r);
  bytes.pop_back();
  EXPECT_EQ(DecodeBytes(bytes, &out).code(), Code::kProtocol);
  r.server_index = 64;
  EXPECT_EQ(DecodeBytes(EncodeFailover(r), &out).code(), Code::kProtocol);
  // Recovery collectives keep their root and epoch apart from every ordinary sequence number.
  const uint64_t seq = RecoverySeq(5, 1234);
  EXPECT_TRUE(IsRecoverySeq(seq));
  EXPECT_FALSE(IsRecoverySeq(1234));
  EXPECT_EQ(RootSeq(seq), 1234u);
  EXPECT_NE(RecoverySeq(4, 1234), seq);
}

TEST(WireRoundTrip, LaterMessageTypesKeepTheirDocumentedNumbers) {
  // docs/protocol.md: StallQuery and StallReport are 12 and 13, the failover messages 14 to 18, the
  // relayed report 19.
  EXPECT_EQ(GetU16(EncodeStallQuery(1), 2), 12);
  EXPECT_EQ(GetU16(EncodeStallReport(StallReport{1, "0"}), 2), 13);
  EXPECT_EQ(GetU16(EncodeFailover(FailoverReport{}), 2), 14);
  EXPECT_EQ(GetU16(EncodeAgreed(FailoverAgreed{}), 2), 15);
  EXPECT_EQ(GetU16(EncodeNotice(1), 2), 16);
  EXPECT_EQ(GetU16(EncodeEpoch(EpochChange{}), 2), 17);
  EXPECT_EQ(GetU16(EncodeHeartbeat(), 2), 18);
  EXPECT_EQ(GetU16(EncodeFailoverRelay(0, FailoverReport{}), 2), 19);
}

TEST(WireRoundTrip, ChunkFlags) {
  Chunk c = SampleChunk();
  c.flags = kChunkResultCopy | kChunkInputLost;
  Message out;
  ASSERT_TRUE(DecodeBytes(EncodeChunk(c), &out).ok());
  EXPECT_EQ(out.chunk.flags, c.flags);
  auto bytes = EncodeChunk(c);
  bytes[kChunkOpOffset + 1] = 0x80;  // an unknown flag
  EXPECT_EQ(DecodeBytes(bytes, &out).code(), Code::kProtocol);
}

TEST(WireRoundTrip, LittleEndianLayout) {
  // The chunk layout is fixed: check a few fields at their documented byte positions.
  const auto b = EncodeChunk(SampleChunk());
  EXPECT_EQ(b[kPrefixBytes], 0x08);  // coll_seq LSB first
  EXPECT_EQ(b[kPrefixBytes + 7], 0x01);
  EXPECT_EQ(b[kChunkCollOffset], static_cast<uint8_t>(CollType::kReduceScatter));
  EXPECT_EQ(b[kChunkDtypeOffset], static_cast<uint8_t>(DataType::kBFloat16));
  EXPECT_EQ(b[kChunkOpOffset], static_cast<uint8_t>(RedOp::kMax));
  EXPECT_EQ(b[kChunkOpOffset + 1], 0);  // flags
  EXPECT_EQ(b[kChunkRefCountOffset], 0x98);
  EXPECT_EQ(b[kChunkRefCountOffset + 3], 0xfe);
}

// ---- Rejections ----

TEST(WireDecode, RejectsWrongVersionNamingIt) {
  for (auto bytes : AllValidMessages()) {
    // An Error is read in any version (the next test).
    if (GetU16(bytes, 2) == static_cast<uint16_t>(MsgType::kError)) continue;
    for (uint16_t v : {uint16_t{0}, uint16_t{2}, uint16_t{0x100}, uint16_t{0xffff}}) {
      if (v == kProtocolVersion) continue;
      PutU16(bytes, 0, v);
      Message out;
      Status st = DecodeBytes(bytes, &out);
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.code(), Code::kProtocol);
      EXPECT_NE(st.message().find("version"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find(std::to_string(v)), std::string::npos) << st.message();
    }
  }
}

// A refusal from a peer of another release is still read: the Error's layout is every version's.
TEST(WireDecode, ReadsAnErrorOfAnotherVersion) {
  const std::vector<uint8_t> bytes = EncodeErrorForVersion({Code::kProtocol, 0, "speaks version 4"}, 4);
  EXPECT_EQ(VersionOf(bytes), 4);
  Message out;
  ASSERT_TRUE(DecodeBytes(bytes, &out).ok());
  EXPECT_EQ(out.type, MsgType::kError);
  EXPECT_EQ(out.error.text, "speaks version 4");
}

TEST(WireDecode, HelloNamesALaneAndWelcomeCountsThem) {
  Hello h;
  h.nranks = 3;
  h.lane = 2;
  Message out;
  ASSERT_TRUE(DecodeBytes(EncodeHello(h), &out).ok());
  EXPECT_EQ(out.hello.lane, 2u);
  Welcome w;
  w.lanes = 3;
  ASSERT_TRUE(DecodeBytes(EncodeWelcome(w), &out).ok());
  EXPECT_EQ(out.welcome.lanes, 3u);
  w.lanes = 0;
  EXPECT_FALSE(DecodeBytes(EncodeWelcome(w), &out).ok());
}

TEST(WireDecode, RejectsUnknownType) {
  for (uint16_t t : {uint16_t{0}, uint16_t{20}, uint16_t{21}, uint16_t{0x100}, uint16_t{0xffff}}) {
    std::vector<uint8_t> bytes = EncodeBye();
    PutU16(bytes, 2, t);
    Message out;
    Status st = DecodeBytes(bytes, &out);
    ASSERT_FALSE(st.ok()) << t;
    EXPECT_EQ(st.code(), Code::kProtocol);
    EXPECT_NE(st.message().find("unknown message type"), std::string::npos) << st.message();
    // Also with a body the size of a chunk: the type check must not depend on the length.
    bytes = EncodeChunk(SampleChunk());
    PutU16(bytes, 2, t);
    EXPECT_FALSE(DecodeBytes(bytes, &out).ok()) << t;
  }
}

TEST(WireDecode, RejectsShortPrefix) {
  const std::vector<uint8_t> bye = EncodeBye();
  for (size_t n = 0; n < kPrefixBytes; ++n) {
    std::vector<uint8_t> bytes(bye.begin(), bye.begin() + static_cast<long>(n));
    Message out;
    Status st = DecodeBytes(bytes, &out);
    EXPECT_FALSE(st.ok()) << n;
    EXPECT_EQ(st.code(), Code::kProtocol);
  }
}

TEST(WireDecode, RejectsEveryTruncationOfEveryMessage) {
  for (const auto& full : AllValidMessages()) {
    for (size_t n = 0; n < full.size(); ++n) {
      std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
      Message out;
      Status st = DecodeBytes(cut, &out);
      EXPECT_FALSE(st.ok()) << "type " << GetU16(full, 2) << " cut to " << n << " of " << full.size();
      EXPECT_EQ(st.code(), Code::kProtocol);
    }
  }
}

TEST(WireDecode, RejectsEveryTruncationOfChunk) {
  const auto full = EncodeChunk(SampleChunk());
  ASSERT_EQ(full.size(), kChunkBytes);
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
    Message out;
    Status st = DecodeBytes(cut, &out);
    ASSERT_FALSE(st.ok()) << n;
    EXPECT_EQ(st.code(), Code::kProtocol);
    if (n >= kPrefixBytes) {
      EXPECT_NE(st.message().find("chunk"), std::string::npos) << st.message();
    }
  }
}

TEST(WireDecode, RejectsOverlongMessages) {
  for (const auto& full : AllValidMessages()) {
    for (size_t extra : {1u, 2u, 7u, 100u}) {
      std::vector<uint8_t> longer = full;
      longer.resize(full.size() + extra, 0);
      Message out;
      Status st = DecodeBytes(longer, &out);
      EXPECT_FALSE(st.ok()) << "type " << GetU16(full, 2) << " +" << extra;
      EXPECT_EQ(st.code(), Code::kProtocol);
    }
  }
}

TEST(WireDecode, RejectsUnknownEnumsInChunk) {
  struct Case {
    size_t offset;
    std::vector<uint8_t> bad;
    const char* word;
  };
  const Case cases[] = {
      {kChunkCollOffset, {3, 4, 0x7f, 0xff}, "collective"},
      {kChunkDtypeOffset, {static_cast<uint8_t>(kNumDataTypes), 11, 0x80, 0xff}, "data type"},
      {kChunkOpOffset, {static_cast<uint8_t>(kNumRedOps), 9, 0xff}, "reduction op"},
  };
  for (const auto& c : cases) {
    for (uint8_t v : c.bad) {
      auto bytes = EncodeChunk(SampleChunk());
      bytes[c.offset] = v;
      Message out;
      Status st = DecodeBytes(bytes, &out);
      ASSERT_FALSE(st.ok()) << c.word << " " << int{v};
      EXPECT_EQ(st.code(), Code::kProtocol);
      EXPECT_NE(st.message().find(c.word), std::string::npos) << st.message();
      EXPECT_NE(st.message().find(std::to_string(v)), std::string::npos) << st.message();
    }
  }
}

TEST(WireDecode, AcceptsEveryValidEnumValueAtTheBoundary) {
  auto bytes = EncodeChunk(SampleChunk());
  bytes[kChunkCollOffset] = static_cast<uint8_t>(CollType::kAllGather);
  bytes[kChunkDtypeOffset] = static_cast<uint8_t>(kNumDataTypes - 1);
  bytes[kChunkOpOffset] = static_cast<uint8_t>(kNumRedOps - 1);
  Message out;
  ASSERT_TRUE(DecodeBytes(bytes, &out).ok());
  EXPECT_EQ(out.chunk.desc.dtype, DataType::kUInt64);
  EXPECT_EQ(out.chunk.desc.op, RedOp::kBxor);
}

TEST(WireDecode, RejectsZeroCountChunk) {
  Chunk c = SampleChunk();
  c.ref.count = 0;
  Message out;
  Status st = DecodeBytes(EncodeChunk(c), &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kProtocol);
  EXPECT_NE(st.message().find("zero"), std::string::npos) << st.message();
}

TEST(WireError, EncodeCapsTextAtLimit) {
  for (size_t len : {kMaxErrorText - 1, kMaxErrorText, kMaxErrorText + 1, 3 * kMaxErrorText}) {
    std::string text(len, 'x');
    for (size_t i = 0; i < len; ++i) text[i] = static_cast<char>('a' + i % 26);
    const auto bytes = EncodeError({Code::kInternal, 4, text});
    const size_t kept = std::min(len, kMaxErrorText);
    EXPECT_EQ(bytes.size(), kErrorHeadBytes + kept) << len;
    Message out;
    ASSERT_TRUE(DecodeBytes(bytes, &out).ok()) << len;
    EXPECT_EQ(out.error.text, text.substr(0, kept));
  }
}

TEST(WireError, DecodeRejectsTextOverLimit) {
  // Hand-build an error meta whose text is one byte over the limit (the encoder refuses to).
  std::vector<uint8_t> bytes = EncodeError({Code::kInternal, 0, std::string(kMaxErrorText, 'y')});
  PutU32(bytes, kErrorHeadBytes - 4, static_cast<uint32_t>(kMaxErrorText + 1));
  bytes.push_back('y');
  Message out;
  Status st = DecodeBytes(bytes, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kProtocol);
}

TEST(WireError, DecodeRejectsTextLengthDisagreeingWithMeta) {
  std::vector<uint8_t> bytes = EncodeError({Code::kInternal, 0, "hello"});
  for (uint32_t claimed : {0u, 4u, 6u, 0xffffffffu}) {
    auto b = bytes;
    PutU32(b, kErrorHeadBytes - 4, claimed);
    Message out;
    EXPECT_FALSE(DecodeBytes(b, &out).ok()) << claimed;
  }
}

TEST(WireError, UnknownCodeBecomesInternal) {
  std::vector<uint8_t> bytes = EncodeError({Code::kInternal, 0, "x"});
  for (uint32_t code : {static_cast<uint32_t>(Code::kCancelled) + 1, 99u, 0xffffffffu}) {
    PutU32(bytes, kPrefixBytes, code);
    Message out;
    ASSERT_TRUE(DecodeBytes(bytes, &out).ok());
    EXPECT_EQ(out.error.code, Code::kInternal) << code;
  }
}

TEST(WirePayload, PayloadBytesIsCountTimesElementSize) {
  for (int dt = 0; dt < kNumDataTypes; ++dt) {
    const auto dtype = static_cast<DataType>(dt);
    for (uint32_t count : {1u, 3u, 1000u, UINT32_MAX}) {
      uint64_t bytes = 0;
      ASSERT_TRUE(PayloadBytes(dtype, {0, 0, count}, &bytes).ok());
      EXPECT_EQ(bytes, uint64_t{count} * DataTypeSize(dtype));
    }
  }
}

TEST(WireJobId, HexMatchesJobIdToHex) {
  for (int i = 0; i < 8; ++i) {
    JobId id = JobId::Random();
    EXPECT_EQ(JobIdHex(id.bytes), id.ToHex());
  }
  JobIdBytes b{};
  b[0] = 0x0f;
  b[15] = 0xa0;
  EXPECT_EQ(JobIdHex(b), "0f0000000000000000000000000000a0");
}

}  // namespace
}  // namespace optcast::wire
