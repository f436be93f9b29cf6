// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Helpers shared by the fuzz targets and the seed generator: TCP frames built with the
// transport layer's own header writer, and a fatal check that libFuzzer reports as a crash.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "transport/message.h"
#include "wire/protocol.h"

namespace optcast::fuzz {

// A whole frame: header, meta, payload.
inline std::vector<uint8_t> Frame(std::span<const uint8_t> meta, std::span<const uint8_t> payload = {}) {
  transport::OutMessage m = transport::MakeOutMessage(meta, payload.data(), payload.size());
  std::vector<uint8_t> out(m.head.data(), m.head.data() + m.head.size());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

inline void Append(std::vector<uint8_t>* out, std::span<const uint8_t> bytes) {
  out->insert(out->end(), bytes.begin(), bytes.end());
}

}  // namespace optcast::fuzz

// A broken invariant: print it and abort, which libFuzzer records as a crash with the input.
#define FUZZ_CHECK(cond, ...)                                                                \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                     \
      std::fprintf(stderr, "\n");                                                            \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)
