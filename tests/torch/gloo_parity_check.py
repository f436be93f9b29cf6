#!/usr/bin/python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""One torch.distributed script, run unchanged on "gloo" and on "optcast", and the results
compared. The script uses the calls a gloo user makes: bitwise all_reduce, gather, scatter,
all_to_all_single, send/recv (tagged, from any source, batch_isend_irecv), the object collectives
and subgroups. Every rank also checks each result against what it computes itself from the inputs
it knows every rank gives, so a result both backends got wrong the same way still fails.
Run with Debian's /usr/bin/python3 (python3-torch)."""

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

INT_TYPES = [torch.int8, torch.uint8, torch.int32, torch.int64]
BITWISE = {"BAND": dist.ReduceOp.BAND, "BOR": dist.ReduceOp.BOR, "BXOR": dist.ReduceOp.BXOR}
# Results that are sums of floats: the backends may round differently (gloo's ring, the servers'
# rank order), so these are compared within a tolerance; everything else bit for bit.
FLOAT_SUMS = ("all_reduce float32 SUM",)
# Calls that gloo refuses and the optcast backend serves: checked against the reference only.
OPTCAST_ONLY = ("all_to_all list",)


def random_bits(dtype, n, seed, op_name):
    """Every bit pattern of `dtype`; for BAND mostly ones and for BOR mostly zeros, so that the
    result of several ranks still has both."""
    g = torch.Generator().manual_seed(seed)
    info = torch.iinfo(dtype)

    def draw():
        return torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dtype)

    a, b, c = draw(), draw(), draw()
    if op_name == "BAND":
        return a | b | c
    if op_name == "BOR":
        return a & b & c
    return a


def expect_equal(got, want, what):
    if not torch.equal(got, want):
        raise AssertionError(f"{what}: got {got.flatten()[:8].tolist()} want {want.flatten()[:8].tolist()}")


