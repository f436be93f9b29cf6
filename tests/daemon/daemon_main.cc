// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Rank processes are forked from the test process, which may also run server threads. Server threads
// log warnings (a failed job, a refused connection) under spdlog's sink mutex; a fork at that
// moment would leave the child with a locked mutex. So unless the caller asked for a level, the
// servers log errors only (they have none), which never takes the lock.

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("OPTCAST_LOG_LEVEL", "error", /*overwrite=*/0);
  signal(SIGPIPE, SIG_IGN);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
