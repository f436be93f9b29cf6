#!/usr/bin/env python3
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
"""optcast-sim against closed-form times on small fabrics.

The references are the textbook costs, computed here from the inputs alone:
  ring:     2(n-1) * (S/n/B + L)
  servers:  S/B * max(1, n/M, oversubscribed uplink share) * (1 + 1/C), C = chunks per stripe
            (one chunk to fill the pipeline; within 4%)
  tree:     S/B * max((w+1)/L, racks/roots) * (1 + 4/C) for w workers and L leaf servers per
            rack (a leaf's link also carries its partial up and the root's result down; four hops
            to fill and drain)
Usage: closed_form_test.py PATH/TO/optcast-sim
"""
import json
import subprocess
import sys
import unittest

SIM = None
MIB = 1 << 20
B = 100e6  # 800 Mbit/s links


def run(*args):
    out = subprocess.run([SIM, "--link-mbit", "800", *map(str, args)], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    return json.loads(out.strip().splitlines()[-1])


class Ring(unittest.TestCase):
    def check(self, n, size, lat_us):
        r = run("--algo", "ring", "-n", n, "--bytes", size, "--latency-us", lat_us)
        ref = 2 * (n - 1) * (size / n / B + lat_us * 1e-6)
        self.assertAlmostEqual(r["time_s"] / ref, 1.0, delta=0.01, msg=f"n={n} S={size}: {r['time_s']} vs {ref}")

    def test_bandwidth_term(self):
        for n in (2, 4, 8, 16):
            self.check(n, 16 * MIB, 5)

    def test_latency_term(self):
        self.check(8, 64 * 1024, 1000)  # 14 steps of 1 ms dominate 8 KiB segments

    def test_ring_stays_inside_a_rack_under_oversubscription(self):
        # 32 workers in 2 racks, 4:1 uplinks: each step crosses the uplink with one flow only.
        r = run("--algo", "ring", "-n", 32, "--bytes", 16 * MIB, "--latency-us", 5, "--rack-size", 16,
                "--oversub", 4)
        ref = 2 * 31 * (16 * MIB / 32 / B + 5e-6)
        self.assertAlmostEqual(r["time_s"] / ref, 1.0, delta=0.01)


class Servers(unittest.TestCase):
    def check(self, n, m, size, extra=(), factor=None, tol=0.04):
        r = run("--algo", "servers", "-n", n, "-m", m, "--bytes", size, "--latency-us", 5, *extra)
        stripe = size / r["stripes"]
        chunks = -(-stripe // r["chunk_bytes"])
        f = factor if factor is not None else max(1.0, n / m)
        ref = size / B * f * (1 + 1 / chunks)
        self.assertAlmostEqual(r["time_s"] / ref, 1.0, delta=tol,
                               msg=f"n={n} M={m} S={size}: {r['time_s']:.4f} s vs {ref:.4f} s")
        return r

    def test_as_many_servers_as_workers(self):
        for n in (4, 8, 16):
            self.check(n, n, 16 * MIB)

    def test_fewer_servers_share_their_links(self):
        self.check(8, 4, 16 * MIB)
        self.check(8, 2, 16 * MIB)
        self.check(16, 4, 16 * MIB)

    def test_client_chunking_rules(self):
        # 16 MiB over 8 servers: 2 MiB stripes, cut into the client's 32 KiB chunks.
        r = self.check(8, 8, 16 * MIB)
        self.assertEqual((r["stripes"], r["chunk_bytes"]), (8, 32 * 1024))
        # 32 KiB keeps at least 8 KiB per server: 4 stripes, each one chunk of the stream policy's
        # 16 KiB floor (a stripe of 16-64 KiB would be cut in two).
        r = run("--algo", "servers", "-n", 4, "-m", 8, "--bytes", 32 * 1024)
        self.assertEqual((r["stripes"], r["chunk_bytes"]), (4, 16 * 1024))
        # 256 KiB over 8 servers: 32 KiB stripes in two 16 KiB chunks.
        r = run("--algo", "servers", "-n", 8, "-m", 8, "--bytes", 256 * 1024)
        self.assertEqual((r["stripes"], r["chunk_bytes"]), (8, 16 * 1024))

    def test_oversubscribed_uplinks_limit_flat_servers(self):
        # 16 workers fill one rack; the 16 servers sit in another; uplinks 4:1 carry 16 S each way.
        self.check(16, 16, 16 * MIB, extra=("--rack-size", 16, "--oversub", 4), factor=4.0)

    def test_slow_reduction_limits_the_server(self):
        # One server reducing 8 x 16 MiB at 50 MB/s of input needs 2.7 s; its link needs 1.3 s.
        r = run("--algo", "servers", "-n", 8, "-m", 1, "--bytes", 16 * MIB, "--reduce-gbs", 0.05)
        self.assertGreater(r["time_s"], 8 * 16 * MIB / 50e6)
        self.assertLess(r["time_s"], 8 * 16 * MIB / 50e6 * 1.05)


class Tree(unittest.TestCase):
    def check(self, n, rack, leaves, roots, factor, size=32 * MIB, oversub=1, placement="spread"):
        r = run("--algo", "tree", "-n", n, "-m", leaves, "--roots", roots, "--bytes", size, "--latency-us", 5,
                "--rack-size", rack, "--oversub", oversub, "--root-placement", placement)
        chunks = -(-(size / r["stripes"]) // r["chunk_bytes"])
        ref = size / B * factor * (1 + 4 / chunks)
        self.assertAlmostEqual(r["time_s"] / ref, 1.0, delta=0.06,
                               msg=f"n={n} leaves={leaves} roots={roots}: {r['time_s']:.4f} s vs {ref:.4f} s")

    def test_link_rate_with_enough_servers(self):
        # 2 racks of 8 workers + 8 leaf servers; 2 roots each take half the stripes of 2 racks.
        self.check(16, 8, 8, 2, 9 / 8)

    def test_tree_is_immune_to_oversubscription(self):
        # Each rack sends one partial per stripe up: S per uplink, far below 16 B / 4.
        self.check(16, 8, 8, 2, 9 / 8, oversub=4)

    def test_leaf_fan_in_limits(self):
        # 12 workers per rack on 4 leaf servers: each leaf takes (12 + 1) S / 4 in.
        self.check(24, 12, 4, 4, 13 / 4)

    def test_root_fan_in_limits(self):
        # 4 racks of 8 workers into 1 root: the root takes 4 S in.
        self.check(32, 8, 8, 1, 4.0)

    def test_roots_in_one_rack_meet_its_uplink(self):
        # 8 racks of 8 workers on 8 leaves, 8 roots, 4:1 uplinks of 2 B. All roots in one rack: its
        # uplink takes every rack's partials, 8 S in through 2 B. Spread (root q in rack q) or on the
        # spine: a rack's uplink carries 7/8 S of partials and results each way, and the leaves'
        # (8 + 1)/8 S is the bound again.
        for placement, factor in (("rack", 4.0), ("spread", 9 / 8), ("spine", 9 / 8)):
            self.check(64, 8, 8, 8, factor, size=16 * MIB, oversub=4, placement=placement)


class Fold(unittest.TestCase):
    """--simulated-racks K plays K of the worker racks and gives the servers all racks share
    (flat servers, tree roots) K/racks of their links and reduce rate."""

    def test_all_racks_is_the_whole_model(self):
        for algo in (("--algo", "servers", "-m", 8), ("--algo", "tree", "-m", 4, "--roots", 2)):
            base = ("-n", 32, "--rack-size", 8, "--bytes", 4 * MIB, "--latency-us", 5, *algo)
            whole, folded = run(*base), run(*base, "--simulated-racks", 4)
            self.assertEqual(whole["time_s"], folded["time_s"], algo)
            self.assertEqual(whole["messages"], folded["messages"], algo)

    def test_a_folded_tree_keeps_the_leaf_fan_in_bound(self):
        # 8 racks of 12 workers on 4 leaves each, 8 roots: the leaves bound it at (12 + 1) S / 4,
        # and one simulated rack plays an eighth of the messages.
        size = 32 * MIB
        r = run("--algo", "tree", "-n", 96, "-m", 4, "--roots", 8, "--bytes", size, "--latency-us", 5,
                "--rack-size", 12, "--simulated-racks", 1)
        chunks = -(-(size / r["stripes"]) // r["chunk_bytes"])
        self.assertAlmostEqual(r["time_s"] / (size / B * 13 / 4 * (1 + 4 / chunks)), 1.0, delta=0.06)
        self.assertEqual(r["simulated_racks"], 1)
        whole = run("--algo", "tree", "-n", 96, "-m", 4, "--roots", 8, "--bytes", size, "--latency-us", 5,
                    "--rack-size", 12)
        self.assertAlmostEqual(r["messages"] * 8 / whole["messages"], 1.0, delta=0.01)

    def test_a_folded_tree_keeps_the_root_fan_in_bound(self):
        # 8 racks of 8 workers into 2 roots: each root takes 4 S in, whatever share is simulated.
        size = 32 * MIB
        for k in (1, 2):
            r = run("--algo", "tree", "-n", 64, "-m", 8, "--roots", 2, "--bytes", size, "--latency-us", 5,
                    "--rack-size", 8, "--simulated-racks", k)
            chunks = -(-(size / r["stripes"]) // r["chunk_bytes"])
            self.assertAlmostEqual(r["time_s"] / (size / B * 4.0 * (1 + 4 / chunks)), 1.0, delta=0.06, msg=k)

    def test_a_folded_tree_with_spread_roots_reads_as_the_whole_one(self):
        # Spread roots sit in the worker racks whole; folded, each keeps its share of a port in a
        # rack of its own (fabric.cc). At 4:1 neither uplink binds, so both read the leaves' bound.
        base = ("--algo", "tree", "-n", 64, "-m", 8, "--roots", 8, "--bytes", 16 * MIB, "--latency-us", 5,
                "--rack-size", 8, "--oversub", 4)
        whole, folded = run(*base), run(*base, "--simulated-racks", 1)
        self.assertAlmostEqual(folded["time_s"] / whole["time_s"], 1.0, delta=0.05)

    def test_folded_servers_keep_their_link_share(self):
        # 64 workers in 8 racks on 16 flat servers: each server link carries n/M = 4 S each way.
        size = 16 * MIB
        for k in (1, 2):
            r = run("--algo", "servers", "-n", 64, "-m", 16, "--bytes", size, "--latency-us", 5, "--rack-size", 8,
                    "--simulated-racks", k)
            chunks = -(-(size / r["stripes"]) // r["chunk_bytes"])
            # Fewer flows per server port than the whole job has: a few percent either way (scale.md).
            self.assertAlmostEqual(r["time_s"] / (size / B * 4.0 * (1 + 1 / chunks)), 1.0, delta=0.08, msg=k)

    def test_folded_servers_keep_their_reduce_rate(self):
        # 4 racks of 4 workers on one server reducing 50 MB/s of input: n S / rate, folded or not.
        r = run("--algo", "servers", "-n", 16, "-m", 1, "--bytes", 4 * MIB, "--reduce-gbs", 0.05, "--rack-size", 4,
                "--simulated-racks", 1)
        self.assertGreater(r["time_s"], 16 * 4 * MIB / 50e6)
        self.assertLess(r["time_s"], 16 * 4 * MIB / 50e6 * 1.05)

    def test_what_cannot_be_folded_is_refused(self):
        for args, words in ((["--algo", "ring", "-n", 64, "--simulated-racks", 1], "ring has no symmetry"),
                            (["--algo", "servers", "-n", 40, "--simulated-racks", 1], "whole racks"),
                            (["--algo", "tree", "-n", 64, "--simulated-racks", 3], "only 2 worker racks")):
            p = subprocess.run([SIM, *map(str, args)], capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(words, p.stderr, args)


class BadInput(unittest.TestCase):
    def test_errors_name_the_fix(self):
        for args, words in ((["--algo", "hypercube"], "ring, servers or tree"),
                            (["--workers", "1"], "at least 2"),
                            (["--oversub", "0.5"], "non-blocking"),
                            (["--bytes", "12Q"], "1M"),
                            (["--algo", "tree", "--root-placement", "pod"], "spread, rack or spine")):
            p = subprocess.run([SIM, *args], capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(words, p.stderr, args)


if __name__ == "__main__":
    SIM = sys.argv.pop(1)
    unittest.main()
