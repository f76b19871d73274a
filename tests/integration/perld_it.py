"""Shared pieces of the daemon integration tests: the real perld on
127.0.0.1:0, gRPC stubs generated from proto/ by grpc_tools (plus the
standard health and reflection protos), and a check() that records failures.
Run under Debian's /usr/bin/python3 (python3-grpcio, python3-grpc-tools).
"""
import importlib
import json
import math
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The standard health and reflection protos, only the parts used here
# (proto3 ignores the fields left out).
HEALTH_PROTO = """
syntax = "proto3";
package grpc.health.v1;
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
  ServingStatus status = 1;
}
service Health {
  rpc Check(HealthCheckRequest) returns (HealthCheckResponse);
  rpc Watch(HealthCheckRequest) returns (stream HealthCheckResponse);
}
"""
REFLECTION_PROTO = """
syntax = "proto3";
package grpc.reflection.v1alpha;
message ServerReflectionRequest {
  string host = 1;
  oneof message_request { string list_services = 7; }
}
message ServiceResponse { string name = 1; }
message ListServiceResponse { repeated ServiceResponse service = 1; }
message ServerReflectionResponse {
  string valid_host = 1;
  oneof message_response { ListServiceResponse list_services_response = 6; }
}
service ServerReflection {
  rpc ServerReflectionInfo(stream ServerReflectionRequest) returns (stream ServerReflectionResponse);
}
"""

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def generate_stubs(out):
    from grpc_tools import protoc
    with open(os.path.join(out, "health.proto"), "w") as f:
        f.write(HEALTH_PROTO)
    with open(os.path.join(out, "reflection.proto"), "w") as f:
        f.write(REFLECTION_PROTO)
    for include, proto in ((os.path.join(ROOT, "proto"), "perld/v1/perld.proto"),
                           (os.path.join(ROOT, "proto"), "perld/v1/ingest.proto"),
                           (out, "health.proto"), (out, "reflection.proto")):
        rc = protoc.main(["protoc", "-I" + include, "--python_out=" + out,
                          "--grpc_python_out=" + out, proto])
        if rc != 0:
            raise RuntimeError("grpc_tools.protoc failed for " + proto)
    sys.path.insert(0, out)


class Daemon:
    """perld on port 0; .grpc and .http are the addresses it printed."""

    def __init__(self, perld, state, config=None, extra=(), log=None, grpc_listen="127.0.0.1:0",
                 env=None):
        """log: a path that receives the daemon's stderr (default: discarded);
        env: variables added to the daemon's environment (e.g. PERLD_FAILPOINT)."""
        cmd = [perld, "--grpc-listen", grpc_listen, "--http-listen", "127.0.0.1:0",
               "--state-dir", state] + (["--config", config] if config else []) + list(extra)
        self.log = open(log, "a") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=dict(os.environ, **env) if env else None)
        self.grpc = self.http = None
        deadline = time.time() + 30
        while (self.grpc is None or self.http is None) and time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.match(r"perld: (gRPC|HTTP) listening on (\S+)", line)
            if m and m.group(1) == "gRPC":
                if not m.group(2).startswith("unix:"):
                    self.grpc = m.group(2)
            elif m:
                self.http = m.group(2)
        if self.grpc is None or self.http is None:
            self.proc.kill()
            raise RuntimeError("perld did not print its listen addresses")
        # Keep draining stdout so the daemon never blocks on a full pipe.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def rss_kib(self, field="VmRSS"):
        """The daemon's resident memory (field "VmHWM": its peak) in KiB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def wait_checkpoint(self, after=0, seconds=60):
        """Waits (bounded) until this process committed more than `after`
        ingest checkpoints (perld_ingest_checkpoints_total); False when it
        did not."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            if (metric(self.http, "perld_ingest_checkpoints_total") or 0) > after:
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return -9


