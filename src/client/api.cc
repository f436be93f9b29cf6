// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// The public API's entry points (optcast/communicator.h): making a communicator, the blocking
// forms of the collectives, and the options the environment sets.

#include <fmt/format.h>

#include <memory>

#include "auth/secret.h"
#include "client/server_communicator.h"
#include "client/wire_narrowing.h"
#include "common/env.h"
#include "observe/trace.h"
#include "optcast/communicator.h"
#include "transport/kind.h"
#include "transport/posix/congestion.h"
#include "transport/posix/traffic_class.h"

namespace optcast {

Status Communicator::Create(const CommunicatorOptions& options, std::unique_ptr<Communicator>* out) {
  if (options.servers.empty()) {
    return InvalidArgument("no reduction servers given; set OPTCAST_SERVERS=host:port[,host:port...]");
  }
  if (options.nranks < 1) return InvalidArgument("nranks must be at least 1");
  if (options.rank < 0 || options.rank >= options.nranks) {
    return InvalidArgument(fmt::format("rank {} is out of range for {} ranks", options.rank, options.nranks));
  }
  if (options.servers.size() > 64) return InvalidArgument("at most 64 servers per communicator");
  if (options.latency_dscp < 0 || options.latency_dscp > transport::posix::kMaxDscp) {
    return InvalidArgument(
        fmt::format("latency_dscp {} is not a DSCP; use 0-63 (0: mark nothing)", options.latency_dscp));
  }
  OPTCAST_RETURN_IF_ERROR(client::WireNarrowing::CheckWireDtype(options.wire_dtype));
  OPTCAST_RETURN_IF_ERROR(
      observe::StartTraceFromEnv("OPTCAST_TRACE", options.rank, fmt::format("optcast rank {}", options.rank)));
  transport::Kind kind = transport::Kind::kTcp;
  if (options.transport.empty()) {
    OPTCAST_RETURN_IF_ERROR(transport::KindFromEnvironment(transport::Kind::kTcp, &kind));
  } else {
    OPTCAST_RETURN_IF_ERROR(transport::ParseKind(options.transport, "CommunicatorOptions::transport", &kind));
  }
  auto comm = std::make_unique<client::ServerCommunicator>(options, kind);
  OPTCAST_RETURN_IF_ERROR(comm->Connect());
  *out = std::move(comm);
  return Status::Ok();
}

Status Communicator::AllReduce(const void* sendbuf, void* recvbuf, size_t count, DataType dtype, RedOp op) {
  Request* req = nullptr;
  OPTCAST_RETURN_IF_ERROR(IAllReduce(sendbuf, recvbuf, count, dtype, op, &req));
  return Wait(req);
}

Status Communicator::ReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType dtype, RedOp op) {
  Request* req = nullptr;
  OPTCAST_RETURN_IF_ERROR(IReduceScatter(sendbuf, recvbuf, recvcount, dtype, op, &req));
  return Wait(req);
}

Status Communicator::AllGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType dtype) {
  Request* req = nullptr;
  OPTCAST_RETURN_IF_ERROR(IAllGather(sendbuf, recvbuf, sendcount, dtype, &req));
  return Wait(req);
}

Status ParseWireDtype(std::string_view text, std::string_view what, DataType* out) {
  if (text.empty() || text == "off" || text == "0") {
    *out = DataType::kFloat32;
    return Status::Ok();
  }
  const auto parsed = ParseDataType(text);
  if (!parsed || (*parsed != DataType::kFloat32 && !IsFloat32WireType(*parsed))) {
    return InvalidArgument(fmt::format("{}='{}' is not a wire type for float32; use bf16, fp16 or off", what, text));
  }
  *out = *parsed;
  return Status::Ok();
}

Status ApplyEnvironment(CommunicatorOptions* o) {
  if (auto servers = GetEnv("OPTCAST_SERVERS")) {
    o->servers.clear();
    size_t start = 0;
    while (start <= servers->size()) {
      size_t comma = servers->find(',', start);
      if (comma == std::string::npos) comma = servers->size();
      if (comma > start) o->servers.push_back(servers->substr(start, comma - start));
      start = comma + 1;
    }
  }
  int64_t v = 0;
  OPTCAST_RETURN_IF_ERROR(GetEnvInt("OPTCAST_TIMEOUT_MS", o->timeout.count(), &v));
  if (v <= 0) return InvalidArgument("OPTCAST_TIMEOUT_MS must be positive");
  o->timeout = std::chrono::milliseconds(v);
  OPTCAST_RETURN_IF_ERROR(GetEnvInt("OPTCAST_CONNECT_TIMEOUT_MS", o->connect_timeout.count(), &v));
  o->connect_timeout = std::chrono::milliseconds(v);
  if (auto chunk = GetEnv("OPTCAST_CHUNK_BYTES")) {
    auto bytes = ParseByteSize(*chunk);
    if (!bytes || *bytes == 0) {
      return InvalidArgument("OPTCAST_CHUNK_BYTES='" + *chunk + "' is not a size; write e.g. 512K or 1M");
    }
    o->chunk_bytes = *bytes;
  }
  if (auto t = GetEnv("OPTCAST_TRANSPORT")) o->transport = *t;
  OPTCAST_RETURN_IF_ERROR(GetEnvInt("OPTCAST_WINDOW", o->window, &v));
  o->window = static_cast<int>(v);
  if (auto f = GetEnv("OPTCAST_FAILOVER")) {
    if (*f != "0" && *f != "1") return InvalidArgument("OPTCAST_FAILOVER='" + *f + "' must be 0 (off) or 1 (on)");
    o->failover = *f == "1";
  }
  OPTCAST_RETURN_IF_ERROR(GetEnvInt("OPTCAST_HEARTBEAT_MS", o->heartbeat.count(), &v));
  if (v <= 0) return InvalidArgument("OPTCAST_HEARTBEAT_MS must be positive");
  o->heartbeat = std::chrono::milliseconds(v);
  OPTCAST_RETURN_IF_ERROR(transport::posix::CongestionControlFromEnvironment(&o->tcp_congestion));
  if (auto bytes = GetEnv("OPTCAST_LATENCY_BYTES")) {
    auto parsed = ParseByteSize(*bytes);
    if (!parsed) {
      return InvalidArgument("OPTCAST_LATENCY_BYTES='" + *bytes + "' is not a size; write e.g. 64K, or 0 for none");
    }
    o->latency_bytes = *parsed;
  }
  if (auto dscp = GetEnv("OPTCAST_LATENCY_DSCP")) {
    OPTCAST_RETURN_IF_ERROR(transport::posix::ParseDscp(*dscp, "OPTCAST_LATENCY_DSCP", &o->latency_dscp));
  }
  if (auto wire = GetEnv("OPTCAST_WIRE_DTYPE")) {
    OPTCAST_RETURN_IF_ERROR(ParseWireDtype(*wire, "OPTCAST_WIRE_DTYPE", &o->wire_dtype));
  }
  std::string secret;
  OPTCAST_RETURN_IF_ERROR(auth::SecretFromEnvironment(&secret));
  if (!secret.empty()) o->secret = std::move(secret);
  return Status::Ok();
}

}  // namespace optcast
