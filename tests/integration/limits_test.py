#!/usr/bin/env python3
"""Security and resource limits (issue 24) against the real perld, through
Debian's grpcio and perlctl:

  * every input has a cap: labels (count, key and value bytes), names (run,
    client name, client id, bench name) and percentile lists on IngestOpen
    and StartBench -- at the cap accepted, one over refused with
    INVALID_ARGUMENT naming the key, and counted on /metrics; GetPercentiles
    and GetClients share the percentile cap;
  * the runs' memory budget (limits.maxMemoryBytes): runs reserve the worst
    case of their caps; one that would pass the budget is refused with
    RESOURCE_EXHAUSTED naming the key and what it needs, counted, and an
    ended run gives its share back;
  * ListRuns pages: more runs than a page come back whole, in order, through
    grpcio's page tokens and through `perlctl runs`;
  * gRPC caps: grpc.maxConcurrentStreams holds a connection's extra calls
    (another connection is served); a client pinging faster than
    grpc.keepaliveMinPingIntervalMs gets GOAWAY while a quiet one does not,
    and the same pings pass where the key allows them; with grpc.maxThreads
    small, Ingest streams (callback reactors) still open: they hold no
    thread, and the daemon's thread count does not grow with them.

    /usr/bin/python3 tests/integration/limits_test.py --perld PATH --perlctl PATH
Exit 0 when every check passes; every wait is bounded (about 10 s in all).
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import Daemon, IngestStream, check, finish, load_stubs  # noqa: E402

import grpc  # noqa: E402

MIB = 1 << 20
# A windows-mode ns run reserves exactLatencyMaxMemoryMB + exactTotalLatencyMaxMemoryMB
# = 24 MiB here; a ms bench run 180001 x 8 B + totalMaxHashMapSizeMB 16 MiB + 1 x 1024 x 40 B.
CONFIG = f"""reportingIntervalMs: 200
drainTimeoutMs: 1000
exactLatencyMaxMemoryMB: 8
exactTotalLatencyMaxMemoryMB: 16
totalMaxHashMapSizeMB: 16
maxPendingPerWorker: 1024
limits:
  maxRunningRuns: 64
  maxLabels: 4
  maxLabelKeyBytes: 16
  maxLabelValueBytes: 32
  maxNameBytes: 40
  maxPercentiles: 30
  maxMemoryBytes: {50 * MIB}
grpc:
  maxConcurrentStreams: 4
  keepaliveMinPingIntervalMs: 5000
  keepaliveMaxPingStrikes: 1
