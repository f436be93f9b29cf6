// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A client that speaks raw bytes to a server on loopback, to test how it meets bad input.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "optcast/job_id.h"
#include "optcast/status.h"
#include "wire/protocol.h"

namespace optcast::e2e {

// A blocking loopback connection with a 5 s receive timeout; -1 on failure.
int RawConnect(uint16_t port);
bool SendRaw(int fd, const std::vector<uint8_t>& bytes);
// Header (magic, meta_len, payload_len) + meta.
std::vector<uint8_t> Frame(const std::vector<uint8_t>& meta, uint64_t payload_len);
std::vector<uint8_t> Concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b);

struct RawReply {
  enum Kind { kFrame, kClosed, kTimeout, kReset, kGarbage } kind = kGarbage;
  uint64_t payload_len = 0;
  wire::Message msg;
  std::string detail;
};

// Reads one frame's header and meta (not its payload).
RawReply ReadReply(int fd);
// The server answers with an Error frame naming the problem (every one of `words`), then closes.
void ExpectErrorThenClose(int fd, Code code, std::initializer_list<const char*> words, const char* what);
std::vector<uint8_t> HelloMeta(const JobId& job, uint32_t nranks, uint32_t rank);

}  // namespace optcast::e2e
