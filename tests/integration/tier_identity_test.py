#!/usr/bin/env python3
"""Tier identities cannot collide (issue 24): two edges on one host (so one
host name), each with its own state directory, no upstream.nodeId and no
$PERLD_NODE_ID, run a bench of the same name at the same time, forwarding
to one root. Each edge names itself by the random UUID it keeps in
STATE_DIR/node-id, so the root's run has two clients, no duplicates, and
exactly both edges' records; a restarted edge keeps its id.

  /usr/bin/python3 tests/integration/tier_identity_test.py \\
      --perld build/release/daemon/bench/perld --perlctl build/release/client/perlctl/perlctl
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import Daemon, check, finish, load_stubs, wait_ended  # noqa: E402

import grpc  # noqa: E402

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
RECORDS = (10000, 10001)


def node_id(state):
    try:
        with open(os.path.join(state, "node-id")) as f:
            return f.read().strip()
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    os.environ.pop("PERLD_NODE_ID", None)  # the edges inherit the environment
    with tempfile.TemporaryDirectory() as tmp:
        pb, rpc, _ = load_stubs(tmp)

        def write(name, text):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(text)
            return path

        root = Daemon(args.perld, os.path.join(tmp, "root"), write(
            "root.yaml", "reportingIntervalMs: 200\ntimeUnit: ns\n"))
        edge_config = write("edge.yaml", f"reportingIntervalMs: 200\ntimeUnit: ns\n"
                                         f"upstream:\n  target: {root.grpc}\n")
        states = [os.path.join(tmp, f"edge{n}") for n in range(2)]
        edges = [Daemon(args.perld, state, edge_config) for state in states]
        try:
            ids = [node_id(state) for state in states]
            check(all(i is not None and UUID.match(i) for i in ids) and ids[0] != ids[1],
                  f"each edge keeps a random UUID in STATE_DIR/node-id ({ids})")

            # The same run name on both edges at the same time: one root run
            # (each bench lasts ~3 s, so both edges' streams overlap at the
            # root even on a slow sanitizer build: a root run ends once every
            # client that joined it closed).
            benches = [subprocess.Popen(
                [args.perlctl, "--target", edge.grpc, "bench", "-writers", "1", "-records",
                 str(records), "-seconds", "20", "-size", "100", "-throughput", "0.3",
                 "-time", "ns",
                 "--name", "twins", "--wait"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True) for edge, records in zip(edges, RECORDS)]
            for bench in benches:
                _, err = bench.communicate(timeout=60)
                check(bench.returncode == 0, f"an edge's bench exits 0 ({err.strip()})")

            channel = grpc.insecure_channel(root.grpc)
            query = rpc.QueryStub(channel)
            runs = [r for r in query.ListRuns(pb.ListRunsRequest(), timeout=10).runs
                    if r.name == "twins"]
            check(len(runs) == 1, f"the root holds one run 'twins' ({len(runs)})")
            if runs:
                got = wait_ended(query, pb, runs[0].id, 30)
                check(got.run.state == pb.RUN_STATE_FINISHED and
                      got.total.records == sum(RECORDS),
                      f"the root's run is exact: {got.total.records} == {sum(RECORDS)} records, "
                      f"{pb.RunState.Name(got.run.state)} {got.run.failure_reason}")
                clients = query.GetClients(pb.GetClientsRequest(run=str(runs[0].id)),
                                           timeout=10).clients
                names = sorted(c.client_id.split("/")[0] for c in clients)
                check(names == sorted(str(i) for i in ids) and len(clients) == 2,
                      f"two clients at the root, named by the edges' ids ({names})")
                check(all(c.duplicates == 0 for c in clients) and
                      sorted(c.records for c in clients) == sorted(RECORDS),
                      f"no window dropped as a duplicate ({[(c.records, c.duplicates) for c in clients]})")
            channel.close()  # an open connection holds the root's stop for drainTimeoutMs

            # A restarted edge keeps its id (and says so on /metrics).
            check(edges[0].stop() == 0, "edge 0 stops")
            edges[0] = Daemon(args.perld, states[0], edge_config)
            metrics = urllib.request.urlopen(f"http://{edges[0].http}/metrics",
                                             timeout=10).read().decode()
            check(node_id(states[0]) == ids[0] and
                  f'perld_upstream_runs_total{{node="{ids[0]}"}}' in metrics,
                  "the restarted edge keeps its node id")
        finally:
            for d in edges + [root]:
                check(d.stop() == 0, "daemon stops cleanly")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