"""


def metric(text, name, **labels):
    """The value of `name{labels}` in an exposition text (None when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(name + ("{" + want + "}" if want else " ")):
            return float(line.split()[-1])
    return None


def code_of(fn):
    try:
        fn()
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details() or ""


# gRPC's own clients ping at most once a second (once the server allows
# pings without calls): against a 5 s minimum and one strike allowed, the
# second early ping, about 2 s in, ends the connection; gRPC's defaults
# (5 minutes, 2 strikes) end it after 3 s.
PINGING = [("grpc.keepalive_time_ms", 100), ("grpc.keepalive_permit_without_calls", 1),
           ("grpc.http2.max_pings_without_data", 0)]
KEEPALIVE_SECONDS = 4.0  # past gRPC's default GOAWAY (3 s) with a margin


class Connection:
    """A channel with its own connection and no calls, recording its states."""

    def __init__(self, d, options):
        self.began = time.time()
        self.states = []
        self.channel = grpc.insecure_channel(
            d.grpc, options=options + [("grpc.use_local_subchannel_pool", 1)])
        self.channel.subscribe(self.states.append, try_to_connect=True)

    def names(self):
        return [s.name for s in self.states]

    def went_idle(self):
        """True when the connection was READY and then dropped (GOAWAY)."""
        names = self.names()
        return "READY" in names and names.index("READY") < len(names) - 1

    def close(self):
        self.channel.unsubscribe(self.states.append)
        self.channel.close()


def wait_keepalive(*connections, until_idle=None):
    """Waits until the connections have been up KEEPALIVE_SECONDS (or, with
    `until_idle`, until that one went idle, 10 s at most), then closes them."""
    began = min(c.began for c in connections)
    if until_idle is not None:
        while time.time() < began + 10 and not until_idle.went_idle():
            time.sleep(0.05)
    else:
        time.sleep(max(0.0, began + KEEPALIVE_SECONDS - time.time()))
    for c in connections:
        c.close()


def wait_none_running(query, pb, kind=None, seconds=30):
    """Waits until no run (of source `kind`) is running."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        running = query.ListRuns(pb.ListRunsRequest(state=pb.RUN_STATE_RUNNING, page_size=1000),
                                 timeout=10).runs
        if not [r for r in running if kind is None or r.source == kind]:
            return
        time.sleep(0.02)
    raise RuntimeError("runs still running")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pb, rpc, _ = load_stubs(tmp)
        ipb = importlib.import_module("perld.v1.ingest_pb2")
        irpc = importlib.import_module("perld.v1.ingest_pb2_grpc")
        config = os.path.join(tmp, "perld.yaml")
        with open(config, "w") as f:
            f.write(CONFIG)
        d = Daemon(args.perld, os.path.join(tmp, "state"), config)
        try:
            run_checks(d, args, pb, rpc, ipb, irpc)
        finally:
            rc = d.stop()
        check(rc == 0, f"SIGTERM: exit {rc}")
        # grpc.maxThreads: a quota for gRPC's threads; streams hold none.
        with open(config, "w") as f:
            f.write("drainTimeoutMs: 500\ngrpc:\n  maxThreads: 6\n"
                    "  keepaliveMinPingIntervalMs: 500\n  keepaliveMaxPingStrikes: 1\n")
        d = Daemon(args.perld, os.path.join(tmp, "state2"), config)
        try:
            thread_checks(d, pb, rpc, ipb, irpc)
        finally:
            rc = d.stop()
        check(rc == 0, f"SIGTERM: exit {rc}")
    return finish()


def threads_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def thread_checks(d, pb, rpc, ipb, irpc):
    allowed = Connection(d, PINGING)  # the same pings, allowed here
    channel = grpc.insecure_channel(d.grpc)
    ingest = irpc.IngestStub(channel)
    opened, refused = [], []
    before = threads_of(d.proc.pid)
    for i in range(8):
        s = IngestStream(ingest, ipb, ipb.IngestOpen(run_name="threads", client_id=f"t{i}",
                                                     mode=ipb.IngestOpen.MODE_RAW), timeout=10)
        try:
            s.recv()
            opened.append(s)
        except grpc.RpcError as e:
            refused.append((e.code(), e.details()))
    during = threads_of(d.proc.pid)
    check(len(opened) == 8 and not refused and during < before + 8,
          f"grpc.maxThreads 6: 8 Ingest streams open, holding no thread each "
          f"({len(opened)} opened, {refused[:1]}; threads {before} -> {during})")
    for s in opened:
        s.cancel()
    deadline = time.time() + 10
    code = None
    while time.time() < deadline and code != grpc.StatusCode.OK:
        code, _ = code_of(lambda: rpc.QueryStub(channel).GetRun(
            pb.GetRunRequest(run="threads"), timeout=2))
        time.sleep(0.05)
    check(code == grpc.StatusCode.OK, "once the streams end their threads serve calls again")
    wait_keepalive(allowed)
    check(not allowed.went_idle(),
          f"with grpc.keepaliveMinPingIntervalMs 500 the same pings are allowed: {allowed.names()}")


def run_checks(d, args, pb, rpc, ipb, irpc):
    # Keepalive abuse runs beside the other checks (it takes seconds): a
    # connection that pings every second without a call, and one that does not.
    pinging, quiet = Connection(d, PINGING), Connection(d, [])
    channel = grpc.insecure_channel(d.grpc)
    grpc.channel_ready_future(channel).result(timeout=10)
    ingest = irpc.IngestStub(channel)
    query = rpc.QueryStub(channel)
    control = rpc.ControlStub(channel)
    NS, WINDOWS = pb.TIME_UNIT_NS, ipb.IngestOpen.MODE_WINDOWS

    def metrics():
        return urllib.request.urlopen(f"http://{d.http}/metrics", timeout=10).read().decode()

    def opener(run, client, **kw):
        return ipb.IngestOpen(run_name=run, client_id=client, mode=WINDOWS, time_unit=NS, **kw)

    def open_status(msg):
        s = IngestStream(ingest, ipb, msg, timeout=10)
        try:
            s.recv()
            return grpc.StatusCode.OK, "", s
        except grpc.RpcError as e:
            return e.code(), e.details() or "", None

    # --- every input has a cap: IngestOpen ----------------------------------
    at_cap = opener("n" * 40, "c" * 40, client_name="h" * 40,
                    labels={f"k{i}" + "x" * 14: "v" * 32 for i in range(4)},
                    percentiles=[1 + i for i in range(30)])
    code, detail, good = open_status(at_cap)
    check(code == grpc.StatusCode.OK, f"an open at every cap is accepted ({detail})")
    over = [
        ("run_name", opener("n" * 41, "c1"), "limits.maxNameBytes"),
        ("client_id", opener("r", "c" * 41), "limits.maxNameBytes"),
        ("client_name", opener("r", "c2", client_name="h" * 41), "limits.maxNameBytes"),
        ("5 labels", opener("r", "c3", labels={f"k{i}": "v" for i in range(5)}),
         "limits.maxLabels"),
        ("a 17-byte key", opener("r", "c4", labels={"k" * 17: "v"}), "limits.maxLabelKeyBytes"),
        ("a 33-byte value", opener("r", "c5", labels={"k": "v" * 33}),
         "limits.maxLabelValueBytes"),
        ("31 percentiles", opener("r", "c6", percentiles=[1 + i for i in range(31)]),
         "limits.maxPercentiles"),
        # Issue 24's example: half a million percentiles (that many series per run).
        ("500,000 percentiles",
         opener("r", "c7", percentiles=[i / 10_000 for i in range(1, 500_001)]),
         "limits.maxPercentiles"),
    ]
    for what, msg, key in over:
        code, detail, _ = open_status(msg)
        check(code == grpc.StatusCode.INVALID_ARGUMENT and key in detail,
              f"IngestOpen with {what}: INVALID_ARGUMENT naming {key} ({detail[:90]})")
    text = metrics()
    check(metric(text, "perld_ingest_refused_total", reason="input_limit") == len(over),
          f"the {len(over)} IngestOpen refusals are counted: "
          f"{metric(text, 'perld_ingest_refused_total', reason='input_limit')}")
    check(not any(r.name == "r" for r in query.ListRuns(pb.ListRunsRequest()).runs),
          "no run was created by a refused open")

    # --- StartBench -----------------------------------------------------------
    def bench(name="b", labels=None, records=1):
        return control.StartBench(pb.StartBenchRequest(
            name=name, labels=labels or {}, options=pb.BenchOptions(writers=1, records=records)),
            timeout=10)

    code, detail = code_of(lambda: bench("b" * 40, {f"k{i}": "v" * 32 for i in range(4)}))
    check(code == grpc.StatusCode.OK, f"StartBench at the caps is accepted ({detail})")
    bench_over = [("a 41-byte name", dict(name="b" * 41), "limits.maxNameBytes"),
                  ("5 labels", dict(labels={f"k{i}": "v" for i in range(5)}), "limits.maxLabels"),
                  ("a 17-byte key", dict(labels={"k" * 17: "v"}), "limits.maxLabelKeyBytes"),
                  ("a 33-byte value", dict(labels={"k": "v" * 33}), "limits.maxLabelValueBytes")]
    for what, kw, key in bench_over:
        code, detail = code_of(lambda: bench(**kw))
        check(code == grpc.StatusCode.INVALID_ARGUMENT and key in detail,
              f"StartBench with {what}: INVALID_ARGUMENT naming {key} ({detail[:90]})")
    text = metrics()
    check(metric(text, "perld_runs_refused_total", reason="input_limit") == len(bench_over),
          f"the {len(bench_over)} StartBench refusals are counted: "
          f"{metric(text, 'perld_runs_refused_total', reason='input_limit')}")

    # --- one percentile cap for queries ----------------------------------------
    run_id = [r.id for r in query.ListRuns(pb.ListRunsRequest()).runs if r.name == "n" * 40][0]
    for rpc_name, call in (
            ("GetPercentiles", lambda p: query.GetPercentiles(
                pb.GetPercentilesRequest(run=str(run_id), percentiles=p), timeout=10)),
            ("GetClients", lambda p: query.GetClients(
                pb.GetClientsRequest(run=str(run_id), percentiles=p), timeout=10))):
        code, detail = code_of(lambda: call([1 + i for i in range(31)]))
        check(code == grpc.StatusCode.INVALID_ARGUMENT and "limits.maxPercentiles" in detail,
              f"{rpc_name} with 31 percentiles: INVALID_ARGUMENT ({detail[:80]})")
        code, detail = code_of(lambda: call([1 + i for i in range(30)]))
        check(code == grpc.StatusCode.OK, f"{rpc_name} with 30 percentiles answers ({detail})")

    # --- the runs' memory budget -------------------------------------------------
    wait_none_running(query, pb, kind=pb.RUN_SOURCE_BENCH)
    # `good` holds 24 MiB; one more windows run fits (48 of 50 MiB), a third does not.
    code, detail, second = open_status(opener("second", "s"))
    check(code == grpc.StatusCode.OK, f"a second 24 MiB run fits the 50 MiB budget ({detail})")
    code, detail, _ = open_status(opener("third", "t"))
    check(code == grpc.StatusCode.RESOURCE_EXHAUSTED and "limits.maxMemoryBytes" in detail and
          f"needs {24 * MIB} bytes" in detail and "exactTotalLatencyMaxMemoryMB" in detail,
          f"a third is refused: RESOURCE_EXHAUSTED naming the key, its need and the caps "
          f"({detail[:160]})")
    code, detail = code_of(lambda: bench())
    check(code == grpc.StatusCode.RESOURCE_EXHAUSTED and "limits.maxMemoryBytes" in detail and
          "totalMaxHashMapSizeMB" in detail,
          f"so is a bench run that needs 17.4 MiB ({detail[:120]})")
    text = metrics()
    check(metric(text, "perld_runs_refused_total", reason="memory") == 2,
          f"both counted: perld_runs_refused_total{{reason=\"memory\"}} "
          f"{metric(text, 'perld_runs_refused_total', reason='memory')}")
    check(metric(text, "perld_run_memory_reserved_bytes") == 48 * MIB and
          metric(text, "perld_run_memory_budget_bytes") == 50 * MIB,
          f"reserved {metric(text, 'perld_run_memory_reserved_bytes')} of "
          f"{metric(text, 'perld_run_memory_budget_bytes')}")
    reply = second.finish(0)
    check(reply is not None, "the second run's client closes")
    second_id = [r.id for r in query.ListRuns(pb.ListRunsRequest()).runs if r.name == "second"][0]
    deadline = time.time() + 10
    while time.time() < deadline and query.GetRun(pb.GetRunRequest(
            run=str(second_id)), timeout=10).run.state == pb.RUN_STATE_RUNNING:
        time.sleep(0.02)
    code, detail, third = open_status(opener("third", "t"))
    check(code == grpc.StatusCode.OK,
          f"once it has ended its share is free: the third run starts ({detail})")
    check(metric(metrics(), "perld_run_memory_reserved_bytes") == 48 * MIB,
          "reserved again 48 MiB")
    third.finish(0)
    good.finish(0)

    # --- ListRuns pages --------------------------------------------------------
    before = {r.id for r in query.ListRuns(pb.ListRunsRequest(page_size=1000)).runs}
    started = 0
    deadline = time.time() + 30
    while started < 120 and time.time() < deadline:
        # Two bench runs fit the budget at once: past it, wait for one to end.
        code, _ = code_of(lambda: bench(f"page{started}"))
        if code == grpc.StatusCode.OK:
            started += 1
        else:
            time.sleep(0.005)
    check(started == 120, f"120 short runs started ({started})")
    wait_none_running(query, pb)
    first = query.ListRuns(pb.ListRunsRequest(), timeout=10)
    check(len(first.runs) == 100 and first.next_page_token != "",
          f"ListRuns without a page size: a page of 100 and a token "
          f"({len(first.runs)}, '{first.next_page_token}')")
    ids, token, pages = [], "", 0
    while pages < 100:
        page = query.ListRuns(pb.ListRunsRequest(page_size=7, page_token=token), timeout=10)
        ids += [r.id for r in page.runs]
        pages += 1
        token = page.next_page_token
        if not token:
            break
    total = len(before) + 120
    check(len(ids) == total and ids == sorted(ids) and len(set(ids)) == total,
          f"pages of 7 return all {total} runs once, in id order ({len(ids)} in {pages} pages)")
    filtered = query.ListRuns(pb.ListRunsRequest(state=pb.RUN_STATE_FINISHED, page_size=1000))
    check(not filtered.next_page_token, "a page that holds the rest has no token")
    code, _ = code_of(lambda: query.ListRuns(pb.ListRunsRequest(page_token="nope")))
    check(code == grpc.StatusCode.INVALID_ARGUMENT, "a token ListRuns did not give: INVALID_ARGUMENT")
    out = subprocess.run([args.perlctl, "--target", d.grpc, "--json", "runs"],
                         capture_output=True, text=True, timeout=30)
    listed = [r["id"] for r in json.loads(out.stdout)["runs"]] if out.returncode == 0 else []
    check(listed == ids, f"perlctl runs follows the pages: {len(listed)} of {total} runs")

    # --- grpc.maxConcurrentStreams: a connection's 5th call waits -----------------
    held = opener("held", "h")
    code, detail, holder = open_status(held)
    check(code == grpc.StatusCode.OK, f"a run to watch ({detail})")
    # Its own connection (channels of one process share connections otherwise).
    watch_channel = grpc.insecure_channel(d.grpc, options=[("grpc.use_local_subchannel_pool", 1)])
    grpc.channel_ready_future(watch_channel).result(timeout=10)
    watcher = rpc.QueryStub(watch_channel)
    watches = [watcher.WatchRun(pb.WatchRunRequest(run="held"), timeout=30) for _ in range(4)]
    time.sleep(0.3)  # the 4 streams are open
    code, _ = code_of(lambda: watcher.GetRun(pb.GetRunRequest(run="held"), timeout=1))
    check(code == grpc.StatusCode.DEADLINE_EXCEEDED,
          f"a 5th call on the connection waits for a stream (grpc.maxConcurrentStreams 4): {code}")
    code, detail = code_of(lambda: query.GetRun(pb.GetRunRequest(run="held"), timeout=1))
    check(code == grpc.StatusCode.OK, f"another connection is served meanwhile ({code} {detail})")
    watches[0].cancel()
    code, detail = code_of(lambda: watcher.GetRun(pb.GetRunRequest(run="held"), timeout=5))
    check(code == grpc.StatusCode.OK,
          f"once one stream ends the connection serves the next call ({code} {detail})")
    for w in watches[1:]:
        w.cancel()
    watch_channel.close()
    holder.finish(0)

    # --- keepalive enforcement: too many pings -> GOAWAY --------------------------
    wait_keepalive(pinging, quiet, until_idle=pinging)
    check(pinging.went_idle(),
          f"a client pinging every second (grpc.keepaliveMinPingIntervalMs 5000) gets GOAWAY "
          f"(too_many_pings): {pinging.names()}")
    check(not quiet.went_idle(), f"a client that does not ping keeps its connection: {quiet.names()}")


if __name__ == "__main__":
    sys.exit(main())
