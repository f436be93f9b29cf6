// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tree_reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "harness.h"
#include "reduce/half.h"

namespace optcast::tree {
namespace {

// One thing a node combines: a rank's own input, or a child node's partial.
struct Item {
  int min_rank = 0;
  int rank = -1;  // >= 0: a rank
  int node = -1;  // >= 0: a child node
};

int MinRank(const TreeShape& s, int node) {
  int best = INT32_MAX;
  for (int r = 0; r < s.nranks(); ++r) {
    if (s.rank_node[r] == node) best = std::min(best, r);
  }
  for (size_t c = 0; c < s.parent.size(); ++c) {
    if (s.parent[c] == node) best = std::min(best, MinRank(s, static_cast<int>(c)));
  }
  return best;
}

std::vector<Item> ItemsOf(const TreeShape& s, int node) {
  std::vector<Item> items;
  for (int r = 0; r < s.nranks(); ++r) {
    if (s.rank_node[r] == node) items.push_back(Item{r, r, -1});
  }
  for (size_t c = 0; c < s.parent.size(); ++c) {
    if (s.parent[c] != node) continue;
    const int m = MinRank(s, static_cast<int>(c));
    if (m != INT32_MAX) items.push_back(Item{m, -1, static_cast<int>(c)});  // a child with ranks
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.min_rank < b.min_rank; });
  return items;
}

template <typename A>
A Apply(RedOp op, A acc, A v) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return static_cast<A>(acc + v);
    case RedOp::kProd: return static_cast<A>(acc * v);
    case RedOp::kMin: return acc < v ? acc : v;
    case RedOp::kMax: return acc > v ? acc : v;
    case RedOp::kBand:
    case RedOp::kBor:
    case RedOp::kBxor: break;  // integer types only: their reference is e2e::FillReference
  }
  return acc;
}

// in[r][i]: rank r's element i, widened to the accumulator type A.
template <typename A>
A Eval(const TreeShape& s, const std::vector<std::vector<Item>>& items, int node, RedOp op,
       const std::vector<std::vector<A>>& in, size_t i) {
  const auto& list = items[node];
  auto value = [&](const Item& it) { return it.rank >= 0 ? in[it.rank][i] : Eval<A>(s, items, it.node, op, in, i); };
  A acc = value(list[0]);
  for (size_t k = 1; k < list.size(); ++k) acc = Apply<A>(op, acc, value(list[k]));
  return acc;
}

template <typename A, typename Load, typename Store>
void FloatReference(const TreeShape& s, DataType dtype, RedOp op, uint64_t seed, size_t n, Load load, Store store) {
  std::vector<std::vector<Item>> items(s.parent.size());
  for (size_t node = 0; node < s.parent.size(); ++node) items[node] = ItemsOf(s, static_cast<int>(node));
  const size_t es = DataTypeSize(dtype);
  std::vector<std::vector<A>> in(s.nranks(), std::vector<A>(n));
  std::vector<uint8_t> raw(n * es);
  for (int r = 0; r < s.nranks(); ++r) {
    e2e::FillInput(dtype, op, seed, r, 0, n, raw.data());
    for (size_t i = 0; i < n; ++i) in[r][i] = load(raw.data() + i * es);
  }
  for (size_t i = 0; i < n; ++i) {
    A v = Eval<A>(s, items, s.root(), op, in, i);
    if (op == RedOp::kAvg) v = v / static_cast<A>(s.nranks());  // divided once, at the root
    store(i, v);
  }
}

}  // namespace

int TreeShape::root() const {
  for (size_t i = 0; i < parent.size(); ++i) {
    if (parent[i] < 0) return static_cast<int>(i);
  }
  return -1;
}

void TreeReference(const TreeShape& s, DataType dtype, RedOp op, uint64_t seed, size_t n, void* out) {
  switch (dtype) {
    case DataType::kFloat32:
      FloatReference<float>(
          s, dtype, op, seed, n,
          [](const uint8_t* p) {
            float f;
            std::memcpy(&f, p, 4);
            return f;
          },
          [out](size_t i, float v) { static_cast<float*>(out)[i] = v; });
      return;
    case DataType::kFloat64:
      FloatReference<double>(
          s, dtype, op, seed, n,
          [](const uint8_t* p) {
            double f;
            std::memcpy(&f, p, 8);
            return f;
          },
          [out](size_t i, double v) { static_cast<double*>(out)[i] = v; });
      return;
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const bool half = dtype == DataType::kFloat16;
      // Widened to float32 where they enter the tree, rounded to 16 bits once at the root.
      FloatReference<float>(
          s, dtype, op, seed, n,
          [half](const uint8_t* p) {
            uint16_t b;
            std::memcpy(&b, p, 2);
            return half ? reduce::HalfToFloat(b) : reduce::BFloat16ToFloat(b);
          },
          [out, half](size_t i, float v) {
            static_cast<uint16_t*>(out)[i] = half ? reduce::FloatToHalf(v) : reduce::FloatToBFloat16(v);
          });
      return;
    }
    default:
      // Integers: the grouping does not change the result.
      e2e::FillReference(dtype, op, seed, s.nranks(), 0, n, out);
      return;
  }
}

std::string VerifyTree(const TreeShape& shape, const void* got, DataType dtype, RedOp op, uint64_t seed, size_t n) {
  const size_t es = DataTypeSize(dtype);
  std::vector<uint8_t> want(n * es);
  TreeReference(shape, dtype, op, seed, n, want.data());
  const auto* g = static_cast<const uint8_t*>(got);
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(g + i * es, want.data() + i * es, es) != 0) {
      return fmt::format("{} of {}: element {} is {}, expected {}", RedOpName(op), DataTypeName(dtype), i,
                         e2e::ValueString(dtype, g + i * es), e2e::ValueString(dtype, want.data() + i * es));
    }
  }
  return "";
}

}  // namespace optcast::tree
