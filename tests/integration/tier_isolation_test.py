#!/usr/bin/env python3
"""One stuck parent stream delays no other, and an edge's stop is bounded
(issue 25; README "Tiers beyond one machine").

An edge perld forwards two runs to a root perld:

  1. the root refuses the edge's stream of run "blocked" for as long as the
     test holds the run's only client slot (ingest.maxClientsPerRun 1:
     RESOURCE_EXHAUSTED, which the edge retries), and the edge's run
     "blocked" has one window of 600 pairs sent in 600 parts -- more than
     the 256 unacknowledged messages a stream may hold, so its stream has no
     room. Run "free" must still reach the root promptly and exactly (total
     and percentiles of its client's windows), its stream closed and the
     root's run finished.
  2. with "blocked" still stuck and the root frozen (SIGSTOP), the edge
     stops on SIGTERM within upstream.closeTimeoutMs plus a margin, keeping
     the stuck run's messages in its state database.

  /usr/bin/python3 tests/integration/tier_isolation_test.py \\
      --perld build/release/daemon/bench/perld
"""
import argparse
import importlib
import os
import random
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import (PERCENTS, Daemon, IngestStream, check, exact_percentiles,  # noqa: E402
                      finish, merge_pairs, metric, wait_ended)

import grpc  # noqa: E402

ROOT_CONFIG = """
reportingIntervalMs: 200
timeUnit: ns
ingest:
  maxClientsPerRun: 1
  clientTimeoutMs: 120000
"""
CLOSE_MS = 2000
EDGE_CONFIG = f"""
reportingIntervalMs: 200
timeUnit: ns
ingest:
  clientTimeoutMs: 120000
upstream:
  target: {{root}}
  nodeId: edge
  maxPairsPerReport: 1
  closeTimeoutMs: {CLOSE_MS}
"""
BLOCKED_PAIRS = 600  # one window in 600 parts: more than a stream's 256 unacknowledged
STOP_MARGIN_S = 4.0  # generous: the rest of the edge's shutdown on two busy cores


def window_msg(ipb, seq, pairs):
    valid = sum(c for _, c in pairs)
    deltas, prev = [], 0
    for v, _ in pairs:
        deltas.append(v - prev)
        prev = v
    return ipb.WindowReport(
        sequence=seq, records=valid, bytes=valid * 100, valid_latency_records=valid,
        min_latency=pairs[0][0], max_latency=pairs[-1][0],
        total_latency=sum(v * c for v, c in pairs), latency_delta=deltas,
        count=[c for _, c in pairs])


