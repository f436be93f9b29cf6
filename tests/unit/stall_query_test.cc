// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The wording of a client's timeout once the servers have (or have not) said what they wait for.

#include "client/stall_query.h"

#include <gtest/gtest.h>

#include "wire/protocol.h"

namespace optcast::client {
namespace {

using std::chrono::milliseconds;

TEST(StallQuery, NamesTheRanksEveryServerWaitsFor) {
  StallQuery q;
  const auto now = Clock::now();
  q.Begin(5, {{0, "h0:1"}, {2, "h2:1"}}, now + milliseconds(1000));
  EXPECT_TRUE(q.asked());
  EXPECT_FALSE(q.Done(now));
  q.OnReport(2, 5, "1,3");
  EXPECT_FALSE(q.Done(now));
  q.OnReport(0, 4, "7");  // about another collective: ignored
  EXPECT_FALSE(q.Done(now));
  q.OnReport(0, 5, "3");
  EXPECT_TRUE(q.Done(now));
  EXPECT_EQ(q.Describe(milliseconds(1000)),
            "server h0:1 is still waiting for rank(s) 3; server h2:1 is still waiting for rank(s) 1,3; a rank may be "
            "stuck or dead");
}

TEST(StallQuery, AServerThatDoesNotAnswerIsNamedAsPossiblyStuck) {
  StallQuery q;
  const auto now = Clock::now();
  q.Begin(9, {{0, "h0:1"}, {1, "h1:1"}}, now + milliseconds(500));
  q.OnReport(0, 9, "2");
  EXPECT_FALSE(q.Done(now));
  EXPECT_TRUE(q.Done(now + milliseconds(500)));
  EXPECT_EQ(q.Describe(milliseconds(500)),
            "server h0:1 is still waiting for rank(s) 2; server h1:1 did not say which ranks it waits for within "
            "500 ms; a rank or a server may be stuck or dead");
  q.Reset();
  EXPECT_FALSE(q.asked());
  q.Begin(10, {{1, "h1:1"}}, now);
  EXPECT_EQ(q.Describe(milliseconds(500)),
            "server h1:1 did not say which ranks it waits for within 500 ms; that server may be stuck or dead");
}

TEST(StallQuery, AnAnswerWithoutRanksDoesNotBlameARank) {
  StallQuery q;
  q.Begin(3, {{0, "h0:1"}}, Clock::now() + milliseconds(100));
  q.OnReport(0, 3, "(none here: waiting for the upstream server p:1)");
  EXPECT_EQ(q.Describe(milliseconds(100)),
            "server h0:1 is still waiting for rank(s) (none here: waiting for the upstream server p:1); a rank or a "
            "server may be stuck or dead");
  StallQuery none;
  none.Begin(3, {}, Clock::now());
  EXPECT_TRUE(none.Done(Clock::now()));
  EXPECT_EQ(none.Describe(milliseconds(100)), "a rank or a server may be stuck or dead");
}

TEST(StallQuery, AServerAskedAboutAReRunAnswersAboutTheReRun) {
  // After a failover, a server may owe a collective only the re-run of a dead server's share.
  StallQuery q;
  const auto now = Clock::now();
  const uint64_t rerun = wire::RecoverySeq(1, 7);
  q.Begin(7, {{0, "h0:1"}, {1, "h1:1", rerun}}, now + milliseconds(1000));
  q.OnReport(1, 7, "0");  // about the collective itself, which h1 was not asked about: ignored
  EXPECT_FALSE(q.Done(now));
  q.OnReport(1, rerun, "2");
  q.OnReport(0, 7, "2");
  EXPECT_TRUE(q.Done(now));
  EXPECT_EQ(q.Describe(milliseconds(1000)),
            "server h0:1 is still waiting for rank(s) 2; server h1:1 is still waiting for rank(s) 2; a rank may be "
            "stuck or dead");
}

}  // namespace
}  // namespace optcast::client
