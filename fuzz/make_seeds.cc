// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Writes the seed corpus: fuzz_make_seeds DIR  ->  DIR/<target>/<name>.
// Rebuild with `cmake --build build-fuzz -t fuzz_seeds` after a protocol change.
//
// fuzz_make_seeds --large DIR writes a few large seeds instead (not committed: scripts/fuzz.sh
// adds them to its working corpus). Only payloads of 32 KiB and more take the connection's path
// that receives straight into the destination buffer, and libFuzzer does not grow small inputs
// that far by itself.
//
// fuzz_make_seeds --repro DIR writes the reproducers of open findings (fuzz/repro/, see
// docs/testing.md).

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "frames.h"
#include "optcast/status.h"
#include "optcast/types.h"
#include "wire/protocol.h"

namespace optcast::fuzz {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

int g_files = 0;

bool g_large = false;

void Write(const fs::path& dir, const std::string& name, const Bytes& b) {
  fs::create_directories(dir);
  std::ofstream f(dir / name, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  FUZZ_CHECK(f.good(), "cannot write %s", (dir / name).c_str());
  FUZZ_CHECK(g_large || b.size() < 4096, "seed %s has %zu bytes", name.c_str(), b.size());
  ++g_files;
}

Bytes Cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) Append(&out, p);
  return out;
}

Bytes Truncate(Bytes b, size_t drop) {
  b.resize(b.size() > drop ? b.size() - drop : 0);
  return b;
}

wire::Hello MakeHello(uint32_t nranks, uint32_t rank) {
  wire::Hello h;
  for (int i = 0; i < 16; ++i) h.job_id[i] = static_cast<uint8_t>(0x10 + i);
  h.nranks = nranks;
  h.rank = rank;
  return h;
}

wire::Chunk MakeChunk(CollType coll, DataType dt, RedOp op, uint64_t count, uint32_t segment, uint64_t offset,
                      uint32_t n) {
  wire::Chunk c;
  c.desc.coll_seq = 7;
  c.desc.coll = coll;
  c.desc.dtype = dt;
  c.desc.op = op;
  c.desc.count = count;
  c.desc.server_elems = count;
  c.ref.segment = segment;
  c.ref.offset = offset;
  c.ref.count = n;
  return c;
}

Bytes Payload(const wire::Chunk& c) {
  Bytes p(static_cast<size_t>(c.ref.count) * DataTypeSize(c.desc.dtype));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i * 37 + 1);
  return p;
}

Bytes ChunkFrame(const wire::Chunk& c) { return Frame(wire::EncodeChunk(c), Payload(c)); }

Bytes WithVersion(Bytes meta, uint16_t version) {
  meta[0] = static_cast<uint8_t>(version);
  meta[1] = static_cast<uint8_t>(version >> 8);
  return meta;
}

}  // namespace
}  // namespace optcast::fuzz

