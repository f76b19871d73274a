"""Prometheus remote write (issue 29) against the real receivers:

  * a real `prometheus --web.enable-remote-write-receiver` (Debian's 2.42) on
    a loopback port with a temporary storage directory, nothing scraping:
    perld's remoteWrite pushes every intervalMs; after a bench, every
    quantile Prometheus stored for the run -- the latest window
    (perld_run_latency_seconds) and the total
    (perld_run_total_latency_seconds) -- equals GetPercentiles exactly, as do
    the records counter and the summary's _count;
  * an outage: the receiver stopped for 10 s and started again on the same
    storage: the queue (large enough) holds what it could not take, and
    afterwards every collection's samples are stored (the collection
    counter's stored values have no gap), nothing dropped, retries counted;
  * a tiny remoteWrite.maxQueuedSamples with no receiver: the drops are
    counted in perld_remote_write_samples_dropped_total{reason="queue_full"};
  * with --victoria-metrics: the same exactness against Debian's
    victoria-metrics (its /api/v1/write and /api/v1/query).
Loopback only; every server is started by the test. Run by /usr/bin/python3.
"""
import argparse
import decimal
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import Daemon, check, finish, free_port, load_stubs  # noqa: E402

PERCENTS = [50, 90, 99, 99.9, 99.99]
INTERVAL_MS = 500


def get(address, path, timeout=10):
    with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as r:
        return r.read().decode()


def metric(text, name, labels=""):
    """The value of `name{labels}` in an exposition text (None: absent)."""
    pattern = re.compile(r"^" + re.escape(name) + r"(\{[^}]*\})? (\S+)$", re.M)
    for m in pattern.finditer(text):
        if labels in (m.group(1) or ""):
            return float(m.group(2))
    return None


def quantile_label(percent):
    """perld's quantile label text of a percent (99.9 -> 0.999), exactly."""
    d = decimal.Decimal(repr(float(percent))) / 100
    text = format(d.normalize(), "f")
    return text


class Receiver:
    """Prometheus (remote-write receiver) or VictoriaMetrics on a loopback port."""

    def __init__(self, kind, home, port=None):
        self.kind, self.home = kind, home
        self.port = port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.proc = None
        os.makedirs(home, exist_ok=True)

    def start(self):
        log = open(os.path.join(self.home, "log"), "a")
        if self.kind == "prometheus":
            config = os.path.join(self.home, "prometheus.yml")
            with open(config, "w") as f:
                f.write("global:\n  scrape_interval: 1h\n")
            cmd = ["prometheus", "--config.file=" + config,
                   "--storage.tsdb.path=" + os.path.join(self.home, "data"),
                   "--web.enable-remote-write-receiver",
                   f"--web.listen-address={self.address}"]
            ready = "/-/ready"
        else:
            cmd = ["victoria-metrics", "-storageDataPath=" + os.path.join(self.home, "data"),
                   f"-httpListenAddr={self.address}", "-search.latencyOffset=0s",
                   "-search.disableCache", "-retentionPeriod=1d"]
            ready = "/health"
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                get(self.address, ready, timeout=2)
                return True
            except OSError:
                time.sleep(0.2)
        return False

    def stop(self):
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None

    @property
    def write_url(self):
        return f"http://{self.address}/api/v1/write"

    def query(self, expr):
        """The instant query's result list (empty on an error)."""
        try:
            body = get(self.address, "/api/v1/query?" + urllib.parse.urlencode(
                {"query": expr, "time": f"{time.time():.3f}"}))
            return json.loads(body)["data"]["result"]
        except (OSError, KeyError, ValueError):
            return []

    def value(self, expr):
        result = self.query(expr)
        return result[0]["value"][1] if len(result) == 1 else None


def config_file(tmp, name, url, extra=""):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(f"reportingIntervalMs: 300\npercentiles: [{', '.join(map(str, PERCENTS))}]\n"
                f"remoteWrite:\n  url: {url}\n  intervalMs: {INTERVAL_MS}\n{extra}")
    return path


