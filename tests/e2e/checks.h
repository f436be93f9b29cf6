// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// gtest-side helpers for the e2e tests (parent process only).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness.h"

namespace optcast::e2e {

#define E2E_ASSERT_OK(expr)                                           \
  do {                                                                \
    const ::optcast::Status _e2e_st = (expr);                         \
    ASSERT_TRUE(_e2e_st.ok()) << #expr << ": " << _e2e_st.ToString(); \
  } while (0)

#define E2E_EXPECT_OK(expr)                                           \
  do {                                                                \
    const ::optcast::Status _e2e_st = (expr);                         \
    EXPECT_TRUE(_e2e_st.ok()) << #expr << ": " << _e2e_st.ToString(); \
  } while (0)

// Every child exited with 0; otherwise each failure is reported with the child's message.
inline void ExpectChildrenOk(Children& kids, Shared& shared, milliseconds limit = milliseconds(60000)) {
  const std::vector<ChildResult> results = kids.WaitAll(limit);
  for (size_t i = 0; i < results.size(); ++i) {
    const ChildResult& r = results[i];
    EXPECT_TRUE(r.exited && r.exit_code == 0)
        << "child " << i << ": " << r.Describe() << ": " << shared.Message(static_cast<int>(i));
  }
}

// Slots [first, first + n) recorded the same hash `k`.
inline void ExpectSameHash(Shared& shared, int first, int n, int k, const char* what) {
  for (int i = first + 1; i < first + n; ++i) {
    EXPECT_EQ(Hex(shared->hash[i][k]), Hex(shared->hash[first][k]))
        << what << ": child " << i << " and child " << first << " got different results";
  }
  EXPECT_NE(shared->hash[first][k], 0u) << what << ": child " << first << " recorded no hash";
}

inline uint64_t SeedFor(uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0) {
  return HashBytes(&b, sizeof(b), HashBytes(&c, sizeof(c), HashBytes(&d, sizeof(d), 0x5eed0000ull + a)));
}

}  // namespace optcast::e2e