def workload(rank, world):
    """The script under test: plain torch.distributed calls. Returns {name: result}."""
    out = {}
    # --- all_reduce with the bitwise ops, integer types, one element to many chunks.
    seed = 0
    for dtype in INT_TYPES:
        for op_name, op in BITWISE.items():
            for n in (1, 1001, 70001):
                seed += 1
                t = random_bits(dtype, n, seed * 100 + rank, op_name)
                dist.all_reduce(t, op=op)
                want = random_bits(dtype, n, seed * 100, op_name)
                for r in range(1, world):
                    v = random_bits(dtype, n, seed * 100 + r, op_name)
                    want = want & v if op_name == "BAND" else want | v if op_name == "BOR" else want ^ v
                expect_equal(t, want, f"all_reduce {dtype} {op_name} n={n}")
                out[f"all_reduce {dtype} {op_name} {n}"] = t
    # A bitwise op on a float tensor is refused, by both.
    try:
        dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BXOR)
        out["all_reduce float32 BXOR"] = "accepted"
    except RuntimeError:
        out["all_reduce float32 BXOR"] = "refused"
    t = torch.arange(1000, dtype=torch.float32) * (rank + 1) / 7
    dist.all_reduce(t)
    out["all_reduce float32 SUM"] = t
    t = torch.arange(999, dtype=torch.int64) * (rank - 1)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    expect_equal(t, torch.arange(999, dtype=torch.int64) * max(r - 1 for r in range(world)), "all_reduce MAX")
    out["all_reduce int64 MAX"] = t

    # --- gather and scatter, to and from a root that is not rank 0.
    root = world - 1
    mine = torch.arange(5, dtype=torch.float64) + 10 * rank
    parts = [torch.empty(5, dtype=torch.float64) for _ in range(world)] if rank == root else None
    dist.gather(mine, gather_list=parts, dst=root)
    if rank == root:
        for r in range(world):
            expect_equal(parts[r], torch.arange(5, dtype=torch.float64) + 10 * r, f"gather part {r}")
        out["gather"] = torch.stack(parts)
    pieces = [torch.full((3, 2), r * 1.5 + 0.25) for r in range(world)] if rank == 1 % world else None
    got = torch.empty(3, 2)
    dist.scatter(got, scatter_list=pieces, src=1 % world)
    expect_equal(got, torch.full((3, 2), rank * 1.5 + 0.25), "scatter")
    out["scatter"] = got

    # --- all_to_all_single: equal splits, then rank r sends r + j + 1 elements to rank j.
    src = torch.arange(world * 4, dtype=torch.int32) + 1000 * rank
    dst = torch.empty_like(src)
    dist.all_to_all_single(dst, src)
    expect_equal(dst, torch.cat([torch.arange(4, dtype=torch.int32) + 4 * rank + 1000 * r for r in range(world)]),
                 "all_to_all_single")
    out["all_to_all_single"] = dst
    in_splits = [rank + j + 1 for j in range(world)]
    out_splits = [r + rank + 1 for r in range(world)]
    src = torch.cat([torch.full((n,), float(100 * rank + j)) for j, n in enumerate(in_splits)])
    dst = torch.empty(sum(out_splits))
    dist.all_to_all_single(dst, src, output_split_sizes=out_splits, input_split_sizes=in_splits)
    expect_equal(dst, torch.cat([torch.full((n,), float(100 * r + rank)) for r, n in enumerate(out_splits)]),
                 "all_to_all_single uneven")
    out["all_to_all_single uneven"] = dst
    # The list form: gloo has none.
    ins = [torch.full((2, j + 1), rank * 10 + j, dtype=torch.int64) for j in range(world)]
    outs = [torch.empty((2, rank + 1), dtype=torch.int64) for _ in range(world)]
    try:
        dist.all_to_all(outs, ins)
        for r in range(world):
            expect_equal(outs[r], torch.full((2, rank + 1), r * 10 + rank, dtype=torch.int64), f"all_to_all from {r}")
        out["all_to_all list"] = torch.cat([o.flatten() for o in outs])
    except RuntimeError as e:
        if "does not support alltoall" not in str(e):
            raise
        out["all_to_all list"] = "unsupported"

    # --- point to point: a ring with isend/irecv, tagged blocking pairs, batch_isend_irecv.
    right, left = (rank + 1) % world, (rank - 1) % world
    send = torch.arange(7, dtype=torch.float32) + rank
    recv = torch.empty(7)
    reqs = [dist.isend(send, right), dist.irecv(recv, left)]
    for req in reqs:
        req.wait()
    expect_equal(recv, torch.arange(7, dtype=torch.float32) + left, "isend/irecv ring")
    out["isend ring"] = recv.clone()
    if rank % 2 == 0 and rank + 1 < world:
        sends = [dist.isend(torch.tensor([rank, 7], dtype=torch.int64), rank + 1, tag=7),
                 dist.isend(torch.tensor([rank, 3], dtype=torch.int64), rank + 1, tag=3)]
        for req in sends:
            req.wait()
    elif rank % 2 == 1:
        a, b = torch.empty(2, dtype=torch.int64), torch.empty(2, dtype=torch.int64)
        dist.recv(b, rank - 1, tag=3)  # the other tag first: tags keep them apart
        dist.recv(a, rank - 1, tag=7)
        expect_equal(torch.stack([a, b]), torch.tensor([[rank - 1, 7], [rank - 1, 3]]), "tagged send/recv")
        out["tagged send/recv"] = torch.stack([a, b])
    if rank == 0:
        senders = []
        for _ in range(world - 1):
            t = torch.empty(1, dtype=torch.int64)
            # Any source, returning the sender; a tag of its own, so that a rank already on to the
            # next step cannot be taken for one of these.
            senders.append(dist.recv(t, tag=5))
            expect_equal(t, torch.tensor([senders[-1] * 11]), "recv from any source")
        out["recv any source"] = sorted(senders)
    else:
        dist.send(torch.tensor([rank * 11]), 0, tag=5)
    send = torch.full((4,), float(rank))
    recv_l, recv_r = torch.empty(4), torch.empty(4)
    ops = [dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv_l, left),
           dist.P2POp(dist.isend, send, left), dist.P2POp(dist.irecv, recv_r, right)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    expect_equal(torch.cat([recv_l, recv_r]), torch.tensor([float(left)] * 4 + [float(right)] * 4),
                 "batch_isend_irecv")
    out["batch_isend_irecv"] = torch.cat([recv_l, recv_r])
    # A barrier after an isend that nobody has waited for: the receiver sees the data.
    late = dist.isend(torch.tensor([rank + 0.5]), right)
    got = torch.empty(1)
    dist.recv(got, left)
    dist.barrier()
    late.wait()
    expect_equal(got, torch.tensor([left + 0.5]), "recv around a barrier")

    # --- object collectives.
    objs = [{"from": rank, "list": list(range(rank + 1))}, f"rank {rank}", (rank, 2.5)]
    src_rank = 1 % world
    bcast = objs if rank == src_rank else [None, None, None]
    dist.broadcast_object_list(bcast, src=src_rank)
    assert bcast == [{"from": src_rank, "list": list(range(src_rank + 1))}, f"rank {src_rank}", (src_rank, 2.5)], bcast
    out["broadcast_object_list"] = bcast
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "pad": "x" * (10 * rank)})
    assert gathered == [{"rank": r, "pad": "x" * (10 * r)} for r in range(world)], gathered
    out["all_gather_object"] = gathered
    at_root = [None] * world if rank == 0 else None
    dist.gather_object(("g", rank), at_root, dst=0)
    if rank == 0:
        assert at_root == [("g", r) for r in range(world)], at_root
        out["gather_object"] = at_root
    mine = [None]
    dist.scatter_object_list(mine, [{"to": r} for r in range(world)] if rank == 0 else None, src=0)
    assert mine == [{"to": rank}], mine
    out["scatter_object_list"] = mine

    # --- a subgroup of the even ranks: its own gloo and optcast groups.
    members = list(range(0, world, 2))
    group = dist.new_group(members)
    if rank in members:
        t = torch.tensor([rank | 0x10], dtype=torch.int32)
        dist.all_reduce(t, op=dist.ReduceOp.BOR, group=group)
        want = 0
        for r in members:
            want |= r | 0x10
        expect_equal(t, torch.tensor([want], dtype=torch.int32), "subgroup BOR")
        parts = [torch.empty(2) for _ in members] if rank == members[-1] else None
        dist.gather(torch.tensor([rank, -rank], dtype=torch.float32), parts, dst=members[-1], group=group)
        if parts is not None:
            expect_equal(torch.stack(parts), torch.tensor([[r, -r] for r in members], dtype=torch.float32),
                         "subgroup gather")
            out["subgroup gather"] = torch.stack(parts)
        out["subgroup BOR"] = t
    dist.barrier()
    return out


