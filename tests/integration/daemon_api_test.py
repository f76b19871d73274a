#!/usr/bin/env python3
"""End-to-end checks of the perld daemon through a gRPC client that is not
ours: Debian's grpcio with stubs that grpc_tools generates from proto/ at
test start (issue 8's test list).

Starts the real `perld` on 127.0.0.1:0 with a temporary state directory and
checks:
  * exact counts through Control: odd record counts, several writers, both
    queue kinds, two runs at once that stay separate;
  * the total's percentiles equal those of the same run's SBK CSV Total row,
    and GetPercentiles answers a set nobody configured;
  * WatchRun delivers every periodic window once, in order, then the total;
  * unknown run -> NOT_FOUND, unknown scope -> INVALID_ARGUMENT;
  * health SERVING (overall and per service), reflection lists the services.

    /usr/bin/python3 tests/integration/daemon_api_test.py --perld PATH
Exit 0 when every check passes; every wait is bounded.
"""
import argparse
import csv
import os
import sys
import tempfile

from perld_it import Daemon, check, finish, load_stubs, wait_ended


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    args = ap.parse_args()
    import grpc
    with tempfile.TemporaryDirectory() as tmp:
        pb, rpc, m = load_stubs(tmp)
        health_pb, health_rpc = m["health_pb2"], m["health_pb2_grpc"]
        refl_pb, refl_rpc = m["reflection_pb2"], m["reflection_pb2_grpc"]

        csv_dir = os.path.join(tmp, "csv")
        config = os.path.join(tmp, "perld.yaml")
        with open(config, "w") as f:
            f.write(f"csvDir: {csv_dir}\nreportingIntervalMs: 200\n")
        daemon = Daemon(args.perld, os.path.join(tmp, "state"), config)
        try:
            channel = grpc.insecure_channel(daemon.grpc)
            query = rpc.QueryStub(channel)
            control = rpc.ControlStub(channel)

            # Health and reflection: generic gRPC tools work.
            health = health_rpc.HealthStub(channel)
            for service in ("", "perld.v1.Query", "perld.v1.Control"):
                status = health.Check(health_pb.HealthCheckRequest(service=service), timeout=10)
                check(status.status == health_pb.HealthCheckResponse.SERVING,
                      f"health '{service}' is SERVING")
            refl = refl_rpc.ServerReflectionStub(channel)
            replies = refl.ServerReflectionInfo(
                iter([refl_pb.ServerReflectionRequest(list_services="*")]), timeout=10)
            names = {s.name for r in replies for s in r.list_services_response.service}
            check({"perld.v1.Query", "perld.v1.Control", "grpc.health.v1.Health"} <= names,
                  f"reflection lists the services ({sorted(names)})")

            # Two runs at once, odd counts, several writers, both queue kinds.
            runs = {}
            # The first closes a window every 10 ms, so watch sees several.
            for name, writers, records, mpsc, interval in (
                    ("odd-mpsc", 3, 3_000_001, True, 10),
                    ("odd-library", 2, 777_777, False, 200)):
                opts = pb.BenchOptions(writers=writers, records=records, size=100,
                                       time_unit=pb.TIME_UNIT_NS, mpscqueue=mpsc,
                                       reporting_interval_ms=interval)
                started = control.StartBench(pb.StartBenchRequest(name=name, options=opts),
                                             timeout=10)
                runs[name] = (started.run_id, writers, records)

            # Watch the first run from its start: every window once, in order.
            watched_id = runs["odd-mpsc"][0]
            events = list(query.WatchRun(pb.WatchRunRequest(run=str(watched_id), from_start=True),
                                         timeout=120))
            windows = [e.window for e in events if e.HasField("window")]
            periodic = [w for w in windows if w.kind == pb.Window.KIND_PERIODIC]
            totals = [w for w in windows if w.kind == pb.Window.KIND_TOTAL]
            check(len(periodic) >= 2 and
                  [w.seq for w in periodic] == list(range(1, len(periodic) + 1)),
                  f"watch: periodic windows 1..{len(periodic)} once, in order")
            check(len(totals) == 1 and windows[-1].kind == pb.Window.KIND_TOTAL,
                  "watch: the total comes once, last")
            check(sum(w.records for w in periodic) == runs["odd-mpsc"][2],
                  "watch: the periodic windows add up to the run's records")

            for name, (run_id, writers, records) in runs.items():
                got = wait_ended(query, pb, run_id)
                t = got.total
                check(got.run.state == pb.RUN_STATE_FINISHED, f"{name}: finished")
                check(t.records == records and t.valid_latency_records == records,
                      f"{name}: total {t.records} records == {records} requested")
                check(t.invalid_latency_records == 0, f"{name}: no invalid latency")
                check(t.bytes == records * 100, f"{name}: bytes == records x size")
                check(got.run.writers == writers, f"{name}: {writers} writers in the run info")

                # The total's percentiles equal the SBK CSV Total row's.
                with open(os.path.join(csv_dir, f"run-{run_id}.csv")) as f:
                    rows = list(csv.DictReader(f))
                total_rows = [r for r in rows if r["Type"] == "Total"]
                check(len(total_rows) == 1, f"{name}: one Total row in the CSV")
                if total_rows:
                    row = total_rows[0]
                    check(int(row["Records"]) == t.records, f"{name}: CSV Total records")
                    for p in t.percentiles:
                        key = "Percentile_" + format(p.percent, "g")
                        check(key in row and int(row[key]) == p.latency,
                              f"{name}: {key} CSV {row.get(key)} == gRPC {p.latency}")

            # Any percentile set, exactly: monotone and within [min, max].
            run_id = runs["odd-library"][0]
            answer = query.GetPercentiles(pb.GetPercentilesRequest(
                run=str(run_id), percentiles=[0.001, 12.5, 50, 99.999, 100]), timeout=10)
            lat = [p.latency for p in answer.percentiles]
            total = query.GetRun(pb.GetRunRequest(run=str(run_id)), timeout=10).total
            check(len(lat) == 5 and lat == sorted(lat), "GetPercentiles: any set, ascending")
            check(lat[-1] == total.max_latency and lat[0] >= total.min_latency,
                  "GetPercentiles: 100th is the max latency")

            # Errors are precise status codes.
            for call, request, code in (
                    (query.GetRun, pb.GetRunRequest(run="no-such-run"),
                     grpc.StatusCode.NOT_FOUND),
                    (query.GetPercentiles, pb.GetPercentilesRequest(run=str(run_id), scope=7),
                     grpc.StatusCode.INVALID_ARGUMENT),
                    (query.GetPercentiles, pb.GetPercentilesRequest(run=str(run_id), method=7),
                     grpc.StatusCode.INVALID_ARGUMENT),
                    (control.StartBench,
                     pb.StartBenchRequest(options=pb.BenchOptions(writers=-1, records=10)),
                     grpc.StatusCode.INVALID_ARGUMENT)):
                try:
                    call(request, timeout=10)
                    check(False, f"{type(request).__name__} -> {code.name}")
                except grpc.RpcError as e:
                    check(e.code() == code, f"{type(request).__name__} -> {e.code().name} "
                          f"({e.details()})")
        finally:
            rc = daemon.stop()
            check(rc == 0, f"SIGTERM: perld exits 0 (got {rc})")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
