#!/usr/bin/env python3
"""What survives what (issue 24; README "Durability: what survives what").

perld is killed at named failpoints (PERLD_FAILPOINT, daemon/common/failpoint.h)
and by a simulated power cut, while `perlctl load` clients (raw with a
spool, windows in memory) stream into one run on a fixed loopback port; it
is restarted on the same state directory each time. The run must end
finished with a total equal to the clients' own and every percentile equal
to that of their merged --distribution-out data, and every client must exit
0 (everything acknowledged):

  A. checkpoint-after-commit-before-ack: a checkpoint committed, its
     durable acknowledgement never given;
  B. run-ended-before-remembered: every client closed and was acknowledged,
     the run ended, its final total never reached the state store: the
     restarted daemon resumes the run and ends it at once, exact;
  C. a power cut: the daemon runs with every file of its state directory
     kept as of its last fsync (tests/tools/powercut_preload.cc), is killed,
     and restarts on that image -- what a power loss leaves. Everything it
     had acknowledged durable must be there (with synchronous=NORMAL none
     of it was);
  D. a daemon that lost its state directory (wiped): a client that was told
     messages were durable ends within seconds with an error naming the
     run, the client and the lost range -- no reconnect storm, no new run
     of the same name; and one whose state directory was restored from an
     older copy: DATA_LOSS naming the lost range;
  E. RESOURCE_EXHAUSTED is transient: a client refused for
     limits.maxRunningRuns retries with backoff and gets in once a run ends.

  /usr/bin/python3 tests/integration/durability_test.py --perld build/release/daemon/bench/perld \\
      --perlctl build/release/client/perlctl/perlctl [--powercut build/.../libpowercut_preload.so]
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
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
  clientTimeoutMs: 60000
"""
MODES = ("raw", "windows-memory")


def verify(query, pb, tag, outs, procs):
    """Every client exits 0 and the run's total and percentiles are theirs."""
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            err += " (killed: still running after 120 s)"
        results.append(json.loads(out) if p.returncode == 0 and out.strip() else None)
        check(p.returncode == 0, f"{tag}: the client exits 0, everything acknowledged "
              f"({err.strip()[-300:]})")
    if not all(results):
        return None
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
    got = query.GetPercentiles(pb.GetPercentilesRequest(run=str(run_id), percentiles=PERCENTS))
    want = exact_percentiles(pairs, PERCENTS)
    check([p.latency for p in got.percentiles] == want,
          f"{tag}: every percentile equals the merged distribution's: {want}")
    return results


def wait_dead(d, tag, seconds=30):
    try:
        rc = d.proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        d.proc.kill()
        rc = None
    check(rc == -signal.SIGKILL, f"{tag}: the failpoint killed the daemon (exit {rc})")


