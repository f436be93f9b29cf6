#!/usr/bin/python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""Trains one small model with DistributedDataParallel on the "optcast" backend and on "gloo",
from the same initial weights and the same data, and prints the losses and step times side by
side. Exits 1 if the losses disagree beyond float tolerance.

    # servers on loopback, started and stopped here (needs the optcast command):
    /usr/bin/python3 ddp_compare.py --np 2 --local-servers 2 --optcast build/tools/optcast
    # servers already running elsewhere:
    OPTCAST_SERVERS=10.0.0.5:8918 /usr/bin/python3 ddp_compare.py --np 4

One rank per process on this machine (torch.multiprocessing); --rank/--world-size/--store run a
single rank instead, for launching ranks on other hosts (or network namespaces) by hand.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def build_model(width):
    torch.manual_seed(1234)  # the same initial weights for every backend (DDP also broadcasts rank 0's)
    return torch.nn.Sequential(torch.nn.Linear(256, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                               torch.nn.ReLU(), torch.nn.Linear(width, 10))


# A task the model can learn: the labels of a fixed random linear teacher.
TEACHER = torch.randn(256, 10, generator=torch.Generator().manual_seed(99))


def batch(rank, step, size):
    g = torch.Generator().manual_seed(rank * 100003 + step)
    x = torch.randn(size, 256, generator=g)
    return x, (x @ TEACHER).argmax(dim=1)


def train(rank, world, backend, store, args, out_file):
    # "optcast-bf16": the optcast backend with float32 gradients on a bfloat16 wire, set on the
    # group itself (OPTCAST_WIRE_DTYPE=bf16 would set it for every group).
    wire = "bf16" if backend == "optcast-bf16" else None
    if backend.startswith("optcast"):
        import optcast_torch  # noqa: F401  registers the backend
        backend = "optcast"
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world)
    if wire:
        dist.distributed_c10d._get_default_group().set_wire_dtype(wire)
    model = DDP(build_model(args.width))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    losses, times = [], []
    for step in range(args.warmup + args.steps):
        x, y = batch(rank, step, args.batch)
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()  # DDP allreduces the gradient buckets here
        opt.step()
        elapsed = time.perf_counter() - start
        # The mean loss over all ranks (the same on every rank), for the comparison.
        # In float64, which no wire type narrows.
        mean = loss.detach().double()
        dist.all_reduce(mean)
        if step >= args.warmup:
            losses.append(mean.item() / world)
            times.append(elapsed)
    # The slowest rank's time per step is the step time.
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        with open(out_file, "w") as f:
            json.dump({"losses": losses, "times": t.tolist()}, f)
    dist.barrier()
    dist.destroy_process_group()


def run_backend(backend, args, tmp):
    out_file = os.path.join(tmp, f"{backend}.json")
    store = os.path.join(tmp, f"{backend}.store")
    ctx = mp.start_processes(train, args=(args.np, backend, store, args, out_file), nprocs=args.np, join=False,
                             start_method="spawn")
    deadline = time.time() + args.timeout
    while not ctx.join(timeout=1):
        if time.time() > deadline:
            for p in ctx.processes:
                p.kill()
            sys.exit(f"{backend}: the ranks did not finish within {args.timeout} s")
    with open(out_file) as f:
        return json.load(f)


def compare(results, args):
    names = list(results)
    n_params = sum(p.numel() for p in build_model(args.width).parameters())
    print(f"DDP, {args.np} ranks, {n_params} parameters ({n_params * 4 / 2**20:.2f} MiB of float32 gradients), "
          f"batch {args.batch} per rank, {args.steps} steps after {args.warmup} warm-up")
    print("step  " + "  ".join(f"{n + ' loss':>14}" for n in names) + "   rel.diff  " +
          "  ".join(f"{n + ' ms':>11}" for n in names))
    worst = 0.0
    for i in range(args.steps):
        ls = [results[n]["losses"][i] for n in names]
        diff = abs(ls[0] - ls[-1]) / max(abs(ls[-1]), 1e-12)
        worst = max(worst, diff)
        print(f"{i:4d}  " + "  ".join(f"{v:14.8f}" for v in ls) + f"  {diff:9.2e}  " +
              "  ".join(f"{results[n]['times'][i] * 1e3:11.2f}" for n in names))
    mean = {n: sum(results[n]["times"]) / len(results[n]["times"]) for n in names}
    print("mean step time: " + ", ".join(f"{n} {mean[n] * 1e3:.2f} ms" for n in names) +
          (f"; {names[0]} runs at {mean[names[-1]] / mean[names[0]]:.2f}x the speed of {names[-1]}"
           if len(names) > 1 else ""))
    if worst > args.tolerance:
        print(f"FAIL: the losses differ by up to {worst:.2e} (relative), more than {args.tolerance:.0e}")
        return 1
    print(f"OK: the losses agree within {args.tolerance:.0e} (largest relative difference {worst:.2e})")
    if args.final_tolerance is not None:
        # The end of training: the mean loss of the last tenth of the steps.
        tail = max(1, args.steps // 10)
        ends = [sum(results[n]["losses"][-tail:]) / tail for n in names]
        first = [results[n]["losses"][0] for n in names]
        end_diff = abs(ends[0] - ends[-1]) / abs(ends[-1])
        print(f"loss over the last {tail} steps: " + ", ".join(f"{n} {e:.6f}" for n, e in zip(names, ends)) +
              f" (from {first[-1]:.6f}); relative difference {end_diff:.2e}")
        if end_diff > args.final_tolerance:
            print(f"FAIL: the final losses differ by more than {args.final_tolerance:.0e}")
            return 1
        if not ends[0] < 0.9 * first[0]:
            print(f"FAIL: {names[0]} did not train (loss {first[0]:.6f} to {ends[0]:.6f})")
            return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, default=2, help="ranks (processes)")
    ap.add_argument("--backends", default="optcast,gloo")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--width", type=int, default=512, help="hidden layer width (sets the gradient size)")
    ap.add_argument("--tolerance", type=float, default=1e-4, help="largest relative loss difference")
    ap.add_argument("--final-tolerance", type=float,
                    help="also: largest relative difference of the mean loss over the last tenth of the steps")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--local-servers", type=int, default=0, help="start this many servers on loopback")
    ap.add_argument("--optcast", default="optcast", help="the optcast command, for --local-servers")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--rank", type=int, help="run only this rank (with --store; --np is the world size)")
    ap.add_argument("--store", help="with --rank: a folder every rank sees, for the file stores and results")
    args = ap.parse_args()

    backends = args.backends.split(",")
    if args.rank is not None:
        if not args.store:
            sys.exit("--rank needs --store, a folder that every rank can reach")
        results = {}
        for b in backends:
            out_file = os.path.join(args.store, f"{b}.json")
            train(args.rank, args.np, b, os.path.join(args.store, f"{b}.store"), args, out_file)
            if args.rank == 0:
                with open(out_file) as f:
                    results[b] = json.load(f)
        sys.exit(compare(results, args) if args.rank == 0 else 0)
    with tempfile.TemporaryDirectory() as tmp:
        if args.local_servers:
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
            from local_servers import servers
            with servers(args.optcast, args.local_servers) as addresses:
                os.environ["OPTCAST_SERVERS"] = addresses
                results = {b: run_backend(b, args, tmp) for b in backends}
        else:
            results = {b: run_backend(b, args, tmp) for b in backends}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)
    sys.exit(compare(results, args))


if __name__ == "__main__":
    main()