def bench(perlctl, target, name, records):
    p = subprocess.run([perlctl, "--target", target, "bench", "-writers", "2", "-size", "100",
                        "-records", str(records), "-time", "ns", "--name", name, "--wait"],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"bench {name} ran ({p.stderr.strip()[:100]})")


def wait_drained(d, seconds=30):
    """Waits until perld's remote-write queue is empty; returns /metrics text."""
    deadline = time.time() + seconds
    text = ""
    while time.time() < deadline:
        text = get(d.http, "/metrics")
        if metric(text, "perld_remote_write_queue_samples") == 0 and \
                (metric(text, "perld_remote_write_samples_sent_total") or 0) > 0:
            return text
        time.sleep(0.2)
    return text


def check_exact(receiver, query, pb, got, label):
    """Every stored quantile of the run of GetRun answer `got` (latest window
    and total), its records and _count equal perld's GetPercentiles / GetRun
    answers."""
    run_id = got.run.id
    records_total = got.total.records
    sel = f'run_id="{run_id}"'
    for scope, family in ((pb.GetPercentilesRequest.SCOPE_LATEST, "perld_run_latency_seconds"),
                          (pb.GetPercentilesRequest.SCOPE_TOTAL,
                           "perld_run_total_latency_seconds")):
        answer = query.GetPercentiles(pb.GetPercentilesRequest(
            run=str(run_id), percentiles=PERCENTS, scope=scope), timeout=10)
        wrong = []
        for p in answer.percentiles:
            expr = f'{family}{{{sel},quantile="{quantile_label(p.percent)}"}}'
            stored = None
            deadline = time.time() + 20
            while stored is None and time.time() < deadline:
                stored = receiver.value(expr)
                if stored is None:
                    time.sleep(0.3)
            exact = decimal.Decimal(p.latency) / decimal.Decimal(10**9)
            if stored is None or float(stored) != float(exact):
                wrong.append((expr, stored, str(exact)))
        check(not wrong and len(answer.percentiles) == len(PERCENTS),
              f"{label}: every {family} quantile stored equals GetPercentiles "
              f"({len(answer.percentiles)} percentiles; wrong: {wrong[:3]})")
    records = receiver.value(f"perld_run_records_total{{{sel}}}")
    count = receiver.value(f"perld_run_latency_seconds_count{{{sel}}}")
    check(records is not None and float(records) == records_total and
          count is not None and float(count) == records_total,
          f"{label}: perld_run_records_total ({records}) and _count ({count}) stored = "
          f"{records_total}")


