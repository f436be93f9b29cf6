// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// A client's requests in the trace (observe/trace.h): one span per request from issue to
// completion, and each chunk's time on the wire. Only called when tracing is on.

#include <algorithm>
#include <utility>

#include "client/server_communicator.h"

namespace optcast::client {

// A request is one span from issue to completion on the process's "requests" tracks.
void ServerCommunicator::TraceRequestBegin(Request* req, observe::TraceArgs& issue_args) {
  req->trace_id = (trace_comm_ << 40) | req->seq;
  observe::TraceArgs a;
  a.Add("seq", req->seq).Add("count", req->desc.count).Add("dtype", DataTypeName(req->desc.dtype));
  a.Add("op", RedOpName(req->desc.op)).Add("bytes", req->desc.count * req->esize);
  a.Add("replies", req->outstanding);
  issue_args = a;
  observe::TraceAsyncBegin(CollTypeName(req->desc.coll), "request", req->trace_id, observe::TraceNowUs(), a);
}

void ServerCommunicator::TraceRequestEnd(Request* req) {
  if (req->trace_id == 0) return;
  observe::TraceArgs a;
  if (!req->status.ok()) a.Add("error", req->status.message());
  observe::TraceAsyncEnd(CollTypeName(req->desc.coll), "request", req->trace_id, observe::TraceNowUs(), a);
  req->trace_id = 0;
}

// A chunk's time on the wire, on its link's track: from when the link was free to write it
// (messages go out in order) until its last byte left.
void ServerCommunicator::TraceSend(ServerLink* link, transport::OutMessage* msg) {
  const double queued = observe::TraceNowUs();
  msg->on_done = [link, queued, seq = msg->tag, bytes = msg->payload_len, then = std::move(msg->on_done)] {
    const double now = observe::TraceNowUs();
    const double start = std::max(queued, link->tx_free_us);
    link->tx_free_us = now;
    observe::TraceArgs a;
    a.Add("seq", seq).Add("bytes", bytes);
    observe::TraceComplete("send chunk", "client", start, now, a, link->trace_track_tx);
    if (then) then();
  };
}

}  // namespace optcast::client
