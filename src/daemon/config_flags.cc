// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "daemon/config_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "config/config_file.h"

namespace optcast::daemon {

namespace {

// Flags that make no sense in a file.
bool NotAKey(const std::string& name) { return name == "config" || name == "help" || name == "version"; }

}  // namespace

std::vector<std::string> ConfigKeys(const CLI::App* cmd) {
  std::vector<std::string> keys;
  for (const CLI::Option* opt : cmd->get_options()) {
    for (const std::string& name : opt->get_lnames()) {
      if (!NotAKey(name)) keys.push_back(name);
    }
  }
  return keys;
}

Status ApplyConfigFile(CLI::App* cmd, const std::string& path) {
  std::vector<config::ConfigEntry> entries;
  OPTCAST_RETURN_IF_ERROR(config::ReadConfigFile(path, &entries));
  // `max_chunk:` and `max-chunk:` are one flag: a file that sets it twice is refused like a
  // repeated key, whichever spelling each line uses.
  std::map<const CLI::Option*, const config::ConfigEntry*> first_set;
  for (const config::ConfigEntry& e : entries) {
    std::string key = e.key;
    std::replace(key.begin(), key.end(), '_', '-');
    CLI::Option* opt = NotAKey(key) ? nullptr : cmd->get_option_no_throw("--" + key);
    if (opt == nullptr) {
      return InvalidArgument(config::ConfigError(
          path, e.line, fmt::format("unknown key '{}'; the keys are: {}", e.key, fmt::join(ConfigKeys(cmd), ", "))));
    }
    if (auto [it, fresh] = first_set.emplace(opt, &e); !fresh) {
      return InvalidArgument(
          config::ConfigError(path, e.line,
                              fmt::format("'{}' sets --{}, which '{}' on line {} sets already; keep one", e.key, key,
                                          it->second->key, it->second->line)));
    }
    if (opt->count() > 0) continue;  // given on the command line, which wins
    if (e.is_list && opt->get_expected_max() <= 1 && e.values.size() != 1) {
      return InvalidArgument(config::ConfigError(path, e.line, fmt::format("'{}' takes one value, not a list", e.key)));
    }
    // CLI11 reports a value its checks refuse by exception; here it becomes a Status naming the line.
    try {
      opt->clear();
      for (const std::string& v : e.values) opt->add_result(v);
      opt->run_callback();
    } catch (const CLI::Error& err) {
      std::string why = err.what();
      if (opt->get_expected_max() == 0 && dynamic_cast<const CLI::ConversionError*>(&err) != nullptr) {
        // A flag: CLI11 says only "Could not convert".
        why = fmt::format("'{}' is not true or false; write `{}: true` or `{}: false`",
                          e.values.empty() ? "" : e.values.front(), e.key, e.key);
      }
      const std::string flag_prefix = "--" + key + ": ";  // CLI11 names the flag; the key is named already
      if (why.rfind(flag_prefix, 0) == 0) why = why.substr(flag_prefix.size());
      return InvalidArgument(config::ConfigError(path, e.line, fmt::format("bad value for '{}': {}", e.key, why)));
    }
  }
  return Status::Ok();
}

}  // namespace optcast::daemon
