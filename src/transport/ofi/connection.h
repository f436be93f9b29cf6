// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transport/connection.h"
#include "transport/ofi/fabric.h"
#include "transport/out_queue.h"
#include "transport/posix/poller.h"
#include "transport/posix/socket.h"

namespace optcast::transport::ofi {

// A connection over one libfabric reliable-datagram endpoint that talks to exactly one peer.
//
// Each message goes out as two tagged sends: its frame header and meta (tag kHeadTag, copied into
// a registered slot) and its payload straight from the caller's buffer (tag kPayloadTag | the
// message's number), which the receiver posts straight into the destination its handler chose.
// Sends are ordered (FI_ORDER_SAS) and posted receives match in the order they were posted, so
// the n-th header receive posted holds the n-th message: messages are numbered by that order, not
// by the order their completions are read, which the provider may change.
//
// A TCP "control" socket, opened to exchange fabric addresses, stays open for the connection's
// life: reliable datagrams do not tell when a peer dies or closes, and its end-of-stream does.
//
// fd() is an epoll descriptor over the completion queue's wait descriptor (FI_WAIT_FD), the
// control socket and an eventfd this connection raises when completions are waiting that the
// wait descriptor would not announce (fi_trywait), so that it is readable whenever there is work.
class FabricConnection final : public Connection {
 public:
  static Status Create(std::shared_ptr<Fabric> fabric, posix::Socket control, uint64_t max_payload, std::string peer,
                       std::unique_ptr<FabricConnection>* out);
  // The connection of Dialer::StartDial: `connecting` is a socket whose connect to the
  // FabricListener is under way (posix::StartConnect). The connect and the address exchange
  // advance, without blocking, inside Flush and ReadAvailable; messages wait in the queue until the
  // peer's address has arrived.
  static Status StartDial(std::shared_ptr<Fabric> fabric, posix::Socket connecting, uint64_t max_payload,
                          std::string peer, std::unique_ptr<FabricConnection>* out);
  ~FabricConnection() override;

  // Counts over the process, for tests and diagnosis: messages that arrived and were never read,
  // dropped when their connection closed; and closes that stopped waiting for a transfer still
  // in flight (Quiesce).
  static uint64_t UnreadMessagesDropped();
  static uint64_t ClosesWithATransferInFlight();

  // This endpoint's fabric address (fi_getname), for the peer.
  const std::vector<uint8_t>& local_address() const { return local_address_; }
  // Adds the peer's fabric address and posts the receives for headers.
  Status SetPeerAddress(const std::vector<uint8_t>& address);
  const Fabric& fabric() const { return *fabric_; }

  int fd() const override { return epfd_; }
  const std::string& peer() const override { return peer_; }
  bool WritesSignalReadable() const override { return true; }
  bool Connected() const override { return !dialing_; }
  void Send(OutMessage msg) override;
  Status Flush() override;
  bool HasPendingWrites() const override { return !queued_.empty() || !posted_.empty(); }
  size_t PendingWriteCount() const override { return queued_.size() + posted_.size(); }
  Status ReadAvailable(MessageHandler& handler, size_t budget = 8u << 20) override;
  void DetachPayloads(const std::function<bool(uint64_t)>& pred) override;
  void DropPendingWrites() override;
  void ShutdownWrite() override;
  bool DiscardAvailable() override;
  std::string SilenceHint() const override;

 private:
  enum class OpKind : uint8_t { kSendHead, kSendPayload, kRecvHead, kRecvPayload, kDiscard };
  struct Posted;
  // Operation context handed to libfabric (providers may use the fi_context2 space).
  struct Op {
    fi_context2 ctx;
    OpKind kind;
    bool pending = false;  // a receive posted whose completion (or error) has not been read
    uint32_t slot = 0;
    Posted* msg = nullptr;
  };
  // A message whose sends are posted: it stays here, with its payload, until all complete.
  struct Posted {
    OutMessage msg;
    uint32_t slot = 0;
    uint64_t number = 0;
    uint32_t segments = 0;
    uint32_t posted_segments = 0;
    uint32_t left = 0;  // completions still to come
    std::vector<Op> ops;
    std::vector<fid_mr*> held;  // registrations of the payload, released when all complete
  };
  // A posted header receive; `len` is set once it has completed.
  struct HeadRecv {
    uint32_t slot;
    bool done = false;
    size_t len = 0;
  };

