// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace optcast::tools::topology {

// `optcast topology HOSTS`: writes tree.yaml for a host-to-rack list and prints each worker's
// OPTCAST_SERVERS (docs/tree.md, "Writing tree.yaml").
std::function<int()> AddTopologyCommand(CLI::App& app);

}  // namespace optcast::tools::topology