class IngestStream:
    """One perld.v1.Ingest stream driven message by message."""

    def __init__(self, stub, ipb, open_msg, timeout=120):
        self.ipb = ipb
        self.duplicates = 0  # as the last ack read reported
        self.acked = 0  # the highest acked_sequence read
        self.q = queue.Queue()
        self.q.put(ipb.IngestRequest(open=open_msg))
        self.call = stub.Stream(iter(self.q.get, None), timeout=timeout)

    def recv(self):
        reply = next(self.call)
        if reply.HasField("opened"):
            self.acked = reply.opened.acked_sequence
        if reply.HasField("ack"):
            self.duplicates = reply.ack.duplicates
            self.acked = max(self.acked, reply.ack.acked_sequence)
        return reply

    def send(self, **body):
        self.q.put(self.ipb.IngestRequest(**body))

    def ask(self, **body):
        """Sends one message and returns the first response about it.

        Acks are cumulative and also come as checkpoints make messages
        durable, so an ack read after sending may be about earlier messages:
        it is skipped. A new batch or window is answered by an ack reaching
        its sequence, a resend by one whose duplicates grew, a close by the
        last ack before the stream ends (sent once the close is durable).
        An error raises, as next() on the call does."""
        duplicates, acked = self.duplicates, self.acked
        self.send(**body)
        if "close" in body:
            last = None
            for reply in self.call:
                if reply.HasField("ack"):
                    self.duplicates = reply.ack.duplicates
                last = reply
            return last
        sequence = next(iter(body.values())).sequence
        while True:
            reply = self.recv()
            if not reply.HasField("ack"):
                return reply
            if sequence <= acked or sequence == 0:
                if reply.ack.duplicates > duplicates:
                    return reply
            elif reply.ack.acked_sequence >= sequence:
                return reply

    def end(self):
        self.q.put(None)

    def cancel(self):
        self.call.cancel()

    def finish(self, last):
        """Closes after sequence `last`, ends the stream, returns the close's ack."""
        reply = self.ask(close=self.ipb.IngestClose(last_sequence=last))
        self.end()
        for _ in self.call:
            pass
        return reply


def wait_ended(query, pb, run_id, seconds=120):
    """Polls GetRun until the run is no longer running; returns the response."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        run = query.GetRun(pb.GetRunRequest(run=str(run_id)), timeout=10)
        if run.run.state != pb.RUN_STATE_RUNNING:
            return run
        time.sleep(0.05)
    raise RuntimeError(f"run {run_id} did not end within {seconds} s")



def load_stubs(tmp):
    """Generates the stubs into tmp and returns (perld pb, perld rpc, modules dict)."""
    generate_stubs(tmp)
    names = ("health_pb2", "health_pb2_grpc", "reflection_pb2", "reflection_pb2_grpc")
    return (importlib.import_module("perld.v1.perld_pb2"),
            importlib.import_module("perld.v1.perld_pb2_grpc"),
            {n: importlib.import_module(n) for n in names})


def ingest_stubs(tmp):
    """Generates the stubs into tmp and returns (perld.v1 ingest pb, its rpc module)."""
    load_stubs(tmp)
    return (importlib.import_module("perld.v1.ingest_pb2"),
            importlib.import_module("perld.v1.ingest_pb2_grpc"))


def merged_distributions(files, kind="service"):
    """(ascending (latency, count) pairs, records) of `perlctl load
    --distribution-out` files merged; kind "response": a rate-controlled
    client's response times."""
    pairs, records = {}, 0
    for f in files:
        with open(f) as fh:
            d = json.load(fh)
        if kind == "response":
            d = d["response"]
        records += d["records"]
        for latency, count in d["latencies"]:
            pairs[latency] = pairs.get(latency, 0) + count
    return sorted(pairs.items()), records


def exact_percentiles(pairs, percents, method="sbk"):
    """The daemon's rules (daemon/core/latency_percentiles.h) over ascending
    (latency, count) pairs, as 0-based indexes clamped to [0, V - 1]:
    sbk floor(V * p / 100); nearest-rank (HdrHistogram Java) ceil(V *
    nextDown(p) / 100) - 1; hdr (HdrHistogram C) int(p / 100 * V + 0.5) - 1."""
    valid = sum(c for _, c in pairs)
    out = []
    for p in percents:
        if valid == 0:
            out.append(0)
            continue
        if method == "sbk":
            index = int(valid * (p / 100.0))
        elif method == "nearest-rank":
            index = math.ceil(min(max(math.nextafter(p, -math.inf), 0.0), 100.0) * valid / 100.0) - 1
        else:
            index = int(min(p, 100.0) / 100 * valid + 0.5) - 1
        index = min(max(index, 0), valid - 1)
        cumulative = 0
        for latency, count in pairs:
            if index < cumulative + count:
                out.append(latency)
                break
            cumulative += count
    return out


