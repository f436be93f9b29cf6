// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// An ordinary MPI program that runs the collectives liboptcast-mpi.so intercepts, for every
// predefined datatype and op it routes, on several communicators and odd counts, and writes every
// result to OUTDIR/rank<R>.bin. Run it with and without the interposer, then `compare` the two
// directories: integers must match exactly, floats within a tolerance (the servers add in rank
// order, MPI in its own order).
//
//   mpirun -np 4 optcast-mpi-check run OUTDIR
//   optcast-mpi-check compare DIR_WITHOUT DIR_WITH

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

enum class Compare : uint32_t { kExact = 0, kFloat32 = 1, kFloat64 = 2 };

struct TypeCase {
  MPI_Datatype type;
  const char* name;
  size_t size;
  bool is_signed;
  Compare compare;
};

const TypeCase kTypes[] = {
    {MPI_FLOAT, "float", 4, true, Compare::kFloat32},
    {MPI_DOUBLE, "double", 8, true, Compare::kFloat64},
    {MPI_INT8_T, "int8_t", 1, true, Compare::kExact},
    {MPI_UINT8_T, "uint8_t", 1, false, Compare::kExact},
    {MPI_INT32_T, "int32_t", 4, true, Compare::kExact},
    {MPI_UINT32_T, "uint32_t", 4, false, Compare::kExact},
    {MPI_INT64_T, "int64_t", 8, true, Compare::kExact},
    {MPI_UINT64_T, "uint64_t", 8, false, Compare::kExact},
    {MPI_INT, "int", sizeof(int), true, Compare::kExact},
    {MPI_UNSIGNED, "unsigned", sizeof(unsigned), false, Compare::kExact},
    {MPI_LONG, "long", sizeof(long), true, Compare::kExact},
    {MPI_UNSIGNED_LONG, "unsigned long", sizeof(unsigned long), false, Compare::kExact},
    {MPI_LONG_LONG, "long long", sizeof(long long), true, Compare::kExact},
    {MPI_UNSIGNED_LONG_LONG, "unsigned long long", sizeof(unsigned long long), false, Compare::kExact},
    {MPI_SIGNED_CHAR, "signed char", 1, true, Compare::kExact},
    {MPI_UNSIGNED_CHAR, "unsigned char", 1, false, Compare::kExact},
};

struct OpCase {
  MPI_Op op;
  const char* name;
};
const OpCase kOps[] = {{MPI_SUM, "sum"}, {MPI_PROD, "prod"}, {MPI_MIN, "min"}, {MPI_MAX, "max"}};

// Odd counts, from one element to more than one chunk.
const int kCounts[] = {1, 3, 1001, 70001};

// Element i of rank r's input, chosen so that no sum or product overflows any type.
template <typename T>
T Value(size_t i, int r, MPI_Op op, bool is_signed) {
  if (op == MPI_PROD) {
    int v = (i + r) % 3 == 0 ? 2 : 1;
    if (is_signed && (i + 2 * r) % 5 == 0) v = -v;
    if constexpr (std::is_floating_point_v<T>) return T(v) * T(1.0 + 0.01 * ((i + r) % 7));
    return T(v);
  }
  int v = int((i * 7 + r * 13) % 50);
  if (is_signed) v -= 20;
  if constexpr (std::is_floating_point_v<T>) return T(v) / T(7) + T(0.001) * T(i % 11);
  return T(v);
}

void Fill(void* buf, const TypeCase& t, size_t count, int rank, MPI_Op op) {
  for (size_t i = 0; i < count; ++i) {
    auto* p = static_cast<uint8_t*>(buf) + i * t.size;
    if (t.compare == Compare::kFloat32) {
      float v = Value<float>(i, rank, op, true);
      std::memcpy(p, &v, 4);
    } else if (t.compare == Compare::kFloat64) {
      double v = Value<double>(i, rank, op, true);
      std::memcpy(p, &v, 8);
    } else {
      int64_t v = Value<int64_t>(i, rank, op, t.is_signed);
      std::memcpy(p, &v, t.size);  // little-endian: the low bytes
    }
  }
}