  FabricConnection() = default;
  Status Init(std::shared_ptr<Fabric> fabric, posix::Socket control, uint64_t max_payload, std::string peer);
  // Reads the completion queue and records what completed (no handler needed).
  Status PollCompletions();
  // Posts queued sends while the provider and the send slots allow.
  Status PostQueued();
  Status PostPayloadSegments(Posted* p);
  Status PostHeadRecv(uint32_t slot);
  // tcp;ofi_rxm only: opens the endpoint's connection to itself (see connection.cc).
  void HoldConnectionIndex();
  // Hands arrived messages to the handler, one at a time as the stream would.
  Status Deliver(MessageHandler& handler);
  // The oldest posted header receive has completed: the next message's header is here.
  bool HeadReady() const { return !heads_.empty() && heads_.front().done; }
  size_t HeadsReady() const;
  void RunDoneCallbacks();
  // Reads the control socket: false once the peer has closed it.
  bool ControlOpen();
  // Makes fd() readable again when work is waiting that the wait descriptor will not announce.
  void Rearm();
  void BreakOff(const Status& why);
  // Before the endpoint closes: leaves no receive for a message to match and no rendezvous in
  // flight, and drops the messages no receive was posted for (see connection.cc).
  void Quiesce();
  // Reads every completion and error available, whatever it says; false if the queue failed.
  bool ReapCompletions();
  void DiscardUnexpected();
  // StartDial's connect and address exchange, as far as they go without waiting (connection_dial.cc).
  Status AdvanceDial();
  Status WatchControl(bool writable);
  // Releases the registrations of messages no operation can touch any more.
  void ReleasePosted(Posted& p);
  void ReleaseReceive();

  std::shared_ptr<Fabric> fabric_;
  posix::Socket control_;
  uint64_t max_payload_ = 0;
  std::string peer_;
  std::vector<uint8_t> local_address_;
  fid_ep* ep_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fi_addr_t peer_addr_ = FI_ADDR_UNSPEC;
  int epfd_ = -1;
  Waker waker_;  // raised by Rearm and BreakOff, drained by each read
  int cq_fd_ = -1;
  Status broken_;
  bool peer_closed_ = false;
  bool send_blocked_ = false;  // the provider said "again" with sends queued

  // StartDial: the control socket is connecting, or the addresses are being exchanged on it.
  bool enabled_ = false;  // fi_enable succeeded: ofi_rxm may be progressed
  bool dialing_ = false;
  bool dial_connected_ = false;
  bool shut_after_dial_ = false;
  std::vector<uint8_t> dial_out_;  // our address message
  size_t dial_sent_ = 0;
  std::vector<uint8_t> dial_in_;  // the server's, as it arrives

  // Header slots (registered once): sends copy a message's head here; receives land here.
  std::vector<uint8_t> send_slots_;
  std::vector<uint8_t> recv_slots_;
  void* send_desc_ = nullptr;
  void* recv_desc_ = nullptr;
  fid_mr* send_mr_ = nullptr;  // held for the connection's life
  fid_mr* recv_mr_ = nullptr;
  std::vector<uint32_t> free_send_slots_;
  std::vector<Op> recv_ops_;

  OutQueue queued_;
  std::deque<Posted> posted_;
  std::vector<std::function<void()>> done_;
  uint64_t tx_number_ = 0;

  // Header receives in the order they were posted, which is the order they match messages in
  // (libfabric matches posted receives in order; their completions may come in any order).
  std::deque<HeadRecv> heads_;
  uint64_t rx_number_ = 0;
  bool rx_payload_ = false;  // a payload is being received
  uint32_t rx_left_ = 0;     // its segments still to complete
  std::vector<Op> rx_ops_;
  std::vector<fid_mr*> rx_held_;  // registrations of the payload being received

  // The context of the FI_PEEK | FI_DISCARD receives of DiscardUnexpected.
  Op discard_op_{};
  bool discarded_ = false;  // the last one found a message (else FI_ENOMSG)
};

}  // namespace optcast::transport::ofi
