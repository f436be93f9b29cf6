// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "optcast/status.h"
#include "transport/connection.h"
#include "transport/message.h"

namespace optcast::transport {

// Collects every message a connection delivers: metas, and payloads into buffers of their own.
class Collector final : public MessageHandler {
 public:
  Status OnMessageMeta(Connection&, std::span<const uint8_t> meta, uint64_t payload_len, uint8_t** dst) override {
    metas.emplace_back(meta.begin(), meta.end());
    payloads.emplace_back(payload_len);
    *dst = payloads.back().data();
    return Status::Ok();
  }
  Status OnMessageComplete(Connection&) override {
    ++completed;
    return Status::Ok();
  }
  std::vector<std::vector<uint8_t>> metas;
  std::vector<std::vector<uint8_t>> payloads;
  size_t completed = 0;
};

}  // namespace optcast::transport
