// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <string>

namespace optcast::testsupport {

// The optcast binary under test: $OPTCAST_BIN, which ctest sets for the suites that run it
// (tests/*/CMakeLists.txt), or "" when unset (a test binary run by hand), for the tests to skip.
std::string OptcastBinary();

}  // namespace optcast::testsupport
