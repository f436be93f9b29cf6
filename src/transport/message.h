// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "optcast/status.h"
#include "transport/traffic_class.h"

namespace optcast::transport {

// Every transport moves messages made of a small `meta` block (the protocol's header, owned by
// the wire layer) and an optional bulk `payload` that is sent from and received into the
// caller's memory without staging copies.
//
// Stream framing (TCP): 16 bytes, little-endian: magic u32, meta_len u32, payload_len u64.
inline constexpr uint32_t kFrameMagic = 0x4354504f;  // "OPTC"
inline constexpr size_t kFrameHeaderSize = 16;
inline constexpr uint32_t kMaxMetaBytes = 16 * 1024;

class Connection;

// Frame header + meta of one message. The per-chunk messages fit inline, so sending a chunk or a
// result allocates nothing; larger ones (an error's text) spill to the heap.
class FrameHead {
 public:
  static constexpr size_t kInlineBytes = 80;
  uint8_t* Resize(size_t n) {
    size_ = n;
    if (n <= kInlineBytes) return inline_;
    spill_.resize(n);
    return spill_.data();
  }
  const uint8_t* data() const { return size_ <= kInlineBytes ? inline_ : spill_.data(); }
  size_t size() const { return size_; }

 private:
  uint8_t inline_[kInlineBytes];
  size_t size_ = 0;
  std::vector<uint8_t> spill_;
};

// One message to send. `payload` must stay valid until `on_done` runs (or `keepalive` owns it).
struct OutMessage {
  FrameHead head;  // frame header + meta, built by MakeOutMessage / StartOutMessage
  const uint8_t* payload = nullptr;
  uint64_t payload_len = 0;
  std::shared_ptr<const void> keepalive;
  std::function<void()> on_done;  // runs once the bytes are handed to the kernel
  uint64_t tag = 0;               // the sender's label (the client: the collective's sequence number)
  TrafficClass traffic_class = TrafficClass::kUnchanged;  // traffic_class.h
};

OutMessage MakeOutMessage(std::span<const uint8_t> meta, const void* payload, uint64_t payload_len);
// Writes the frame header of a message with `meta_len` bytes of meta into `m` and returns where
// the caller encodes the meta (the allocation-free form of MakeOutMessage).
uint8_t* StartOutMessage(OutMessage* m, size_t meta_len, const void* payload, uint64_t payload_len);

// Receives messages from a connection. Called from the thread that drives the connection.
class MessageHandler {
 public:
  virtual ~MessageHandler() = default;
  // The meta of a message has arrived. Point *payload_dst at payload_len writable bytes (ignored
  // when payload_len is 0). An error closes the connection with that status. The bytes must stay
  // writable until OnMessageComplete or the connection's destruction, even if the owner stops
  // reading (DiscardAvailable): a transport that receives straight into them (ofi) has the
  // receive posted and cannot take it back.
  virtual Status OnMessageMeta(Connection& conn, std::span<const uint8_t> meta, uint64_t payload_len,
                               uint8_t** payload_dst) = 0;
  // The payload has fully landed at *payload_dst.
  virtual Status OnMessageComplete(Connection& conn) = 0;
};

}  // namespace optcast::transport
