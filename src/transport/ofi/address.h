// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// How an ofi connection starts. Servers stay named by host:port. The server listens on that TCP
// port; a client connects, sends its provider name and fabric address (fi_getname of an endpoint
// made for this server), and the server answers with the same for an endpoint it makes for this
// client. The TCP connection then stays open as the connection's control channel (see
// FabricConnection); everything else, hello and authentication included, goes over the fabric.
//
// Address exchange, both directions: magic u32 "OFAB", provider length u16, address length u16,
// provider name, address. An answer with address length 0 is a refusal whose "provider" field
// holds the reason.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/env.h"
#include "optcast/status.h"

namespace optcast::transport::ofi {

inline constexpr uint32_t kAddressMagic = 0x4241464f;  // "OFAB"
inline constexpr size_t kMaxAddressField = 4096;
// A client that has not sent its address within this long is dropped.
inline constexpr auto kAddressTimeout = std::chrono::seconds(10);

// Checks the 8 bytes that start an address message and reads the two lengths.
Status CheckAddressHead(const uint8_t* h, const std::string& who, size_t* plen, size_t* alen);
// An address message's bytes.
std::vector<uint8_t> EncodeAddress(const std::string& provider, const std::vector<uint8_t>& address);
// Sends an address message (blocking, until `d`).
Status SendAddress(int fd, const std::string& provider, const std::vector<uint8_t>& address, Deadline d);
// Reads the peer's provider and address; `who` names the peer in errors.
Status RecvAddress(int fd, Deadline d, const std::string& who, std::string* provider, std::vector<uint8_t>* address);

// The local address this machine would use toward `host` (a UDP socket's connect sends
// nothing), so that a fabric binds to the interface the control connection takes; "" if unknown.
std::string LocalHostToward(const std::string& host);

}  // namespace optcast::transport::ofi
