// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Communicator::RegisterMemory: a registered buffer is registered with the transport once and
// reused by every collective; an unregistered one is registered on first use where the provider
// needs registered memory (efa, verbs), and not at all where it does not (libfabric's tcp). Over
// the built-in TCP nothing is registered.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checks.h"
#include "harness.h"

namespace optcast::e2e {
namespace {

constexpr int kRanks = 2;
constexpr size_t kCount = (size_t{1} << 20) / sizeof(float) + 5;  // several chunks per server
constexpr int kRounds = 5;

// Slots of SharedState::value per rank.
enum : int { kMadeByRegister, kMadeByCollectives, kMadeByUnregistered, kOpenDropped };

std::string AllReduceChecked(Communicator& comm, float* send, float* recv, uint64_t seed) {
  FillInput(DataType::kFloat32, RedOp::kSum, seed, comm.rank(), 0, kCount, send);
  Status st = comm.AllReduce(send, recv, kCount, DataType::kFloat32, RedOp::kSum);
  if (!st.ok()) return st.ToString();
  return VerifyReduction(recv, DataType::kFloat32, RedOp::kSum, seed, comm.nranks(), 0, kCount);
}

int RegisteringRank(Shared& sh, const std::vector<std::string>& servers, const JobId& job, int rank) {
  std::unique_ptr<Communicator> comm;
  Status st = MakeComm(servers, job, kRanks, rank, CommConfig{}, &comm);
  if (!st.ok()) return sh.Fail(rank, "create: " + st.ToString());
  std::vector<float> send(kCount), recv(kCount);
  const TransportStats before = comm->transport_stats();
  RegisteredMemory* send_reg = nullptr;
  RegisteredMemory* recv_reg = nullptr;
  st = comm->RegisterMemory(send.data(), send.size() * sizeof(float), &send_reg);
  if (st.ok()) st = comm->RegisterMemory(recv.data(), recv.size() * sizeof(float), &recv_reg);
  if (!st.ok()) return sh.Fail(rank, "register: " + st.ToString());
  const TransportStats registered = comm->transport_stats();
  sh->value[rank][kMadeByRegister] = static_cast<int64_t>(registered.registrations_made - before.registrations_made);
  for (int round = 0; round < kRounds; ++round) {
    const std::string err = AllReduceChecked(*comm, send.data(), recv.data(), SeedFor(90, round));
    if (!err.empty())
      return sh.Fail(rank, "allreduce on registered buffers, round " + std::to_string(round) + ": " + err);
  }
  const TransportStats used = comm->transport_stats();
  sh->value[rank][kMadeByCollectives] = static_cast<int64_t>(used.registrations_made - registered.registrations_made);

  std::vector<float> other_send(kCount), other_recv(kCount);
  const std::string err = AllReduceChecked(*comm, other_send.data(), other_recv.data(), SeedFor(91));
  if (!err.empty()) return sh.Fail(rank, "allreduce on unregistered buffers: " + err);
  const TransportStats lazy = comm->transport_stats();
  sh->value[rank][kMadeByUnregistered] = static_cast<int64_t>(lazy.registrations_made - used.registrations_made);
  sh->flag[rank].store(lazy.registration_required ? 1 : 0);

  st = comm->DeregisterMemory(send_reg);
  if (st.ok()) st = comm->DeregisterMemory(recv_reg);
  if (!st.ok()) return sh.Fail(rank, "deregister: " + st.ToString());
  sh->value[rank][kOpenDropped] =
      static_cast<int64_t>(lazy.registrations_open) - static_cast<int64_t>(comm->transport_stats().registrations_open);
  st = comm->DeregisterMemory(send_reg);
  if (st.code() != Code::kInvalidArgument) {
    return sh.Fail(rank, "a second deregistration of the same buffer was not refused: " + st.ToString());
  }
  return 0;
}

TEST(E2eRegistration, RegisteredBuffersAreRegisteredOnceAndReusedByEveryCollective) {
  ServerFarm farm;
  E2E_ASSERT_OK(farm.Bind(2));
  const auto servers = farm.addresses();
  const JobId job = JobId::Random();
  Shared sh;
  Children kids;
  for (int r = 0; r < kRanks; ++r) kids.Spawn([&, r] { return RegisteringRank(sh, servers, job, r); });
  farm.Serve();
  ExpectChildrenOk(kids, sh);
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const int64_t* v = sh->value[r];
    EXPECT_EQ(v[kMadeByCollectives], 0) << "collectives on registered buffers registered memory again";
    if (OverFabric()) {
      // Two buffers, each in the domain its two server connections share.
      EXPECT_EQ(v[kMadeByRegister], 2) << "RegisterMemory should register each buffer once";
      if (sh->flag[r].load() != 0) {
        EXPECT_GT(v[kMadeByUnregistered], 0) << "the provider needs registered memory: registered on first use";
      } else {
        EXPECT_EQ(v[kMadeByUnregistered], 0) << "the provider needs no registered memory: nothing to register";
      }
      EXPECT_EQ(v[kOpenDropped], 2) << "deregistering should close both registrations";
    } else {
      EXPECT_EQ(v[kMadeByRegister], 0) << "TCP registers nothing";
      EXPECT_EQ(v[kMadeByUnregistered], 0);
      EXPECT_EQ(v[kOpenDropped], 0);
    }
  }
  EXPECT_EQ(farm.WaitIdle(), "");
}

}  // namespace
}  // namespace optcast::e2e
