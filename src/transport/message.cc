// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/message.h"

#include <cstring>

#include "common/little_endian.h"

namespace optcast::transport {

uint8_t* StartOutMessage(OutMessage* m, size_t meta_len, const void* payload, uint64_t payload_len) {
  uint8_t* head = m->head.Resize(kFrameHeaderSize + meta_len);
  PutU32(head, kFrameMagic);
  PutU32(head + 4, static_cast<uint32_t>(meta_len));
  PutU64(head + 8, payload_len);
  m->payload = static_cast<const uint8_t*>(payload);
  m->payload_len = payload_len;
  return head + kFrameHeaderSize;
}

OutMessage MakeOutMessage(std::span<const uint8_t> meta, const void* payload, uint64_t payload_len) {
  OutMessage m;
  uint8_t* dst = StartOutMessage(&m, meta.size(), payload, payload_len);
  if (!meta.empty()) std::memcpy(dst, meta.data(), meta.size());
  return m;
}

}  // namespace optcast::transport
