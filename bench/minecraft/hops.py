#!/usr/bin/env python3
"""Splits the real-stack bench's latency by hop (issue 22 item 9).

    MC_STACK_TRACE=/tmp/trace target/release/minecraft-stack-bench --adapters squid --rates 10000 --games 0 ...
    python3 bench/minecraft/hops.py /tmp/trace

Run one case per trace directory (each case's processes write the same file names). For every event the client
read, it joins, by the game's event number: sent (the driver's stamp), the relay reading its frame (relay_in) and
done with it, the relay writing the frame that carried it to the MCP server (relay_out), the MCP server reading it
(mcp_in) and done publishing it, and the client's read, and the start of the poll that read it. Prints each hop's
p50/p99/max over all events and over the slowest 1 %, so the hop that adds the tail shows.
"""
import bisect
import json
import re
import sys
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;]*m")
FIELD = re.compile(r"(\w+)=(\"[^\"]*\"|\S+)")


def records(path, hop):
    out = []
    for line in Path(path).read_text(errors="replace").splitlines():
        line = ANSI.sub("", line)
        if "mc_latency" not in line or hop not in line:
            continue
        f = {k: v.strip('"') for k, v in FIELD.findall(line)}
        if f.get("hop") != hop:
            continue
        out.append(f)
    return out


def first_at_or_after(keys, values, k):
    i = bisect.bisect_left(keys, k)
    return values[i] if i < len(keys) else None


def q(xs, f):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(f * len(xs)))]


def main():
    d = Path(sys.argv[1])
    relay_in = [(int(r["game_seq"]), int(r["read_us"]), int(r["done_us"])) for r in records(d / "relay.log", "relay_in")]
    relay_out = [(int(r["seq"]), int(r["read_us"]), int(r["done_us"])) for r in records(d / "relay.log", "relay_out")]
    mcp = [r for r in records(d / "mcp-0.log", "mcp_in") if r.get("game_seq") not in (None, "None")]
    mcp_in = [(int(r["game_seq"]), int(r["seq"]), int(r["read_us"]), int(r["done_us"])) for r in mcp]
    # The relay numbers its queue for the client itself: the offset to the game's numbers, from the MCP side.
    offsets = {s - g for g, s, _, _ in mcp_in}
    if len(offsets) != 1:
        print(f"note: relay seq - game seq takes {len(offsets)} values {sorted(offsets)[:5]}; using the most common")
    off = max(offsets, key=lambda o: sum(1 for g, s, _, _ in mcp_in if s - g == o)) if offsets else 0
    for xs in (relay_in, relay_out, mcp_in):
        xs.sort()
    ri_k = [x[0] for x in relay_in]
    ro_k = [x[0] - off for x in relay_out]
    mi_k = [x[0] for x in mcp_in]
    rows = []
    for line in (d / "client-0.tsv").read_text().splitlines():
        seq, sent, read, polled = map(int, line.split("\t"))
        ri = first_at_or_after(ri_k, relay_in, seq)
        ro = first_at_or_after(ro_k, relay_out, seq)
        mi = first_at_or_after(mi_k, mcp_in, seq)
        if not (ri and ro and mi):
            continue
        rows.append({
            "total": read - sent,
            "driver->relay read": ri[1] - sent,
            "relay handle": ri[2] - ri[1],
            "relay queued->written": ro[2] - ri[2],
            "relay written->mcp read": mi[2] - ro[2],
            "mcp handle": mi[3] - mi[2],
            "mcp published->client read": read - mi[3],
            "poll began after publish": max(0, polled - mi[3]),
        })
    if not rows:
        print("no events joined")
        return
    rows.sort(key=lambda r: r["total"])
    tail = rows[int(0.99 * len(rows)):]
    print(f"{len(rows)} events joined; {len(tail)} in the slowest 1 % (total >= {tail[0]['total'] / 1000:.2f} ms)")
    print(f"{'hop (ms)':<30} {'p50':>8} {'p99':>8} {'max':>8}   {'tail p50':>8} {'tail max':>8}")
    for k in rows[0]:
        a = [r[k] / 1000 for r in rows]
        t = [r[k] / 1000 for r in tail]
        print(f"{k:<30} {q(a, .5):8.3f} {q(a, .99):8.3f} {max(a):8.3f}   {q(t, .5):8.3f} {max(t):8.3f}")


if __name__ == "__main__":
    main()
