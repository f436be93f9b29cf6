// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Servers and ranks all run on threads of the test process; failed jobs are expected in some
// tests, so servers log errors only unless the caller asked for a level.

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("OPTCAST_LOG_LEVEL", "error", /*overwrite=*/0);
  signal(SIGPIPE, SIG_IGN);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
