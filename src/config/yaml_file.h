// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Reading a YAML file into a node, with the errors every configuration file reports the same
// way: "PATH:LINE: what is wrong". yaml-cpp's exceptions stop here and become a Status.

#include <yaml-cpp/yaml.h>

#include <string>

#include "optcast/status.h"

namespace optcast::config {

// Loads `path`; `what` names the file's role in the errors ("configuration file", ...).
Status LoadYamlFile(const std::string& path, const std::string& what, YAML::Node* root);

// The 1-based line of a node, for error messages.
inline int LineOf(const YAML::Node& n) { return n.Mark().line + 1; }

}  // namespace optcast::config
