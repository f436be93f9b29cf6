// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What a float32 collective on a 16-bit wire must produce, element by element, computed from the
// contract with the scalar conversions of reduce/half.h (not the vector kernels under test): each
// rank's input rounded to the wire type once, the servers' float32 fold in rank order, one
// rounding of the result, widened back to float32.

#include <cstdint>
#include <vector>

#include "optcast/types.h"
#include "reduce/half.h"

namespace optcast::e2e {

// kFloat32: as it is (no wire type).
inline float RoundToWire(DataType wire, float v) {
  switch (wire) {
    case DataType::kBFloat16: return reduce::BFloat16ToFloat(reduce::FloatToBFloat16(v));
    case DataType::kFloat16: return reduce::HalfToFloat(reduce::FloatToHalf(v));
    default: return v;
  }
}

// inputs[r][i]: rank r's element i. avg divides the float32 sum by the rank count before rounding.
inline std::vector<float> ExpectedOnWire(DataType wire, RedOp op, const std::vector<std::vector<float>>& inputs) {
  std::vector<float> out(inputs.empty() ? 0 : inputs[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    float acc = RoundToWire(wire, inputs[0][i]);
    for (size_t r = 1; r < inputs.size(); ++r) {
      const float v = RoundToWire(wire, inputs[r][i]);
      switch (op) {
        case RedOp::kMin: acc = acc < v ? acc : v; break;
        case RedOp::kMax: acc = acc > v ? acc : v; break;
        default: acc += v; break;
      }
    }
    if (op == RedOp::kAvg) acc /= static_cast<float>(inputs.size());
    out[i] = RoundToWire(wire, acc);
  }
  return out;
}

}  // namespace optcast::e2e
