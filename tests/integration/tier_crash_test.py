#!/usr/bin/env python3
"""Tiers across crashes (README "Tiers beyond one machine").

An edge perld forwards its runs' windows to a root perld. Clients with
durable spools stream into the edge. The root's run must end with a total
equal to the clients' summed totals and percentiles equal to those of their
merged --distribution-out files -- zero lost, zero counted twice -- when:

  A. the edge is killed with SIGKILL twice while the clients stream, each
     time after it committed a checkpoint (it resumes its run; its stream to
     the root continues from its state database, and windows after the
     resumed cut were never forwarded);
  B. the root is killed with SIGKILL while the clients stream, after it
     committed a checkpoint of their run, and stays down
     until after the edge's run ended and the edge was stopped (SIGTERM: its
     unacknowledged window messages stay in its state database) and
     restarted; the root restarts last, resumes its run, and the edge resends.
     upstream.maxQueuedWindows is tiny and windows go in parts of 4 pairs, so
     messages also wait in the edge's state database while the root is down
     (past the stream's 256 unacknowledged ones) and are read back in turn.
  C. the edge is killed by the failpoint upstream-stored-before-send: window
     messages to the root committed in its state database, none of them
     sent yet; the restarted edge sends them.

  /usr/bin/python3 tests/integration/tier_crash_test.py \\
      --perld build/release/daemon/bench/perld --perlctl build/release/client/perlctl/perlctl
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import (PERCENTS, Daemon, check, exact_percentiles, finish,  # noqa: E402
                      free_port, merged_distributions, spooled_loads, wait_ended)

ROOT_CONFIG = """
reportingIntervalMs: 200
ingest:
  clientTimeoutMs: 120000
"""
EDGE_CONFIG = """
reportingIntervalMs: 200
ingest:
  clientTimeoutMs: 120000
upstream:
  target: {root}
  nodeId: edge-1
  maxPairsPerReport: 4
  maxQueuedWindows: 3
  closeTimeoutMs: {close_ms}
