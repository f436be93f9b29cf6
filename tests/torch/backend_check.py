#!/usr/bin/python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""The "optcast" torch.distributed backend with N real processes and real servers on loopback.
Every rank computes the expected result of each collective itself, from the inputs every rank
is known to contribute, and compares. Run with Debian's /usr/bin/python3 (python3-torch)."""

import argparse
import datetime
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from local_servers import servers  # noqa: E402


def inputs(rank, n, dtype, seed):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    if dtype.is_floating_point:
        return (torch.rand(n, generator=g, dtype=torch.float64) * 4 - 2).to(dtype)
    return torch.randint(-20, 21, (n,), generator=g).to(dtype)


def expected_reduce(tensors, op):
    stack = torch.stack([t.to(torch.float64) for t in tensors])
    if op == dist.ReduceOp.SUM:
        return stack.sum(0)
    if op == dist.ReduceOp.PRODUCT:
        return stack.prod(0)
    if op == dist.ReduceOp.MIN:
        return stack.min(0).values
    if op == dist.ReduceOp.MAX:
        return stack.max(0).values
    raise ValueError(op)


def assert_close(got, want, what):
    if got.dtype.is_floating_point:
        tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2, torch.float16: 2e-3}[got.dtype]
        ok = torch.allclose(got.to(torch.float64), want.to(torch.float64), rtol=tol, atol=tol)
    else:
        ok = torch.equal(got, want.to(got.dtype))
    if not ok:
        raise AssertionError(f"{what}: got {got[:8].tolist()} want {want[:8].tolist()}")


def check_collectives(rank, world):
    counts = [1, 1001, 70001]
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
    seed = 0
    for dtype in [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64,
                  torch.int8, torch.uint8]:
        for op in ops:
            for n in counts:
                seed += 1
                if op == dist.ReduceOp.PRODUCT:
                    mine = torch.tensor([(-1) ** ((i + rank) % 2) * (1 + (i + rank) % 2) for i in range(n)]).to(dtype)
                    alls = [torch.tensor([(-1) ** ((i + r) % 2) * (1 + (i + r) % 2) for i in range(n)]).to(dtype)
                            for r in range(world)]
                    if dtype == torch.uint8:
                        mine, alls = mine.abs(), [a.abs() for a in alls]
                else:
                    mine = inputs(rank, n, dtype, seed).abs() if dtype == torch.uint8 else inputs(rank, n, dtype, seed)
                    alls = [inputs(r, n, dtype, seed) for r in range(world)]
                    if dtype == torch.uint8:
                        alls = [a.abs() for a in alls]
                t = mine.clone()
                dist.all_reduce(t, op=op)
                assert_close(t, expected_reduce(alls, op), f"all_reduce {dtype} {op} n={n}")
    # AVG, and an asynchronous allreduce whose future hands back the tensor.
    t = inputs(rank, 4099, torch.float32, 99)
    work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    fut_result = work.get_future().wait()
    want = expected_reduce([inputs(r, 4099, torch.float32, 99) for r in range(world)], dist.ReduceOp.SUM) / world
    assert_close(fut_result[0], want, "all_reduce AVG via future")
    assert work.is_completed()
    # Several in flight at once, completed in order.
    works, ts = [], []
    for k in range(4):
        ts.append(inputs(rank, 333 + k, torch.float64, 200 + k))
        works.append(dist.all_reduce(ts[-1], async_op=True))
    for k in reversed(range(4)):
        works[k].wait()
        want = expected_reduce([inputs(r, 333 + k, torch.float64, 200 + k) for r in range(world)], dist.ReduceOp.SUM)
        assert_close(ts[k], want, f"async all_reduce #{k}")
    # A non-contiguous tensor.
    base = inputs(rank, 2000, torch.float32, 300).view(40, 50)
    t = base.t()
    dist.all_reduce(t)
    want = expected_reduce([inputs(r, 2000, torch.float32, 300).view(40, 50).t() for r in range(world)],
                           dist.ReduceOp.SUM)
    assert_close(t.reshape(-1), want.reshape(-1), "all_reduce non-contiguous")

    # reduce_scatter (list form and flat form).
    n = 1001
    ins = [inputs(rank, n, torch.float32, 400 + j) for j in range(world)]
    out = torch.empty(n)
    dist.reduce_scatter(out, ins)
    want = expected_reduce([inputs(r, n, torch.float32, 400 + rank) for r in range(world)], dist.ReduceOp.SUM)
    assert_close(out, want, "reduce_scatter")
    flat = torch.cat([inputs(rank, n, torch.int64, 500 + j) for j in range(world)])
    out = torch.empty(n, dtype=torch.int64)
    dist.reduce_scatter_tensor(out, flat, op=dist.ReduceOp.MAX)
    want = expected_reduce([inputs(r, n, torch.int64, 500 + rank) for r in range(world)], dist.ReduceOp.MAX)
    assert_close(out, want, "reduce_scatter_tensor MAX")

    # allgather (list and flat), any dtype including bool.
    mine = inputs(rank, 777, torch.float16, 600)
    outs = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(outs, mine)
    for r in range(world):
        assert torch.equal(outs[r], inputs(r, 777, torch.float16, 600)), f"all_gather part {r}"
    mine = torch.tensor([(i + rank) % 3 == 0 for i in range(101)])
    flat = torch.empty(101 * world, dtype=torch.bool)
    dist.all_gather_into_tensor(flat, mine)
    for r in range(world):
        assert torch.equal(flat[r * 101:(r + 1) * 101], torch.tensor([(i + r) % 3 == 0 for i in range(101)]))

    # broadcast: the root's bits exactly, NaN and -0.0 included.
    root = world - 1
    special = torch.tensor([float("nan"), -0.0, float("inf"), 1e-40, 3.25])
    t = special.clone() if rank == root else torch.full((5,), 7.0)
    dist.broadcast(t, src=root)
    assert t.view(torch.int32).equal(special.view(torch.int32)), f"broadcast bits: {t.tolist()}"
    t = inputs(rank, 5003, torch.int64, 700)
    dist.broadcast(t, src=0)
    assert torch.equal(t, inputs(0, 5003, torch.int64, 700)), "broadcast int64"

    # reduce: only the root's tensor changes.
    t = inputs(rank, 55, torch.float32, 800)
    dist.reduce(t, dst=0, op=dist.ReduceOp.MIN)
    want = expected_reduce([inputs(r, 55, torch.float32, 800) for r in range(world)], dist.ReduceOp.MIN)
    assert_close(t, want if rank == 0 else inputs(rank, 55, torch.float32, 800), "reduce")

    # barrier: no rank leaves before the slowest arrives.
    if rank == 0:
        time.sleep(0.5)
    before = time.time()
    dist.barrier()
    if rank != 0:
        assert time.time() - before > 0.3, "barrier returned before rank 0 arrived"

    # A subgroup (every other rank) is a job of its own.
    members = list(range(0, world, 2))
    group = dist.new_group(members)
    if rank in members:
        t = torch.full((10,), float(rank))
        dist.all_reduce(t, group=group)
        assert_close(t, torch.full((10,), float(sum(members))), "subgroup all_reduce")


