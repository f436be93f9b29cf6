// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "common/env.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>

namespace optcast {

std::optional<std::string> GetEnv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

Status GetEnvInt(const char* name, int64_t fallback, int64_t* out) {
  auto v = GetEnv(name);
  if (!v) {
    *out = fallback;
    return Status::Ok();
  }
  char* end = nullptr;
  long long parsed = std::strtoll(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0') {
    return InvalidArgument(std::string(name) + "='" + *v + "' is not an integer; set it to a number");
  }
  *out = parsed;
  return Status::Ok();
}

std::optional<uint64_t> ParseByteSize(const std::string& text) {
  if (text.empty()) return std::nullopt;
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    if (value > (UINT64_MAX - 9) / 10) return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string suffix = text.substr(i);
  std::transform(suffix.begin(), suffix.end(), suffix.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  uint64_t mult = 1;
  if (suffix.empty() || suffix == "B") mult = 1;
  else if (suffix == "K" || suffix == "KB" || suffix == "KIB") mult = 1ull << 10;
  else if (suffix == "M" || suffix == "MB" || suffix == "MIB") mult = 1ull << 20;
  else if (suffix == "G" || suffix == "GB" || suffix == "GIB") mult = 1ull << 30;
  else return std::nullopt;
  if (value > UINT64_MAX / mult) return std::nullopt;
  return value * mult;
}

int Deadline::RemainingMs() const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

}  // namespace optcast
