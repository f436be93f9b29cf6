// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Which TCP congestion control the server path's data connections use.
//
// Every rank's chunks for a server meet at that server's port at the same moment, and its
// results leave towards every rank at once: a many-to-one pattern of flows that start and stop
// together each round. BBR (v1, as Linux ships it) paces each flow at its own bandwidth estimate,
// which such on/off flows sharing one port keep too low: on the emulated cluster (8 ranks,
// 8 servers, 500 Mbit/s, MTU 1500) the server path reached 53-66% of its bound at 4-64 MiB under
// the host's BBR against 74-82% with CUBIC, and at 200 Mbit/s / MTU 9000 91.5% against 96.7% at
// 64 MiB; a small job next to the stream waited no longer (docs/benchmarks.md, "Congestion control").
// So those connections ask for CUBIC, whatever the host's default, unless told otherwise. The
// peer-to-peer ring, the rendezvous and the NCCL plugin's own p2p sockets keep the host's.

#include <string>

#include "optcast/status.h"

namespace optcast::transport::posix {

// What the data connections ask for when nothing is configured.
inline constexpr const char* kDefaultCongestionControl = "cubic";
// The setting that leaves the host's default (net.ipv4.tcp_congestion_control) alone.
inline constexpr const char* kSystemCongestionControl = "system";

// Applies a setting to a socket: "" asks for kDefaultCongestionControl and, where the host does
// not offer it, keeps the host's default (logged once per process); "system" changes nothing;
// any other name must be set, or the error says what the host offers and allows.
Status ApplyCongestionControl(int fd, const std::string& setting);

// The congestion control a socket uses now ("" if it cannot be read).
std::string CongestionControlOf(int fd);

// The setting OPTCAST_TCP_CONGESTION names, checked, into *out; *out is left alone when it is
// unset. The error names the variable.
Status CongestionControlFromEnvironment(std::string* out);

// Checks a setting without a socket: "", "system", or a name the host offers and allows this
// process to set. For command lines and environment variables, so that a typo is named at start.
Status CheckCongestionControl(const std::string& setting);

}  // namespace optcast::transport::posix