def run_named(query, pb, name, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        runs = [r for r in query.ListRuns(pb.ListRunsRequest(), timeout=10).runs
                if r.name == name]
        if runs:
            return runs[-1]
        time.sleep(0.05)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl")  # unused; accepted like the other tier tests
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-tier-isolation-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    ipb = importlib.import_module("perld.v1.ingest_pb2")
    irpc = importlib.import_module("perld.v1.ingest_pb2_grpc")
    rng = random.Random(25)

    def write(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    edge_log = os.path.join(tmp, "edge.log")
    root = Daemon(args.perld, os.path.join(tmp, "root"), config=write("root.yaml", ROOT_CONFIG))
    edge = Daemon(args.perld, os.path.join(tmp, "edge"),
                  config=write("edge.yaml", EDGE_CONFIG.format(root=root.grpc)), log=edge_log)
    channels = {root.grpc: [], edge.grpc: []}

    def channel(target):
        c = grpc.insecure_channel(target)
        channels[target].append(c)
        return c

    def opener(run, client):
        return ipb.IngestOpen(run_name=run, client_id=client, client_name=client,
                              mode=ipb.IngestOpen.MODE_WINDOWS, time_unit=pb.TIME_UNIT_NS)

    holder = None
    try:
        root_query = rpc.QueryStub(channel(root.grpc))
        # The root's run "blocked" has its one client: the edge's stream of
        # that run is refused (RESOURCE_EXHAUSTED) and retried, never opened.
        holder = IngestStream(irpc.IngestStub(channel(root.grpc)), ipb,
                              opener("blocked", "holder"))
        holder.recv()
        edge_ingest = irpc.IngestStub(channel(edge.grpc))
        blocked = IngestStream(edge_ingest, ipb, opener("blocked", "a"))
        blocked.recv()
        blocked.ask(window=window_msg(ipb, 1, [(1000 + i, 1) for i in range(BLOCKED_PAIRS)]))
        deadline = time.time() + 60
        sent = None
        while time.time() < deadline:
            sent = metric(edge.http, "perld_upstream_reports_sent_total")
            if sent is not None and sent >= 256:
                break
            time.sleep(0.1)
        check(sent is not None and sent >= 256,
              f"the edge filled the blocked run's stream ({sent} messages handed over)")

        # --- 1. Run "free" reaches the root promptly and exactly. ----------
        free = IngestStream(edge_ingest, ipb, opener("free", "b"))
        free.recv()
        sent_pairs = []
        for k in range(5):
            lat = [rng.randrange(1_000, 5_000_000) for _ in range(300)]
            pairs = merge_pairs({v: lat.count(v) for v in set(lat)})
            free.ask(window=window_msg(ipb, k + 1, pairs))
            sent_pairs.append(pairs)
            time.sleep(0.25)
        free.finish(5)
        want = merge_pairs(*sent_pairs)
        records = sum(c for _, c in want)
        run = run_named(root_query, pb, "free", 30)
        check(run is not None, "the root has run 'free' while the blocked stream is stuck")
        if run is not None:
            try:
                got = wait_ended(root_query, pb, run.id, 30)
            except RuntimeError as e:
                got = None
                check(False, f"the root's run 'free' ends: {e}")
            if got is not None:
                check(got.run.state == pb.RUN_STATE_FINISHED and got.total.records == records,
                      f"the root's run 'free' finished with its client's {records} records "
                      f"({got.total.records}, {pb.RunState.Name(got.run.state)} "
                      f"{got.run.failure_reason})")
                answer = root_query.GetPercentiles(pb.GetPercentilesRequest(
                    run=str(run.id), percentiles=PERCENTS), timeout=10)
                have = [p.latency for p in answer.percentiles]
                check(have == exact_percentiles(want, PERCENTS),
                      f"the root's percentiles of 'free' are its client's exactly ({have})")
        stuck = run_named(root_query, pb, "blocked", 5)
        clients = root_query.GetClients(pb.GetClientsRequest(run=str(stuck.id)),
                                        timeout=10).clients if stuck else []
        check([c.client_id for c in clients] == ["holder"],
              f"the blocked run's stream is still refused at the root "
              f"({[c.client_id for c in clients]})")

        # --- 2. The edge stops within closeTimeoutMs, the root frozen. -------
        blocked.finish(1)  # the edge's run ends; its stream cannot close
        for c in channels[edge.grpc]:
            c.close()  # an open connection holds the edge's stop for drainTimeoutMs
        root.proc.send_signal(signal.SIGSTOP)
        start = time.time()
        rc = edge.stop()
        took = time.time() - start
        check(rc == 0 and took < CLOSE_MS / 1000 + STOP_MARGIN_S,
              f"the edge stops within upstream.closeTimeoutMs ({CLOSE_MS} ms) + "
              f"{STOP_MARGIN_S} s while its root is frozen ({took:.2f} s, exit {rc})")
        with open(edge_log) as f:
            log = f.read()
        check("kept in the state database" in log,
              "the blocked run's unacknowledged messages stay in the edge's state database")
    finally:
        root.proc.send_signal(signal.SIGCONT)
        if holder is not None:
            holder.cancel()
        for c in channels[root.grpc] + channels[edge.grpc]:
            c.close()
        edge.stop()
        rc = root.stop()
        check(rc == 0, f"root: SIGTERM, exit {rc}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
