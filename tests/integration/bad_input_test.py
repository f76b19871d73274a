#!/usr/bin/env python3
"""Hostile input against the real perld (issue 12's bad-input list): zero,
negative and overflowing counts, absurd latency ranges, 10,000 concurrent
Ingest streams against ingest.maxStreams, and slow HTTP clients -- each
refused with a clear status, counted, the daemon's memory bounded, and
nothing of a good client's run lost meanwhile.
"""
import argparse
import asyncio
import os
import socket
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import Daemon, IngestStream, check, finish, load_stubs  # noqa: E402

import grpc  # noqa: E402

STREAMS = 10_000
MAX_STREAMS = 64


def call_status(stub, ipb, open_msg, *messages):
    """Opens a stream, sends `messages`, returns (code, details) of its end."""
    s = IngestStream(stub, ipb, open_msg, timeout=30)
    try:
        s.recv()  # opened
        for m in messages:
            s.send(**m)
            s.recv()
        s.end()
        for _ in s.call:
            pass
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details() or ""


async def many_streams(target, ipb, open_for, stop):
    """STREAMS concurrent Ingest streams over 20 channels; each sends its
    open and waits. Returns (opened, refused, other) counts."""
    channels = [grpc.aio.insecure_channel(target) for _ in range(20)]
    results = {"opened": 0, "refused": 0, "other": 0}

    async def one(i):
        stub_call = channels[i % len(channels)].stream_stream(
            "/perld.v1.Ingest/Stream", request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=ipb.IngestResponse.FromString)
        call = stub_call(timeout=120)
        try:
            await call.write(ipb.IngestRequest(open=open_for(i)))
            response = await call.read()
            if response is grpc.aio.EOF:
                results["other"] += 1
                return
            results["opened"] += 1
            await stop.wait()
            await call.done_writing()
            await call.code()
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "maxStreams" in (e.details() or ""):
                results["refused"] += 1
            else:
                results["other"] += 1
        finally:
            call.cancel()

    tasks = [asyncio.create_task(one(i)) for i in range(STREAMS)]
    return channels, tasks, results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--sanitized", action="store_true", help="skip the RSS bound (ASan quarantine)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pb, rpc, _ = load_stubs(tmp)
        import importlib
        ipb = importlib.import_module("perld.v1.ingest_pb2")
        ipb_grpc = importlib.import_module("perld.v1.ingest_pb2_grpc")
        config = os.path.join(tmp, "perld.yaml")
        with open(config, "w") as f:
            f.write(f"reportingIntervalMs: 200\ningest:\n  maxStreams: {MAX_STREAMS}\n"
                    "  clientTimeoutMs: 1000\n  maxClientsPerRun: 4096\n"
                    "  maxClientMemoryBytes: 8388608\n  maxMemoryBytes: 1048576\n")
        d = Daemon(args.perld, os.path.join(tmp, "state"), config)
        try:
            channel = grpc.insecure_channel(d.grpc)
            stub = ipb_grpc.IngestStub(channel)
            query = rpc.QueryStub(channel)
            NS = pb.TIME_UNIT_NS

            def opener(run, client, mode=ipb.IngestOpen.MODE_WINDOWS, **kw):
                return ipb.IngestOpen(run_name=run, client_id=client, mode=mode, time_unit=NS, **kw)

            def win(seq, latencies, counts, **kw):
                deltas, prev = [], 0
                for v in latencies:
                    deltas.append(v - prev)
                    prev = v
                valid = kw.pop("valid", sum(counts))
                return {"window": ipb.WindowReport(
                    sequence=seq, records=kw.pop("records", valid), valid_latency_records=valid,
                    min_latency=latencies[0] if latencies else 0,
                    max_latency=latencies[-1] if latencies else 0,
                    total_latency=kw.pop("total", sum(a * c for a, c in zip(latencies, counts))),
                    latency_delta=deltas, count=counts, **kw)}

            # --- counts and ranges ------------------------------------------------
            code, detail = call_status(stub, ipb, opener("bad", "zero"), win(1, [5, 9], [3, 0]))
            check(code == grpc.StatusCode.INVALID_ARGUMENT, f"a zero count: INVALID_ARGUMENT ({detail})")
            big = 2 ** 63 - 1
            code, detail = call_status(stub, ipb, opener("bad", "overflow"),
                                       win(1, [5, 9], [big, big], valid=-2, records=-2, total=0))
            check(code == grpc.StatusCode.INVALID_ARGUMENT,
                  f"counts overflowing int64: INVALID_ARGUMENT ({detail})")
            code, detail = call_status(stub, ipb, opener("bad", "negative"),
                                       win(1, [5], [1], records=-1))
            check(code == grpc.StatusCode.INVALID_ARGUMENT, f"negative records: INVALID_ARGUMENT ({detail})")
            code, detail = call_status(stub, ipb, opener("bad", "outside"), win(1, [2 ** 62 + 5], [1]))
            check(code == grpc.StatusCode.INVALID_ARGUMENT,
                  f"a latency beyond the run's range: INVALID_ARGUMENT ({detail})")
            for name, kw in (("min>max", {"min_latency": 100, "max_latency": 10}),
                             ("negative min", {"min_latency": -5}),
                             ("max 2^63-1", {"max_latency": big})):
                code, detail = call_status(stub, ipb, opener("absurd-" + name.replace(" ", ""),
                                                             "c", **kw))
                check(code == grpc.StatusCode.INVALID_ARGUMENT,
                      f"an absurd range ({name}): INVALID_ARGUMENT ({detail})")

            wide = list(range(1, 100_001))  # 100,000 pairs: 1.6 MB queued, over 1 MiB
            code, detail = call_status(stub, ipb, opener("bad", "huge"), win(1, wide, [1] * len(wide)))
            check(code == grpc.StatusCode.INVALID_ARGUMENT and "ingest.maxMemoryBytes" in detail,
                  f"a window over the global memory limit: INVALID_ARGUMENT, final ({detail[:90]})")

            # GetClients parses its own request (a raw method): a malformed
            # message is INVALID_ARGUMENT, the daemon goes on.
            raw_clients = channel.unary_unary("/perld.v1.Query/GetClients",
                                              request_serializer=lambda b: b,
                                              response_deserializer=lambda b: b)
            for name, junk in (("a length past the end", b"\x0a\xff\xff\xff\xff\x0f"),
                               ("a truncated varint", b"\x18\xff"),
                               ("an invalid wire type", b"\x0f")):
                try:
                    raw_clients(junk, timeout=10)
                    code, detail = grpc.StatusCode.OK, ""
                except grpc.RpcError as e:
                    code, detail = e.code(), e.details() or ""
                check(code == grpc.StatusCode.INVALID_ARGUMENT and "GetClientsRequest" in detail,
                      f"GetClients with {name}: INVALID_ARGUMENT ({detail})")

            # --- a good client keeps streaming through everything below ----------
            good = IngestStream(stub, ipb, opener("good", "g", mode=ipb.IngestOpen.MODE_RAW), 600)
            good.recv()
            good_records = 0
            seq = 0

            def good_batch():
                nonlocal seq, good_records
                seq += 1
                good.send(batch=ipb.TimestampBatch(sequence=seq, count=100,
                                                   latency_delta=[1] * 100, constant_records=1))
                good.recv()
                good_records += 100

            good_batch()
            rss_before = d.rss_kib()

            # --- 10,000 concurrent streams against maxStreams ---------------------
            async def storm():
                stop = asyncio.Event()
                channels, tasks, results = await many_streams(
                    d.grpc, ipb, lambda i: opener("storm", f"s{i}"), stop)
                deadline = time.time() + 120
                while time.time() < deadline and \
                        results["opened"] + results["refused"] + results["other"] < STREAMS:
                    await asyncio.sleep(0.2)
                peak_rss = d.rss_kib()
                stop.set()
                await asyncio.gather(*tasks, return_exceptions=True)
                for c in channels:
                    await c.close()
                return results, peak_rss

            results, peak_rss = asyncio.run(storm())
            good_batch()
            check(results["opened"] <= MAX_STREAMS + 1 and results["opened"] >= 1,
                  f"at most ingest.maxStreams ({MAX_STREAMS}) of {STREAMS} streams open at once "
                  f"({results})")
            check(results["refused"] + results["opened"] + results["other"] == STREAMS and
                  results["refused"] >= STREAMS - MAX_STREAMS - 1 - results["other"],
                  f"the rest refused with RESOURCE_EXHAUSTED naming ingest.maxStreams ({results})")
            check(args.sanitized or peak_rss - rss_before < 256 * 1024,
                  f"memory bounded during the storm: RSS {rss_before} -> {peak_rss} KiB")
            metrics = urllib.request.urlopen(f"http://{d.http}/metrics", timeout=10).read().decode()
            refused = [line for line in metrics.splitlines()
                       if line.startswith("perld_ingest_refused_total") and 'reason="streams"' in line]
            check(refused and float(refused[0].split()[-1]) >= results["refused"],
                  f"the refusals are counted ({refused})")
            memory = [line for line in metrics.splitlines()
                      if line.startswith("perld_ingest_refused_total") and 'reason="memory"' in line]
            check(memory and float(memory[0].split()[-1]) == 1,
                  f"the global memory refusal is counted ({memory})")
            # The good client's batch is queued until the recorder merges it.
            deadline = time.time() + 10
            while "perld_ingest_queued_window_bytes 0" not in metrics and time.time() < deadline:
                time.sleep(0.05)
                metrics = urllib.request.urlopen(f"http://{d.http}/metrics",
                                                 timeout=10).read().decode()
            check("perld_ingest_queued_window_bytes 0" in metrics,
                  "perld_ingest_queued_window_bytes: nothing left queued")

            # --- slow HTTP clients -------------------------------------------------
            host, port = d.http.rsplit(":", 1)
            slow = []
            for _ in range(16):
                s = socket.create_connection((host, int(port)), timeout=10)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finishes
                slow.append(s)
            answered = False
            deadline = time.time() + 60
            while time.time() < deadline and not answered:
                try:
                    answered = urllib.request.urlopen(
                        f"http://{d.http}/healthz", timeout=10).status == 200
                except OSError:
                    time.sleep(0.5)
            check(answered, "16 slow HTTP clients do not keep /healthz from answering")
            for s in slow:
                s.close()
            good_batch()

            # --- the good client's run is exact ------------------------------------
            good.finish(seq)
            run = query.GetRun(pb.GetRunRequest(run="good"), timeout=10)
            deadline = time.time() + 30
            while run.run.state == pb.RUN_STATE_RUNNING and time.time() < deadline:
                time.sleep(0.1)
                run = query.GetRun(pb.GetRunRequest(run="good"), timeout=10)
            check(run.total.records == good_records,
                  f"the good client's run: {run.total.records} == {good_records} records")
            check(d.proc.poll() is None, "the daemon is still running")
        finally:
            rc = d.stop()
        check(rc == 0, f"SIGTERM after it all: exit {rc}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
