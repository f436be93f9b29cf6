// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "config/config_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <map>

#include "config/yaml_file.h"

namespace optcast::config {

std::string ConfigError(const std::string& path, int line, const std::string& text) {
  return line > 0 ? fmt::format("{}:{}: {}", path, line, text) : fmt::format("{}: {}", path, text);
}

Status ReadConfigFile(const std::string& path, std::vector<ConfigEntry>* out) {
  out->clear();
  YAML::Node root;
  OPTCAST_RETURN_IF_ERROR(LoadYamlFile(path, "configuration file", &root));
  if (root.IsNull()) return Status::Ok();  // empty file: nothing to set
  if (!root.IsMap()) {
    return InvalidArgument(ConfigError(path, LineOf(root),
                                       "expected `key: value` lines (a YAML mapping) at the top "
                                       "level"));
  }
  std::map<std::string, int> seen;
  for (const auto& kv : root) {
    const YAML::Node& k = kv.first;
    const YAML::Node& v = kv.second;
    if (!k.IsScalar()) return InvalidArgument(ConfigError(path, LineOf(k), "a key must be a plain name"));
    ConfigEntry e;
    e.key = k.Scalar();
    e.line = LineOf(k);
    if (auto [it, fresh] = seen.emplace(e.key, e.line); !fresh) {
      return InvalidArgument(
          ConfigError(path, e.line, fmt::format("'{}' is set twice (first on line {}); keep one", e.key, it->second)));
    }
    if (v.IsScalar()) {
      e.values.push_back(v.Scalar());
    } else if (v.IsSequence()) {
      e.is_list = true;
      for (const auto& item : v) {
        if (!item.IsScalar()) {
          return InvalidArgument(ConfigError(path, LineOf(item),
                                             fmt::format("'{}' lists something that is not a "
                                                         "plain value",
                                                         e.key)));
        }
        e.values.push_back(item.Scalar());
      }
    } else if (v.IsMap()) {
      return InvalidArgument(ConfigError(path, e.line,
                                         fmt::format("'{}' holds a nested mapping; every key takes "
                                                     "one value, e.g. `{}: VALUE`",
                                                     e.key, e.key)));
    } else {
      return InvalidArgument(ConfigError(path, e.line,
                                         fmt::format("'{}' has no value; write `{}: VALUE` or remove "
                                                     "the line",
                                                     e.key, e.key)));
    }
    out->push_back(std::move(e));
  }
  return Status::Ok();
}

}  // namespace optcast::config