def check_errors(rank, world):
    # Refused before anything is sent: a clear message.
    try:
        dist.all_reduce(torch.ones(3, dtype=torch.float32), op=dist.ReduceOp.BAND)
        raise AssertionError("BAND of float32 was accepted")
    except RuntimeError as e:
        assert "band" in str(e) and "float32" in str(e) and "integer types only" in str(e), str(e)
    # Ranks that disagree: the server fails the job and every rank gets its message.
    group = dist.new_group(list(range(world)))
    t = torch.ones(100 + rank)
    try:
        dist.all_reduce(t, group=group)
        raise AssertionError("an all_reduce whose ranks disagree on the count succeeded")
    except RuntimeError as e:
        msg = str(e)
        assert "optcast" in msg and "server 127.0.0.1:" in msg and "count" in msg, msg
        print(f"rank {rank} got the expected error: {msg}", flush=True)


def worker(rank, world, store_file, addresses):
    os.environ["OPTCAST_SERVERS"] = addresses
    os.environ["OPTCAST_TIMEOUT_MS"] = "20000"
    import optcast_torch  # noqa: F401  registers the backend

    # A file store: no rank hosts it, so none can pull it away from the others by exiting first.
    dist.init_process_group("optcast", init_method=f"file://{store_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    assert dist.get_backend() == "optcast"
    check_collectives(rank, world)
    check_errors(rank, world)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: all checks passed", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--optcast", required=True, help="the optcast command (servers)")
    ap.add_argument("--pythonpath", required=True, help="folder holding the optcast_torch package")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=240)
    args = ap.parse_args()
    sys.path.insert(0, args.pythonpath)
    os.environ["PYTHONPATH"] = args.pythonpath + os.pathsep + os.environ.get("PYTHONPATH", "")
    with servers(args.optcast, args.servers) as addresses, tempfile.TemporaryDirectory() as tmp:
        store_file = os.path.join(tmp, "store")
        ctx = mp.start_processes(worker, args=(args.np, store_file, addresses), nprocs=args.np, join=False,
                                 start_method="spawn")
        deadline = time.time() + args.timeout
        while not ctx.join(timeout=1):
            if time.time() > deadline:
                for p in ctx.processes:
                    p.kill()
                sys.exit(f"the ranks did not finish within {args.timeout} s")
    print(f"OK: {args.np} ranks")


if __name__ == "__main__":
    main()
