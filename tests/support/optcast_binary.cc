// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tests/support/optcast_binary.h"

#include <cstdlib>

namespace optcast::testsupport {

std::string OptcastBinary() {
  const char* bin = std::getenv("OPTCAST_BIN");
  return bin != nullptr ? bin : "";
}

}  // namespace optcast::testsupport