int main(int argc, char** argv) {
  using namespace optcast;
  using namespace optcast::fuzz;
  const std::string flag = argc == 3 ? argv[1] : "";
  g_large = flag == "--large" || flag == "--repro";
  if (argc != 2 && !g_large) {
    std::fprintf(stderr, "usage: %s [--large|--repro] DIR\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[argc - 1];
  if (flag == "--repro") {
    // Findings 1 and 2: a hello for the most ranks a server accepts (8192), then 1000 one-byte
    // int8 chunks (65 KB in all), none of which can ever complete.
    auto many_ranks = [](uint8_t id0, CollType coll, int chunks, bool distinct_collectives) {
      wire::Hello h;
      for (int i = 0; i < 16; ++i) h.job_id[i] = static_cast<uint8_t>(id0 + i);
      h.nranks = 8192;
      h.rank = 0;
      Bytes s{0};  // fuzz_server_session mode byte: no prelude
      Append(&s, Frame(wire::EncodeHello(h)));
      for (int i = 0; i < chunks; ++i) {
        wire::Chunk c = MakeChunk(coll, DataType::kInt8, RedOp::kSum, 1u << 20, 0, distinct_collectives ? 0 : i, 1);
        c.desc.coll_seq = distinct_collectives ? static_cast<uint64_t>(i) : 1;
        Append(&s, ChunkFrame(c));
      }
      return s;
    };
    Write(root, "chunks_many_ranks", many_ranks(0xc0, CollType::kAllReduce, 1000, true));
    Write(root, "allgather_many_ranks", many_ranks(0xd0, CollType::kAllGather, 1000, false));
    // Finding 3 (fuzz_decode with OPTCAST_FUZZ_STRICT=1): segment * count wraps around 2^64.
    wire::Chunk wrap = MakeChunk(CollType::kAllGather, DataType::kFloat32, RedOp::kSum, 0x200000005ull, 0xfffffffeu,
                                 0xffffffffull, 0xc6000000u);
    wrap.desc.coll_seq = 0x0000080000000007ull;
    wrap.desc.server_elems = 0x400000000ull;
    Write(root, "validatechunk_segment_overflow", wire::EncodeChunk(wrap));
    std::printf("wrote %d reproducers under %s\n", g_files, root.c_str());
    return 0;
  }
  if (g_large) {
    const Bytes hello = wire::EncodeHello(MakeHello(1, 0));
    // 40000 and 70000 bytes of payload: more than half the connection's 64 KiB staging buffer.
    const wire::Chunk c40 = MakeChunk(CollType::kAllReduce, DataType::kFloat32, RedOp::kSum, 40000, 0, 0, 10000);
    const wire::Chunk c70 = MakeChunk(CollType::kAllReduce, DataType::kUInt8, RedOp::kMax, 70000, 0, 0, 70000);
    const fs::path fr = root / "fuzz_framing";
    Write(fr, "large_chunk_40k", Cat({Frame(hello), ChunkFrame(c40), Frame(wire::EncodeBye())}));
    Write(fr, "large_chunks_70k_40k", Cat({ChunkFrame(c70), ChunkFrame(c40)}));
    Write(fr, "large_chunk_truncated", Truncate(ChunkFrame(c70), 20000));
    std::printf("wrote %d large seed files under %s\n", g_files, root.c_str());
    return 0;
  }

  const Bytes hello = wire::EncodeHello(MakeHello(1, 0));
  const Bytes hello2 = wire::EncodeHello(MakeHello(2, 1));
  const Bytes welcome = wire::EncodeWelcome({64u << 20, 30000});
  const Bytes error = wire::EncodeError({Code::kMismatch, 7, "ranks disagree on collective #7"});
  const wire::Chunk ar = MakeChunk(CollType::kAllReduce, DataType::kFloat32, RedOp::kSum, 16, 0, 0, 4);
  const wire::Chunk ar2 = MakeChunk(CollType::kAllReduce, DataType::kFloat32, RedOp::kSum, 16, 0, 4, 4);
  const wire::Chunk rs = MakeChunk(CollType::kReduceScatter, DataType::kBFloat16, RedOp::kMax, 8, 0, 2, 3);
  const wire::Chunk ag = MakeChunk(CollType::kAllGather, DataType::kInt64, RedOp::kSum, 5, 0, 0, 5);
  const wire::Chunk avg = MakeChunk(CollType::kAllReduce, DataType::kInt8, RedOp::kAvg, 9, 0, 0, 9);
  const wire::Chunk prod = MakeChunk(CollType::kAllReduce, DataType::kInt32, RedOp::kProd, 70, 0, 0, 70);
  const wire::ChunkDone done{7, {0, 4, 4}};
  const Bytes chunk = wire::EncodeChunk(ar);

  // fuzz_decode: bare meta blocks.
  const fs::path dec = root / "fuzz_decode";
  Write(dec, "hello", hello);
  Write(dec, "welcome", welcome);
  Write(dec, "error", error);
  Write(dec, "chunk_allreduce", chunk);
  Write(dec, "chunk_reducescatter", wire::EncodeChunk(rs));
  Write(dec, "chunk_allgather", wire::EncodeChunk(ag));
  Write(dec, "result", wire::EncodeResult(done));
  Write(dec, "ack", wire::EncodeAck(done));
  Write(dec, "bye", wire::EncodeBye());
  Write(dec, "challenge", wire::EncodeChallenge(wire::Nonce{1, 2, 3}));
  Write(dec, "proof", wire::EncodeProof(wire::Mac{4, 5, 6}));
  Write(dec, "stall_query", wire::EncodeStallQuery(7));
  Write(dec, "stall_report", wire::EncodeStallReport(wire::StallReport{7, "1,3"}));
  wire::FailoverReport report{1, 0, 0x2, 9, {7, 8}};
  Write(dec, "failover", wire::EncodeFailover(report));
  Write(dec, "agreed", wire::EncodeAgreed(wire::FailoverAgreed{1, 0x2, 9, {7}}));
  Write(dec, "notice", wire::EncodeNotice(0x2));
  Write(dec, "epoch", wire::EncodeEpoch(wire::EpochChange{1, 0x2, 9}));
  Write(dec, "heartbeat", wire::EncodeHeartbeat());
  wire::Chunk copy = ar;
  copy.desc.coll_seq = wire::RecoverySeq(1, ar.desc.coll_seq);
  copy.desc.epoch = 1;
  copy.flags = wire::kChunkResultCopy;
  Write(dec, "chunk_result_copy", wire::EncodeChunk(copy));
  Write(dec, "hello_wrong_version", WithVersion(hello, wire::kProtocolVersion - 1));
  Write(dec, "chunk_truncated", Truncate(chunk, 5));

  // fuzz_framing: byte streams of frames.
  const fs::path fr = root / "fuzz_framing";
  Write(fr, "hello", Frame(hello));
  Write(fr, "hello_chunk_bye", Cat({Frame(hello), ChunkFrame(ar), ChunkFrame(ar2), Frame(wire::EncodeBye())}));
  Write(fr, "error", Frame(error));
  Write(fr, "chunk_truncated_payload", Truncate(ChunkFrame(ar), 3));
  Write(fr, "chunk_truncated_header", Truncate(ChunkFrame(ar), ChunkFrame(ar).size() - 9));
  Write(fr, "hello_wrong_version", Frame(WithVersion(hello, 0)));
  Bytes bad_magic = Frame(hello);
  bad_magic[0] ^= 0xff;
  Write(fr, "bad_magic", bad_magic);
  Bytes big = Frame(chunk);  // announces a 2 MiB payload: over the handler's 1 MiB
  big[8 + 2] = 0x20;
  Write(fr, "payload_over_limit", big);

  // fuzz_server_session: a mode byte (bits 0-1: 0 no prelude, k a hello of k ranks first; bits
  // 2-3: the prelude's rank; bit 4: linger for replies before half-closing; bit 5: every rank
  // connects and sends the same bytes), then the bytes sent.
  const fs::path ss = root / "fuzz_server_session";
  auto session = [&](const std::string& name, uint8_t mode, const Bytes& b) {
    Bytes s{mode};
    Append(&s, b);
    Write(ss, name, s);
  };
  session("hello", 0, Frame(hello));
  session("hello_2ranks", 0, Frame(hello2));
  session("allreduce_1rank", 0x11, Cat({ChunkFrame(ar), ChunkFrame(ar2), Frame(wire::EncodeBye())}));
  session("reducescatter_1rank", 1, ChunkFrame(rs));
  session("allgather_1rank", 0x11, ChunkFrame(ag));
  session("avg_int8_1rank", 0x11, ChunkFrame(avg));
  session("allreduce_2ranks", 0x16, ChunkFrame(ar));
  session("allreduce_all2", 0x32, Cat({ChunkFrame(ar), ChunkFrame(ar2)}));
  session("prod_int32_all3", 0x33, ChunkFrame(prod));
  session("reducescatter_all3", 0x33, ChunkFrame(rs));
  session("stall_query_2ranks", 0x16, Cat({ChunkFrame(ar), Frame(wire::EncodeStallQuery(ar.desc.coll_seq))}));
  session("stall_query_other_seq", 0x11, Frame(wire::EncodeStallQuery(99)));
  session("stall_query_before_hello", 0, Frame(wire::EncodeStallQuery(1)));
  session("stall_report_from_client", 1, Frame(wire::EncodeStallReport(wire::StallReport{1, "0"})));
  // Failover: a lone rank reports that its second server died (this server is its first), then
  // applies the agreed failover; a heartbeat is a server's message.
  session("failover_report_1rank", 0x11,
          Cat({Frame(wire::EncodeFailover(report)), Frame(wire::EncodeEpoch(wire::EpochChange{1, 0x2, 9}))}));
  session("failover_report_2ranks", 0x16, Cat({ChunkFrame(ar), Frame(wire::EncodeFailover(report))}));
  session("result_copy_1rank", 0x11, ChunkFrame(copy));
  session("heartbeat_from_client", 1, Frame(wire::EncodeHeartbeat()));
  session("error_from_client", 0, Frame(error));
  session("hello_wrong_version", 0, Frame(WithVersion(hello, wire::kProtocolVersion + 1)));
  session("chunk_truncated", 1, Truncate(ChunkFrame(ar), 6));
  session("chunk_before_hello", 0, ChunkFrame(ar));
  session("second_hello", 1, Frame(hello));
  Bytes short_payload = Frame(chunk, Bytes(8, 1));
  session("chunk_wrong_payload_len", 1, short_payload);
  session("hello_zero_ranks", 0, Frame(wire::EncodeHello(MakeHello(0, 0))));

  // fuzz_auth_exchange: a mode byte (bit 0: a valid hello and its challenge first; bit 1: then a
  // proof computed over the nonce and hello XORed with the next 48 bytes), then the bytes.
  const fs::path ax = root / "fuzz_auth_exchange";
  auto auth = [&](const std::string& name, uint8_t mode, const Bytes& b) {
    Bytes s{mode};
    Append(&s, b);
    Write(ax, name, s);
  };
  wire::Mac zero_mac{};
  auth("raw_hello", 0, Frame(hello));
  auth("raw_hello_then_proof", 0, Cat({Frame(hello), Frame(wire::EncodeProof(zero_mac))}));
  auth("raw_proof_first", 0, Frame(wire::EncodeProof(zero_mac)));
  auth("right_proof", 3, Bytes(48, 0));
  auth("proof_other_nonce", 3, Cat({Bytes(31, 0), Bytes{1}}));
  auth("proof_other_rank", 3, Cat({Bytes(44, 0), Bytes{1}}));
  auth("forged_proof", 1, Frame(wire::EncodeProof(zero_mac)));
  auth("chunk_instead_of_proof", 1, ChunkFrame(ar));
  auth("second_hello", 1, Frame(hello));
  auth("truncated_proof", 1, Truncate(Frame(wire::EncodeProof(zero_mac)), 10));

  // fuzz_failover: a byte for the ranks (2 + bit 0), then operations: an opcode (bits 0-1 the
  // rank, bits 2-4 the kind) and its operand bytes (fuzz/fuzz_failover.cc).
  const fs::path fo = root / "fuzz_failover";
  auto report_op = [](uint8_t rank, uint8_t epoch, uint8_t index, uint8_t dead, uint8_t first, Bytes needing) {
    Bytes op{static_cast<uint8_t>(rank), epoch, index, dead, first, static_cast<uint8_t>(needing.size())};
    Append(&op, needing);
    return op;
  };
  auto epoch_op = [](uint8_t rank, uint8_t epoch, uint8_t dead, uint8_t boundary) {
    return Bytes{static_cast<uint8_t>(rank | 2u << 2), epoch, dead, boundary};
  };
  auto chunk_op = [](uint8_t rank, uint8_t seq, uint8_t epoch) {
    return Bytes{static_cast<uint8_t>(rank | 7u << 2), seq, epoch};
  };
  // Server 0 of 3 sees server 1 die: two ranks agree, apply the epoch, go on.
  Write(fo, "two_ranks_agree",
        Cat({Bytes{0}, report_op(0, 0, 0, 2, 5, {3, 4}), report_op(1, 0, 0, 2, 4, {4}), epoch_op(0, 1, 2, 4),
             epoch_op(1, 1, 2, 4), chunk_op(0, 5, 1), chunk_op(1, 5, 1)}));
  // Three ranks; one saw nothing yet (a notice), then reports; a second failover follows.
  Write(fo, "three_ranks_notice_then_second_failover",
        Cat({Bytes{1}, report_op(0, 0, 0, 2, 7, {}), report_op(1, 0, 0, 2, 7, {6}), report_op(2, 0, 0, 2, 6, {}),
             epoch_op(0, 1, 2, 6), epoch_op(1, 1, 2, 6), epoch_op(2, 1, 2, 6), report_op(2, 1, 0, 6, 9, {8}),
             report_op(0, 1, 0, 6, 9, {}), report_op(1, 1, 0, 6, 9, {})}));
  // Not the first server left: agreement without an announcement from here.
  Write(fo, "second_server_is_silent", Cat({Bytes{0}, report_op(0, 0, 2, 2, 3, {}), report_op(1, 0, 2, 2, 3, {})}));
  // Ranks disagree on this server's place in the list, or on the dead set.
  Write(fo, "different_server_index", Cat({Bytes{0}, report_op(0, 0, 0, 2, 3, {}), report_op(1, 0, 1, 4, 3, {})}));
  Write(fo, "different_dead_sets", Cat({Bytes{0}, report_op(0, 0, 0, 2, 3, {}), report_op(1, 0, 0, 6, 3, {1})}));
  // Refusals: this server dead to itself, no dead server, an epoch that skips one, epochs whose
  // boundaries disagree, server-to-client messages from a rank, a chunk ahead of the epoch.
  Write(fo, "self_dead", Cat({Bytes{0}, report_op(0, 0, 1, 2, 3, {})}));
  Write(fo, "no_dead_server", Cat({Bytes{0}, report_op(0, 0, 0, 0, 3, {})}));
  Write(fo, "epoch_skips", Cat({Bytes{0}, epoch_op(0, 2, 2, 3)}));
  Write(fo, "epoch_boundaries_disagree", Cat({Bytes{0}, epoch_op(0, 1, 2, 3), epoch_op(1, 1, 2, 4)}));
  Write(fo, "heartbeat_from_rank", Bytes{0, 3u << 2});
  Write(fo, "notice_from_rank", Bytes{0, 4u << 2, 2});
  Write(fo, "agreed_from_rank", Bytes{0, 5u << 2, 1, 2, 3});
  Write(fo, "chunk_ahead_of_epoch", Cat({Bytes{0}, chunk_op(0, 1, 1)}));
  Write(fo, "stale_chunk_dropped",
        Cat({Bytes{0}, chunk_op(0, 3, 0), epoch_op(0, 1, 1, 2), epoch_op(1, 1, 1, 2), chunk_op(1, 3, 0)}));
  Write(fo, "raw_failover_meta", Bytes{0, 6u << 2, 0, 8, 1, 0, 0, 0, 0, 0, 0, 0});

  std::printf("wrote %d seed files under %s\n", g_files, root.c_str());
  return 0;
}
