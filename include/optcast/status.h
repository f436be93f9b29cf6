// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace optcast {

// Error categories. Stable values: they travel on the wire in error frames.
enum class Code : int {
  kOk = 0,
  kInvalidArgument = 1,  // caller passed something wrong
  kMismatch = 2,         // ranks of one job disagree (dtype, count, op, ...)
  kProtocol = 3,         // malformed or unexpected bytes on the wire
  kTimeout = 4,          // a bounded wait expired
  kUnavailable = 5,      // peer unreachable or disconnected
  kPeerFailed = 6,       // another rank of the job failed
  kResourceExhausted = 7,
  kUnauthenticated = 8,
  kInternal = 9,
  kCancelled = 10,
};

const char* CodeName(Code code);

// Result of an operation: OK, or a code with a sentence that names the problem and the fix.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status MismatchError(std::string m) { return {Code::kMismatch, std::move(m)}; }
inline Status ProtocolError(std::string m) { return {Code::kProtocol, std::move(m)}; }
inline Status TimeoutError(std::string m) { return {Code::kTimeout, std::move(m)}; }
inline Status UnavailableError(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status PeerFailedError(std::string m) { return {Code::kPeerFailed, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
inline Status InternalError(std::string m) { return {Code::kInternal, std::move(m)}; }

}  // namespace optcast

#define OPTCAST_RETURN_IF_ERROR(expr)          \
  do {                                         \
    ::optcast::Status _optcast_st = (expr);    \
    if (!_optcast_st.ok()) return _optcast_st; \
  } while (0)
