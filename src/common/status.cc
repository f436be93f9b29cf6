// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "optcast/status.h"

namespace optcast {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kMismatch: return "mismatch between ranks";
    case Code::kProtocol: return "protocol error";
    case Code::kTimeout: return "timeout";
    case Code::kUnavailable: return "unavailable";
    case Code::kPeerFailed: return "peer failed";
    case Code::kResourceExhausted: return "resource exhausted";
    case Code::kUnauthenticated: return "unauthenticated";
    case Code::kInternal: return "internal error";
    case Code::kCancelled: return "cancelled";
  }
  return "unknown error";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace optcast
