// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "config/topology.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <map>

#include "config/config_file.h"
#include "config/yaml_file.h"

namespace optcast::config {
namespace {

Status ReadServer(const std::string& path, const YAML::Node& n, TopologyServer* s) {
  s->line = LineOf(n);
  if (!n.IsMap()) {
    return InvalidArgument(
        ConfigError(path, s->line, "each entry of `servers` is a mapping with name, address, parent"));
  }
  std::string address;
  for (const auto& kv : n) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (!kv.second.IsScalar()) {
      return InvalidArgument(ConfigError(path, LineOf(kv.first), fmt::format("'{}' must be a single value", key)));
    }
    const std::string v = kv.second.Scalar();
    if (key == "name") {
      s->name = v;
    } else if (key == "address") {
      address = v;
    } else if (key == "rack") {
      s->rack = v;
    } else if (key == "pod") {
      s->pod = v;
    } else if (key == "parent") {
      s->parent = v;
    } else {
      return InvalidArgument(ConfigError(
          path, LineOf(kv.first), fmt::format("unknown key '{}'; a server has name, address, rack, pod, parent", key)));
    }
  }
  if (s->name.empty()) return InvalidArgument(ConfigError(path, s->line, "a server without a name"));
  if (address.empty()) {
    return InvalidArgument(ConfigError(path, s->line, fmt::format("server '{}' has no address", s->name)));
  }
  if (Status st = transport::ParseEndpoint(address, &s->address, 8918); !st.ok()) {
    return InvalidArgument(
        ConfigError(path, s->line, fmt::format("server '{}': bad address '{}': {}", s->name, address, st.message())));
  }
  return Status::Ok();
}

}  // namespace

const TopologyServer* Topology::Find(const std::string& name) const {
  for (const auto& s : servers) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

int Topology::Depth(const std::string& name) const {
  int depth = 0;
  for (const TopologyServer* s = Find(name); s != nullptr && !s->parent.empty(); s = Find(s->parent)) ++depth;
  return depth;
}

std::vector<std::string> Topology::Children(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& s : servers) {
    if (s.parent == name) out.push_back(s.name);
  }
  return out;
}

Status ReadTopology(const std::string& path, Topology* out) {
  *out = Topology{};
  out->path = path;
  YAML::Node root;
  OPTCAST_RETURN_IF_ERROR(LoadYamlFile(path, "topology file", &root));
  if (!root.IsMap() || !root["servers"] || !root["servers"].IsSequence()) {
    return InvalidArgument(ConfigError(path, root.IsNull() ? 0 : LineOf(root),
                                       "expected a top-level `servers:` list of {name, address, parent}"));
  }
  std::map<std::string, int> seen;
  for (const auto& n : root["servers"]) {
    TopologyServer s;
    OPTCAST_RETURN_IF_ERROR(ReadServer(path, n, &s));
    if (auto [it, fresh] = seen.emplace(s.name, s.line); !fresh) {
      return InvalidArgument(ConfigError(
          path, s.line,
          fmt::format("server '{}' is listed twice (first on line {}); names are unique", s.name, it->second)));
    }
    out->servers.push_back(std::move(s));
  }
  for (const auto& s : out->servers) {
    if (!s.parent.empty() && out->Find(s.parent) == nullptr) {
      return InvalidArgument(ConfigError(
          path, s.line, fmt::format("server '{}' names parent '{}', which the file does not list", s.name, s.parent)));
    }
    // Following parents from any server must reach a root within as many steps as there are servers.
    const TopologyServer* p = &s;
    for (size_t steps = 0; p != nullptr && !p->parent.empty(); ++steps) {
      if (steps > out->servers.size()) {
        return InvalidArgument(ConfigError(
            path, s.line, fmt::format("the parents of server '{}' form a cycle; a tree needs a root", s.name)));
      }
      p = out->Find(p->parent);
    }
  }
  return Status::Ok();
}

}  // namespace optcast::config
