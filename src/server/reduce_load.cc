// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#include "server/reduce_load.h"

#include <cmath>

namespace optcast::server {
namespace {

double Decayed(double busy_us, ReduceLoad::Clock::time_point last, ReduceLoad::Clock::time_point now) {
  if (now <= last) return busy_us;
  const double elapsed_us = std::chrono::duration<double, std::micro>(now - last).count();
  return busy_us * std::exp(-elapsed_us / static_cast<double>(ReduceLoad::kDecay.count()));
}

}  // namespace

void ReduceLoad::Add(Clock::duration spent, Clock::time_point now) {
  busy_us_ = Decayed(busy_us_, last_, now) + std::chrono::duration<double, std::micro>(spent).count();
  if (now > last_) last_ = now;
}

// A steady share s of a core adds s·dt per dt and fades by dt/kDecay, so the decayed sum settles
// at s·kDecay.
double ReduceLoad::Share(Clock::time_point now) const {
  return Decayed(busy_us_, last_, now) / static_cast<double>(kDecay.count());
}

}  // namespace optcast::server
