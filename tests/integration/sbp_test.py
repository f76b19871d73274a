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
Run by Debian's /usr/bin/python3.
"""
import argparse
import importlib
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import (ROOT, Daemon, check, exact_percentiles, finish,  # noqa: E402
                      load_stubs)

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    args = ap.parse_args()
    import grpc
    from google.protobuf import empty_pb2
    random.seed(7)
    with tempfile.TemporaryDirectory() as tmp:
        pb, rpc, _ = load_stubs(tmp)
        sbp, sbp_rpc = sbp_stubs(tmp)
        config = os.path.join(tmp, "perld.yaml")
        with open(config, "w") as f:
            f.write("timeUnit: ns\nreportingIntervalMs: 200\n"
                    f"percentiles: [{', '.join(str(p) for p in PERCENTS)}]\n"
                    "sbp:\n  storageName: Kafka\n  action: Writing\n  maxConnections: 3\n")
        d = Daemon(args.perld, os.path.join(tmp, "state"), config)
        channel = grpc.insecure_channel(d.grpc)
        service = sbp_rpc.ServiceStub(channel)
        query = rpc.QueryStub(channel)
        empty = empty_pb2.Empty()

        def code_of(call, *a):
            try:
                call(*a, timeout=10)
                return grpc.StatusCode.OK
            except grpc.RpcError as e:
                return e.code()

        try:
            version = service.getVersion(empty, timeout=10)
            check(version.major == 4 and version.minor == 0, "getVersion is 4.0")
            check(service.isVersionSupported(sbp.Version(major=4, minor=7), timeout=10).value and
                  not service.isVersionSupported(sbp.Version(major=3), timeout=10).value,
                  "isVersionSupported: major 4 only")
            cfg = service.getConfig(empty, timeout=10)
            check(cfg.storageName == "Kafka" and cfg.action == sbp.Writing and
                  cfg.timeUnit == sbp.ns and cfg.maxRecordSizeBytes == 16 << 20,
                  "getConfig: the configured storage, action, unit and record size")

            wrong = sbp.Config(storageName="Pulsar", action=sbp.Writing, timeUnit=sbp.ns)
            check(code_of(service.registerClient, wrong) == grpc.StatusCode.FAILED_PRECONDITION,
                  "registerClient: another storage -> FAILED_PRECONDITION")
            wrong = sbp.Config(storageName="kafka", action=sbp.Reading, timeUnit=sbp.ns)
            check(code_of(service.registerClient, wrong) == grpc.StatusCode.FAILED_PRECONDITION,
                  "registerClient: another action -> FAILED_PRECONDITION")

            # Three clients (storage name case-insensitive), different distributions.
            mine = sbp.Config(storageName="KAFKA", action=sbp.Writing, timeUnit=sbp.ns)
            ids = [service.registerClient(mine, timeout=10).id for _ in range(3)]
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
                runs = [r for r in query.ListRuns(pb.ListRunsRequest(), timeout=10).runs
                        if r.name == "sbp:Kafka:Writing"]
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
            def stream_code(records):
                try:
                    service.streamLatencies(iter(records), timeout=30)
                    return grpc.StatusCode.OK
                except grpc.RpcError as e:
                    return e.code()

            def fresh():
                return service.registerClient(mine, timeout=10).id

            c = fresh()
            check(stream_code([record(sbp, c, 2, {5: 1})]) == grpc.StatusCode.DATA_LOSS,
                  "a first record numbered 2 -> DATA_LOSS")
            service.closeClient(sbp.ClientID(id=c), timeout=10)
            c = fresh()
            check(stream_code([record(sbp, c, 1, {5: 1}), record(sbp, c, 3, {5: 1})]) ==
                  grpc.StatusCode.DATA_LOSS, "a sequence gap -> DATA_LOSS")
            service.closeClient(sbp.ClientID(id=c), timeout=10)
            c = fresh()
            check(stream_code([record(sbp, c, 1, {5: 1}), record(sbp, c, 1, {5: 1})]) ==
                  grpc.StatusCode.DATA_LOSS, "a duplicate sequence -> DATA_LOSS")
            service.closeClient(sbp.ClientID(id=c), timeout=10)
            c = fresh()
            check(stream_code([record(sbp, c, 1, {5: 1}), record(sbp, c + 100, 2, {5: 1})]) ==
                  grpc.StatusCode.INVALID_ARGUMENT, "a changed client id -> INVALID_ARGUMENT")
            service.closeClient(sbp.ClientID(id=c), timeout=10)
            c = fresh()
            bad = record(sbp, c, 1, {5: 2, 7: 1})
            bad.validLatencyRecords = 4
            check(stream_code([bad]) == grpc.StatusCode.INVALID_ARGUMENT,
                  "counts that disagree with validLatencyRecords -> INVALID_ARGUMENT")
            service.closeClient(sbp.ClientID(id=c), timeout=10)
            check(stream_code([record(sbp, 999, 1, {5: 1})]) == grpc.StatusCode.NOT_FOUND,
                  "records of an unregistered client -> NOT_FOUND")
        finally:
            channel.close()
            check(d.stop() == 0, "daemon stops cleanly")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
