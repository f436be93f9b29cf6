# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""torch.distributed backend "optcast": CPU tensors reduced on Optcast reduction servers.

    import optcast_torch                       # registers the backend
    torch.distributed.init_process_group("optcast", rank=rank, world_size=n)   # OPTCAST_SERVERS set

allreduce and reduce_scatter (and allgather, broadcast, barrier, reduce) of CPU tensors go
through the servers listed in OPTCAST_SERVERS; every rank of a group joins one job whose id rank 0
publishes in the group's store.
"""

import torch.distributed as dist

from ._optcast_torch import ProcessGroupOptcast

BACKEND_NAME = "optcast"


def _create_process_group(store, rank, world_size, timeout):
    return ProcessGroupOptcast(store, rank, world_size, timeout)


if BACKEND_NAME.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND_NAME, _create_process_group)

__all__ = ["ProcessGroupOptcast", "BACKEND_NAME"]
