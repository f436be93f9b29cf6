// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The client's striping (client/striping.h) and request table (client/request_table.h): a
// collective laid over the servers covers its buffer exactly once, its pieces match what is
// queued, a failed link gets nothing queued, and the table files re-runs with their request.

#include "client/striping.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "client/request_table.h"

namespace optcast::client {
namespace {

Request MakeRequest(CollType coll, uint64_t count, uint64_t seq, size_t nlinks) {
  Request r;
  r.seq = seq;
  r.esize = 4;
  r.desc.coll_seq = seq;
  r.desc.coll = coll;
  r.desc.dtype = DataType::kFloat32;
  r.desc.count = count;
  r.pending_link.assign(nlinks, 0);
  return r;
}

std::vector<ServerLink> MakeLinks(size_t n) {
  std::vector<ServerLink> links(n);
  for (size_t i = 0; i < n; ++i) links[i].index = i;
  return links;
}

TEST(Striping, AnAllReduceCoversItsBufferOnceAndItsPiecesMatchTheQueues) {
  constexpr int kRanks = 4;
  for (uint64_t count : {uint64_t{1}, uint64_t{1000}, uint64_t{1} << 20, (uint64_t{1} << 20) + 7}) {
    std::vector<ServerLink> links = MakeLinks(3);
    const Striping striping(kRanks, 1, /*failover=*/true, 64 * 1024, 64 << 20, 0, kStreamChunks);
    Request req = MakeRequest(CollType::kAllReduce, count, 5, links.size());
    striping.Stripe(&req, {0, 1, 2}, 0, links);
    ASSERT_TRUE(req.planned);
    std::vector<uint8_t> covered(count, 0);
    uint64_t expected = 0;
    size_t queued_chunks = 0;
    for (const ServerLink& link : links) {
      for (const PendingSends& ps : link.queue) {
        EXPECT_EQ(ps.req, &req);
        for (const wire::ChunkRef& ref : ps.chunks) {
          ASSERT_LE(ref.offset + ref.count, count);
          for (uint64_t e = ref.offset; e < ref.offset + ref.count; ++e) ++covered[e];
          const size_t i = req.FindPiece(ref.offset);
          ASSERT_NE(i, SIZE_MAX) << "offset " << ref.offset;
          EXPECT_EQ(req.pieces[i].link, link.index);
          EXPECT_EQ(req.pieces[i].ref.count, ref.count);
          ++queued_chunks;
        }
      }
      expected += req.pending_link[link.index];
    }
    EXPECT_TRUE(std::all_of(covered.begin(), covered.end(), [](uint8_t c) { return c == 1; })) << count;
    EXPECT_EQ(req.pieces.size(), queued_chunks);
    EXPECT_TRUE(std::is_sorted(req.pieces.begin(), req.pieces.end(),
                               [](const Piece& a, const Piece& b) { return a.ref.offset < b.ref.offset; }));
    EXPECT_EQ(req.outstanding, expected);
    EXPECT_GT(req.outstanding, 0u);
  }
}

TEST(Striping, AFailedLinkGetsNothingQueuedButItsShareStaysDue) {
  std::vector<ServerLink> links = MakeLinks(2);
  links[1].failed = true;
  const Striping striping(2, 0, /*failover=*/true, 0, 64 << 20, 0, kStreamChunks);
  Request req = MakeRequest(CollType::kAllReduce, uint64_t{1} << 20, 2, links.size());
  striping.Stripe(&req, {0, 1}, 0, links);
  EXPECT_FALSE(links[0].queue.empty());
  EXPECT_TRUE(links[1].queue.empty());
  EXPECT_GT(req.pending_link[1], 0u);
}

TEST(Striping, AnAllGatherTracksEverySegmentButSendsOnlyItsOwn) {
  constexpr int kRanks = 3;
  constexpr int kRank = 2;
  constexpr uint64_t kCount = 50000;
  std::vector<ServerLink> links = MakeLinks(2);
  const Striping striping(kRanks, kRank, /*failover=*/true, 0, 64 << 20, 0, kStreamChunks);
  Request req = MakeRequest(CollType::kAllGather, kCount, 1, links.size());
  std::vector<float> in(kCount), out(kCount * kRanks);
  req.send = reinterpret_cast<const uint8_t*>(in.data());
  req.recv = reinterpret_cast<uint8_t*>(out.data());
  striping.Stripe(&req, {0, 1}, 0, links);
  uint64_t sent = 0;
  for (const ServerLink& link : links) {
    for (const PendingSends& ps : link.queue) {
      for (const wire::ChunkRef& ref : ps.chunks) {
        EXPECT_TRUE(striping.Sends(req, ref));
        EXPECT_EQ(ref.segment, static_cast<uint32_t>(kRank));
        // Its bytes come from its own input, at the chunk's place within its segment.
        EXPECT_EQ(striping.ChunkSource(req, ref, 0), req.send + (ref.offset - kRank * kCount) * req.esize);
        sent += ref.count;
      }
    }
  }
  EXPECT_EQ(sent, kCount);
  uint64_t tracked = 0;
  for (const Piece& p : req.pieces) {
    tracked += p.ref.count;
    EXPECT_EQ(striping.Sends(req, p.ref), p.ref.segment == static_cast<uint32_t>(kRank));
  }
  EXPECT_EQ(tracked, kCount * kRanks);
}

TEST(Striping, WithoutFailoverNoPiecesAreKept) {
  std::vector<ServerLink> links = MakeLinks(2);
  const Striping striping(2, 0, /*failover=*/false, 0, 64 << 20, 0, kStreamChunks);
  Request req = MakeRequest(CollType::kReduceScatter, 4096, 1, links.size());
  striping.Stripe(&req, {0, 1}, 0, links);
  EXPECT_TRUE(req.pieces.empty());
  EXPECT_GT(req.outstanding, 0u);
}

TEST(RequestTable, FilesRerunsWithTheirRequestAndReturnsEachRequestOnce) {
  RequestTable table;
  Request a, b;
  a.seq = table.TakeSeq();
  b.seq = table.TakeSeq();
  EXPECT_EQ(a.seq, 1u);
  EXPECT_EQ(table.next_seq(), 3u);
  a.pending_link = {1, 0};
  b.pending_link = {0, 2};
  table.Add(b.seq, &b);
  table.Add(a.seq, &a);
  a.rerun_seqs.push_back(wire::RecoverySeq(1, a.seq));
  table.Add(a.rerun_seqs.back(), &a);
  EXPECT_EQ(table.Find(a.rerun_seqs.back()), &a);
  EXPECT_EQ(table.Roots(), (std::vector<Request*>{&a, &b}));
  EXPECT_EQ(table.Oldest(), &a);
  EXPECT_TRUE(table.AnyWaitingOn(1));
  EXPECT_EQ(table.TakeWaitingOn(0), std::vector<Request*>{&a});
  EXPECT_EQ(table.Find(a.seq), nullptr);
  EXPECT_EQ(table.Find(a.rerun_seqs.back()), nullptr);
  EXPECT_EQ(table.Find(b.seq), &b);
  table.Remove(b);
  EXPECT_TRUE(table.empty());
  table.Add(a.seq, &a);
  EXPECT_EQ(table.TakeAll(), std::vector<Request*>{&a});
  EXPECT_TRUE(table.empty());
}

}  // namespace
}  // namespace optcast::client
