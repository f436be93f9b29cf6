#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""GPU check of libnccl-net-optcast.so under PyTorch, with no change to the training code.

Two optcast servers on loopback; two processes on GPU 0 that NCCL takes for two nodes (different
NCCL_HOSTID); torch.distributed with the nccl backend and CollNet forced (NCCL_ALGO=CollNetChain).
Each rank all-reduces tensors of several sizes, data types and ops, and checks every element
against the result computed on the CPU from both ranks' inputs. Passes when every result is
exact, the plugin reports "CollNet active" on both ranks, NCCL picked COLLNET for float32 sums,
and the servers saw the job. With --kill-a-server, the ranks then run rounds of 4 MiB all_reduces,
each checked, while the parent SIGKILLs one of the two servers: the job must go on over the other
and every round stay exact.

  tests/nccl/gpu_torch_check.py --optcast PATH --plugin PATH [--port 18940] [--kill-a-server]

Needs PyTorch with CUDA (its NCCL is the one tested). Not part of ctest: there is no GPU in CI.
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

# (dtype name, op name); values stay small integers, so every sum is exact in each type.
CASES = [("float32", "sum"), ("float32", "max"), ("float32", "avg"), ("float16", "sum"), ("bfloat16", "sum"),
         ("int32", "sum")]
SIZES = [1, 1000, 65536, 131073, 1 << 20, 4 << 20]


def rank_input(torch, n, rank, case_index):
    i = torch.arange(n, dtype=torch.int64)
    return ((i * 7 + rank * 13 + case_index * 5) % 17) - 8


