// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "transport/endpoint.h"

#include <arpa/inet.h>

#include <cstdlib>

namespace optcast::transport {

Status ParseEndpoint(const std::string& text, Endpoint* out, uint16_t default_port, bool allow_any_port) {
  std::string host;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) return InvalidArgument("address '" + text + "' has '[' without ']'");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return InvalidArgument("address '" + text + "': expected ':' after ']'");
      port = text.substr(close + 2);
    }
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) {
      host = text;
    } else {
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
    }
  }
  if (host.empty()) host = "0.0.0.0";
  long p = default_port;
  if (!port.empty()) {
    char* end = nullptr;
    p = std::strtol(port.c_str(), &end, 10);
    if (*end != '\0' || p < (allow_any_port ? 0 : 1) || p > 65535) {
      return InvalidArgument("address '" + text + "' has a bad port; write it as HOST:PORT with PORT in 1..65535");
    }
  } else if (default_port == 0) {
    return InvalidArgument("address '" + text + "' has no port; write it as HOST:PORT");
  }
  out->host = host;
  out->port = static_cast<uint16_t>(p);
  return Status::Ok();
}

Status ParseEndpointList(const std::string& text, std::vector<Endpoint>* out, uint16_t default_port) {
  out->clear();
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    if (!item.empty()) {
      Endpoint ep;
      OPTCAST_RETURN_IF_ERROR(ParseEndpoint(item, &ep, default_port));
      out->push_back(ep);
    }
    start = comma + 1;
  }
  if (out->empty()) return InvalidArgument("empty address list; give HOST:PORT[,HOST:PORT...]");
  return Status::Ok();
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

}  // namespace optcast::transport
