// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A YAML configuration file whose keys are a command's long flag names (`timeout-ms: 30000`), read
// with yaml-cpp. Only the file's shape is checked here; what the keys and values mean is up to
// the command, which reports a bad key or value with the line recorded here.

#include <string>
#include <vector>

#include "optcast/status.h"

namespace optcast::config {

struct ConfigEntry {
  std::string key;                  // as written, e.g. "timeout-ms"
  std::vector<std::string> values;  // one for a scalar, several for a list
  bool is_list = false;
  int line = 0;  // 1-based, for messages
};

// Reads a mapping of keys to scalars or lists of scalars. Refuses (naming file and line) a file
// that is not YAML, a top level that is not a mapping, nested mappings, empty values and
// repeated keys.
Status ReadConfigFile(const std::string& path, std::vector<ConfigEntry>* out);

// "FILE:LINE: text", the form every message about a configuration file takes.
std::string ConfigError(const std::string& path, int line, const std::string& text);

}  // namespace optcast::config