class Dump {
 public:
  explicit Dump(const std::string& path) : out_(path, std::ios::binary) {}
  bool ok() const { return bool(out_); }
  void Write(uint32_t case_id, Compare compare, const void* data, uint64_t bytes) {
    uint32_t head[2] = {case_id, uint32_t(compare)};
    out_.write(reinterpret_cast<const char*>(head), sizeof(head));
    out_.write(reinterpret_cast<const char*>(&bytes), sizeof(bytes));
    out_.write(static_cast<const char*>(data), std::streamsize(bytes));
  }

 private:
  std::ofstream out_;
};

void Check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    std::fprintf(stderr, "optcast-mpi-check: %s returned %d\n", what, rc);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

// Counts, per collective, of the calls that the interposer should route (`routed`) and of those
// it must hand to MPI (`passed`), printed for the test to compare with the interposer's counters.
struct Expect {
  long routed[4] = {};
  long passed[4] = {};
};

int Run(const std::string& outdir) {
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  Dump dump(outdir + "/rank" + std::to_string(world_rank) + ".bin");
  if (!dump.ok()) {
    std::fprintf(stderr, "optcast-mpi-check: cannot write to %s\n", outdir.c_str());
    return 1;
  }
  MPI_Comm parity, dup;
  // Reversed keys: rank order inside the split differs from the world's.
  Check(MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, -world_rank, &parity), "MPI_Comm_split");
  Check(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup");
  const MPI_Comm comms[] = {MPI_COMM_WORLD, parity, dup};

  Expect expect;
  uint32_t case_id = 0;
  auto count_call = [&](int kind, MPI_Comm comm, bool routable) {
    int size = 0;
    MPI_Comm_size(comm, &size);
    (routable && size > 1 ? expect.routed : expect.passed)[kind]++;
  };

  for (MPI_Comm comm : comms) {
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (const TypeCase& t : kTypes) {
      for (const OpCase& o : kOps) {
        const size_t count = size_t(kCounts[case_id % 4]);
        std::vector<uint8_t> send(count * t.size * size), recv(count * t.size * size);
        // MPI_Allreduce, out of place and in place.
        Fill(send.data(), t, count, rank, o.op);
        Check(MPI_Allreduce(send.data(), recv.data(), int(count), t.type, o.op, comm), "MPI_Allreduce");
        count_call(0, comm, true);
        dump.Write(case_id++, t.compare, recv.data(), count * t.size);
        Fill(recv.data(), t, count, rank, o.op);
        Check(MPI_Allreduce(MPI_IN_PLACE, recv.data(), int(count), t.type, o.op, comm), "MPI_Allreduce in place");
        count_call(0, comm, true);
        dump.Write(case_id++, t.compare, recv.data(), count * t.size);

        // MPI_Reduce_scatter_block: rank r's input part j is element range j of a rank-r buffer.
        Fill(send.data(), t, count * size, rank, o.op);
        Check(MPI_Reduce_scatter_block(send.data(), recv.data(), int(count), t.type, o.op, comm),
              "MPI_Reduce_scatter_block");
        count_call(2, comm, true);
        dump.Write(case_id++, t.compare, recv.data(), count * t.size);
        Fill(recv.data(), t, count * size, rank, o.op);
        Check(MPI_Reduce_scatter_block(MPI_IN_PLACE, recv.data(), int(count), t.type, o.op, comm),
              "MPI_Reduce_scatter_block in place");
        count_call(2, comm, true);
        dump.Write(case_id++, t.compare, recv.data(), count * t.size);
      }
      // MPI_Iallreduce: all four ops in flight at once, completed by different calls.
      const size_t count = size_t(kCounts[case_id % 4]);
      std::vector<std::vector<uint8_t>> bufs(4, std::vector<uint8_t>(count * t.size));
      MPI_Request reqs[4];
      for (int k = 0; k < 4; ++k) {
        Fill(bufs[k].data(), t, count, rank, kOps[k].op);
        Check(MPI_Iallreduce(MPI_IN_PLACE, bufs[k].data(), int(count), t.type, kOps[k].op, comm, &reqs[k]),
              "MPI_Iallreduce");
        count_call(1, comm, true);
      }
      int flag = 0;
      while (!flag) Check(MPI_Test(&reqs[0], &flag, MPI_STATUS_IGNORE), "MPI_Test");
      Check(MPI_Wait(&reqs[1], MPI_STATUS_IGNORE), "MPI_Wait");
      Check(MPI_Waitall(2, &reqs[2], MPI_STATUSES_IGNORE), "MPI_Waitall");
      for (int k = 0; k < 4; ++k) dump.Write(case_id++, t.compare, bufs[k].data(), count * t.size);
    }

    // MPI_Allgather moves bytes: any packed predefined type, out of place and in place.
    const TypeCase gather_types[] = {kTypes[0], kTypes[1], kTypes[2], kTypes[8]};
    for (const TypeCase& t : gather_types) {
      const size_t count = size_t(kCounts[case_id % 4]);
      std::vector<uint8_t> send(count * t.size), recv(count * t.size * size);
      Fill(send.data(), t, count, rank, MPI_SUM);
      Check(MPI_Allgather(send.data(), int(count), t.type, recv.data(), int(count), t.type, comm), "MPI_Allgather");
      count_call(3, comm, true);
      dump.Write(case_id++, Compare::kExact, recv.data(), recv.size());
      Fill(recv.data() + rank * send.size(), t, count, rank + 100, MPI_SUM);
      Check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv.data(), int(count), t.type, comm),
            "MPI_Allgather in place");
      count_call(3, comm, true);
      dump.Write(case_id++, Compare::kExact, recv.data(), recv.size());
    }

    // What must stay with MPI: a type the servers lack (short), a bitwise op, a derived type,
    // a padded pair type.
    {
      std::vector<short> s(1001, short(rank + 1)), r(1001);
      Check(MPI_Allreduce(s.data(), r.data(), 1001, MPI_SHORT, MPI_SUM, comm), "MPI_Allreduce short");
      count_call(0, comm, false);
      dump.Write(case_id++, Compare::kExact, r.data(), r.size() * sizeof(short));
      std::vector<int> a(1001, 0xF0 | rank), b(1001);
      Check(MPI_Allreduce(a.data(), b.data(), 1001, MPI_INT, MPI_BOR, comm), "MPI_Allreduce bor");
      count_call(0, comm, false);
      dump.Write(case_id++, Compare::kExact, b.data(), b.size() * sizeof(int));
      MPI_Datatype pair;
      MPI_Type_contiguous(2, MPI_INT, &pair);
      MPI_Type_commit(&pair);
      std::vector<int> c(2 * 501, rank), d(2 * 501 * size);
      Check(MPI_Allgather(c.data(), 501, pair, d.data(), 501, pair, comm), "MPI_Allgather derived");
      count_call(3, comm, false);
      MPI_Type_free(&pair);
      dump.Write(case_id++, Compare::kExact, d.data(), d.size() * sizeof(int));
    }
  }
  MPI_Comm_free(&parity);
  MPI_Comm_free(&dup);
  const char* names[4] = {"MPI_Allreduce", "MPI_Iallreduce", "MPI_Reduce_scatter_block", "MPI_Allgather"};
  std::string line;
  for (int k = 0; k < 4; ++k) {
    line += std::string(k ? "; " : "") + names[k] + " " + std::to_string(expect.routed[k]) + " via servers " +
            std::to_string(expect.passed[k]) + " via MPI";
  }
  std::printf("optcast-mpi-check: rank %d expects: %s\n", world_rank, line.c_str());
  std::printf("optcast-mpi-check: rank %d wrote %u results\n", world_rank, case_id);
  return 0;
}

