"""The SBM-like aggregator and tiers of perld, end to end over loopback, from
Debian's grpcio (/usr/bin/python3):

- tiers: three edge daemons (upstream.target = a root daemon), clients on
  every edge (windows and raw mode, different distributions, several
  intervals); the root's run total and percentiles equal the merge of every
  client's raw data exactly, the edges' own runs equal their clients', and
  the root's run counts the edges as its clients;
- aggregate windows: a windows run in ns uses hybrid pages; each periodic
  window says how many clients contributed; a report whose client window
  ended before the daemon's interval began is counted late (Query and
  /metrics);
- a run whose only client sent nothing ends finished with zero records;
- the edges' upstream counters in /metrics;
- memory caps: one-value-per-page windows past exactLatencyMaxMemoryMB are
  reported whole, then the cache is released (counted); the total prints
  and resets on its own cap; RSS stays bounded over many intervals.

  /usr/bin/python3 tests/integration/aggregator_test.py --perld build/release/daemon/bench/perld
"""
import argparse
import importlib
import os
import random
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import check, Daemon, IngestStream as Stream, wait_ended, exact_percentiles  # noqa: E402,E501

import grpc  # noqa: E402

PERCENTS = [1, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.99, 100]
INTERVAL_MS = 200
ROOT_CONFIG = f"""
reportingIntervalMs: {INTERVAL_MS}
timeUnit: ns
ingest:
  clientTimeoutMs: 2000
"""
WINDOWS = 100
CAPPED = f"""
reportingIntervalMs: {INTERVAL_MS}
timeUnit: ns
exactLatencyMaxMemoryMB: 1
exactTotalLatencyMaxMemoryMB: 4
ingest:
  clientBreakdownMaxMemoryMB: 1
retention:
  maxWindowsPerRun: 1000
"""
EDGE_CONFIG = """
reportingIntervalMs: {interval}
timeUnit: ns
upstream:
  target: {root}
  nodeId: edge-{n}
  maxPairsPerReport: 500
  closeTimeoutMs: 20000
"""


def distribution(rng, shape, n):
    """n raw latencies (ns) of one shape."""
    if shape == "contiguous":
        base = rng.randrange(10_000, 11_000)
        return [base + i for i in range(n)]
    if shape == "one-per-page":
        return [i * 256 + rng.randrange(256) for i in range(n)]
    if shape == "lognormal":
        return [int(min(rng.lognormvariate(11, 0.8), 4_000_000)) + 50_000 for _ in range(n)]
    # heavy sparse tail: a dense head, 2% spread over nine decades
    return [rng.randrange(10**9) if rng.random() < 0.02 else 1000 + rng.randrange(2000)
            for _ in range(n)]


def pairs_of(latencies):
    counts = {}
    for v in latencies:
        counts[v] = counts.get(v, 0) + 1
    return sorted(counts.items())


def window_msg(ipb, seq, pairs, end_unix_ms=0):
    valid = sum(c for _, c in pairs)
    deltas, prev = [], 0
    for v, _ in pairs:
        deltas.append(v - prev)
        prev = v
    return ipb.WindowReport(
        sequence=seq, records=valid, bytes=valid * 100, valid_latency_records=valid,
        min_latency=pairs[0][0] if pairs else 0, max_latency=pairs[-1][0] if pairs else 0,
        total_latency=sum(v * c for v, c in pairs), latency_delta=deltas,
        count=[c for _, c in pairs], end_unix_ms=end_unix_ms)


def batch_msg(ipb, seq, latencies):
    deltas, prev = [], 0
    for v in latencies:
        deltas.append(v - prev)
        prev = v
    return ipb.TimestampBatch(sequence=seq, count=len(latencies), latency_delta=deltas,
                              constant_records=1, constant_bytes=100)


def merge(*pair_lists):
    total = {}
    for pairs in pair_lists:
        for v, c in pairs:
            total[v] = total.get(v, 0) + c
    return sorted(total.items())


