// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/ofi/dialer.h"

#include <algorithm>

#include "transport/ofi/address.h"
#include "transport/ofi/connection.h"
#include "transport/posix/socket.h"

namespace optcast::transport::ofi {

namespace {

// Holds one registration of the buffer in each fabric; at the end, releases it and forgets the
// range, so that a later buffer at the same address is registered afresh.
class FabricRegistration final : public MemoryRegistration {
 public:
  FabricRegistration(const void* data, size_t size) : data_(data), size_(size) {}
  ~FabricRegistration() override {
    for (auto& [fabric, mr] : held_) {
      fabric->Release(mr);
      fabric->mr_cache().Deregister(data_, size_);
    }
  }
  void Hold(std::shared_ptr<Fabric> fabric, fid_mr* mr) { held_.emplace_back(std::move(fabric), mr); }

 private:
  const void* data_;
  size_t size_;
  std::vector<std::pair<std::shared_ptr<Fabric>, fid_mr*>> held_;
};

}  // namespace

Status DialFabric(const Endpoint& ep, Deadline deadline, uint64_t max_payload, std::unique_ptr<Connection>* out,
                  const std::string& provider) {
  std::shared_ptr<Fabric> fabric;
  OPTCAST_RETURN_IF_ERROR(
      Fabric::Open(provider.empty() ? RequestedProvider() : provider, LocalHostToward(ep.host), &fabric));
  return DialFabric(std::move(fabric), ep, deadline, max_payload, out);
}

Status DialFabric(std::shared_ptr<Fabric> fabric, const Endpoint& ep, Deadline deadline, uint64_t max_payload,
                  std::unique_ptr<Connection>* out) {
  // The endpoint exists before the connection, so the address follows the connect at once.
  posix::Socket s;
  OPTCAST_RETURN_IF_ERROR(posix::Connect(ep, deadline, &s));
  OPTCAST_RETURN_IF_ERROR(posix::ConfigureDataSocket(s.fd(), true));
  const int fd = s.fd();
  std::unique_ptr<FabricConnection> c;
  OPTCAST_RETURN_IF_ERROR(FabricConnection::Create(fabric, std::move(s), max_payload, ep.ToString(), &c));
  const std::string who = "server " + ep.ToString();
  // `deadline` bounds reaching the server; once connected, the exchange gets as long as the
  // server gives a client to send its address (a loaded server may take a moment).
  const Deadline exchange{std::max(deadline.at, Clock::now() + kAddressTimeout)};
  Status st = SendAddress(fd, fabric->provider(), c->local_address(), exchange);
  std::string provider;
  std::vector<uint8_t> address;
  if (st.ok()) st = RecvAddress(fd, exchange, who, &provider, &address);
  if (!st.ok()) return Status(st.code(), st.message().rfind(who, 0) == 0 ? st.message() : who + ": " + st.message());
  if (address.empty()) return InvalidArgument(who + " refused the fabric connection: " + provider);
  OPTCAST_RETURN_IF_ERROR(c->SetPeerAddress(address));
  *out = std::move(c);
  return Status::Ok();
}

Status FabricDialer::FabricToward(const std::string& host, std::shared_ptr<Fabric>* out) {
  const std::string local = LocalHostToward(host);
  auto it = std::find_if(fabrics_.begin(), fabrics_.end(), [&](const auto& f) { return f.first == local; });
  if (it != fabrics_.end()) {
    *out = it->second;
    return Status::Ok();
  }
  OPTCAST_RETURN_IF_ERROR(Fabric::Open(provider_.empty() ? RequestedProvider() : provider_, local, out));
  fabrics_.emplace_back(local, *out);
  return Status::Ok();
}

Status FabricDialer::Dial(const Endpoint& ep, Deadline deadline, uint64_t max_payload,
                          std::unique_ptr<Connection>* out) {
  std::shared_ptr<Fabric> fabric;
  OPTCAST_RETURN_IF_ERROR(FabricToward(ep.host, &fabric));
  return DialFabric(std::move(fabric), ep, deadline, max_payload, out);
}

Status FabricDialer::StartDial(const Endpoint& ep, uint64_t max_payload, std::unique_ptr<Connection>* out) {
  std::shared_ptr<Fabric> fabric;
  OPTCAST_RETURN_IF_ERROR(FabricToward(ep.host, &fabric));
  posix::Socket s;
  OPTCAST_RETURN_IF_ERROR(posix::StartConnect(ep, &s));
  OPTCAST_RETURN_IF_ERROR(posix::ConfigureDataSocket(s.fd(), true));
  std::unique_ptr<FabricConnection> c;
  OPTCAST_RETURN_IF_ERROR(FabricConnection::StartDial(std::move(fabric), std::move(s), max_payload, ep.ToString(), &c));
  *out = std::move(c);
  return Status::Ok();
}

Status FabricDialer::Register(const void* data, size_t size, std::unique_ptr<MemoryRegistration>* out) {
  auto reg = std::make_unique<FabricRegistration>(data, size);
  // An empty buffer (an empty collective's) moves nothing: nothing to register.
  if (size > 0) {
    for (const auto& [address, fabric] : fabrics_) {
      fid_mr* mr = nullptr;
      OPTCAST_RETURN_IF_ERROR(fabric->Register(data, size, &mr));
      reg->Hold(fabric, mr);
    }
  }
  *out = std::move(reg);
  return Status::Ok();
}

uint64_t FabricDialer::registrations_made() const {
  uint64_t n = 0;
  for (const auto& [address, fabric] : fabrics_) n += fabric->mr_cache().registrations();
  return n;
}

bool FabricDialer::registration_required() const {
  for (const auto& [address, fabric] : fabrics_) {
    if (fabric->local_mr()) return true;
  }
  return false;
}

uint64_t FabricDialer::registrations_open() const {
  uint64_t n = 0;
  for (const auto& [address, fabric] : fabrics_) n += fabric->mr_cache().regions();
  return n;
}

}  // namespace optcast::transport::ofi
