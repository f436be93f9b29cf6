// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "tools/topology/host_racks.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace optcast::tools::topology {
namespace {

// Lines without comments, split into words, with their 1-based line numbers.
struct Line {
  int number;
  std::vector<std::string> words;
};
std::vector<Line> Lines(const std::string& text) {
  std::vector<Line> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    Line l{n, {}};
    for (std::string w; words >> w;) l.words.push_back(w);
    if (!l.words.empty()) out.push_back(std::move(l));
  }
  return out;
}

Status ParseText(const std::string& source, const std::vector<Line>& lines, std::vector<HostRack>* out) {
  for (const Line& l : lines) {
    const bool server = l.words.size() == 3 && l.words[2] == "server";
    if (l.words.size() != 2 && !server) {
      return InvalidArgument(fmt::format("{}:{}: expected `host rack` or `host rack server`, got '{}'", source,
                                         l.number, fmt::join(l.words, " ")));
    }
    out->push_back(HostRack{l.words[0], l.words[1], server, l.number});
  }
  return Status::Ok();
}

Status ParseSlurm(const std::string& source, const std::vector<Line>& lines, std::vector<HostRack>* out) {
  for (const Line& l : lines) {
    const std::string& path = l.words[0];
    const size_t last = path.rfind('.');
    if (l.words.size() != 1 || last == std::string::npos || last == 0 || last + 1 == path.size()) {
      return InvalidArgument(fmt::format(
          "{}:{}: expected a SLURM_TOPOLOGY_ADDR path like spine.leaf03.node017 (switches, then the node), got '{}'",
          source, l.number, fmt::join(l.words, " ")));
    }
    const size_t before = path.rfind('.', last - 1);
    const std::string rack = path.substr(before == std::string::npos ? 0 : before + 1,
                                         last - (before == std::string::npos ? 0 : before + 1));
    if (rack.empty())
      return InvalidArgument(fmt::format("{}:{}: '{}' has an empty switch name", source, l.number, path));
    out->push_back(HostRack{path.substr(last + 1), rack, false, l.number});
  }
  return Status::Ok();
}

Status ParseKubernetes(const std::string& source, const std::string& text, const std::string& rack_label,
                       std::vector<HostRack>* out) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument(fmt::format("{}: not valid JSON", source));
  if (!doc.is_object() || !doc.contains("items") || !doc["items"].is_array()) {
    return InvalidArgument(
        fmt::format("{}: expected `kubectl get nodes -o json` output (an object with `items`)", source));
  }
  for (const auto& item : doc["items"]) {
    const auto* meta = item.contains("metadata") ? &item["metadata"] : nullptr;
    if (meta == nullptr || !meta->contains("name") || !(*meta)["name"].is_string()) {
      return InvalidArgument(fmt::format("{}: a node without metadata.name", source));
    }
    const std::string name = (*meta)["name"];
    if (!meta->contains("labels") || !(*meta)["labels"].contains(rack_label) ||
        !(*meta)["labels"][rack_label].is_string()) {
      return InvalidArgument(fmt::format(
          "{}: node '{}' has no label '{}'; label every node with its rack (kubectl label node {} {}=RACK) or "
          "pass --rack-label with the label your cluster uses",
          source, name, rack_label, name, rack_label));
    }
    out->push_back(HostRack{name, (*meta)["labels"][rack_label], false, 0});
  }
  return Status::Ok();
}

}  // namespace

Status ParseHostListFormat(const std::string& s, HostListFormat* out) {
  static const std::map<std::string, HostListFormat> kNames = {{"auto", HostListFormat::kAuto},
                                                               {"text", HostListFormat::kText},
                                                               {"slurm", HostListFormat::kSlurm},
                                                               {"k8s", HostListFormat::kKubernetes}};
  auto it = kNames.find(s);
  if (it == kNames.end()) return InvalidArgument("--format '" + s + "': use auto, text, slurm or k8s");
  *out = it->second;
  return Status::Ok();
}

Status ParseHostRacks(const std::string& source, const std::string& text, HostListFormat format,
                      const std::string& rack_label, std::vector<HostRack>* out) {
  out->clear();
  const std::vector<Line> lines = Lines(text);
  if (format == HostListFormat::kAuto) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    bool slurm = !lines.empty();
    for (const Line& l : lines) slurm = slurm && l.words.size() == 1 && l.words[0].find('.') != std::string::npos;
    format = first != std::string::npos && text[first] == '{' ? HostListFormat::kKubernetes
             : slurm                                          ? HostListFormat::kSlurm
                                                              : HostListFormat::kText;
  }
  Status st = format == HostListFormat::kKubernetes ? ParseKubernetes(source, text, rack_label, out)
              : format == HostListFormat::kSlurm    ? ParseSlurm(source, lines, out)
                                                    : ParseText(source, lines, out);
  OPTCAST_RETURN_IF_ERROR(st);
  if (out->empty()) return InvalidArgument(fmt::format("{}: no hosts listed", source));
  std::map<std::string, const HostRack*> seen;
  for (const HostRack& h : *out) {
    if (auto [it, fresh] = seen.emplace(h.host, &h); !fresh) {
      return InvalidArgument(fmt::format("{}: host '{}' is listed twice (racks '{}' and '{}'); list each host once",
                                         source, h.host, it->second->rack, h.rack));
    }
  }
  return Status::Ok();
}

}  // namespace optcast::tools::topology
