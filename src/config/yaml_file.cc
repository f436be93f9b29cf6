// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "config/yaml_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "config/config_file.h"

namespace optcast::config {

Status LoadYamlFile(const std::string& path, const std::string& what, YAML::Node* root) {
  std::ifstream in(path);
  if (!in)
    return InvalidArgument(ConfigError(path, 0, fmt::format("cannot open the {}: {}", what, std::strerror(errno))));
  std::stringstream text;
  text << in.rdbuf();
  try {
    *root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return InvalidArgument(ConfigError(path, e.mark.line + 1, "not valid YAML: " + e.msg));
  }
  return Status::Ok();
}

}  // namespace optcast::config
