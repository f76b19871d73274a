#!/usr/bin/env python3
"""The include graph of daemon/ and client/ follows the layers in README "Layout".

Every source directory has a rank; a file may include its own directory and
directories of a strictly lower rank, never one above (no upward dependency,
hence no cycle). The client side (client/) may use only the shared layers:
daemon/common, daemon/core and daemon/bench (PerlBench workloads, which
`perlctl load` drives) -- nothing daemon-only. A directory missing from the
table fails the check, so a new component has to be placed in a layer.

Usage: layering_test.py [SOURCE_ROOT]   (prints PASSED when the graph holds)
"""
import os
import re
import sys

# rank: the layer, bottom (0) to top. Same rank = no includes between them.
RANKS = {
    "daemon/common": 0,   # failpoints, JSON writer, log, CRC32C, secrets, host:port
    "daemon/core": 0,     # the latency core: no I/O
    "daemon/config": 1,
    "daemon/bench": 1,    # PerlBench workloads
    "daemon/runs": 2,     # the recorder and its runs
    "daemon/state": 3,
    "daemon/http": 3,
    "client/lib": 3,
    "daemon/ingest": 4,
    "daemon/jobs": 4,
    "client/perlctl": 4,
    "client/include": 4,
    "client/examples": 5,
    "daemon/service": 5,
    "daemon/tiers": 6,
    "daemon/remote_write": 6,  # Prometheus remote write
    "daemon/server": 7,
    "daemon": 8,          # daemon/main.cc
}
CLIENT_MAY_USE = {"daemon/common", "daemon/core", "daemon/bench"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:daemon|client)/[^"]+)"', re.M)


def component(path):
    """The table's directory of `path` (a file under daemon/ or client/)."""
    parts = path.split("/")
    if len(parts) >= 3:
        return "/".join(parts[:2])
    return parts[0]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    root = os.path.abspath(root)
    problems = []
    edges = set()
    files = 0
    for top in ("daemon", "client"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if not name.endswith((".h", ".cc")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                files += 1
                src = component(rel)
                if src not in RANKS:
                    problems.append(f"{rel}: directory {src} has no layer in layering_test.py")
                    continue
                with open(os.path.join(root, rel), encoding="utf-8") as f:
                    text = f.read()
                for target in INCLUDE.findall(text):
                    dst = component(target)
                    if dst == src:
                        continue
                    edges.add((src, dst))
                    if dst not in RANKS:
                        problems.append(f"{rel}: includes {target} from unplaced {dst}")
                    elif RANKS[dst] >= RANKS[src]:
                        problems.append(
                            f"{rel}: includes {target}: {src} (layer {RANKS[src]}) may not use "
                            f"{dst} (layer {RANKS[dst]})")
                    if src.startswith("client/") and not dst.startswith("client/") \
                            and dst not in CLIENT_MAY_USE:
                        problems.append(f"{rel}: the client side includes daemon-only {target}")
    if files == 0:
        problems.append(f"no sources under {root}")
    for p in problems:
        print("LAYERING:", p)
    print(f"{files} files, {len(edges)} directory edges checked")
    if problems:
        print("FAILED")
        return 1
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
