#!/usr/bin/env python3
"""Daemon state across crashes (README "Daemon state across crashes").

Three `perlctl load` clients (raw, windows, raw; each with a durable spool)
stream into one run on a fixed loopback port. perld is killed with SIGKILL
twice while they stream and restarted on the same state directory each
time: it resumes the run from its last checkpoint, the clients reconnect and
replay what it had not made durable. The run must end finished with a total
equal to the sum of the clients' own totals and percentiles equal to those
of their merged --distribution-out files: zero lost, zero counted twice.
Then the same with perld killed before the run's first checkpoint (its
reporting interval outlasts the clients): no client was told anything is
durable, so the run resumes empty and the clients replay everything. Then
the same with a daemon frozen (SIGSTOP) for many reporting intervals while
the clients keep recording.

  /usr/bin/python3 tests/integration/daemon_crash_test.py \\
      --perld build/release/daemon/bench/perld --perlctl build/release/client/perlctl/perlctl
"""
import argparse
import json
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import (PERCENTS, Daemon, check, exact_percentiles, finish,  # noqa: E402
                      free_port, merged_distributions, spooled_loads, wait_ended)

CONFIG = """
reportingIntervalMs: 200
ingest:
  clientTimeoutMs: 20000  # a run resumed empty waits this long for its clients
"""


def clients(perlctl, target, run, tmp, tag):
    return spooled_loads(perlctl, target, run, tmp, tag, ("raw", "windows", "raw"), 7, 2)


def wait_listed(query, pb, name, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if any(r.name == name for r in query.ListRuns(pb.ListRunsRequest(), timeout=10).runs):
            return True
        time.sleep(0.05)
    return False


def verify(query, pb, tag, outs, procs):
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        results.append(json.loads(out) if p.returncode == 0 and out.strip() else None)
        check(p.returncode == 0, f"{tag}: the client exits 0, everything acknowledged "
              f"({err.strip()[-300:]})")
    if not all(results):
        return
    run_ids = {r["runId"] for r in results}
    check(len(run_ids) == 1, f"{tag}: the clients stayed in one run {run_ids}")
    run_id = run_ids.pop()
    run = wait_ended(query, pb, run_id)
    pairs, records = merged_distributions(outs)
    total = sum(r["records"] for r in results)
    check(run.run.state == pb.RUN_STATE_FINISHED,
          f"{tag}: the run finished ({run.run.failure_reason})")
    check(run.total.records == total == records,
          f"{tag}: daemon total {run.total.records} == the clients' {total}: zero lost, "
          "zero twice")
    check(run.total.valid_latency_records == sum(c for _, c in pairs),
          f"{tag}: valid records == merged distribution size")
    got = query.GetPercentiles(pb.GetPercentilesRequest(run=str(run_id), percentiles=PERCENTS))
    want = exact_percentiles(pairs, PERCENTS)
    check([p.latency for p in got.percentiles] == want,
          f"{tag}: every percentile equals the merged distribution's: {want}")
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-crash-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    import grpc
    config = os.path.join(tmp, "perld.yaml")
    with open(config, "w") as f:
        f.write(CONFIG)
    state = os.path.join(tmp, "state")
    listen = f"127.0.0.1:{free_port()}"
    log = os.path.join(tmp, "perld.log")

    def start():
        return Daemon(args.perld, state, config=config, log=log, grpc_listen=listen)

    # --- kill -9 twice during a three-client ingest ------------------------------
    d = start()
    outs, procs = clients(args.perlctl, listen, "crash", tmp, "c")
    for _ in range(2):
        time.sleep(2.0)
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(timeout=30)
        time.sleep(0.3)
        d = start()
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))
    results = verify(query, pb, "kill -9 twice", outs, procs)
    if results:
        check(sum(r.get("reconnects", 0) for r in results) >= 6,
              f"every client reconnected after each crash "
              f"({[r.get('reconnects') for r in results]})")
    with open(log) as f:
        resumed = f.read().count("resumed from its checkpoint")
    check(resumed == 2, f"the daemon resumed the run after each crash ({resumed} in its log)")

    # --- kill -9 before the run's first checkpoint -------------------------------
    outs, procs = spooled_loads(args.perlctl, listen, "early", tmp, "e", ("raw", "windows"), 4,
                                2, interval=60)
    check(wait_listed(query, pb, "early"), "the clients created the run 'early'")
    time.sleep(1.0)
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(timeout=30)
    d = start()
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))
    verify(query, pb, "kill -9 before the first checkpoint", outs, procs)
    with open(log) as f:
        empty = f.read().count("resumed empty: perld stopped before its first checkpoint")
    check(empty == 1, f"the daemon resumed the run empty ({empty} in its log)")
    named = [r for r in query.ListRuns(pb.ListRunsRequest()).runs if r.name == "early"]
    check(len(named) == 1, f"one run named 'early', not a failed one and a new one ({len(named)})")

    # --- a daemon frozen for many intervals while clients record -----------------
    outs, procs = clients(args.perlctl, listen, "frozen", tmp, "f")
    time.sleep(1.5)
    os.kill(d.proc.pid, signal.SIGSTOP)
    time.sleep(2.5)  # about 12 reporting intervals
    os.kill(d.proc.pid, signal.SIGCONT)
    verify(query, pb, "frozen daemon", outs, procs)
    rc = d.stop()
    check(rc == 0, f"SIGTERM: exit {rc}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