def spooled_loads(perlctl, target, run, tmp, tag, modes, seconds, throughput, interval=1):
    """Starts one `perlctl load` per mode ("raw"/"windows") into `run` at
    `target`, each with its own spool and --distribution-out file in tmp;
    returns (the distribution files, the processes). A mode ending in
    "-memory" (e.g. "windows-memory") has no spool: the client keeps what
    the daemon has not made durable in memory. `interval` (seconds) is the
    run's reporting interval, so also how often the daemon checkpoints it.
    `throughput`: MB/s of 100-byte records per client, a rate-controlled
    run with a response view (keep it sustainable: 2 is ~21,000 operations/s;
    an unreachable rate makes every response time distinct)."""
    outs, procs = [], []
    for i, mode in enumerate(modes):
        out = os.path.join(tmp, f"{tag}{i}.json")
        spool = [] if mode.endswith("-memory") else [
            "--spool", os.path.join(tmp, f"spool-{tag}{i}")]
        cmd = [perlctl, "--target", target, "--json", "load", "-size", "100", "-time", "ns",
               "-writers", "1", "-seconds", str(seconds), "-throughput", str(throughput),
               "--run", run, "--mode", mode.removesuffix("-memory")] + spool + [
               "--distribution-out", out, "-interval", str(interval)]
        outs.append(out)
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    return outs, procs


_CRC32C_TABLE = []


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli), as daemon/common/crc32c.h computes it."""
    if not _CRC32C_TABLE:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _CRC32C_TABLE.append(c)
    crc ^= 0xFFFFFFFF
    table = _CRC32C_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def spool_contents(spool_dir, ipb):
    """The messages of a client spool ({key: IngestRequest}), read as the
    client library's recovery reads it (client/lib/spool.h): segment files
    in key order, records `u32 length, u32 CRC32C(payload + key), u64 key,
    payload`; the first incomplete record, failed CRC or key that does not
    rise ends the spool (a torn tail is never replayed)."""
    import glob
    import struct
    out, last = {}, 0
    for path in sorted(glob.glob(os.path.join(spool_dir, "seg-*.log"))):
        with open(path, "rb") as f:
            data = f.read()
        offset = 0
        while offset + 16 <= len(data):
            length, crc, key = struct.unpack_from("<IIQ", data, offset)
            end = offset + 16 + length
            if end > len(data) or key <= last:
                break
            payload = data[offset + 16:end]
            if crc32c(payload + data[offset + 8:offset + 16]) != crc:
                break
            message = ipb.IngestRequest()
            message.ParseFromString(payload)
            out[key] = message
            last = key
            offset = end
        else:
            continue
        break  # a bad record ends the whole spool, later segments included
    return out, last


def messages_truth(messages, low=0, high=180_000_000_000):
    """({latency: count}, records) of Ingest messages: raw batches' latencies
    (the delta column summed) with their records, windows' pairs; what a
    daemon merging exactly those messages holds (negative latencies are
    invalid, latencies outside [low, high] discarded: both not in pairs)."""
    pairs, records = {}, 0
    for m in messages:
        if m.HasField("batch"):
            b = m.batch
            latency = 0
            for i in range(b.count):
                latency += b.latency_delta[i]
                r = b.records[i] if len(b.records) else max(1, b.constant_records)
                records += r
                if low <= latency <= high:
                    pairs[latency] = pairs.get(latency, 0) + r
        elif m.HasField("window"):
            w = m.window
            records += w.records
            latency = 0
            for delta, count in zip(w.latency_delta, w.count):
                latency += delta
                pairs[latency] = pairs.get(latency, 0) + count
    return pairs, records


def merge_pairs(*dicts_or_lists):
    """Ascending (latency, count) pairs of several {latency: count} dicts or
    pair lists merged."""
    merged = {}
    for d in dicts_or_lists:
        for latency, count in (d.items() if isinstance(d, dict) else d):
            merged[latency] = merged.get(latency, 0) + count
    return sorted(merged.items())


class Perlctl:
    """perlctl against one daemon: run() gives (exit code, stdout, stderr);
    json() a --json answer as a dict (checked to exit 0); distribution() a
    run's exported distribution of one latency kind as [latency, count]
    lists, ascending."""

    def __init__(self, perlctl, target):
        self.perlctl, self.target = perlctl, target

    def run(self, *cmd, timeout=120):
        p = subprocess.run([self.perlctl, "--target", self.target] + list(cmd),
                           capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def json(self, *cmd):
        rc, out, err = self.run("--json", *cmd)
        check(rc == 0, f"perlctl {' '.join(cmd)} ({err.strip()})")
        return json.loads(out) if rc == 0 else {}

    def distribution(self, run, kind):
        rc, out, err = self.run("export", run, "--format", "csv", "--kind", kind)
        check(rc == 0, f"{run}: export --kind {kind} ({err.strip()})")
        return [[int(x) for x in line.split(",")] for line in out.splitlines()[1:]] \
            if rc == 0 else []


def metric(http, name, labels=None):
    """The value of sample `name{labels}` on the /metrics of the daemon at
    `http`; without `labels`, of the family's first sample, labelled or not
    (None when absent)."""
    heads = (f"{name}{{{labels}}} ",) if labels else (f"{name} ", f"{name}{{")
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(heads):
                return float(line.split()[-1])
    return None


def free_port():
    """A loopback TCP port free now (for a daemon restarted on the same address)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PERCENTS = [5, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.99, 100]