def prometheus_part(args, tmp, pb, rpc, grpc):
    prom = Receiver("prometheus", os.path.join(tmp, "prometheus"))
    check(prom.start(), "prometheus --web.enable-remote-write-receiver started")
    d = Daemon(args.perld, os.path.join(tmp, "state"),
               config_file(tmp, "perld", prom.write_url, "  maxQueuedSamples: 200000\n"),
               log=os.path.join(tmp, "perld.log"))
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))
    try:
        bench(args.perlctl, d.grpc, "rw-run", 300000)
        run = query.GetRun(pb.GetRunRequest(run="rw-run"), timeout=10)
        time.sleep(3 * INTERVAL_MS / 1000)  # a collection after the run's end
        wait_drained(d)
        check_exact(prom, query, pb, run, "prometheus")
        check(prom.value('perld_run_info{run="rw-run"}') == "1",
              "perld_run_info stored (labels as /metrics)")

        # Outage: the receiver away for 10 s, then back on the same storage.
        start = time.time()
        prom.stop()
        time.sleep(10)
        before = get(d.http, "/metrics")
        queued = metric(before, "perld_remote_write_queue_samples")
        check(queued is not None and queued > 0,
              f"while the receiver is down the samples wait in the queue ({queued})")
        check(prom.start(), "prometheus started again")
        text = wait_drained(d, 60)
        time.sleep(1)
        # Every collection's samples stored: the stored collection counter
        # values over the whole period are consecutive.
        window = int(time.time() - start) + 20
        result = prom.query(f"perld_remote_write_collections_total[{window}s]")
        values = [float(v[1]) for v in result[0]["values"]] if len(result) == 1 else []
        gaps = [(a, b) for a, b in zip(values, values[1:]) if b != a + 1]
        outage_points = [v for v in result[0]["values"]
                         if start + 1 < float(v[0]) < start + 9] if result else []
        check(len(values) > 20 and not gaps and len(outage_points) >= 10,
              f"after a 10 s outage every interval's samples are stored ({len(values)} "
              f"collections, {len(outage_points)} from the outage, gaps {gaps[:3]})")
        dropped = sum(metric(text, "perld_remote_write_samples_dropped_total",
                             f'reason="{r}"') or 0 for r in ("queue_full", "rejected", "shutdown"))
        retries = metric(text, "perld_remote_write_retries_total") or 0
        check(dropped == 0 and retries > 0,
              f"nothing dropped within the queue bound ({dropped}); retries counted ({retries})")
        errors = metric(text, "perld_remote_write_requests_total", 'code="error"') or 0
        check(errors > 0, f"the outage's failed requests counted ({errors} with no answer)")
    finally:
        d.stop()
        prom.stop()

    # A tiny queue and no receiver: drops counted, the daemon unaffected.
    dead = f"http://127.0.0.1:{free_port()}/api/v1/write"
    d = Daemon(args.perld, os.path.join(tmp, "state-tiny"),
               config_file(tmp, "tiny", dead, "  maxQueuedSamples: 100\n"),
               log=os.path.join(tmp, "perld-tiny.log"))
    try:
        time.sleep(4 * INTERVAL_MS / 1000)
        text = get(d.http, "/metrics")
        full = metric(text, "perld_remote_write_samples_dropped_total", 'reason="queue_full"')
        queued = metric(text, "perld_remote_write_queue_samples")
        check(full is not None and full > 0 and queued is not None and queued <= 100,
              f"maxQueuedSamples 100 without a receiver: drops counted ({full}), "
              f"queue bounded ({queued})")
        check(metric(text, "perld_remote_write_queue_capacity_samples") == 100,
              "perld_remote_write_queue_capacity_samples = maxQueuedSamples")
        check(get(d.http, "/healthz").strip() == "ok", "the daemon keeps serving")
    finally:
        rc = d.stop()
        check(rc == 0, f"SIGTERM with an unreachable receiver exits 0 within the drain ({rc})")


def victoria_part(args, tmp, pb, rpc, grpc):
    if shutil.which("victoria-metrics") is None:
        check(False, "victoria-metrics is installed (Debian package victoria-metrics)")
        return
    vm = Receiver("victoria", os.path.join(tmp, "victoria"))
    check(vm.start(), "victoria-metrics started")
    d = Daemon(args.perld, os.path.join(tmp, "state-vm"), config_file(tmp, "vm", vm.write_url),
               log=os.path.join(tmp, "perld-vm.log"))
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))
    try:
        bench(args.perlctl, d.grpc, "rw-vm", 300000)
        run = query.GetRun(pb.GetRunRequest(run="rw-vm"), timeout=10)
        time.sleep(3 * INTERVAL_MS / 1000)
        text = wait_drained(d)
        check_exact(vm, query, pb, run, "victoria-metrics")
        dropped = sum(metric(text, "perld_remote_write_samples_dropped_total",
                             f'reason="{r}"') or 0 for r in ("queue_full", "rejected"))
        check(dropped == 0, f"victoria-metrics accepted every request ({dropped} dropped)")
    finally:
        d.stop()
        vm.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    ap.add_argument("--receiver", choices=["prometheus", "victoria-metrics"],
                    default="prometheus")
    args = ap.parse_args()
    import grpc
    tmp = tempfile.mkdtemp(prefix="perld-remote-write-")
    pb, rpc, _ = load_stubs(tmp)
    if args.receiver == "prometheus":
        if shutil.which("prometheus") is None:
            check(False, "prometheus is installed (Debian package prometheus)")
            return finish()
        prometheus_part(args, tmp, pb, rpc, grpc)
    else:
        victoria_part(args, tmp, pb, rpc, grpc)
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
