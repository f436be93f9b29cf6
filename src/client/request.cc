// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "client/request.h"

#include <algorithm>

namespace optcast {

size_t Request::FindPiece(uint64_t offset) const {
  auto it = std::lower_bound(pieces.begin(), pieces.end(), offset,
                             [](const Piece& p, uint64_t off) { return p.ref.offset < off; });
  if (it == pieces.end() || it->ref.offset != offset) return SIZE_MAX;
  return static_cast<size_t>(it - pieces.begin());
}

}  // namespace optcast
