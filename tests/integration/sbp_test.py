"""perld as a drop-in SBM (issue 10, the SBP slice): SBK's Storage Benchmark
Protocol 4.0 spoken by a Python grpcio client generated from
proto/sbp/sbp.proto (no package: /Service/<method>), as SBK's GrpcLogger
does: getVersion, getConfig, registerClient, one ordered streamLatencies
stream of per-window delta records (unsorted value -> count maps), then
closeClient. Checks the run (source sbp) has exactly the merged input's
totals and percentiles, and the protocol's statuses: wrong storage or action
FAILED_PRECONDITION, concurrent registrations over sbp.maxConnections
RESOURCE_EXHAUSTED, a first record not numbered 1 / a gap DATA_LOSS, a
changed client id INVALID_ARGUMENT, counts that disagree with
validLatencyRecords INVALID_ARGUMENT, an unknown client NOT_FOUND.
Issue 24 (harden the service):
- getConfig's maxRecordSizeBytes is what is accepted (limits.maxMessageBytes):
  a record at it is applied, one over it RESOURCE_EXHAUSTED and counted;
- closeClient after a failed stream ends the run at once (not after
  ingest.clientTimeoutMs);
- `perlctl stop` and Control.StopRun stop an SBP run (streaming, or with a
  client that never streamed);
- another connection cannot use a registered id (PERMISSION_DENIED);
- slots of clients that registered and died without streaming, or whose
  stream broke, are freed after ingest.clientTimeoutMs (counted), also while
  another client streams -- and the daemon stays idle meanwhile.
Run by Debian's /usr/bin/python3.
"""
import argparse
import importlib
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import (ROOT, Daemon, check, exact_percentiles, finish,  # noqa: E402
                      load_stubs, metric)

import grpc  # noqa: E402
from google.protobuf import empty_pb2  # noqa: E402

PERCENTS = [10, 50, 90, 99, 99.9]


def sbp_stubs(out):
    import grpc_tools
    from grpc_tools import protoc
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    rc = protoc.main(["protoc", "-I" + os.path.join(ROOT, "proto"), "-I" + well_known,
                      "--python_out=" + out, "--grpc_python_out=" + out, "sbp/sbp.proto"])
    if rc != 0:
        raise RuntimeError("grpc_tools.protoc failed for sbp.proto")
    return (importlib.import_module("sbp.sbp_pb2"), importlib.import_module("sbp.sbp_pb2_grpc"))


def record(sbp, client, seq, values):
    """One window delta: `values` is {latency: count}, sent unsorted."""
    items = list(values.items())
    random.shuffle(items)
    valid = sum(values.values())
    return sbp.MessageLatenciesRecord(
        clientID=client, sequenceNumber=seq, writers=1, maxWriters=1,
        writeRequestRecords=valid, writeRequestBytes=valid * 10,
        totalRecords=valid, validLatencyRecords=valid, totalBytes=valid * 10,
        totalLatency=sum(v * c for v, c in values.items()),
        minLatency=min(values) if values else 0, maxLatency=max(values) if values else 0,
        latencyValues=[v for v, _ in items], latencyCounts=[c for _, c in items])


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class OpenStream:
    """A streamLatencies call that sends `records`, then stays open until end()."""

    def __init__(self, service, records):
        self.done = threading.Event()
        self.sent = threading.Event()

        def gen():
            yield from records
            self.sent.set()
            self.done.wait(30)
        self.future = service.streamLatencies.future(gen(), timeout=60)

    def end(self):
        self.done.set()

    def code(self):
        try:
            self.future.result(timeout=30)
            return grpc.StatusCode.OK
        except grpc.RpcError as e:
            return e.code()
        except grpc.FutureCancelledError:
            return grpc.StatusCode.CANCELLED


def code_of(call, *a):
    try:
        call(*a, timeout=10)
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def stream_code(service, records):
    try:
        service.streamLatencies(iter(records), timeout=30)
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def sbp_runs(query, pb):
    return sorted((r for r in query.ListRuns(pb.ListRunsRequest(), timeout=10).runs
                   if r.name == "sbp:Kafka:Writing"), key=lambda r: r.id)


