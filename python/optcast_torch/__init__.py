# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""torch.distributed backend "optcast": CPU tensors reduced on Optcast reduction servers.

    import optcast_torch                       # registers the backend
    torch.distributed.init_process_group("optcast", rank=rank, world_size=n)   # OPTCAST_SERVERS set

all_reduce (SUM, AVG, PRODUCT, MIN, MAX, and BAND, BOR, BXOR for integer tensors),
reduce_scatter, all_gather, broadcast, reduce and barrier of CPU tensors go through the servers
listed in OPTCAST_SERVERS; every rank of a group joins one job whose id rank 0 publishes in the
group's store. gather, scatter, all_to_all, send/recv and what torch builds on them go over a
gloo group that the backend creates alongside and owns, so a script written for gloo runs
unchanged.
"""

import torch.distributed as dist

from ._optcast_torch import ProcessGroupOptcast

BACKEND_NAME = "optcast"
# Keys of the gloo group live under this prefix of the group's store.
GLOO_STORE_PREFIX = "optcast_gloo"


def _create_process_group(store, rank, world_size, timeout):
    if not dist.is_gloo_available():
        raise RuntimeError("the optcast backend carries gather, scatter, all_to_all and send/recv over gloo, "
                           "and this torch was built without gloo")
    gloo = dist.ProcessGroupGloo(dist.PrefixStore(GLOO_STORE_PREFIX, store), rank, world_size, timeout)
    return ProcessGroupOptcast(store, rank, world_size, timeout, gloo)


if BACKEND_NAME.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND_NAME, _create_process_group)

__all__ = ["ProcessGroupOptcast", "BACKEND_NAME"]