bool ReadAll(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), {});
  return true;
}

template <typename T>
long CountFloatMismatches(const uint8_t* a, const uint8_t* b, size_t bytes, double tol, uint32_t id) {
  long bad = 0;
  for (size_t i = 0; i + sizeof(T) <= bytes; i += sizeof(T)) {
    T x, y;
    std::memcpy(&x, a + i, sizeof(T));
    std::memcpy(&y, b + i, sizeof(T));
    if (!(std::fabs(double(x) - double(y)) <= tol * std::max(1.0, std::fabs(double(x))))) {
      if (bad++ < 3) std::printf("case %u element %zu: %.17g vs %.17g\n", id, i / sizeof(T), double(x), double(y));
    }
  }
  return bad;
}

// Compares two dumps of the same rank; returns the number of differing results. `float32_tol`:
// how far float32 results may differ (relative above 1, absolute below).
long CompareFiles(const std::string& pa, const std::string& pb, double float32_tol) {
  std::vector<uint8_t> a, b;
  if (!ReadAll(pa, &a) || !ReadAll(pb, &b)) {
    std::printf("cannot read %s or %s\n", pa.c_str(), pb.c_str());
    return 1;
  }
  size_t ia = 0, ib = 0;
  long bad = 0, results = 0;
  constexpr size_t kHead = 16;
  while (ia + kHead <= a.size() && ib + kHead <= b.size()) {
    uint32_t ha[2], hb[2];
    uint64_t la, lb;
    std::memcpy(ha, &a[ia], 8);
    std::memcpy(&la, &a[ia + 8], 8);
    std::memcpy(hb, &b[ib], 8);
    std::memcpy(&lb, &b[ib + 8], 8);
    if (ha[0] != hb[0] || ha[1] != hb[1] || la != lb || ia + kHead + la > a.size() || ib + kHead + lb > b.size()) {
      std::printf("%s and %s disagree on the layout of result %u\n", pa.c_str(), pb.c_str(), ha[0]);
      return bad + 1;
    }
    const uint8_t* da = &a[ia + kHead];
    const uint8_t* db = &b[ib + kHead];
    long diff = 0;
    switch (Compare(ha[1])) {
      case Compare::kExact:
        diff = std::memcmp(da, db, la) != 0;
        if (diff) std::printf("case %u: results differ\n", ha[0]);
        break;
      case Compare::kFloat32: diff = CountFloatMismatches<float>(da, db, la, float32_tol, ha[0]); break;
      case Compare::kFloat64: diff = CountFloatMismatches<double>(da, db, la, 1e-12, ha[0]); break;
    }
    bad += diff != 0;
    ++results;
    ia += kHead + la;
    ib += kHead + lb;
  }
  if (ia != a.size() || ib != b.size()) {
    std::printf("%s and %s hold different numbers of results\n", pa.c_str(), pb.c_str());
    ++bad;
  }
  std::printf("%s: %ld results compared, %ld differ\n", pb.c_str(), results, bad);
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "run" && argc == 3) {
    MPI_Init(&argc, &argv);
    int rc = Run(argv[2]);
    MPI_Finalize();
    return rc;
  }
  if (mode == "compare" && (argc == 4 || argc == 5)) {
    // The servers add in rank order, MPI in its own: float32 sums differ in the last bits. A
    // 16-bit wire (OPTCAST_WIRE_DTYPE) allows more, as the caller says.
    const double float32_tol = argc == 5 ? std::atof(argv[4]) : 1e-5;
    long bad = 0;
    int files = 0;
    for (int r = 0;; ++r) {
      const std::string name = "/rank" + std::to_string(r) + ".bin";
      std::ifstream probe(std::string(argv[2]) + name);
      if (!probe) break;
      bad += CompareFiles(argv[2] + name, argv[3] + name, float32_tol);
      ++files;
    }
    if (files == 0) std::printf("no rank files in %s\n", argv[2]);
    return bad == 0 && files > 0 ? 0 : 1;
  }
  std::fprintf(stderr, "usage: %s run OUTDIR (under mpirun) | compare DIR_A DIR_B [FLOAT32_TOLERANCE]\n", argv[0]);
  return 2;
}