"""


def clients(perlctl, target, run, tmp, tag, seconds):
    return spooled_loads(perlctl, target, run, tmp, tag, ("raw", "windows"), seconds, 2)


def client_results(tag, procs):
    results = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        check(p.returncode == 0, f"{tag}: the client exits 0, everything acknowledged "
              f"({err.strip()[-300:]})")
        results.append(json.loads(out) if p.returncode == 0 and out.strip() else None)
    return results if all(results) else None


def root_run(query, pb, name, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        named = [r.id for r in query.ListRuns(pb.ListRunsRequest(), timeout=10).runs
                 if r.name == name]
        if named:
            check(len(named) == 1, f"one run named '{name}' (never a failed one and a new one): "
                  f"{named}")
            return named[0]
        time.sleep(0.1)
    raise RuntimeError(f"the root has no run '{name}'")


def verify(query, pb, tag, name, outs, results, where):
    run = wait_ended(query, pb, root_run(query, pb, name))
    pairs, records = merged_distributions(outs)
    total = sum(r["records"] for r in results)
    check(run.run.state == pb.RUN_STATE_FINISHED,
          f"{tag}: the {where} run finished ({run.run.failure_reason})")
    check(run.total.records == total == records,
          f"{tag}: {where} total {run.total.records} == the clients' {total}: zero lost, "
          "zero twice")
    got = query.GetPercentiles(pb.GetPercentilesRequest(run=str(run.run.id),
                                                        percentiles=PERCENTS))
    want = exact_percentiles(pairs, PERCENTS)
    check([p.latency for p in got.percentiles] == want,
          f"{tag}: every {where} percentile equals the merged distribution's: {want}")
    # The clients are rate-controlled: the run's response view (forwarded on
    # the run's own stream to the root) equals their response times too.
    pairs, records = merged_distributions(outs, "response")
    got = query.GetPercentiles(pb.GetPercentilesRequest(
        run=str(run.run.id), percentiles=PERCENTS, kind=pb.LATENCY_KIND_RESPONSE))
    want = exact_percentiles(pairs, PERCENTS)
    check(got.valid_latency_records == total == records and
          [p.latency for p in got.percentiles] == want,
          f"{tag}: the {where} response view: {got.valid_latency_records} records == the "
          f"clients' {records}, every percentile equals their response times': {want}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-tier-crash-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    import grpc
    root_listen = f"127.0.0.1:{free_port()}"
    edge_listen = f"127.0.0.1:{free_port()}"
    root_config = os.path.join(tmp, "root.yaml")
    edge_config = os.path.join(tmp, "edge.yaml")
    with open(root_config, "w") as f:
        f.write(ROOT_CONFIG)
    with open(edge_config, "w") as f:
        f.write(EDGE_CONFIG.format(root=root_listen, close_ms=1500))
    edge_log = os.path.join(tmp, "edge.log")

    def root():
        return Daemon(args.perld, os.path.join(tmp, "root-state"), config=root_config,
                      log=os.path.join(tmp, "root.log"), grpc_listen=root_listen)

    def edge(env=None):
        return Daemon(args.perld, os.path.join(tmp, "edge-state"), config=edge_config,
                      log=edge_log, grpc_listen=edge_listen, env=env)

    def log_count(text):
        with open(edge_log) as f:
            return f.read().count(text)

    r, e = root(), edge()
    rq = rpc.QueryStub(grpc.insecure_channel(root_listen))
    eq = rpc.QueryStub(grpc.insecure_channel(edge_listen))

    # --- A: the edge killed twice mid-stream -----------------------------------
    outs, procs = clients(args.perlctl, edge_listen, "edge-crash", tmp, "a", 7)
    for _ in range(2):
        time.sleep(2.0)
        # Killed after a checkpoint, so the run resumes from one (a kill
        # before the first is daemon_crash_test's "resumed empty").
        check(e.wait_checkpoint(), "A: the edge committed a checkpoint before the kill")
        e.proc.send_signal(signal.SIGKILL)
        e.proc.wait(timeout=30)
        time.sleep(0.3)
        e = edge()
    results = client_results("A", procs)
    if results:
        verify(eq, pb, "A", "edge-crash", outs, results, "edge")
        verify(rq, pb, "A", "edge-crash", outs, results, "root")
    resumed = log_count("resumed: its stream to")
    check(resumed == 2, f"A: the edge continued its stream to the root after each crash "
          f"({resumed} in its log)")

    # --- B: the root down from mid-stream until the edge's run ended -----------
    spilled_before = log_count("wait in the state database")
    root_checkpoints = perld_it.metric(r.http, "perld_ingest_checkpoints_total")
    outs, procs = clients(args.perlctl, edge_listen, "root-down", tmp, "b", 4)
    time.sleep(1.5)
    # After the root's first checkpoint: its run resumes from it (killed
    # before, it resumes empty and waits ingest.clientTimeoutMs for clients
    # it cannot name).
    check(r.wait_checkpoint(root_checkpoints), "B: the root committed a checkpoint before the kill")
    r.proc.send_signal(signal.SIGKILL)
    r.proc.wait(timeout=30)
    results = client_results("B", procs)
    if results:
        verify(eq, pb, "B", "root-down", outs, results, "edge")
    rc = e.stop()
    check(rc == 0, f"B: the edge stops on SIGTERM while the root is down (exit {rc})")
    check(log_count("kept in the state database") >= 1,
          "B: the edge kept the unacknowledged window messages in its state database")
    check(log_count("wait in the state database") > spilled_before,
          "B: past upstream.maxQueuedWindows the messages waited in the state database")
    e = edge()
    time.sleep(0.5)
    r = root()
    if results:
        verify(rq, pb, "B", "root-down", outs, results, "root")
    check(log_count("ended before perld stopped: resending") == 1,
          "B: the restarted edge resent the ended run's stored messages")

    # --- C: the edge killed with window messages stored, none sent -------------
    rc = e.stop()
    check(rc == 0, f"C: the edge stops before the failpoint run (exit {rc})")
    e = edge({"PERLD_FAILPOINT": "upstream-stored-before-send:3"})
    outs, procs = clients(args.perlctl, edge_listen, "stored-unsent", tmp, "c", 4)
    try:
        rc = e.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == -signal.SIGKILL and log_count("failpoint upstream-stored-before-send reached") == 1,
          f"C: the failpoint killed the edge with messages stored and unsent (exit {rc})")
    time.sleep(0.3)
    e = edge()
    results = client_results("C", procs)
    if results:
        verify(eq, pb, "C", "stored-unsent", outs, results, "edge")
        verify(rq, pb, "C", "stored-unsent", outs, results, "root")
    for name, d in (("edge", e), ("root", r)):
        rc = d.stop()
        check(rc == 0, f"{name}: SIGTERM, exit {rc}")
    if perld_it.failures:
        # What the daemons said went wrong, for a failure seen only in CI.
        for name in ("edge", "root"):
            with open(os.path.join(tmp, f"{name}.log")) as f:
                errors = [line.rstrip() for line in f if " error " in line]
            print(f"{name}.log errors ({len(errors)}):", *errors[-20:], sep="\n  ")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
