// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <string>

#include "transport/connection.h"
#include "transport/message.h"
#include "transport/options.h"
#include "transport/out_queue.h"
#include "transport/posix/socket.h"
#include "transport/posix/traffic_class.h"

namespace optcast::transport::tcp {

// A non-blocking, message-framed TCP connection. Not thread-safe: one thread drives it.
class StreamConnection final : public Connection {
 public:
  // `options`: the DSCP of TrafficClass::kLatency (the congestion control is the dialer's or the
  // listener's to set). `connecting`: the socket's connect is still under way
  // (posix::StartConnect); messages wait in the queue until it is up, and a failed connect is the
  // error of the next Flush or ReadAvailable.
  StreamConnection(posix::Socket socket, uint64_t max_payload, std::string peer, const TcpOptions& options = {},
                   bool connecting = false);
  ~StreamConnection() override;

  int fd() const override { return socket_.fd(); }
  const std::string& peer() const override { return peer_; }
  bool Connected() const override { return !connecting_; }

  // Queues a message; bytes go out on Flush().
  void Send(OutMessage msg) override;
  // Writes what the socket accepts now. Error: the connection is broken.
  Status Flush() override;
  bool HasPendingWrites() const override { return !out_.empty(); }
  size_t PendingWriteCount() const override { return out_.size(); }

  // Reads what is available (up to `budget` bytes) and delivers complete messages to `handler`.
  // Returns Unavailable when the peer closed, Protocol on garbage, or the handler's error.
  Status ReadAvailable(MessageHandler& handler, size_t budget = 8u << 20) override;

  // For queued messages whose tag satisfies `pred`: drops those not started, and copies the
  // unsent rest of a partly written one into memory of its own, so that the caller's buffer may
  // be freed while the stream stays well-formed.
  void DetachPayloads(const std::function<bool(uint64_t)>& pred) override;
  // Forgets every queued message (the connection will not be written again).
  void DropPendingWrites() override;

  // Half-closes the sending side (the peer sees end-of-stream after what was sent).
  void ShutdownWrite() override;
  // Reads and throws away what the peer sends. Returns false once the peer has closed.
  bool DiscardAvailable() override;

 private:
  enum class ReadState { kHeader, kMeta, kPayload };

  Status ParseFromStaging(MessageHandler& handler, bool* progressed);
  // While connecting: whether the connect has finished (an error if it failed).
  Status CheckConnected();
  // The DSCP a message of class `c` is written with, or -1 for the connection's current one.
  int DscpOf(TrafficClass c) const;

  posix::Socket socket_;
  uint64_t max_payload_;
  std::string peer_;
  bool connecting_ = false;

  // Receive side: small reads go through a staging buffer so that several small messages cost
  // one syscall; a large payload is read straight into its destination, together with the
  // header of the message after it (ReadAvailable).
  std::vector<uint8_t> staging_;
  size_t staged_begin_ = 0;
  size_t staged_end_ = 0;
  ReadState state_ = ReadState::kHeader;
  uint32_t meta_len_ = 0;
  uint64_t payload_len_ = 0;
  uint64_t payload_done_ = 0;
  uint8_t* payload_dst_ = nullptr;
  bool next_is_bulk_ = false;  // the last message had a large payload: the next likely has one too

  // Send side.
  OutQueue out_;
  size_t out_offset_ = 0;  // bytes of out_.front() already written (head then payload)
  posix::TrafficClass traffic_class_;
  uint8_t latency_dscp_;
};

}  // namespace optcast::transport::tcp