def power_image(state, shadow):
    """Rebuilds `state` as a power cut leaves it: each file as of its last
    sync (its copy in `shadow`), files never synced gone. SQLite's -shm is
    shared memory, rebuilt at open; the lock file holds nothing."""
    for name in os.listdir(state):
        path = os.path.join(state, name)
        if name.endswith("-shm") or name == "perld.lock" or os.path.isdir(path):
            continue
        copy = os.path.join(shadow, name)
        if os.path.exists(copy):
            shutil.copyfile(copy, path)
        else:
            os.remove(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    ap.add_argument("--powercut", help="libpowercut_preload.so (C is skipped without it)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-durability-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    import grpc
    config = os.path.join(tmp, "perld.yaml")
    with open(config, "w") as f:
        f.write(CONFIG)
    listen = f"127.0.0.1:{free_port()}"
    log = os.path.join(tmp, "perld.log")

    def start(state, env=None):
        return Daemon(args.perld, os.path.join(tmp, state), config=config, log=log,
                      grpc_listen=listen, env=env)

    def log_has(text):
        with open(log) as f:
            return text in f.read()

    # --- A: killed after a checkpoint's commit, before its acknowledgement -----
    d = start("a", {"PERLD_FAILPOINT": "checkpoint-after-commit-before-ack:4"})
    outs, procs = spooled_loads(args.perlctl, listen, "fp-ack", tmp, "a", MODES, 4, 2)
    wait_dead(d, "A")
    check(log_has("failpoint checkpoint-after-commit-before-ack reached"),
          "A: the daemon died at checkpoint-after-commit-before-ack")
    d = start("a")
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))
    verify(query, pb, "A checkpoint-after-commit-before-ack", outs, procs)
    d.stop()

    # --- B: killed after the run ended, before its total was stored ------------
    d = start("b", {"PERLD_FAILPOINT": "run-ended-before-remembered"})
    outs, procs = spooled_loads(args.perlctl, listen, "fp-end", tmp, "b", MODES, 2, 2)
    wait_dead(d, "B", seconds=60)
    check(log_has("failpoint run-ended-before-remembered reached"),
          "B: the daemon died at run-ended-before-remembered")
    d = start("b")
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))
    verify(query, pb, "B run-ended-before-remembered", outs, procs)
    d.stop()

    # --- C: a power cut ---------------------------------------------------------
    if args.powercut:
        state, shadow = os.path.join(tmp, "c"), os.path.join(tmp, "c-shadow")
        os.makedirs(shadow)
        d = start("c", {"LD_PRELOAD": os.path.abspath(args.powercut),
                        "PERLD_POWERCUT_WATCH": os.path.abspath(state),
                        "PERLD_POWERCUT_SHADOW": os.path.abspath(shadow)})
        outs, procs = spooled_loads(args.perlctl, listen, "power", tmp, "c", MODES, 5, 2)
        time.sleep(2.5)  # about two checkpoints of the 1 s client interval
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(timeout=30)
        power_image(state, shadow)
        d = start("c")
        query = rpc.QueryStub(grpc.insecure_channel(d.grpc))
        results = verify(query, pb, "C power cut", outs, procs)
        if results:
            check(sum(r.get("reconnects", 0) for r in results) >= 2,
                  f"C: the clients reconnected after the power cut "
                  f"({[r.get('reconnects') for r in results]})")
        d.stop()
    else:
        print("skip C: no --powercut library (sanitizer build)")

    # --- D: the state directory lost while a client streams ---------------------
    d = start("d")
    out = os.path.join(tmp, "d.json")
    p = subprocess.Popen([args.perlctl, "--target", listen, "--json", "load", "-size", "100",
                          "-time", "ns", "-writers", "1", "-seconds", "20", "-throughput", "1",
                          "--run", "wiped", "--mode", "windows", "-interval", "1",
                          "--distribution-out", out], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)  # windows acknowledged durable by checkpoints
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(timeout=30)
    shutil.rmtree(os.path.join(tmp, "d"))
    d = start("d")
    began = time.time()
    try:
        stdout, stderr = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        stdout, stderr = p.communicate()
    took = time.time() - began
    summary = json.loads(stdout) if stdout.strip() else {}
    error = summary.get("error", "") + " " + stderr
    check(p.returncode == 1 and took < 10,
          f"D: the client ends with exit 1 within seconds ({took:.1f} s, exit {p.returncode})")
    check("unknown to this daemon" in error or "were lost" in error,
          f"D: its error names the lost run ({error.strip()[:300]})")
    check(summary.get("reconnects", 99) < 10,
          f"D: no reconnect storm ({summary.get('reconnects')} reconnects)")
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))
    listed = query.ListRuns(pb.ListRunsRequest(), timeout=10)
    check(all(r.name != "wiped" for r in listed.runs),
          f"D: no new run named 'wiped' ({[r.name for r in listed.runs]})")
    d.stop()

    # --- D2: the state directory restored from an older copy -------------------
    d = start("d2")
    p = subprocess.Popen([args.perlctl, "--target", listen, "--json", "load", "-size", "100",
                          "-time", "ns", "-writers", "1", "-seconds", "20", "-throughput", "1",
                          "--run", "restored", "--mode", "windows", "-interval", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.6)  # a checkpoint or so
    os.kill(d.proc.pid, signal.SIGSTOP)  # a consistent copy: nothing writes now
    shutil.copytree(os.path.join(tmp, "d2"), os.path.join(tmp, "d2-old"))
    os.kill(d.proc.pid, signal.SIGCONT)
    time.sleep(2.5)  # more windows acknowledged durable after the copy
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(timeout=30)
    shutil.rmtree(os.path.join(tmp, "d2"))
    shutil.copytree(os.path.join(tmp, "d2-old"), os.path.join(tmp, "d2"))
    os.remove(os.path.join(tmp, "d2", "perld.lock"))
    d = start("d2")
    try:
        stdout, stderr = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        stdout, stderr = p.communicate()
    summary = json.loads(stdout) if stdout.strip() else {}
    error = summary.get("error", "") + " " + stderr
    check(p.returncode == 1 and "DATA_LOSS" in error and "were lost on the daemon's side" in error,
          f"D2: a restored older state directory: the client ends with DATA_LOSS naming the "
          f"range ({error.strip()[:300]})")
    d.stop()

    # --- E: RESOURCE_EXHAUSTED is retried --------------------------------------
    with open(config, "a") as f:
        f.write("limits:\n  maxRunningRuns: 1\n")
    d = start("e")
    bench = subprocess.run([args.perlctl, "--target", listen, "bench", "-writers", "1",
                            "-seconds", "2", "-time", "ns", "--name", "occupies-the-slot"],
                           capture_output=True, text=True, timeout=30)
    check(bench.returncode == 0, f"E: a 2 s bench runs ({bench.stderr.strip()[:200]})")
    began = time.time()
    load = subprocess.run([args.perlctl, "--target", listen, "--json", "load", "-size", "100",
                           "-time", "ns", "-writers", "1", "-records", "1000", "--run", "waits"],
                          capture_output=True, text=True, timeout=60)
    summary = json.loads(load.stdout) if load.stdout.strip() else {}
    check(load.returncode == 0 and summary.get("records") == 1000 and time.time() - began > 0.5,
          f"E: a load refused for limits.maxRunningRuns retried and got in after the bench "
          f"(exit {load.returncode}, {summary.get('reconnects')} reconnects, last error "
          f"{summary.get('lastStreamError', '')[:120]})")
    check("RESOURCE_EXHAUSTED" in summary.get("lastStreamError", ""),
          "E: it was refused with RESOURCE_EXHAUSTED first")
    rc = d.stop()
    check(rc == 0, f"SIGTERM: exit {rc}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
