// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause

#include "client/handshake.h"

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <deque>
#include <iterator>
#include <span>
#include <utility>
#include <vector>

#include "auth/handshake.h"
#include "transport/endpoint.h"
#include "transport/message.h"
#include "wire/protocol.h"

namespace optcast::client {
namespace {

// Takes the metas of payload-free messages, in order: the answers to a hello or a proof, and
// whatever a read hands over behind them (one read may deliver several messages).
class ReplyCatcher final : public transport::MessageHandler {
 public:
  Status OnMessageMeta(transport::Connection&, std::span<const uint8_t> meta, uint64_t payload_len,
                       uint8_t**) override {
    if (payload_len != 0) {
      return ProtocolError("the server answered with bytes that are not an Optcast welcome; is it an Optcast server?");
    }
    metas.emplace_back(meta.begin(), meta.end());
    return Status::Ok();
  }
  Status OnMessageComplete(transport::Connection&) override { return Status::Ok(); }
  std::deque<std::vector<uint8_t>> metas;
};

// Sends one message and waits for the one answer, before the connection carries collectives.
Status Exchange(transport::Connection& conn, std::vector<uint8_t> request, Deadline deadline, ReplyCatcher& catcher,
                std::vector<uint8_t>* reply) {
  conn.Send(transport::MakeOutMessage(request, nullptr, 0));
  for (;;) {
    if (!catcher.metas.empty()) {
      *reply = std::move(catcher.metas.front());
      catcher.metas.pop_front();
      return Status::Ok();
    }
    OPTCAST_RETURN_IF_ERROR(conn.Flush());
    const short want =
        static_cast<short>(POLLIN | (conn.HasPendingWrites() && !conn.WritesSignalReadable() ? POLLOUT : 0));
    pollfd p{conn.fd(), want, 0};
    if (deadline.Expired()) {
      const std::string hint = conn.SilenceHint();
      return TimeoutError("no answer to the hello in time" + (hint.empty() ? "" : "; " + hint));
    }
    const int rc = ::poll(&p, 1, std::min(deadline.RemainingMs(), 50));
    if (rc > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
      Status st = conn.ReadAvailable(catcher);
      // An answer that came before the connection failed is still the answer (an Error, say).
      if (catcher.metas.empty()) OPTCAST_RETURN_IF_ERROR(st);
    }
  }
}

}  // namespace

Status JoinServer(transport::Dialer& dialer, const std::string& server, uint32_t lane, const CommunicatorOptions& opts,
                  Deadline connect_deadline, JoinedServer* out) {
  transport::Endpoint ep;
  OPTCAST_RETURN_IF_ERROR(transport::ParseEndpoint(server, &ep, wire::kDefaultPort));
  std::unique_ptr<transport::Connection> conn;
  OPTCAST_RETURN_IF_ERROR(dialer.Dial(ep, connect_deadline, 1ull << 32, &conn));
  wire::Hello hello;
  hello.job_id = opts.job_id.bytes;
  hello.nranks = static_cast<uint32_t>(opts.nranks);
  hello.rank = static_cast<uint32_t>(opts.rank);
  hello.lane = lane;
  const std::string peer = "server " + ep.ToString() + (lane == 0 ? "" : fmt::format(" (lane {})", lane));
  auth::JoinHandshake join(hello, opts.secret, peer, "rank " + std::to_string(opts.rank),
                           "set OPTCAST_SECRET_FILE to the file holding the deployment's secret (the one the servers "
                           "use)");
  const Deadline d = Deadline::After(opts.timeout);
  std::vector<uint8_t> next = join.HelloMeta();
  ReplyCatcher catcher;
  while (!join.welcomed()) {
    std::vector<uint8_t> meta;
    wire::Message reply;
    Status st = Exchange(*conn, std::move(next), d, catcher, &meta);
    if (st.ok()) st = wire::Decode(meta, &reply);
    if (!st.ok()) return Status(st.code(), peer + ": " + st.message());
    OPTCAST_RETURN_IF_ERROR(join.OnMessage(reply, &next));
  }
  out->address = ep.ToString();
  out->max_payload = join.max_payload();
  out->in_tree = join.in_tree();
  out->link_rate_bits = join.link_rate_bits();
  out->lanes = join.lanes();
  out->conn = std::move(conn);
  out->early.assign(std::make_move_iterator(catcher.metas.begin()), std::make_move_iterator(catcher.metas.end()));
  return Status::Ok();
}

}  // namespace optcast::client
