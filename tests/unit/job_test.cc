// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Server-side checks of a chunk against its collective, and the mismatch explanations.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "server/job.h"

namespace optcast::server {
namespace {

wire::Chunk MakeChunk(CollType coll, uint64_t count, uint64_t server_elems, uint32_t segment, uint64_t offset,
                      uint32_t n) {
  wire::Chunk c;
  c.desc.coll_seq = 42;
  c.desc.coll = coll;
  c.desc.dtype = DataType::kFloat32;
  c.desc.op = RedOp::kSum;
  c.desc.count = count;
  c.desc.server_elems = server_elems;
  c.ref.segment = segment;
  c.ref.offset = offset;
  c.ref.count = n;
  return c;
}

// Expects a protocol error whose message contains every one of `words`.
void ExpectRejected(const wire::Chunk& c, uint32_t nranks, uint32_t sender, std::initializer_list<const char*> words) {
  Status st = ValidateChunk(c, nranks, sender);
  ASSERT_FALSE(st.ok()) << "accepted segment=" << c.ref.segment << " offset=" << c.ref.offset
                        << " count=" << c.ref.count;
  EXPECT_EQ(st.code(), Code::kProtocol);
  for (const char* w : words) EXPECT_NE(st.message().find(w), std::string::npos) << st.message() << " lacks " << w;
}

TEST(ValidateChunk, AcceptsWellFormedChunks) {
  // allreduce of 100 elements, this server handles 50.
  EXPECT_TRUE(ValidateChunk(MakeChunk(CollType::kAllReduce, 100, 50, 0, 0, 50), 4, 0).ok());
  EXPECT_TRUE(ValidateChunk(MakeChunk(CollType::kAllReduce, 100, 50, 0, 99, 1), 4, 3).ok());
  // reduce-scatter of 10 per rank, 4 ranks: segment 3 is [30, 40).
  EXPECT_TRUE(ValidateChunk(MakeChunk(CollType::kReduceScatter, 10, 40, 3, 30, 10), 4, 1).ok());
  EXPECT_TRUE(ValidateChunk(MakeChunk(CollType::kReduceScatter, 10, 40, 0, 9, 1), 4, 2).ok());
  // all-gather: only the sender's own segment.
  EXPECT_TRUE(ValidateChunk(MakeChunk(CollType::kAllGather, 10, 40, 2, 25, 5), 4, 2).ok());
  // Largest allowed collective.
  EXPECT_TRUE(ValidateChunk(MakeChunk(CollType::kAllReduce, uint64_t{1} << 40, 1000, 0, (uint64_t{1} << 40) - 1, 1),
                            1, 0)
                  .ok());
}

TEST(ValidateChunk, RejectsZeroElementCollective) {
  ExpectRejected(MakeChunk(CollType::kAllReduce, 0, 1, 0, 0, 1), 2, 0, {"zero elements", "#42"});
}

TEST(ValidateChunk, RejectsCountAboveLimit) {
  ExpectRejected(MakeChunk(CollType::kAllReduce, (uint64_t{1} << 40) + 1, 10, 0, 0, 1), 2, 0, {"2^40", "#42"});
  ExpectRejected(MakeChunk(CollType::kAllReduce, UINT64_MAX, 10, 0, 0, 1), 2, 0, {"2^40"});
}

TEST(ValidateChunk, RejectsSegmentOutOfRange) {
  ExpectRejected(MakeChunk(CollType::kReduceScatter, 10, 40, 4, 40, 1), 4, 0, {"segment 4", "4 ranks"});
  ExpectRejected(MakeChunk(CollType::kReduceScatter, 10, 40, UINT32_MAX, 0, 1), 4, 0, {"segment"});
  ExpectRejected(MakeChunk(CollType::kAllGather, 10, 40, 7, 70, 1), 4, 0, {"segment 7"});
}

TEST(ValidateChunk, RejectsAllReduceWithNonzeroSegment) {
  ExpectRejected(MakeChunk(CollType::kAllReduce, 10, 10, 1, 0, 1), 4, 1, {"allreduce", "segment 1"});
}

TEST(ValidateChunk, RejectsAllGatherForAnotherRanksSegment) {
  ExpectRejected(MakeChunk(CollType::kAllGather, 10, 40, 0, 0, 1), 4, 1, {"rank 1", "rank 0"});
}

TEST(ValidateChunk, RejectsChunksOutsideTheCollective) {
  // allreduce: past the end, straddling the end, offset overflow.
  ExpectRejected(MakeChunk(CollType::kAllReduce, 100, 100, 0, 100, 1), 1, 0, {"outside", "allreduce of 100"});
  ExpectRejected(MakeChunk(CollType::kAllReduce, 100, 100, 0, 90, 11), 1, 0, {"outside"});
  ExpectRejected(MakeChunk(CollType::kAllReduce, 100, 100, 0, UINT64_MAX, 2), 1, 0, {"outside"});
  // reduce-scatter: before its segment, straddling into the next segment.
  ExpectRejected(MakeChunk(CollType::kReduceScatter, 10, 40, 2, 19, 1), 4, 0, {"outside"});
  ExpectRejected(MakeChunk(CollType::kReduceScatter, 10, 40, 2, 25, 6), 4, 0, {"outside"});
  ExpectRejected(MakeChunk(CollType::kReduceScatter, 10, 40, 2, 30, 1), 4, 0, {"outside"});
  // all-gather: straddling.
  ExpectRejected(MakeChunk(CollType::kAllGather, 10, 40, 1, 15, 10), 4, 1, {"outside"});
}

TEST(ValidateChunk, RejectsChunkLargerThanServerShare) {
  ExpectRejected(MakeChunk(CollType::kAllReduce, 100, 30, 0, 0, 31), 2, 0, {"31 elements", "exceeds", "30"});
}

TEST(DescribeColl, NamesShape) {
  wire::CollDesc d;
  d.coll = CollType::kAllReduce;
  d.count = 1024;
  d.dtype = DataType::kFloat32;
  d.op = RedOp::kSum;
  EXPECT_EQ(DescribeColl(d), "allreduce of 1024 float32 (sum)");
  d.coll = CollType::kReduceScatter;
  d.dtype = DataType::kBFloat16;
  d.op = RedOp::kMax;
  EXPECT_EQ(DescribeColl(d), "reducescatter of 1024 bfloat16 (max)");
  d.coll = CollType::kAllGather;
  EXPECT_EQ(DescribeColl(d), "allgather of 1024 bfloat16");  // no op for all-gather
}

wire::CollDesc BaseDesc() {
  wire::CollDesc d;
  d.coll_seq = 7;
  d.coll = CollType::kAllReduce;
  d.dtype = DataType::kFloat32;
  d.op = RedOp::kSum;
  d.count = 1000;
  d.server_elems = 500;
  return d;
}

void ExpectMentions(const std::string& text, std::initializer_list<const char*> words) {
  for (const char* w : words) EXPECT_NE(text.find(w), std::string::npos) << text << " lacks " << w;
}

TEST(DescribeMismatch, CollectiveType) {
  auto a = BaseDesc(), b = BaseDesc();
  b.coll = CollType::kReduceScatter;
  ExpectMentions(DescribeMismatch(a, 0, b, 3),
                 {"#7", "collective type", "rank 0", "allreduce", "rank 3", "reducescatter", "same order"});
}

TEST(DescribeMismatch, DataType) {
  auto a = BaseDesc(), b = BaseDesc();
  b.dtype = DataType::kFloat16;
  ExpectMentions(DescribeMismatch(a, 1, b, 2), {"#7", "data type", "rank 1", "float32", "rank 2", "float16"});
}

TEST(DescribeMismatch, Count) {
  auto a = BaseDesc(), b = BaseDesc();
  b.count = 1001;
  b.server_elems = 501;
  ExpectMentions(DescribeMismatch(a, 0, b, 1), {"element count", "1000", "1001", "rank 0", "rank 1"});
}

TEST(DescribeMismatch, Op) {
  auto a = BaseDesc(), b = BaseDesc();
  b.op = RedOp::kMax;
  ExpectMentions(DescribeMismatch(a, 2, b, 0), {"reduction op", "sum", "max", "rank 2", "rank 0"});
}

TEST(DescribeMismatch, Striping) {
  auto a = BaseDesc(), b = BaseDesc();
  b.server_elems = 499;
  ExpectMentions(DescribeMismatch(a, 0, b, 1), {"striping", "500", "499", "server list"});
}

TEST(DescribeMismatch, FirstDifferenceWins) {
  auto a = BaseDesc(), b = BaseDesc();
  b.dtype = DataType::kInt8;
  b.count = 3;
  b.op = RedOp::kMin;
  const std::string m = DescribeMismatch(a, 0, b, 1);
  EXPECT_NE(m.find("data type"), std::string::npos) << m;
  EXPECT_EQ(m.find("element count"), std::string::npos) << m;
}

TEST(DescribeMismatch, AllGatherIgnoresOpOnlyForOp) {
  auto a = BaseDesc(), b = BaseDesc();
  a.coll = b.coll = CollType::kAllGather;
  b.op = RedOp::kMax;
  const std::string m = DescribeMismatch(a, 0, b, 1);
  EXPECT_EQ(m.find("reduction op"), std::string::npos) << m;
}

}  // namespace
}  // namespace optcast::server
