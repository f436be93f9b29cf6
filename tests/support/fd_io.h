// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Whole buffers over a socket between a test and the processes it forks, every read bounded.

#include <chrono>
#include <cstddef>

namespace optcast::testsupport {

// Sends all `n` bytes on the socket `fd` (MSG_NOSIGNAL: a peer that has gone is false, not
// SIGPIPE). False once the other side is gone.
bool WriteAll(int fd, const void* data, size_t n);
// Reads exactly `n` bytes from `fd` before `deadline`. False on end of stream (the other side
// exited), an error, or the deadline.
bool ReadAll(int fd, void* data, size_t n, std::chrono::steady_clock::time_point deadline);

}  // namespace optcast::testsupport
