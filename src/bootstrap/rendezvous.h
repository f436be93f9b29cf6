// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "optcast/status.h"
#include "transport/endpoint.h"
#include "transport/posix/socket.h"

namespace optcast::bootstrap {

// Out-of-band exchange of small blobs among the ranks of a run (addresses, the job id), through
// rank 0, which listens on the rendezvous address. Star topology; fine for setup-time traffic.
class Rendezvous {
 public:
  // Rank 0 binds `addr`; the others connect to it, retrying until `timeout`.
  static Status Create(const transport::Endpoint& addr, int rank, int nranks, std::chrono::milliseconds timeout,
                       std::unique_ptr<Rendezvous>* out);

  // Rank 0 variant with a listening socket bound earlier (so a launcher can pick the port).
  static Status CreateRoot(transport::posix::Socket listener, int nranks, std::chrono::milliseconds timeout,
                           std::unique_ptr<Rendezvous>* out);

  int rank() const { return rank_; }
  // This host's address as the other ranks see it (for services that peers must reach).
  const std::string& local_host() const { return local_host_; }
  int nranks() const { return nranks_; }

  // Every rank contributes `mine`; everyone gets all contributions indexed by rank.
  Status AllGather(const std::string& mine, std::vector<std::string>* all);
  // Rank 0's `data` reaches every rank.
  Status Broadcast(std::string* data);
  Status Barrier();

 private:
  Rendezvous(int rank, int nranks, std::chrono::milliseconds timeout)
      : rank_(rank), nranks_(nranks), timeout_(timeout) {}
  Status AcceptRanks(const transport::posix::Socket& listener, Deadline deadline);
  Status SendBlob(int fd, const std::string& blob);
  Status RecvBlob(int fd, std::string* blob);

  int rank_;
  int nranks_;
  std::chrono::milliseconds timeout_;
  std::string local_host_ = "127.0.0.1";
  transport::posix::Socket to_root_;                  // ranks > 0
  std::vector<transport::posix::Socket> from_ranks_;  // rank 0: index r-1 for rank r
};

}  // namespace optcast::bootstrap