def run_named(query, pb, name, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        runs = [r for r in query.ListRuns(pb.ListRunsRequest(), timeout=10).runs if r.name == name]
        if runs:
            return runs[-1]
        time.sleep(0.05)
    return None


def metric(http, name):
    text = urllib.request.urlopen(f"http://{http}/metrics", timeout=10).read().decode()
    return [line for line in text.splitlines() if line.startswith(name)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--sanitized", action="store_true", help="perld is a sanitizer build")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-aggregator-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    ipb = importlib.import_module("perld.v1.ingest_pb2")
    irpc = importlib.import_module("perld.v1.ingest_pb2_grpc")
    rng = random.Random(11)

    def write(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    root = Daemon(args.perld, os.path.join(tmp, "root"), config=write("root.yaml", ROOT_CONFIG))
    edges = []
    try:
        for n in range(3):
            cfg = write(f"edge{n}.yaml", EDGE_CONFIG.format(interval=INTERVAL_MS + 50 * n,
                                                            root=root.grpc, n=n))
            edges.append(Daemon(args.perld, os.path.join(tmp, f"edge{n}"), config=cfg))
        root_query = rpc.QueryStub(grpc.insecure_channel(root.grpc))

        # --- Tiers: clients on every edge, several intervals each. ---------
        def opener(client, mode):
            return ipb.IngestOpen(run_name="tiered", client_id=client, client_name=client,
                                  mode=mode, time_unit=pb.TIME_UNIT_NS)

        shapes = ["contiguous", "one-per-page", "lognormal", "heavy-tail"]
        everything = []
        per_edge = []
        streams = []
        for n, edge in enumerate(edges):
            stub = irpc.IngestStub(grpc.insecure_channel(edge.grpc))
            mine = []
            for k in range(2):
                raw = n == 2 and k == 1  # one raw client: its edge records timestamps
                mode = ipb.IngestOpen.MODE_RAW if raw else ipb.IngestOpen.MODE_WINDOWS
                s = Stream(stub, ipb, opener(f"e{n}c{k}", mode))
                s.recv()  # opened
                streams.append((s, raw, shapes[(n + k) % 4], mine))
            per_edge.append(mine)
        for step in range(5):
            for s, raw, shape, mine in streams:
                lat = distribution(rng, shape, 700)
                if raw:
                    r = s.ask(batch=batch_msg(ipb, step + 1, lat))
                else:
                    r = s.ask(window=window_msg(ipb, step + 1, pairs_of(lat)))
                check(r.ack.acked_sequence == step + 1, f"edge client step {step} acknowledged")
                mine.append(pairs_of(lat))
                everything.append(pairs_of(lat))
            time.sleep(INTERVAL_MS / 1000 * 0.6)
        for s, _, _, _ in streams:
            s.finish(5)

        # Each edge's own run equals its clients' data.
        for n, edge in enumerate(edges):
            q = rpc.QueryStub(grpc.insecure_channel(edge.grpc))
            run = run_named(q, pb, "tiered")
            got = wait_ended(q, pb, run.id, 60)
            want = merge(*per_edge[n])
            records = sum(c for _, c in want)
            check(got.run.state == pb.RUN_STATE_FINISHED and got.total.records == records,
                  f"edge {n}: its run has its clients' {records} records "
                  f"({got.total.records}, state {got.run.state})")

        # The root's run: every edge closed, the merge of everything.
        run = run_named(root_query, pb, "tiered")
        check(run is not None, "the root has the tiered run")
        if run is not None:
            got = wait_ended(root_query, pb, run.id, 90)
            want = merge(*everything)
            records = sum(c for _, c in want)
            check(got.run.state == pb.RUN_STATE_FINISHED,
                  f"root run finished (state {got.run.state}: {got.run.failure_reason})")
            check(got.total.records == records and got.total.valid_latency_records == records,
                  f"root total == every client's records ({got.total.records} == {records})")
            check(got.total.bytes == records * 100, "root bytes == every client's bytes")
            check(got.total.min_latency == want[0][0] and got.total.max_latency == want[-1][0],
                  "root min/max == the merged input's")
            answer = root_query.GetPercentiles(pb.GetPercentilesRequest(
                run=str(run.id), percentiles=PERCENTS), timeout=10)
            have = [p.latency for p in answer.percentiles]
            expect = exact_percentiles(want, PERCENTS)
            check(have == expect and answer.exact,
                  f"root percentiles == the merged raw data's ({have} vs {expect})")
            check(got.total.clients == 3, f"the root's run counts 3 edge clients "
                  f"({got.total.clients})")
            check(got.run.latency.periodic_recorder == "HybridPaged",
                  f"a windows run in ns aggregates in hybrid pages ({got.run.latency.periodic_recorder})")
            hist = root_query.GetWindowHistory(pb.GetWindowHistoryRequest(run=str(run.id)),
                                               timeout=10)
            periodic = [w for w in hist.windows if w.kind == pb.Window.KIND_PERIODIC]
            check(sum(w.records for w in periodic) == records,
                  "the root's periodic windows add up to the total")
            check(max((w.clients for w in periodic), default=0) >= 2 and
                  all(w.clients <= 3 for w in periodic),
                  f"periodic windows count their contributing edges "
                  f"({[w.clients for w in periodic]})")
            check(sum(w.remote_reports for w in periodic) == got.total.remote_reports,
                  "window report counts add up to the run's")
            # The per-client breakdown: each edge is one client of the root,
            # with its own exact share.
            clients = root_query.GetClients(pb.GetClientsRequest(run=str(run.id),
                                                                 percentiles=PERCENTS), timeout=10)
            check(len(clients.clients) == 3 and
                  all(c.state == "closed" and c.mode == "windows" and c.exact
                      for c in clients.clients),
                  f"GetClients: 3 closed windows clients with exact distributions "
                  f"({[(c.client_id, c.state, c.mode, c.exact) for c in clients.clients]})")
            check(sum(c.records for c in clients.clients) == records,
                  "the clients' records add up to the run's")
            for c in clients.clients:
                n = int(c.client_id.split("/")[0].split("-")[1])
                mine = merge(*per_edge[n])
                check([p.latency for p in c.percentiles] == exact_percentiles(mine, PERCENTS),
                      f"{c.client_id}: its percentiles == its edge's data")
            edge_query = rpc.QueryStub(grpc.insecure_channel(edges[2].grpc))
            edge_run = run_named(edge_query, pb, "tiered")
            mixed = edge_query.GetClients(pb.GetClientsRequest(run=str(edge_run.id)), timeout=10)
            modes = sorted((c.client_id, c.mode, c.records, c.exact) for c in mixed.clients)
            check(modes == [("e2c0", "windows", 3500, True), ("e2c1", "raw", 3500, False)],
                  f"edge 2's clients: one windows client (exact), one raw (records only) ({modes})")
        for n, edge in enumerate(edges):
            sent = metric(edge.http, "perld_upstream_reports_sent_total")
            acked = metric(edge.http, "perld_upstream_reports_acked_total")
            check(sent and acked and sent[0].split()[-1] == acked[0].split()[-1] and
                  float(sent[0].split()[-1]) > 0,
                  f"edge {n}: every report sent upstream was acknowledged ({sent} {acked})")

        # --- A root that refuses an edge's run (its unit differs): the
        # edge's own run is unaffected, the refusal is counted. -------------
        stub = irpc.IngestStub(grpc.insecure_channel(root.grpc))
        holder = Stream(stub, ipb, ipb.IngestOpen(run_name="clash", client_id="holder",
                                                  mode=ipb.IngestOpen.MODE_WINDOWS,
                                                  time_unit=pb.TIME_UNIT_MS))
        holder.recv()
        edge_stub = irpc.IngestStub(grpc.insecure_channel(edges[0].grpc))
        e = Stream(edge_stub, ipb, ipb.IngestOpen(run_name="clash", client_id="ec",
                                                  mode=ipb.IngestOpen.MODE_WINDOWS,
                                                  time_unit=pb.TIME_UNIT_NS))
        e.recv()
        for k in range(3):
            e.ask(window=window_msg(ipb, k + 1, [(1000 + k, 5)]))
            time.sleep(INTERVAL_MS / 1000)
        e.finish(3)
        eq = rpc.QueryStub(grpc.insecure_channel(edges[0].grpc))
        got = wait_ended(eq, pb, run_named(eq, pb, "clash").id, 30)
        check(got.run.state == pb.RUN_STATE_FINISHED and got.total.records == 15,
              "edge: a run the root refuses still ends finished and exact on the edge")
        deadline = time.time() + 20
        dropped = []
        while time.time() < deadline:
            dropped = metric(edges[0].http, "perld_upstream_dropped_windows_total")
            if dropped and float(dropped[0].split()[-1]) > 0:
                break
            time.sleep(0.1)
        check(dropped and float(dropped[0].split()[-1]) > 0,
              f"edge: the windows the root refused are counted ({dropped})")
        holder.finish(0)

        # --- Late reports and clients per window, on the root directly. ----
        stub = irpc.IngestStub(grpc.insecure_channel(root.grpc))
        # A 10 s interval: the reports dated 5 s ahead fall in the run's first
        # window, which the run waits for (the test's longest wait).
        a = Stream(stub, ipb, ipb.IngestOpen(run_name="late", client_id="a", mode=ipb.IngestOpen.MODE_WINDOWS,
                                             time_unit=pb.TIME_UNIT_NS, reporting_interval_ms=10000))
        b = Stream(stub, ipb, ipb.IngestOpen(run_name="late", client_id="b", mode=ipb.IngestOpen.MODE_WINDOWS,
                                             time_unit=pb.TIME_UNIT_NS, reporting_interval_ms=10000))
        opened = a.recv()
        b.recv()
        now_ms = int(time.time() * 1000)
        a.ask(window=window_msg(ipb, 1, [(100, 2), (200, 1)], end_unix_ms=now_ms - 3_600_000))
        a.ask(window=window_msg(ipb, 2, [(150, 1)], end_unix_ms=now_ms + 5_000))
        b.ask(window=window_msg(ipb, 1, [(300, 4)], end_unix_ms=now_ms + 5_000))
        late_id = opened.opened.run_id
        a.finish(2)
        b.finish(1)
        got = wait_ended(root_query, pb, late_id, 30)
        hist = root_query.GetWindowHistory(pb.GetWindowHistoryRequest(run=str(late_id)), timeout=10)
        periodic = [w for w in hist.windows if w.kind == pb.Window.KIND_PERIODIC]
        # A client's close cuts the run's window when its last messages are
        # not in a checkpoint yet (README "Daemon state across crashes"), so
        # the 10 s interval may end in more than one window: count over them.
        check(sum(w.late_reports for w in periodic) == 1
              and sum(w.remote_reports for w in periodic) == 3
              and max((w.clients for w in periodic), default=0) == 2,
              f"its windows: 3 reports, 1 late, both clients in one window "
              f"({[(w.clients, w.remote_reports, w.late_reports) for w in periodic]})")
        check(got.total.records == 8, f"late reports still count ({got.total.records} == 8)")
        check(got.total.remote_reports == 3 and got.total.late_reports == 1 and
              got.total.clients == 2,
              f"the run total: 3 reports from 2 clients, 1 late ({got.total.remote_reports}, "
              f"{got.total.late_reports}, {got.total.clients})")
        late_lines = [line for line in metric(root.http, "perld_run_late_reports_total")
                      if f'run_id="{late_id}"' in line]
        check(late_lines and late_lines[0].endswith(" 1"),
              f"/metrics counts the late report ({late_lines})")

        # --- A run whose only client sent nothing. -------------------------
        z = Stream(stub, ipb, ipb.IngestOpen(run_name="empty", client_id="z",
                                             mode=ipb.IngestOpen.MODE_WINDOWS, time_unit=pb.TIME_UNIT_NS))
        zid = z.recv().opened.run_id
        z.finish(0)
        got = wait_ended(root_query, pb, zid, 30)
        check(got.run.state == pb.RUN_STATE_FINISHED and got.total.records == 0 and
              got.total.clients == 0,
              f"an empty run ends finished with 0 records and 0 contributing clients "
              f"(state {got.run.state}, {got.total.records}, {got.total.clients})")
        # --- Memory caps under adversarial input (one value per page). -----
        capped = Daemon(args.perld, os.path.join(tmp, "capped"), config=write("capped.yaml", CAPPED))
        edges.append(capped)  # stopped with the others
        cq = rpc.QueryStub(grpc.insecure_channel(capped.grpc))
        cs = Stream(irpc.IngestStub(grpc.insecure_channel(capped.grpc)), ipb,
                    ipb.IngestOpen(run_name="adversarial", client_id="x",
                                   mode=ipb.IngestOpen.MODE_WINDOWS, time_unit=pb.TIME_UNIT_NS))
        cid = cs.recv().opened.run_id
        rss = []
        sent = 0
        for k in range(WINDOWS):
            # 12,000 lone values, each in its own 256-value page, a new
            # region each time: ~1.7 MB of pages against a 1 MB cap.
            base = k * 12_000 * 256
            pairs = [(base + i * 256 + (k % 256), 1) for i in range(12_000)]
            r = cs.ask(window=window_msg(ipb, k + 1, pairs))
            if r.ack.acked_sequence != k + 1:
                check(False, f"adversarial window {k + 1} acknowledged")
            sent += len(pairs)
            time.sleep(INTERVAL_MS / 1000 * 1.2)
            rss.append(capped.rss_kib())
        cs.finish(WINDOWS)
        got = wait_ended(cq, pb, cid, 30)
        check(got.total.records == sent, f"every adversarial record counted ({got.total.records} "
              f"== {sent})")
        check(got.total.cache_releases >= WINDOWS // 2,
              f"the periodic cache was released after its reports "
              f"({got.total.cache_releases} releases)")
        check(got.total.segments > 1, f"the total printed and reset on its own cap "
              f"({got.total.segments} segments)")
        hist = cq.GetWindowHistory(pb.GetWindowHistoryRequest(run=str(cid)), timeout=10)
        periodic = [w for w in hist.windows if w.kind == pb.Window.KIND_PERIODIC]
        check(sum(w.records for w in periodic) == sent and not any(w.closed_full for w in periodic),
              "every window reported whole: periodic pressure never cut one short")
        # The caches fill and release in a sawtooth: the peak of the last
        # third must not exceed the peak of the second by more than a few
        # windows' worth (a leak of one window's pairs each time would add
        # ~10 MiB). A sanitizer's quarantine holds freed memory: skipped there.
        early, late_rss = max(rss[20:50]), max(rss[-30:])
        if args.sanitized:
            print("skip RSS bound: freed memory stays in the sanitizer's quarantine")
        else:
            check(late_rss <= early + 8 * 1024,
                  f"RSS stays bounded over {WINDOWS} windows (peak {early // 1024} MiB in "
                  f"windows 20-50, {late_rss // 1024} MiB in the last 30; every window: "
                  f"{[r // 1024 for r in rss]})")
    finally:
        for d in edges:
            check(d.stop() == 0, "edge exits 0")
        check(root.stop() == 0, "root exits 0")
    return perld_it.finish()


if __name__ == "__main__":
    sys.exit(main())
