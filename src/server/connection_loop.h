// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "optcast/status.h"
#include "server/conn_state.h"
#include "server/options.h"
#include "server/server_metrics.h"
#include "transport/kind.h"
#include "transport/listener.h"
#include "transport/posix/poller.h"

namespace optcast::server {

// The connections of one event loop: accepts them, reads them into the server's handler, flushes
// what is queued on them, closes them with an error, and destroys the dead ones. It knows
// connections, not jobs: what a message means is the handler's business.
class ConnectionLoop {
 public:
  // What the loop reports to the server.
  class Events : public transport::MessageHandler {
   public:
    // Reading or writing failed: the peer closed, sent garbage, or broke a rule.
    virtual void OnConnectionLost(ConnState* cs, const Status& why) = 0;
    // A descriptor given to Watch() is readable.
    virtual void OnWatched(void* tag) = 0;
    // A connection whose hello set hand_off_lane has left this loop: it is the caller's now.
    virtual void OnHandOff(std::unique_ptr<ConnState> cs) = 0;
  };

  ConnectionLoop(const ServerOptions& opts, ServerMetrics& metrics, Events& events);
  ~ConnectionLoop();
  ConnectionLoop(const ConnectionLoop&) = delete;
  ConnectionLoop& operator=(const ConnectionLoop&) = delete;

  // Binds the listening socket (port 0 picks one), then Open().
  Status Listen();
  // Readies the loop without a listener (a lane that the listening lane hands connections to).
  Status Open();
  uint16_t port() const { return port_; }
  // The transport, as the startup log names it.
  std::string TransportName() const;
  // Reports `tag` to Events::OnWatched whenever `fd` is readable.
  Status Watch(int fd, void* tag);
  // Interrupts Poll() from any thread.
  void Wake() { waker_.Wake(); }

  // Waits up to `timeout_ms` for events and handles them.
  Status Poll(int timeout_ms);
  // Writes out what was queued on connections since the last flush.
  void FlushDirty();
  // Destroys the connections marked dead.
  void ReapDead();
  // Closes connections that lingered past their close deadline or never said hello.
  void SweepIdle(Clock::time_point now);

  // Takes over a connection this server opened itself (to a parent server).
  Status Adopt(std::unique_ptr<ConnState> cs);
  void Send(ConnState* cs, transport::OutMessage msg);
  void MarkDirty(ConnState* cs);
  // Sends the error, then closes once it is out (or after a grace period).
  void SendErrorAndClose(ConnState* cs, const Status& st, uint64_t seq);
  // Half-closes once the queued messages are out; the peer has a grace period to close.
  void CloseAfterFlush(ConnState* cs);
  // Refuses a connection without touching any job; the returned status stops reading from it.
  Status Refuse(ConnState* cs, const Status& st);

  // Destroys every connection at once (the server is going away).
  void DestroyAll();
  // Stops accepting for good (shutting down).
  void CloseListener();
  bool HasPendingWrites() const;
  const std::unordered_map<ConnState*, std::unique_ptr<ConnState>>& conns() const { return conns_; }
  // Adds ranks, connections and queued messages to the levels reported as metrics.
  void AddLevels(ServerMetrics::Levels* l) const;

 private:
  void AcceptAll();
  // False when the connection left this loop (handed to another lane).
  bool HandleReadable(ConnState* cs);
  void HandOff(ConnState* cs);
  void PauseAccepting(const Status& why);

  const ServerOptions& opts_;
  ServerMetrics& metrics_;
  Events& events_;
  std::unique_ptr<transport::Listener> listener_;
  uint16_t port_ = 0;
  transport::Poller poller_;
  transport::Waker waker_;
  std::vector<void*> watched_;
  std::vector<transport::Poller::Event> events_scratch_;
  std::unordered_map<ConnState*, std::unique_ptr<ConnState>> conns_;
  std::vector<ConnState*> dirty_;
  bool accept_paused_ = false;
  Clock::time_point accept_resume_at_{};
};

}  // namespace optcast::server
