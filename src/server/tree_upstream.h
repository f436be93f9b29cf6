// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What a tree job below the root sends its parent server (docs/tree.md): messages, each slot's
// combined partial, and the farewell that ends its membership there. Apart from tree_job.h
// because it needs the connections, and they know their jobs.

#include <cstdint>
#include <vector>

#include "server/connection_loop.h"
#include "server/job.h"
#include "server/server_metrics.h"
#include "server/tree_job.h"
#include "transport/message.h"
#include "transport/traffic_class.h"
#include "wire/protocol.h"

namespace optcast::server {

// Sends to the parent, or holds the message until the parent's welcome.
void SendUp(TreeJob& tree, ConnectionLoop& loop, ServerMetrics& metrics, transport::OutMessage msg);
// Sends a slot's combined partial (Slot::result) to the parent; in a failover's re-run, the
// result copy a member sent instead (flagged as one).
// `traffic_class`: the class its packets go in (ServerOptions::TrafficClassOf).
void SendPartialUp(TreeJob& tree, ConnectionLoop& loop, ServerMetrics& metrics, const wire::CollDesc& d,
                   const Slot& slot, transport::TrafficClass traffic_class);
// Ends this server's membership upstream with `farewell` (a Bye, or the Error that failed the
// job); before the welcome it is held and the connection closes once it is out.
void CloseUpstream(TreeJob& tree, ConnectionLoop& loop, const std::vector<uint8_t>& farewell);

}  // namespace optcast::server