def finish(tmp=None):
    """Prints the verdict line the CTest entries match; returns the exit status.
    `tmp` (a test's scratch directory) is removed when every check passed and
    kept, with the daemons' logs, when one failed."""
    print("FAILED: " + "; ".join(failures) if failures else "PASSED")
    if tmp and not failures:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


def chromium_available():
    """True when python3-selenium, chromium and chromium-driver are installed
    (scripts/install-deps.sh); otherwise a failed check says which."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        check(False, "python3-selenium is installed (scripts/install-deps.sh)")
        return False
    if _chromium() is None or not os.path.exists("/usr/bin/chromedriver"):
        check(False, "chromium and chromium-driver are installed (scripts/install-deps.sh)")
        return False
    return True


def _chromium():
    return next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser")
                 if os.path.exists(p)), None)


def headless_chromium(height=1000):
    """A headless Chromium (selenium webdriver), 1280 x `height`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = _chromium()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-dev-shm-usage", f"--window-size=1280,{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    return driver


def start_prometheus(tmp, target):
    """A real Prometheus server (Debian's `prometheus`) on a free loopback
    port scraping `target` (HOST:PORT of perld's HTTP listener) every second,
    its data and log in tmp/prometheus. Returns (process, "127.0.0.1:PORT");
    the caller terminates the process."""
    port = free_port()
    home = os.path.join(tmp, "prometheus")
    os.makedirs(home)
    config = os.path.join(home, "prometheus.yml")
    with open(config, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n  - job_name: perld\n"
                f"    static_configs:\n      - targets: ['{target}']\n")
    proc = subprocess.Popen(
        ["prometheus", "--config.file=" + config,
         "--storage.tsdb.path=" + os.path.join(home, "data"),
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(home, "log"), "w"))
    return proc, f"127.0.0.1:{port}"


# HdrHistogram's own Java tools (Debian's libhdrhistogram-java).
HDR_JAR = "/usr/share/java/hdrhistogram.jar"


def hdrhistogram_java():
    """The java that runs HdrHistogram's tools, or None after a failed check
    naming the packages that provide them."""
    java = shutil.which("java")
    if java is None or not os.path.exists(HDR_JAR):
        check(False, "java and /usr/share/java/hdrhistogram.jar are installed "
                     "(openjdk-17-jre-headless, libhdrhistogram-java: scripts/install-deps.sh)")
        return None
    return java


def processor_csv_rows(path):
    """Data rows of a HistogramLogProcessor -csv file (comments and the legend
    skipped)."""
    with open(path) as f:
        return [line.rstrip("\n").split(",") for line in f
                if line.strip() and not line.startswith("#") and not line.startswith('"')]
