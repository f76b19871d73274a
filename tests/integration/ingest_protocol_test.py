"""perld.v1.Ingest end to end from Debian's grpcio (a client that is not
ours; /usr/bin/python3): both modes into one run, exact totals and
percentiles, duplicates, gaps, reconnect and resume, malformed, inconsistent
and oversized messages, unknown runs, mismatched time units, limits, a client
that vanishes, StopRun, the Unix socket, and the daemon stopping while a
client streams (nothing acknowledged is lost).

  /usr/bin/python3 tests/integration/ingest_protocol_test.py --perld build/release/daemon/bench/perld \
      --perlctl build/release/client/perlctl/perlctl
"""
import argparse
import importlib
import json
import os
import queue
import random
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import check, Daemon, IngestStream as Stream, wait_ended, exact_percentiles  # noqa: E402,E501

import grpc  # noqa: E402

CONFIG = """
ingest:
  maxBatchLength: 1000
  maxPairsPerReport: 1000
  maxClientsPerRun: 4
  clientTimeoutMs: 300
limits:
  maxMessageBytes: 65536
drainTimeoutMs: 500
reportingIntervalMs: 100  # a close is acknowledged at the next window
"""

PERCENTS = [10, 25, 50, 75, 90, 99, 99.9, 100]


def code_of(fn):
    try:
        fn()
    except grpc.RpcError as e:
        return e.code(), e.details()
    return grpc.StatusCode.OK, ""


def batch(ipb, seq, latencies, records=1, size=10):
    deltas, prev = [], 0
    for v in latencies:
        deltas.append(v - prev)
        prev = v
    return ipb.TimestampBatch(sequence=seq, count=len(latencies), latency_delta=deltas,
                              constant_records=records, constant_bytes=size)


def window(ipb, seq, pairs, size=10, invalid=0, lower=0, higher=0):
    """A WindowReport for ascending (latency, count) pairs plus discards."""
    valid = sum(c for _, c in pairs)
    deltas, prev = [], 0
    for v, _ in pairs:
        deltas.append(v - prev)
        prev = v
    records = valid + invalid + lower + higher
    return ipb.WindowReport(
        sequence=seq, records=records, bytes=records * size, valid_latency_records=valid,
        invalid_latency_records=invalid, lower_latency_discard_records=lower,
        higher_latency_discard_records=higher, min_latency=pairs[0][0] if pairs else 0,
        max_latency=pairs[-1][0] if pairs else 0,
        total_latency=sum(v * c for v, c in pairs), latency_delta=deltas,
        count=[c for _, c in pairs])


