// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/posix/congestion.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>

#include "common/env.h"
#include "common/log.h"

namespace optcast::transport::posix {

namespace {

std::string ReadSysctl(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line.empty() ? "(unreadable)" : line;
}

Status SetByName(int fd, const std::string& name) {
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0) {
    return Status::Ok();
  }
  const int err = errno;
  if (err == ENOENT) {
    return InvalidArgument("TCP congestion control '" + name + "' is not available on this host (available: " +
                           ReadSysctl("/proc/sys/net/ipv4/tcp_available_congestion_control") +
                           "); load its module (modprobe tcp_" + name + "), choose one of those, or use '" +
                           kSystemCongestionControl + "' for the host's default");
  }
  if (err == EPERM) {
    return InvalidArgument("TCP congestion control '" + name + "' is not allowed for this process (allowed: " +
                           ReadSysctl("/proc/sys/net/ipv4/tcp_allowed_congestion_control") +
                           "); add it to net.ipv4.tcp_allowed_congestion_control, choose one of those, or use '" +
                           kSystemCongestionControl + "' for the host's default");
  }
  return InternalError("setsockopt(TCP_CONGESTION, " + name + "): " + std::strerror(err));
}

}  // namespace

Status ApplyCongestionControl(int fd, const std::string& setting) {
  if (setting == kSystemCongestionControl) return Status::Ok();
  if (!setting.empty()) return SetByName(fd, setting);
  Status st = SetByName(fd, kDefaultCongestionControl);
  if (!st.ok()) {
    static std::once_flag once;
    std::call_once(once, [&] {
      Log().warn("keeping the host's TCP congestion control ({}) for data connections: {}", CongestionControlOf(fd),
                 st.message());
    });
  }
  return Status::Ok();
}

std::string CongestionControlOf(int fd) {
  char name[64] = {};
  socklen_t len = sizeof(name);
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "";
  return std::string(name, strnlen(name, len));
}

Status CongestionControlFromEnvironment(std::string* out) {
  auto cc = GetEnv("OPTCAST_TCP_CONGESTION");
  if (!cc) return Status::Ok();
  Status st = CheckCongestionControl(*cc);
  if (!st.ok()) return InvalidArgument("OPTCAST_TCP_CONGESTION: " + st.message());
  *out = *cc;
  return Status::Ok();
}

Status CheckCongestionControl(const std::string& setting) {
  if (setting.empty() || setting == kSystemCongestionControl) return Status::Ok();
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return InternalError(std::string("socket(): ") + std::strerror(errno));
  Status st = SetByName(fd, setting);
  ::close(fd);
  return st;
}

}  // namespace optcast::transport::posix
