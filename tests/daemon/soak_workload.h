// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What the soaks run: a job's i-th collective (type, data type, op, size, in place or not) drawn
// from the job's seed, so that every rank of a job runs the same sequence, and one rank's part of
// it, checked against the reference (e2e::VerifyReduction, e2e::VerifyAllGather).

#include <cstddef>
#include <cstdint>
#include <string>

#include "optcast/communicator.h"
#include "optcast/status.h"
#include "optcast/types.h"

namespace optcast::daemon {

// The servers under test are built like the tests. Sanitizer allocators hold freed memory in a
// quarantine and never give it back, so a server's RSS says nothing about leaks there
// (LeakSanitizer checks those instead).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedAllocator = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizedAllocator = true;
#else
inline constexpr bool kSanitizedAllocator = false;
#endif
#else
inline constexpr bool kSanitizedAllocator = false;
#endif

struct CollPlan {
  CollType coll;
  DataType dtype;
  RedOp op;
  size_t count;
  bool in_place;  // allreduce only: send buffer = receive buffer
  uint64_t seed;
};

// `allreduce_share` in [0, 1]: the probability of an allreduce; the rest is split evenly between
// reduce-scatter and all-gather. `max_count`: the largest element count drawn.
CollPlan PlanFor(uint64_t job_seed, int i, double allreduce_share = 1.0 / 3, size_t max_count = 1 << 20);

// Runs `p` on `comm` as rank `rank` of `nranks`. Returns the collective's status; on success
// `*wrong` is "" or a description of the first element that differs from the reference.
Status RunChecked(Communicator& comm, const CollPlan& p, int nranks, int rank, std::string* wrong);

std::string Describe(const CollPlan& p);

}  // namespace optcast::daemon