def merge(pairs_lists):
    total = {}
    for pairs in pairs_lists:
        for v, c in pairs:
            total[v] = total.get(v, 0) + c
    return sorted(total.items())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-ingest-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    ipb = importlib.import_module("perld.v1.ingest_pb2")
    irpc = importlib.import_module("perld.v1.ingest_pb2_grpc")
    config = os.path.join(tmp, "perld.yaml")
    with open(config, "w") as f:
        f.write(CONFIG)
    state = os.path.join(tmp, "state")
    sock = os.path.join(tmp, "perld.sock")
    rng = random.Random(7)

    d = Daemon(args.perld, state, config=config, extra=["--grpc-unix", sock])
    channel = grpc.insecure_channel(d.grpc)
    ingest = irpc.IngestStub(channel)
    query = rpc.QueryStub(channel)
    control = rpc.ControlStub(channel)

    def opener(run, client, mode, unit=pb.TIME_UNIT_NS, **kw):
        return ipb.IngestOpen(run_name=run, client_id=client, client_name="py-" + client,
                              mode=mode, time_unit=unit, percentiles=PERCENTS, **kw)

    RAW, WINDOWS = ipb.IngestOpen.MODE_RAW, ipb.IngestOpen.MODE_WINDOWS

    # --- both modes into one run, exactly once --------------------------------
    raw_lat = [[rng.randint(1, 5000) for _ in range(1000)] for _ in range(3)]
    win_pairs = [sorted({rng.randint(1, 9000): rng.randint(1, 50) for _ in range(400)}.items())
                 for _ in range(2)]
    a = Stream(ingest, ipb, opener("mixed", "a", RAW))
    opened = a.recv().opened
    check(opened.created and opened.acked_sequence == 0 and opened.run_id > 0,
          f"raw client creates run 'mixed' (id {opened.run_id}), acked_sequence 0")
    run_id = opened.run_id
    check(opened.max_batch_length == 1000 and opened.max_pairs_per_report == 1000,
          "IngestOpened carries the configured limits")
    ack = a.ask(batch=batch(ipb, 1, raw_lat[0])).ack
    check(ack.acked_sequence == 1, "batch 1 acknowledged")
    ack = a.ask(batch=batch(ipb, 1, raw_lat[0])).ack
    check(ack.acked_sequence == 1 and ack.duplicates == 1,
          "a resent batch 1 is recognised as a duplicate, not applied")
    a.send(batch=batch(ipb, 3, raw_lat[1]))
    code, detail = code_of(a.recv)
    check(code == grpc.StatusCode.OUT_OF_RANGE and "expected 2" in detail,
          f"a gap (3 after 1) is refused with OUT_OF_RANGE naming the expected sequence ({detail})")

    w = Stream(ingest, ipb, opener("mixed", "w", WINDOWS))
    wo = w.recv().opened
    check(not wo.created and wo.run_id == run_id, "windows client joins the same run")
    check(w.ask(window=window(ipb, 1, win_pairs[0])).ack.acked_sequence == 1, "window 1 applied")

    # reconnect: client a resumes after its acknowledged sequence
    a = Stream(ingest, ipb, opener("mixed", "a", RAW))
    ro = a.recv().opened
    check(not ro.created and ro.acked_sequence == 1,
          f"client a reconnects and resumes after sequence {ro.acked_sequence}")
    check(a.ask(batch=batch(ipb, 1, raw_lat[0])).ack.duplicates == 2,
          "a resend after reconnecting is still a duplicate")
    check(a.ask(batch=batch(ipb, 2, raw_lat[1])).ack.acked_sequence == 2, "batch 2 applied")
    # a second stream of the same client takes over; the first is told so
    a2 = Stream(ingest, ipb, opener("mixed", "a", RAW))
    check(a2.recv().opened.acked_sequence == 2, "a newer stream of client a takes over at 2")
    code, _ = code_of(lambda: a.ask(batch=batch(ipb, 3, raw_lat[2])))
    check(code in (grpc.StatusCode.ABORTED, grpc.StatusCode.CANCELLED),
          f"the replaced stream ends ({code})")
    check(a2.ask(batch=batch(ipb, 3, raw_lat[2])).ack.acked_sequence == 3, "batch 3 applied")
    check(w.ask(window=window(ipb, 2, win_pairs[1])).ack.acked_sequence == 2, "window 2 applied")

    # bad input on a third client never touches the run
    b = Stream(ingest, ipb, opener("mixed", "b", RAW))
    b.recv()
    bad = batch(ipb, 1, [1, 2, 3])
    bad.count = 4
    b.send(batch=bad)
    code, detail = code_of(b.recv)
    check(code == grpc.StatusCode.INVALID_ARGUMENT, f"count != column length: INVALID_ARGUMENT ({detail})")
    b = Stream(ingest, ipb, opener("mixed", "b", RAW))
    b.recv()
    b.send(batch=batch(ipb, 1, list(range(1, 1002))))
    code, detail = code_of(b.recv)
    check(code == grpc.StatusCode.INVALID_ARGUMENT and "maxBatchLength" in detail,
          f"a batch over ingest.maxBatchLength: INVALID_ARGUMENT, final ({detail})")
    b = Stream(ingest, ipb, opener("mixed", "b", RAW))
    b.recv()
    b.send(batch=ipb.TimestampBatch(sequence=1, count=9000, latency_delta=[2**60] * 9000))
    code, detail = code_of(b.recv)
    check(code == grpc.StatusCode.INVALID_ARGUMENT and "maxMessageBytes" in detail,
          f"a message over limits.maxMessageBytes: INVALID_ARGUMENT, final ({detail})")
    b = Stream(ingest, ipb, opener("mixed", "b", RAW))
    b.recv()
    b.send(window=window(ipb, 1, [(5, 1)]))
    code, _ = code_of(b.recv)
    check(code == grpc.StatusCode.INVALID_ARGUMENT, "a window from a raw client: INVALID_ARGUMENT")
    c = Stream(ingest, ipb, opener("mixed", "c", WINDOWS))
    c.recv()
    inconsistent = window(ipb, 1, [(5, 2), (9, 3)])
    inconsistent.valid_latency_records = 4
    c.send(window=inconsistent)
    code, detail = code_of(c.recv)
    check(code == grpc.StatusCode.INVALID_ARGUMENT and "sum" in detail,
          f"counts that do not add up: INVALID_ARGUMENT ({detail})")
    c = Stream(ingest, ipb, opener("mixed", "c", WINDOWS))
    c.recv()
    c.send(window=window(ipb, 1, [(5, 2), (5, 3)]))
    code, _ = code_of(c.recv)
    check(code == grpc.StatusCode.INVALID_ARGUMENT, "latencies not ascending: INVALID_ARGUMENT")
    negative = window(ipb, 1, [(5, 2)])
    negative.records = -1
    c = Stream(ingest, ipb, opener("mixed", "c", WINDOWS))
    c.recv()
    c.send(window=negative)
    code, _ = code_of(c.recv)
    check(code == grpc.StatusCode.INVALID_ARGUMENT, "negative counts: INVALID_ARGUMENT")
    code, detail = code_of(lambda: Stream(ingest, ipb, opener("mixed", "d", RAW)).recv())
    check(code == grpc.StatusCode.RESOURCE_EXHAUSTED and "maxClientsPerRun" in detail,
          f"a 5th client over ingest.maxClientsPerRun 4: RESOURCE_EXHAUSTED ({detail})")
    code, detail = code_of(
        lambda: Stream(ingest, ipb, opener("mixed", "a", RAW, unit=pb.TIME_UNIT_MS)).recv())
    check(code == grpc.StatusCode.FAILED_PRECONDITION and "ns" in detail,
          f"joining with another time unit: FAILED_PRECONDITION ({detail})")
    code, _ = code_of(lambda: Stream(ingest, ipb, opener("mixed", "w", RAW)).recv())
    check(code == grpc.StatusCode.FAILED_PRECONDITION, "a client changing its mode: FAILED_PRECONDITION")
    code, _ = code_of(
        lambda: Stream(ingest, ipb, opener("nosuch", "x", RAW, must_exist=True)).recv())
    check(code == grpc.StatusCode.NOT_FOUND, "must_exist on an unknown run: NOT_FOUND")
    q = queue.Queue()
    q.put(ipb.IngestRequest(batch=batch(ipb, 1, [1])))
    q.put(None)
    code, _ = code_of(lambda: next(ingest.Stream(iter(q.get, None), timeout=10)))
    check(code == grpc.StatusCode.INVALID_ARGUMENT, "a stream that does not start with open: INVALID_ARGUMENT")

    # clients b and c never sent anything valid: they close at sequence 0
    for client, mode in (("b", RAW), ("c", WINDOWS)):
        s = Stream(ingest, ipb, opener("mixed", client, mode))
        s.recv()
        s.ask(close=ipb.IngestClose(last_sequence=0))
        s.end()
        code, _ = code_of(lambda: list(s.call))
        check(code == grpc.StatusCode.OK, f"client {client} closes at 0")
    code, detail = code_of(lambda: a2.ask(close=ipb.IngestClose(last_sequence=2)))
    check(code == grpc.StatusCode.OUT_OF_RANGE, f"close at a sequence not applied: OUT_OF_RANGE ({detail})")
    a2 = Stream(ingest, ipb, opener("mixed", "a", RAW))
    a2.recv()
    a2.ask(close=ipb.IngestClose(last_sequence=3))
    a2.end()
    w.ask(close=ipb.IngestClose(last_sequence=2))
    w.end()
    for s in (a2, w):
        code, _ = code_of(lambda: list(s.call))
        check(code == grpc.StatusCode.OK, "stream ends OK after its close")
    run = wait_ended(query, pb, run_id, seconds=30)
    check(run.run.state == pb.RUN_STATE_FINISHED,
          f"the run ends finished once every client closed ({run.run.failure_reason})")
    expected = merge([[(v, 1) for v in lat] for lat in raw_lat] + win_pairs)
    valid = sum(c for _, c in expected)
    check(run.total.valid_latency_records == valid and run.total.records == valid,
          f"total: {run.total.records} records, expected exactly {valid}")
    check(run.total.bytes == valid * 10, "total bytes exact")
    got = query.GetPercentiles(pb.GetPercentilesRequest(run=str(run_id), percentiles=PERCENTS))
    want = exact_percentiles(expected, PERCENTS)
    check([p.latency for p in got.percentiles] == want,
          f"percentiles equal those of the concatenated data: {want}")

    # --- a client that vanishes ------------------------------------------------
    v = Stream(ingest, ipb, opener("vanish", "v", RAW))
    vid = v.recv().opened.run_id
    v.ask(batch=batch(ipb, 1, [10, 20, 30]))
    keep = Stream(ingest, ipb, opener("vanish", "k", RAW))
    keep.recv()
    keep.ask(batch=batch(ipb, 1, [40, 50]))
    v.cancel()
    time.sleep(1.0)  # past ingest.clientTimeoutMs
    check(query.GetRun(pb.GetRunRequest(run=str(vid))).run.state == pb.RUN_STATE_RUNNING,
          "the run keeps running while another client streams")
    keep.ask(batch=batch(ipb, 2, [60]))
    keep.ask(close=ipb.IngestClose(last_sequence=2))
    keep.end()
    run = wait_ended(query, pb, vid, seconds=30)
    check(run.run.state == pb.RUN_STATE_FAILED and "'py-v'" in run.run.failure_reason,
          f"the run ends failed naming the vanished client ({run.run.failure_reason})")
    check(run.total.records == 6, f"every acknowledged record of both clients is in the total "
                                  f"({run.total.records} of 6)")

    # --- StopRun on an ingest run --------------------------------------------
    s = Stream(ingest, ipb, opener("stopme", "s", RAW))
    sid = s.recv().opened.run_id
    s.ask(batch=batch(ipb, 1, [7, 8]))
    stopped = control.StopRun(pb.StopRunRequest(run=str(sid), wait=True), timeout=30)
    check(stopped.run.state == pb.RUN_STATE_FAILED and "StopRun" in stopped.run.failure_reason,
          f"StopRun ends a streaming ingest run ({stopped.run.failure_reason})")
    code, _ = code_of(lambda: s.ask(batch=batch(ipb, 2, [9])))
    check(code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.ABORTED),
          f"its stream ends ({code})")
    check(query.GetRun(pb.GetRunRequest(run=str(sid))).total.records == 2,
          "the stopped run's total keeps the acknowledged records")

    # --- the Unix socket -------------------------------------------------------
    mode = os.stat(sock).st_mode & 0o777
    check(mode == 0o660, f"socket file mode 0660 ({oct(mode)})")
    uchan = grpc.insecure_channel("unix:" + sock)
    u = Stream(irpc.IngestStub(uchan), ipb, opener("unix", "u", WINDOWS))
    uid = u.recv().opened.run_id
    check(u.ask(window=window(ipb, 1, [(3, 4)])).ack.acked_sequence == 1,
          "a client streams over the Unix socket")
    u.ask(close=ipb.IngestClose(last_sequence=1))
    u.end()
    check(wait_ended(query, pb, uid).total.valid_latency_records == 4, "unix run total exact")
    if args.perlctl:
        out = subprocess.run([args.perlctl, "--target", "unix:" + sock, "--json", "show", str(uid)],
                             capture_output=True, text=True, timeout=30)
        check(out.returncode == 0 and json.loads(out.stdout)["total"]["validLatencyRecords"] == 4,
              "perlctl --target unix:PATH reads the run")

    # --- a close whose acknowledgement was lost ---------------------------------
    # The client reconnects naming its run: it gets that run back with its
    # last sequence and only its close again -- also once the run ended.
    x = Stream(ingest, ipb, opener("relost", "x", RAW))
    rid = x.recv().opened.run_id
    y = Stream(ingest, ipb, opener("relost", "y", RAW))
    y.recv()
    for seq in (1, 2):
        x.ask(batch=batch(ipb, seq, [seq] * 10))
    x.finish(2)
    x = Stream(ingest, ipb, opener("relost", "x", RAW, run_id=rid))
    xo = x.recv().opened
    check(xo.run_id == rid and xo.acked_sequence == 2 and not xo.created,
          f"a closed client that reconnects gets its run and last sequence back ({xo.run_id}, "
          f"{xo.acked_sequence})")
    ack = x.finish(2)
    check(ack is not None and ack.HasField("ack") and ack.ack.acked_sequence == 2
          and ack.ack.durable_sequence == 2, "its repeated close is acknowledged durable")
    x = Stream(ingest, ipb, opener("relost", "x", RAW, run_id=rid))
    x.recv()
    x.send(batch=batch(ipb, 3, [3]))
    code, detail = code_of(x.recv)
    check(code == grpc.StatusCode.FAILED_PRECONDITION and "already closed" in detail,
          f"after its close a client may only repeat the close ({code}: {detail})")
    x = Stream(ingest, ipb, opener("relost", "x", RAW))
    code, detail = code_of(x.recv)
    check(code == grpc.StatusCode.FAILED_PRECONDITION and "already closed" in detail,
          f"a new client reusing a closed client's id (no run_id) is refused ({detail})")
    y.finish(0)
    ended = wait_ended(query, pb, rid)
    check(ended.run.state == pb.RUN_STATE_FINISHED and ended.total.records == 20,
          f"the run ended with both clients closed ({ended.total.records} records)")
    x = Stream(ingest, ipb, opener("relost", "x", RAW, run_id=rid))
    xo = x.recv().opened
    ack = x.finish(2)
    check(xo.run_id == rid and xo.acked_sequence == 2 and ack.ack.durable_sequence == 2,
          "after the run ended, the reconnecting closed client is answered for that run")
    named = [r for r in query.ListRuns(pb.ListRunsRequest()).runs if r.name == "relost"]
    check(len(named) == 1, f"and no new run of that name was started ({len(named)})")

    # --- counters ----------------------------------------------------------------
    metrics = urllib.request.urlopen(f"http://{d.http}/metrics", timeout=10).read().decode()
    for needle in ('perld_ingest_refused_total{reason="sequence_gap"} 2',
                   'perld_ingest_duplicates_total 2',
                   'perld_ingest_refused_total{reason="message_size"} 1'):
        check(needle in metrics, f"/metrics has {needle}")

    # --- the daemon stops while a client streams -------------------------------
    z = Stream(ingest, ipb, opener("shutdown", "z", RAW))
    zid = z.recv().opened.run_id
    acked = 0
    for seq in range(1, 6):
        acked = z.ask(batch=batch(ipb, seq, [seq] * 100)).ack.acked_sequence
    rc = d.stop()
    check(rc == 0, f"SIGTERM with a client streaming: exit {rc}")
    code, _ = code_of(lambda: z.ask(batch=batch(ipb, 6, [6])))
    check(code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED),
          f"the client is told ({code})")
    d = Daemon(args.perld, state, config=config)
    channel = grpc.insecure_channel(d.grpc)
    query = rpc.QueryStub(channel)
    run = query.GetRun(pb.GetRunRequest(run=str(zid)), timeout=10)
    check(run.run.state == pb.RUN_STATE_FAILED and "shut down" in run.run.failure_reason,
          f"after a restart the run is stored, failed ({run.run.failure_reason})")
    check(run.total.records == acked * 100,
          f"every acknowledged record is in its stored total ({run.total.records} of {acked * 100})")
    d.stop()
    return perld_it.finish()


if __name__ == "__main__":
    sys.exit(main())
