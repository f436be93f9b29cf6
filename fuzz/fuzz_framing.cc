// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// transport::tcp::StreamConnection's frame reader on arbitrary bytes. The input is written into one end of a
// socketpair (then closed) and read back with ReadAvailable under varying budgets, by a handler
// that decodes each meta with wire::Decode and gives an exact-size payload buffer (up to 1 MiB).
//
// Oracle: a straightforward reference parser of the same bytes. The connection must deliver
// exactly the metas and payloads the reference finds, in order, and end with the same kind of
// status (Unavailable at a clean or truncated end, the framing or handler error otherwise).
// It must never crash, write outside the buffer it was given, or spin.

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "frames.h"
#include "optcast/status.h"
#include "transport/message.h"
#include "transport/posix/socket.h"
#include "transport/tcp/connection.h"
#include "wire/protocol.h"

namespace optcast::fuzz {
namespace {

constexpr uint64_t kMaxPayload = 64u << 20;        // what the connection accepts (server default)
constexpr uint64_t kHandlerMaxPayload = 1u << 20;  // what the handler gives a buffer for

struct Delivered {
  std::vector<uint8_t> meta;
  uint64_t payload_len = 0;
  std::vector<uint8_t> payload;
  bool complete = false;
};

struct Outcome {
  std::vector<Delivered> msgs;
  Code end = Code::kOk;
};

Status HandlerDecision(std::span<const uint8_t> meta, uint64_t payload_len) {
  wire::Message m;
  OPTCAST_RETURN_IF_ERROR(wire::Decode(meta, &m));
  if (payload_len > kHandlerMaxPayload) {
    return ResourceExhausted("payload of " + std::to_string(payload_len) + " bytes");
  }
  return Status::Ok();
}

class Handler : public transport::MessageHandler {
 public:
  Outcome out;

  Status OnMessageMeta(transport::Connection&, std::span<const uint8_t> meta, uint64_t payload_len,
                       uint8_t** payload_dst) override {
    FUZZ_CHECK(out.msgs.empty() || out.msgs.back().complete, "a meta arrived before the previous payload was done");
    FUZZ_CHECK(meta.size() > 0 && meta.size() <= transport::kMaxMetaBytes, "meta of %zu bytes", meta.size());
    FUZZ_CHECK(payload_len <= kMaxPayload, "payload_len %llu above the connection's limit",
               static_cast<unsigned long long>(payload_len));
    Delivered d;
    d.meta.assign(meta.begin(), meta.end());
    d.payload_len = payload_len;
    out.msgs.push_back(std::move(d));
    OPTCAST_RETURN_IF_ERROR(HandlerDecision(meta, payload_len));
    if (payload_len > 0) {
      // Exactly payload_len bytes on the heap: ASan reports any write past it.
      buf_.reset(new uint8_t[payload_len]);
      std::memset(buf_.get(), 0xa5, payload_len);
      *payload_dst = buf_.get();
    }
    return Status::Ok();
  }

  Status OnMessageComplete(transport::Connection&) override {
    FUZZ_CHECK(!out.msgs.empty() && !out.msgs.back().complete, "completion without a meta");
    Delivered& d = out.msgs.back();
    if (d.payload_len > 0) d.payload.assign(buf_.get(), buf_.get() + d.payload_len);
    buf_.reset();
    d.complete = true;
    return Status::Ok();
  }

 private:
  std::unique_ptr<uint8_t[]> buf_;
};

uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// What the connection must deliver for `in` followed by end-of-stream.
Outcome Reference(std::span<const uint8_t> in) {
  Outcome o;
  size_t pos = 0;
  for (;;) {
    if (in.size() - pos < transport::kFrameHeaderSize) {
      o.end = Code::kUnavailable;
      return o;
    }
    const uint8_t* h = in.data() + pos;
    const uint32_t meta_len = GetU32(h + 4);
    const uint64_t payload_len = GetU64(h + 8);
    if (GetU32(h) != transport::kFrameMagic || meta_len == 0 || meta_len > transport::kMaxMetaBytes ||
        payload_len > kMaxPayload) {
      o.end = Code::kProtocol;
      return o;
    }
    pos += transport::kFrameHeaderSize;
    if (in.size() - pos < meta_len) {
      o.end = Code::kUnavailable;
      return o;
    }
    Delivered d;
    d.meta.assign(in.begin() + pos, in.begin() + pos + meta_len);
    d.payload_len = payload_len;
    pos += meta_len;
    Status st = HandlerDecision(d.meta, payload_len);
    o.msgs.push_back(d);
    if (!st.ok()) {
      o.end = st.code();
      return o;
    }
    if (in.size() - pos < payload_len) {
      o.end = Code::kUnavailable;
      return o;
    }
    o.msgs.back().payload.assign(in.begin() + pos, in.begin() + pos + payload_len);
    o.msgs.back().complete = true;
    pos += payload_len;
  }
}

// Read budgets, cycled through from call to call: tiny ones stop the reader mid-frame.
constexpr size_t kBudgets[] = {1, 7, 16, 8u << 20, 3, 4096, 65536, 100000};

}  // namespace
}  // namespace optcast::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace optcast;
  using namespace optcast::fuzz;
  int sv[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair: %s", std::strerror(errno));
  FUZZ_CHECK(::fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0, "fcntl");
  int writer = sv[1];
  transport::tcp::StreamConnection conn(transport::posix::Socket(sv[0]), kMaxPayload, "fuzz-peer");
  Handler handler;

  size_t written = 0;
  Status st;
  size_t calls = 0;
  // Every call either consumes at least one byte or finds nothing to read, so this bound is
  // only reached if the reader spins.
  const size_t max_calls = 2 * size + 64;
  for (;;) {
    if (writer >= 0) {
      while (written < size) {
        ssize_t n = ::send(writer, data + written, size - written, MSG_NOSIGNAL);
        if (n > 0) {
          written += static_cast<size_t>(n);
        } else {
          FUZZ_CHECK(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR), "send: %s",
                     std::strerror(errno));
          break;
        }
      }
      if (written == size) {
        ::close(writer);
        writer = -1;
      }
    }
    st = conn.ReadAvailable(handler, kBudgets[calls % (sizeof(kBudgets) / sizeof(kBudgets[0]))]);
    ++calls;
    if (!st.ok()) break;
    FUZZ_CHECK(calls < max_calls, "ReadAvailable returned OK %zu times on %zu bytes without reaching the end", calls,
               size);
  }
  if (writer >= 0) ::close(writer);

  const Outcome want = Reference(std::span<const uint8_t>(data, size));
  const Outcome& got = handler.out;
  FUZZ_CHECK(st.code() == want.end, "ended with %s (%s), the reference with %s", CodeName(st.code()),
             st.message().c_str(), CodeName(want.end));
  FUZZ_CHECK(got.msgs.size() == want.msgs.size(), "%zu metas delivered, the reference has %zu", got.msgs.size(),
             want.msgs.size());
  for (size_t i = 0; i < want.msgs.size(); ++i) {
    const Delivered& g = got.msgs[i];
    const Delivered& w = want.msgs[i];
    FUZZ_CHECK(g.meta == w.meta && g.payload_len == w.payload_len, "message %zu: meta differs", i);
    FUZZ_CHECK(g.complete == w.complete, "message %zu: completion %d, the reference %d", i, g.complete, w.complete);
    FUZZ_CHECK(g.payload == w.payload, "message %zu: payload differs", i);
  }
  return 0;
}