def worker(args):
    import torch
    import torch.distributed as dist

    rank = args.rank
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", 0))
    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
    failures = 0
    for ci, (tname, oname) in enumerate(CASES):
        dtype = getattr(torch, tname)
        for n in SIZES:
            mine = rank_input(torch, n, rank, ci)
            both = torch.stack([rank_input(torch, n, r, ci) for r in range(2)]).double()
            want = {"sum": both.sum(0), "max": both.max(0).values, "avg": both.mean(0)}[oname].to(dtype)
            t = mine.to(dtype).cuda()
            dist.all_reduce(t, op=ops[oname])
            torch.cuda.synchronize()
            got = t.cpu()
            if not torch.equal(got, want):
                bad = (got != want).nonzero()
                first = int(bad[0][0])
                print(f"rank {rank}: all_reduce {tname} {oname} of {n}: {bad.numel()} element(s) wrong, first at "
                      f"{first}: got {got[first].item()}, want {want[first].item()}", flush=True)
                failures += 1
    if args.rounds > 0:
        print(f"rank {rank}: failover rounds start", flush=True)
        n = 1 << 20
        slowest = (0.0, -1)
        for k in range(args.rounds):
            t = rank_input(torch, n, rank, 100 + k).float().cuda()
            begin = time.perf_counter()
            dist.all_reduce(t)
            torch.cuda.synchronize()
            slowest = max(slowest, ((time.perf_counter() - begin) * 1000, k))
            want = (rank_input(torch, n, 0, 100 + k) + rank_input(torch, n, 1, 100 + k)).float()
            if not torch.equal(t.cpu(), want):
                print(f"rank {rank}: failover round {k}: wrong result", flush=True)
                failures += 1
                break
        if failures == 0:
            print(f"rank {rank}: {args.rounds} failover rounds exact", flush=True)
        print(f"rank {rank}: slowest round {slowest[1]}: {slowest[0]:.0f} ms", flush=True)
    # A timed float32 sum for the record (one GPU, loopback servers: not a performance figure).
    t = torch.ones(16 << 20, dtype=torch.float32, device="cuda")
    for _ in range(3):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - start) * 100
    print(f"rank {rank}: 64 MiB float32 all_reduce {ms:.1f} ms", flush=True)
    dist.destroy_process_group()
    if failures == 0:
        print(f"rank {rank}: {len(CASES) * len(SIZES)} all_reduce results exact", flush=True)
    return 1 if failures else 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--optcast", required=True, help="the optcast command")
    p.add_argument("--plugin", required=True, help="libnccl-net-optcast.so")
    p.add_argument("--port", type=int, default=18940, help="first server port (two are used)")
    p.add_argument("--kill-a-server", action="store_true", help="SIGKILL one server while the ranks run")
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--rounds", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank is not None:
        return worker(args)

    work = tempfile.mkdtemp()
    servers = []
    for i in range(2):
        log = open(os.path.join(work, f"server{i}.log"), "w")
        servers.append(subprocess.Popen([args.optcast, "server", "--listen", f"127.0.0.1:{args.port + i}",
                                         "--log-level", "info"], stdout=log, stderr=subprocess.STDOUT))
    time.sleep(1)
    env = dict(os.environ, NCCL_NET_PLUGIN=os.path.abspath(args.plugin), NCCL_COLLNET_ENABLE="1",
               NCCL_ALGO=os.environ.get("NCCL_ALGO", "CollNetChain"), NCCL_DEBUG="INFO",
               NCCL_DEBUG_SUBSYS="INIT,NET,TUNING", NCCL_SOCKET_IFNAME="lo", NCCL_MNNVL_ENABLE="0",
               OPTCAST_SERVERS=f"127.0.0.1:{args.port},127.0.0.1:{args.port + 1}", OPTCAST_TIMEOUT_MS="120000",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    ranks = []
    for r in range(2):
        log = open(os.path.join(work, f"rank{r}.log"), "w")
        ranks.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--optcast", args.optcast,
                                       "--plugin", args.plugin, "--rank", str(r), "--rounds",
                                       str(200 if args.kill_a_server else 0)],
                                      env=dict(env, NCCL_HOSTID=f"optcast-torch-check-node{r}"), stdout=log,
                                      stderr=subprocess.STDOUT))
    ok = True
    if args.kill_a_server:
        deadline = time.time() + 180
        while time.time() < deadline and all(proc.poll() is None for proc in ranks):
            with open(os.path.join(work, "rank0.log"), errors="replace") as f:
                if "failover rounds start" in f.read():
                    break
            time.sleep(0.05)
        time.sleep(1.0)
        servers[1].kill()
        print(f"  killed server 1 (127.0.0.1:{args.port + 1}) with SIGKILL")
    for r, proc in enumerate(ranks):
        try:
            code = proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = "timeout"
        if code != 0:
            print(f"rank {r} failed ({code}); see its log below")
            ok = False
    for s in servers:
        if s.poll() is None:
            s.terminate()
        s.wait(timeout=30)

    def text(name):
        with open(os.path.join(work, name), errors="replace") as f:
            return f.read()

    logs = {name: text(name) for name in ("rank0.log", "rank1.log", "server0.log", "server1.log")}

    def check(what, pattern, *names):
        nonlocal ok
        for name in names:
            m = re.search(pattern, logs[name], re.M)
            if m:
                print(f"  ok: {what}: {m.group(0).strip()[:160]}")
                return
        print(f"  MISSING: {what}")
        ok = False

    for r in range(2):
        check(f"results exact on rank {r}", r"^rank \d: \d+ all_reduce results exact$", f"rank{r}.log")
        check(f"plugin joined the servers (rank {r})", r"NET/Optcast : CollNet active.*", f"rank{r}.log")
    check("NCCL ran float32 sums over CollNet", r"AllReduce: \d+ Bytes -> Algo COLLNET\w*.*", "rank0.log", "rank1.log")
    check("servers saw the job", r"job \w+ created \(2 ranks\)", "server0.log", "server1.log")
    if args.kill_a_server:
        for r in range(2):
            check(f"rank {r} failed over", r".*(failing over to|failover \d+:).*", f"rank{r}.log")
            check(f"every failover round exact on rank {r}", r"^rank \d: \d+ failover rounds exact$", f"rank{r}.log")
        check("the server left agreed on the failover", r".*failover to epoch.*", "server0.log")
    for line in re.findall(r"^rank \d: (?:64 MiB|slowest).*$", logs["rank0.log"], re.M):
        print("  " + line)
    algos = sorted(set(re.findall(r"AllReduce: \d+ Bytes -> Algo (\w+)", logs["rank0.log"])))
    print("  algorithms NCCL picked on rank 0: " + ", ".join(algos))
    if not ok:
        for name, t in logs.items():
            print(f"==== {name}")
            lines = [x for x in t.splitlines() if re.search(r"WARN|Optcast|CollNet|Plugin|rank|error|Error", x)]
            print("\n".join(lines[-60:]))
        print("FAIL")
        return 1
    print("PASS: torch.distributed (nccl) all_reduce over CollNet through Optcast servers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
