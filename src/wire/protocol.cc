// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "wire/protocol.h"

#include <cstring>

namespace optcast::wire {

namespace {

constexpr size_t kCollDescBytes = 8 + 4 + 8 + 8 + 4;
constexpr size_t kChunkRefBytes = 4 + 8 + 4;
static_assert(kChunkMetaBytes == 4 + kCollDescBytes + kChunkRefBytes);
static_assert(kDoneMetaBytes == 4 + 8 + kChunkRefBytes);
constexpr size_t kMaxErrorText = 4096;

// Appends to a vector of its own, or (hot path) fills a fixed-size buffer of the caller's.
class Writer {
 public:
  explicit Writer(MsgType type, uint8_t* fixed = nullptr) : fixed_(fixed) {
    U16(kProtocolVersion);
    U16(static_cast<uint16_t>(type));
  }
  void U8(uint8_t v) { Le(v, 1); }
  void U16(uint16_t v) { Le(v, 2); }
  void U32(uint32_t v) { Le(v, 4); }
  void U64(uint64_t v) { Le(v, 8); }
  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);  // variable-length fields never use a fixed buffer
  }
  std::vector<uint8_t> Take() { return std::move(buf_); }

 private:
  void Le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) {
      const auto byte = static_cast<uint8_t>(v >> (8 * i));
      if (fixed_ != nullptr) {
        *fixed_++ = byte;
      } else {
        buf_.push_back(byte);
      }
    }
  }
  uint8_t* fixed_;
  std::vector<uint8_t> buf_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  bool U8(uint8_t* v) { return Le(v, 1); }
  bool U16(uint16_t* v) { return Le(v, 2); }
  bool U32(uint32_t* v) { return Le(v, 4); }
  bool U64(uint64_t* v) { return Le(v, 8); }
  bool Bytes(void* p, size_t n) {
    if (b_.size() - pos_ < n) return false;
    std::memcpy(p, b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t remaining() const { return b_.size() - pos_; }

 private:
  template <typename T>
  bool Le(T* v, int n) {
    if (b_.size() - pos_ < static_cast<size_t>(n)) return false;
    uint64_t x = 0;
    for (int i = 0; i < n; ++i) x |= static_cast<uint64_t>(b_[pos_ + i]) << (8 * i);
    pos_ += static_cast<size_t>(n);
    *v = static_cast<T>(x);
    return true;
  }
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

void PutDesc(Writer& w, const CollDesc& d, uint8_t flags) {
  w.U64(d.coll_seq);
  w.U8(static_cast<uint8_t>(d.coll));
  w.U8(static_cast<uint8_t>(d.dtype));
  w.U8(static_cast<uint8_t>(d.op));
  w.U8(flags);
  w.U64(d.count);
  w.U64(d.server_elems);
  w.U32(d.epoch);
}

void PutSeqs(Writer& w, const std::vector<uint64_t>& seqs) {
  const size_t n = std::min(seqs.size(), kMaxFailoverSeqs);
  w.U32(static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i) w.U64(seqs[i]);
}

bool GetSeqs(Reader& r, std::vector<uint64_t>* seqs) {
  uint32_t n = 0;
  if (!r.U32(&n) || n > kMaxFailoverSeqs || r.remaining() != size_t{n} * 8) return false;
  seqs->resize(n);
  for (auto& s : *seqs) r.U64(&s);
  return true;
}

void PutRef(Writer& w, const ChunkRef& r) {
  w.U32(r.segment);
  w.U64(r.offset);
  w.U32(r.count);
}

std::vector<uint8_t> EncodeDone(MsgType t, const ChunkDone& m) {
  Writer w(t);
  w.U64(m.coll_seq);
  PutRef(w, m.ref);
  return w.Take();
}

Status Truncated(const char* what) { return ProtocolError(std::string("truncated or oversized ") + what + " message"); }

}  // namespace

std::vector<uint8_t> EncodeHello(const Hello& m) {
  Writer w(MsgType::kHello);
  w.Bytes(m.job_id.data(), m.job_id.size());
  w.U32(m.nranks);
  w.U32(m.rank);
  w.U32(m.flags);
  w.U32(m.lane);
  return w.Take();
}

std::vector<uint8_t> EncodeWelcome(const Welcome& m) {
  Writer w(MsgType::kWelcome);
  w.U64(m.max_payload);
  w.U32(m.job_timeout_ms);
  w.U32(m.flags);
  w.U64(m.link_rate_bits);
  w.U32(m.lanes);
  return w.Take();
}

uint16_t VersionOf(std::span<const uint8_t> meta) {
  return meta.size() < 2 ? 0 : static_cast<uint16_t>(meta[0] | (meta[1] << 8));
}

std::vector<uint8_t> EncodeErrorForVersion(const ErrorMsg& m, uint16_t version) {
  std::vector<uint8_t> bytes = EncodeError(m);
  bytes[0] = static_cast<uint8_t>(version);
  bytes[1] = static_cast<uint8_t>(version >> 8);
  return bytes;
}

std::vector<uint8_t> EncodeError(const ErrorMsg& m) {
  Writer w(MsgType::kError);
  const size_t len = std::min(m.text.size(), kMaxErrorText);
  w.U32(static_cast<uint32_t>(m.code));
  w.U64(m.coll_seq);
  w.U32(static_cast<uint32_t>(len));
  w.Bytes(m.text.data(), len);
  return w.Take();
}

std::vector<uint8_t> EncodeChunk(const Chunk& m) {
  Writer w(MsgType::kChunk);
  PutDesc(w, m.desc, m.flags);
  PutRef(w, m.ref);
  return w.Take();
}

std::vector<uint8_t> EncodeResult(const ChunkDone& m) { return EncodeDone(MsgType::kResult, m); }
std::vector<uint8_t> EncodeAck(const ChunkDone& m) { return EncodeDone(MsgType::kAck, m); }

void EncodeChunkTo(const Chunk& m, uint8_t* out) {
  Writer w(MsgType::kChunk, out);
  PutDesc(w, m.desc, m.flags);
  PutRef(w, m.ref);
}

void EncodeDoneTo(MsgType type, const ChunkDone& m, uint8_t* out) {
  Writer w(type, out);
  w.U64(m.coll_seq);
  PutRef(w, m.ref);
}
std::vector<uint8_t> EncodeBye() { return Writer(MsgType::kBye).Take(); }

std::vector<uint8_t> EncodeChallenge(const Nonce& nonce) {
  Writer w(MsgType::kChallenge);
  w.Bytes(nonce.data(), nonce.size());
  return w.Take();
}

std::vector<uint8_t> EncodeProof(const Mac& mac) {
  Writer w(MsgType::kProof);
  w.Bytes(mac.data(), mac.size());
  return w.Take();
}

std::vector<uint8_t> EncodeGrow(const Grow& m) {
  Writer w(MsgType::kGrow);
  w.U32(m.weight);
  w.U32(m.min_rank);
  return w.Take();
}

std::vector<uint8_t> EncodeSealed(uint32_t nranks) {
  Writer w(MsgType::kSealed);
  w.U32(nranks);
  return w.Take();
}

std::vector<uint8_t> EncodeStallQuery(uint64_t coll_seq) {
  Writer w(MsgType::kStallQuery);
  w.U64(coll_seq);
  return w.Take();
}

std::vector<uint8_t> EncodeStallReport(const StallReport& m) {
  Writer w(MsgType::kStallReport);
  const size_t len = std::min(m.waiting_for.size(), kMaxErrorText);
  w.U64(m.coll_seq);
  w.U32(static_cast<uint32_t>(len));
  w.Bytes(m.waiting_for.data(), len);
  return w.Take();
}

namespace {

void PutReport(Writer& w, const FailoverReport& m) {
  w.U32(m.epoch);
  w.U32(m.server_index);
  w.U64(m.dead_mask);
  w.U64(m.first_unplanned);
  PutSeqs(w, m.needing);
}

bool GetReport(Reader& r, FailoverReport* f) {
  return r.U32(&f->epoch) && r.U32(&f->server_index) && r.U64(&f->dead_mask) && r.U64(&f->first_unplanned) &&
         GetSeqs(r, &f->needing);
}

}  // namespace

std::vector<uint8_t> EncodeFailover(const FailoverReport& m) {
  Writer w(MsgType::kFailover);
  PutReport(w, m);
  return w.Take();
}

std::vector<uint8_t> EncodeFailoverRelay(uint32_t rank, const FailoverReport& m) {
  Writer w(MsgType::kFailoverRelay);
  w.U32(rank);
  PutReport(w, m);
  return w.Take();
}

std::vector<uint8_t> EncodeAgreed(const FailoverAgreed& m) {
  Writer w(MsgType::kAgreed);
  w.U32(m.epoch);
  w.U64(m.dead_mask);
  w.U64(m.boundary);
  PutSeqs(w, m.recover);
  return w.Take();
}

std::vector<uint8_t> EncodeNotice(uint64_t dead_mask) {
  Writer w(MsgType::kNotice);
  w.U64(dead_mask);
  return w.Take();
}

std::vector<uint8_t> EncodeEpoch(const EpochChange& m) {
  Writer w(MsgType::kEpoch);
  w.U32(m.epoch);
  w.U64(m.dead_mask);
  w.U64(m.boundary);
  return w.Take();
}

std::vector<uint8_t> EncodeHeartbeat() { return Writer(MsgType::kHeartbeat).Take(); }

Status Decode(std::span<const uint8_t> meta, Message* out) {
  Reader r(meta);
  uint16_t version = 0;
  uint16_t type = 0;
  if (!r.U16(&version) || !r.U16(&type)) return ProtocolError("message shorter than its 4-byte prefix");
  // An Error has one layout in every version, so a refusal from a peer of another release (most
  // often: "you speak another version") is still read; anything else of another version is not.
  if (version != kProtocolVersion && static_cast<MsgType>(type) != MsgType::kError) {
    return ProtocolError("peer speaks protocol version " + std::to_string(version) + ", this side speaks " +
                         std::to_string(kProtocolVersion) + "; run the same Optcast release on clients and servers");
  }
  out->type = static_cast<MsgType>(type);
  switch (out->type) {
    case MsgType::kHello: {
      Hello& h = out->hello;
      if (!r.Bytes(h.job_id.data(), h.job_id.size()) || !r.U32(&h.nranks) || !r.U32(&h.rank) || !r.U32(&h.flags) ||
          !r.U32(&h.lane) || r.remaining() != 0) {
        return Truncated("hello");
      }
      return Status::Ok();
    }
    case MsgType::kWelcome: {
      if (!r.U64(&out->welcome.max_payload) || !r.U32(&out->welcome.job_timeout_ms) || !r.U32(&out->welcome.flags) ||
          !r.U64(&out->welcome.link_rate_bits) || !r.U32(&out->welcome.lanes) || r.remaining() != 0) {
        return Truncated("welcome");
      }
      if (out->welcome.lanes == 0) return ProtocolError("a welcome announcing 0 lanes");
      return Status::Ok();
    }
    case MsgType::kError: {
      uint32_t code = 0;
      uint32_t len = 0;
      if (!r.U32(&code) || !r.U64(&out->error.coll_seq) || !r.U32(&len) || len > kMaxErrorText ||
          r.remaining() != len) {
        return Truncated("error");
      }
      out->error.code = code <= static_cast<uint32_t>(Code::kCancelled) ? static_cast<Code>(code) : Code::kInternal;
      out->error.text.resize(len);
      if (len > 0 && !r.Bytes(out->error.text.data(), len)) return Truncated("error");
      return Status::Ok();
    }
    case MsgType::kChunk: {
      CollDesc& d = out->chunk.desc;
      ChunkRef& c = out->chunk.ref;
      uint8_t coll = 0, dtype = 0, op = 0;
      if (r.remaining() != kCollDescBytes + kChunkRefBytes || !r.U64(&d.coll_seq) || !r.U8(&coll) || !r.U8(&dtype) ||
          !r.U8(&op) || !r.U8(&out->chunk.flags) || !r.U64(&d.count) || !r.U64(&d.server_elems) || !r.U32(&d.epoch) ||
          !r.U32(&c.segment) || !r.U64(&c.offset) || !r.U32(&c.count)) {
        return Truncated("chunk");
      }
      if ((out->chunk.flags & ~(kChunkResultCopy | kChunkInputLost)) != 0) {
        return ProtocolError("chunk has unknown flags " + std::to_string(out->chunk.flags));
      }
      if (!IsValidCollType(coll)) return ProtocolError("chunk names unknown collective " + std::to_string(coll));
      if (!IsValidDataType(dtype)) return ProtocolError("chunk names unknown data type " + std::to_string(dtype));
      if (!IsValidRedOp(op)) return ProtocolError("chunk names unknown reduction op " + std::to_string(op));
      d.coll = static_cast<CollType>(coll);
      d.dtype = static_cast<DataType>(dtype);
      d.op = static_cast<RedOp>(op);
      if (c.count == 0) return ProtocolError("chunk with zero elements");
      return Status::Ok();
    }
    case MsgType::kResult:
    case MsgType::kAck: {
      ChunkDone& m = out->done;
      if (r.remaining() != 8 + kChunkRefBytes || !r.U64(&m.coll_seq) || !r.U32(&m.ref.segment) ||
          !r.U64(&m.ref.offset) || !r.U32(&m.ref.count)) {
        return Truncated(out->type == MsgType::kResult ? "result" : "ack");
      }
      return Status::Ok();
    }
    case MsgType::kBye:
      if (r.remaining() != 0) return Truncated("bye");
      return Status::Ok();
    case MsgType::kChallenge:
      if (r.remaining() != out->challenge.size() || !r.Bytes(out->challenge.data(), out->challenge.size())) {
        return Truncated("challenge");
      }
      return Status::Ok();
    case MsgType::kProof:
      if (r.remaining() != out->proof.size() || !r.Bytes(out->proof.data(), out->proof.size())) {
        return Truncated("proof");
      }
      return Status::Ok();
    case MsgType::kGrow:
      if (!r.U32(&out->grow.weight) || !r.U32(&out->grow.min_rank) || r.remaining() != 0) return Truncated("grow");
      return Status::Ok();
    case MsgType::kSealed:
      if (!r.U32(&out->sealed_nranks) || r.remaining() != 0) return Truncated("sealed");
      return Status::Ok();
    case MsgType::kStallQuery:
      if (!r.U64(&out->stall_query_seq) || r.remaining() != 0) return Truncated("stall query");
      return Status::Ok();
    case MsgType::kStallReport: {
      uint32_t len = 0;
      if (!r.U64(&out->stall_report.coll_seq) || !r.U32(&len) || len > kMaxErrorText || r.remaining() != len) {
        return Truncated("stall report");
      }
      out->stall_report.waiting_for.resize(len);
      if (len > 0 && !r.Bytes(out->stall_report.waiting_for.data(), len)) return Truncated("stall report");
      return Status::Ok();
    }
    case MsgType::kFailover: {
      FailoverReport& f = out->report;
      if (!GetReport(r, &f)) return Truncated("failover");
      if (f.server_index >= 64) return ProtocolError("failover names server index " + std::to_string(f.server_index));
      return Status::Ok();
    }
    case MsgType::kFailoverRelay: {
      FailoverReport& f = out->report;
      if (!r.U32(&out->relay_rank) || !GetReport(r, &f)) return Truncated("failover relay");
      if (f.server_index >= 64) return ProtocolError("failover names server index " + std::to_string(f.server_index));
      return Status::Ok();
    }
    case MsgType::kAgreed: {
      FailoverAgreed& a = out->agreed;
      if (!r.U32(&a.epoch) || !r.U64(&a.dead_mask) || !r.U64(&a.boundary) || !GetSeqs(r, &a.recover)) {
        return Truncated("agreed");
      }
      return Status::Ok();
    }
    case MsgType::kNotice:
      if (!r.U64(&out->notice_mask) || r.remaining() != 0) return Truncated("notice");
      return Status::Ok();
    case MsgType::kEpoch:
      if (!r.U32(&out->epoch.epoch) || !r.U64(&out->epoch.dead_mask) || !r.U64(&out->epoch.boundary) ||
          r.remaining() != 0) {
        return Truncated("epoch");
      }
      return Status::Ok();
    case MsgType::kHeartbeat:
      if (r.remaining() != 0) return Truncated("heartbeat");
      return Status::Ok();
  }
  return ProtocolError("unknown message type " + std::to_string(type));
}

Status PayloadBytes(DataType dtype, const ChunkRef& ref, uint64_t* bytes) {
  *bytes = static_cast<uint64_t>(ref.count) * DataTypeSize(dtype);
  return Status::Ok();
}

std::string JobIdHex(const JobIdBytes& id) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (uint8_t b : id) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

}  // namespace optcast::wire