def worker(rank, world, backend, store_file, addresses, out_dir):
    os.environ["OPTCAST_SERVERS"] = addresses
    os.environ["OPTCAST_TIMEOUT_MS"] = "20000"
    if backend == "optcast":
        import optcast_torch  # noqa: F401  registers the backend
    dist.init_process_group(backend, init_method=f"file://{store_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    assert dist.get_backend() == backend
    start = time.time()
    results = workload(rank, world)
    took = time.time() - start
    dist.destroy_process_group()
    torch.save(results, os.path.join(out_dir, f"{backend}-{rank}.pt"))
    print(f"{backend} rank {rank}: {len(results)} results, all as computed, in {took:.2f} s", flush=True)


def run(backend, np_, addresses, tmp, timeout):
    store_file = os.path.join(tmp, f"store-{backend}")
    ctx = mp.start_processes(worker, args=(np_, backend, store_file, addresses, tmp), nprocs=np_, join=False,
                             start_method="spawn")
    deadline = time.time() + timeout
    while not ctx.join(timeout=1):
        if time.time() > deadline:
            for p in ctx.processes:
                p.kill()
            sys.exit(f"{backend}: the ranks did not finish within {timeout} s")
    return [torch.load(os.path.join(tmp, f"{backend}-{r}.pt")) for r in range(np_)]


def same(a, b, key):
    if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
        return False
    if not isinstance(a, torch.Tensor):
        return a == b
    if key in FLOAT_SUMS:
        return a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a, b, rtol=1e-6, atol=1e-6)
    # Bit for bit, dtype and shape included.
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(-1).view(torch.uint8),
                                                                     b.view(-1).view(torch.uint8))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--optcast", required=True, help="the optcast command (servers)")
    ap.add_argument("--pythonpath", required=True, help="folder holding the optcast_torch package")
    ap.add_argument("--np", type=int, default=3)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=200)
    args = ap.parse_args()
    sys.path.insert(0, args.pythonpath)
    os.environ["PYTHONPATH"] = args.pythonpath + os.pathsep + os.environ.get("PYTHONPATH", "")
    with servers(args.optcast, args.servers) as addresses, tempfile.TemporaryDirectory() as tmp:
        gloo = run("gloo", args.np, addresses, tmp, args.timeout)
        optcast = run("optcast", args.np, addresses, tmp, args.timeout)
    problems, compared = [], 0
    for rank in range(args.np):
        g, o = gloo[rank], optcast[rank]
        if set(g) != set(o):
            problems.append(f"rank {rank}: gloo gave {sorted(set(g) - set(o))}, optcast {sorted(set(o) - set(g))}")
        for key in sorted(set(g) & set(o)):
            if key in OPTCAST_ONLY:
                if isinstance(o[key], str):
                    problems.append(f"rank {rank}: {key}: optcast said {o[key]}")
                continue
            compared += 1
            if not same(g[key], o[key], key):
                problems.append(f"rank {rank}: {key}: gloo {g[key]!r:.200} optcast {o[key]!r:.200}")
    for p in problems:
        print("MISMATCH", p)
    if problems:
        sys.exit(f"{len(problems)} results differ between gloo and optcast")
    print(f"OK: {args.np} ranks, {compared} results the same on gloo and optcast")


if __name__ == "__main__":
    main()