def wait_run_ended(query, pb, run_id, seconds):
    """The run once it is no longer running, or None after `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        got = query.GetRun(pb.GetRunRequest(run=str(run_id)), timeout=10)
        if got.run.state != pb.RUN_STATE_RUNNING:
            return got
        time.sleep(0.05)
    return None


def protocol(args, tmp, pb, rpc, sbp, sbp_rpc):
    """The protocol against one daemon: limits.maxMessageBytes 65536, and a
    client timeout (60 s) no check waits for."""
    config = os.path.join(tmp, "perld.yaml")
    with open(config, "w") as f:
        f.write("timeUnit: ns\nreportingIntervalMs: 200\n"
                f"percentiles: [{', '.join(str(p) for p in PERCENTS)}]\n"
                "limits:\n  maxMessageBytes: 65536\n"
                "ingest:\n  clientTimeoutMs: 60000\n"
                "sbp:\n  storageName: Kafka\n  action: Writing\n  maxConnections: 3\n")
    d = Daemon(args.perld, os.path.join(tmp, "state"), config)
    channel = grpc.insecure_channel(d.grpc)
    service = sbp_rpc.ServiceStub(channel)
    query = rpc.QueryStub(channel)
    control = rpc.ControlStub(channel)
    empty = empty_pb2.Empty()
    mine = sbp.Config(storageName="KAFKA", action=sbp.Writing, timeUnit=sbp.ns)

    def fresh():
        return service.registerClient(mine, timeout=10).id

    try:
        version = service.getVersion(empty, timeout=10)
        check(version.major == 4 and version.minor == 0, "getVersion is 4.0")
        check(service.isVersionSupported(sbp.Version(major=4, minor=7), timeout=10).value and
              not service.isVersionSupported(sbp.Version(major=3), timeout=10).value,
              "isVersionSupported: major 4 only")
        cfg = service.getConfig(empty, timeout=10)
        check(cfg.storageName == "Kafka" and cfg.action == sbp.Writing and
              cfg.timeUnit == sbp.ns, "getConfig: the configured storage, action and unit")
        check(cfg.maxRecordSizeBytes == 65536,
              f"getConfig: maxRecordSizeBytes is what is accepted, limits.maxMessageBytes "
              f"({cfg.maxRecordSizeBytes})")

        wrong = sbp.Config(storageName="Pulsar", action=sbp.Writing, timeUnit=sbp.ns)
        check(code_of(service.registerClient, wrong) == grpc.StatusCode.FAILED_PRECONDITION,
              "registerClient: another storage -> FAILED_PRECONDITION")
        wrong = sbp.Config(storageName="kafka", action=sbp.Reading, timeUnit=sbp.ns)
        check(code_of(service.registerClient, wrong) == grpc.StatusCode.FAILED_PRECONDITION,
              "registerClient: another action -> FAILED_PRECONDITION")

        # Three clients (storage name case-insensitive), different distributions.
        ids = [fresh() for _ in range(3)]
        check(ids == [1, 2, 3], f"client ids from 1 ({ids})")
        check(code_of(service.registerClient, mine) == grpc.StatusCode.RESOURCE_EXHAUSTED,
              "a 4th concurrent client over sbp.maxConnections 3 -> RESOURCE_EXHAUSTED")
        shapes = [
            lambda: {v: 1 for v in range(1000, 1000 + random.randint(50, 300))},  # contiguous
            lambda: {random.randint(1, 10**9): random.randint(1, 5) for _ in range(200)},
            lambda: {int(random.lognormvariate(9, 1)) + 1: random.randint(1, 9)
                     for _ in range(300)},
        ]
        merged = {}
        total_records = 0
        for client, shape in zip(ids, shapes):
            records = []
            for seq in range(1, 4):
                values = shape()
                records.append(record(sbp, client, seq, values))
                for v, c in values.items():
                    merged[v] = merged.get(v, 0) + c
                total_records += sum(values.values())
            service.streamLatencies(iter(records), timeout=30)
            service.closeClient(sbp.ClientID(id=client), timeout=10)
        check(code_of(service.closeClient, sbp.ClientID(id=2)) == grpc.StatusCode.NOT_FOUND,
              "closeClient of a closed client -> NOT_FOUND")

        deadline = time.time() + 30
        run = None
        while time.time() < deadline:
            runs = sbp_runs(query, pb)
            if runs and runs[0].state != pb.RUN_STATE_RUNNING:
                run = runs[0]
                break
            time.sleep(0.1)
        check(run is not None and run.state == pb.RUN_STATE_FINISHED,
              "the SBP run ends finished once every client closed")
        if run is not None:
            got = query.GetRun(pb.GetRunRequest(run=str(run.id)), timeout=10)
            check(got.run.source == pb.RUN_SOURCE_SBP, "the run's source is sbp")
            check(got.total.records == total_records and
                  got.total.valid_latency_records == total_records,
                  f"run total == merged input ({got.total.records} == {total_records})")
            answer = query.GetPercentiles(pb.GetPercentilesRequest(
                run=str(run.id), percentiles=PERCENTS), timeout=10)
            want = exact_percentiles(sorted(merged.items()), PERCENTS)
            have = [p.latency for p in answer.percentiles]
            check(have == want and answer.exact,
                  f"percentiles == those of the merged input ({have} vs {want})")

        # Sequence and consistency rules, each on a fresh client.
        c = fresh()
        check(stream_code(service, [record(sbp, c, 2, {5: 1})]) == grpc.StatusCode.DATA_LOSS,
              "a first record numbered 2 -> DATA_LOSS")
        service.closeClient(sbp.ClientID(id=c), timeout=10)
        c = fresh()
        check(stream_code(service, [record(sbp, c, 1, {5: 1}), record(sbp, c, 3, {5: 1})]) ==
              grpc.StatusCode.DATA_LOSS, "a sequence gap -> DATA_LOSS")
        service.closeClient(sbp.ClientID(id=c), timeout=10)
        c = fresh()
        check(stream_code(service, [record(sbp, c, 1, {5: 1}), record(sbp, c, 1, {5: 1})]) ==
              grpc.StatusCode.DATA_LOSS, "a duplicate sequence -> DATA_LOSS")
        service.closeClient(sbp.ClientID(id=c), timeout=10)
        c = fresh()
        check(stream_code(service, [record(sbp, c, 1, {5: 1}),
                                    record(sbp, c + 100, 2, {5: 1})]) ==
              grpc.StatusCode.INVALID_ARGUMENT, "a changed client id -> INVALID_ARGUMENT")
        service.closeClient(sbp.ClientID(id=c), timeout=10)
        c = fresh()
        bad = record(sbp, c, 1, {5: 2, 7: 1})
        bad.validLatencyRecords = 4
        check(stream_code(service, [bad]) == grpc.StatusCode.INVALID_ARGUMENT,
              "counts that disagree with validLatencyRecords -> INVALID_ARGUMENT")
        service.closeClient(sbp.ClientID(id=c), timeout=10)
        check(stream_code(service, [record(sbp, 999, 1, {5: 1})]) == grpc.StatusCode.NOT_FOUND,
              "records of an unregistered client -> NOT_FOUND")

        # closeClient after a failed stream: the run ends at once, failed,
        # with the records applied before the error (not after 60 s).
        c = fresh()
        run_id = sbp_runs(query, pb)[-1].id
        check(stream_code(service, [record(sbp, c, 1, {5: 3}), record(sbp, c, 3, {5: 1})]) ==
              grpc.StatusCode.DATA_LOSS, "a gap after one record -> DATA_LOSS")
        service.closeClient(sbp.ClientID(id=c), timeout=10)
        ended = wait_run_ended(query, pb, run_id, 5)
        check(ended is not None and ended.run.state == pb.RUN_STATE_FAILED and
              ended.total.records == 3,
              "closeClient after a failed stream ends the run at once, failed, with the "
              f"record applied ({ended.run.state if ended else 'still running after 5 s'})")

        # Records up to maxRecordSizeBytes are applied, a larger one refused.
        refused = metric(d.http, "perld_ingest_refused_total", 'reason="message_size"') or 0
        c = fresh()
        run_id = sbp_runs(query, pb)[-1].id
        limit = 65536  # limits.maxMessageBytes
        n = 12000  # pairs of about 5 bytes each
        while record(sbp, c, 1, {v: 1 for v in range(10**8, 10**8 + n + 100)}).ByteSize() <= limit:
            n += 100
        values = {v: 1 for v in range(10**8, 10**8 + n)}
        fits = record(sbp, c, 1, values)
        big = record(sbp, c, 2, {v: 1 for v in range(10**8, 10**8 + n + 400)})
        check(fits.ByteSize() <= limit < big.ByteSize() < 2 * limit,
              f"record sizes {fits.ByteSize()} <= 65536 < {big.ByteSize()}")
        check(stream_code(service, [fits, big]) == grpc.StatusCode.RESOURCE_EXHAUSTED,
              "a record over limits.maxMessageBytes -> RESOURCE_EXHAUSTED")
        now = metric(d.http, "perld_ingest_refused_total", 'reason="message_size"') or 0
        check(now == refused + 1, f"the refusal is counted as message_size ({refused} -> {now})")
        service.closeClient(sbp.ClientID(id=c), timeout=10)
        ended = wait_run_ended(query, pb, run_id, 5)
        check(ended is not None and ended.total.records == len(values),
              f"the record at the limit was applied ({ended.total.records if ended else None}"
              f" == {len(values)})")

        # perlctl stop on a streaming SBP run; Control.StopRun on one whose
        # client never streamed. Their slots are freed with the run.
        run_ended = metric(d.http, "perld_sbp_slots_freed_total", 'reason="run_ended"') or 0
        c = fresh()
        run_id = sbp_runs(query, pb)[-1].id
        stream = OpenStream(service, [record(sbp, c, 1, {7: 2})])
        stream.sent.wait(10)
        p = subprocess.run([args.perlctl, "--target", d.grpc, "stop", str(run_id), "--wait"],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, f"perlctl stop on a streaming SBP run exits 0 ({p.stderr.strip()})")
        ended = wait_run_ended(query, pb, run_id, 5)
        check(ended is not None and ended.run.state == pb.RUN_STATE_FAILED and
              "stopped" in ended.run.failure_reason,
              f"the stopped SBP run ended ({ended.run.failure_reason if ended else 'running'})")
        stream.end()
        check(stream.code() != grpc.StatusCode.OK, "the stopped run's stream ends in an error")
        check(code_of(service.closeClient, sbp.ClientID(id=c)) == grpc.StatusCode.OK,
              "closeClient after its run was stopped: OK")
        c = fresh()
        run_id = sbp_runs(query, pb)[-1].id
        try:
            stopped = control.StopRun(pb.StopRunRequest(run=str(run_id), wait=True), timeout=10)
            check(stopped.run.state == pb.RUN_STATE_FAILED,
                  "Control.StopRun on an SBP run whose client never streamed: it ends")
        except grpc.RpcError as e:
            check(False, f"Control.StopRun on an SBP run: {e.code()} {e.details()}")
        check(code_of(service.streamLatencies, iter([record(sbp, c, 1, {5: 1})])) ==
              grpc.StatusCode.NOT_FOUND, "a stream for a client of a stopped run -> NOT_FOUND")
        now = metric(d.http, "perld_sbp_slots_freed_total", 'reason="run_ended"') or 0
        check(now == run_ended + 2, f"both stopped runs freed their slot ({run_ended} -> {now})")

        # A registration belongs to its connection.
        c = fresh()
        other = grpc.insecure_channel(d.grpc, options=[("grpc.use_local_subchannel_pool", 1)])
        thief = sbp_rpc.ServiceStub(other)
        check(stream_code(thief, [record(sbp, c, 1, {5: 1})]) ==
              grpc.StatusCode.PERMISSION_DENIED,
              "another connection streaming a registered id -> PERMISSION_DENIED")
        check(code_of(thief.reportClientFailure, sbp.ClientFailure(clientID=c, message="x")) ==
              grpc.StatusCode.PERMISSION_DENIED,
              "another connection's reportClientFailure -> PERMISSION_DENIED")
        check(code_of(thief.closeClient, sbp.ClientID(id=c)) ==
              grpc.StatusCode.PERMISSION_DENIED,
              "another connection's closeClient -> PERMISSION_DENIED")
        other.close()
        run_id = sbp_runs(query, pb)[-1].id
        check(stream_code(service, [record(sbp, c, 1, {9: 4})]) == grpc.StatusCode.OK and
              code_of(service.closeClient, sbp.ClientID(id=c)) == grpc.StatusCode.OK,
              "the registering connection streams and closes its id")
        ended = wait_run_ended(query, pb, run_id, 5)
        check(ended is not None and ended.run.state == pb.RUN_STATE_FINISHED and
              ended.total.records == 4, "its run ends finished with its 4 records only")
    finally:
        channel.close()
        check(d.stop() == 0, "daemon stops cleanly")


def slots(args, tmp, pb, rpc, sbp, sbp_rpc):
    """sbp.maxConnections 2, ingest.clientTimeoutMs 1000: crashed clients'
    slots come back."""
    config = os.path.join(tmp, "slots.yaml")
    with open(config, "w") as f:
        f.write("timeUnit: ns\ningest:\n  clientTimeoutMs: 1000\n"
                "sbp:\n  storageName: Kafka\n  maxConnections: 2\n")
    d = Daemon(args.perld, os.path.join(tmp, "state-slots"), config)
    channel = grpc.insecure_channel(d.grpc)
    service = sbp_rpc.ServiceStub(channel)
    mine = sbp.Config(storageName="Kafka", action=sbp.Writing, timeUnit=sbp.ns)

    def register_within(seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                return service.registerClient(mine, timeout=10).id
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
            time.sleep(0.05)
        return None

    try:
        silent = service.registerClient(mine, timeout=10).id  # dies without streaming
        first = service.registerClient(mine, timeout=10).id
        breaks = OpenStream(service, [record(sbp, first, 1, {5: 1})])  # breaks later
        breaks.sent.wait(10)
        check(code_of(service.registerClient, mine) == grpc.StatusCode.RESOURCE_EXHAUSTED,
              "both slots held -> RESOURCE_EXHAUSTED")
        start = time.time()
        second = register_within(5)
        check(second is not None,
              f"the silent client's slot is freed after ingest.clientTimeoutMs while another "
              f"client streams ({time.time() - start:.2f} s)")
        streams = [OpenStream(service, [record(sbp, second, 1, {6: 1})])]
        streams[0].sent.wait(10)
        before = cpu_seconds(d.proc.pid)
        time.sleep(1)
        used = cpu_seconds(d.proc.pid) - before
        check(used < 0.3, f"the daemon idles meanwhile ({used:.2f} CPU s in 1 s)")
        breaks.future.cancel()  # its client is gone too, after its timeout
        check(code_of(service.registerClient, mine) == grpc.StatusCode.RESOURCE_EXHAUSTED,
              "the broken stream's slot is held until its timeout")
        third = register_within(5)
        check(third is not None, "the broken stream's slot is freed after ingest.clientTimeoutMs")
        streams.append(OpenStream(service, [record(sbp, third, 1, {7: 1})]))
        streams[1].sent.wait(10)
        gone = metric(d.http, "perld_sbp_slots_freed_total", 'reason="gone"')
        held = metric(d.http, "perld_sbp_slots")
        check(gone == 2 and held == 2, f"2 slots freed as gone, 2 held ({gone}, {held})")
        for stream in streams:
            stream.end()
            check(stream.code() == grpc.StatusCode.OK, "a stream ends OK")
        for c in (second, third):
            service.closeClient(sbp.ClientID(id=c), timeout=10)
        freed = sum(metric(d.http, "perld_sbp_slots_freed_total", f'reason="{r}"')
                    for r in ("closed", "run_ended"))
        held = metric(d.http, "perld_sbp_slots")
        check(freed == 2 and held == 0, f"the last two slots freed ({freed}, {held})")
    finally:
        channel.close()
        check(d.stop() == 0, "daemon stops cleanly")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    random.seed(7)
    with tempfile.TemporaryDirectory() as tmp:
        pb, rpc, _ = load_stubs(tmp)
        sbp, sbp_rpc = sbp_stubs(tmp)
        protocol(args, tmp, pb, rpc, sbp, sbp_rpc)
        slots(args, tmp, pb, rpc, sbp, sbp_rpc)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
