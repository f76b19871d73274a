"""The real perld on 127.0.0.1 port 0 for the goal scripts (daemon_goals.py,
metrics_goals.py): its listen addresses, CPU seconds and memory from /proc;
a process's CPU by thread name (soak.py, stream_goals.py).
"""
import json
import os
import re
import signal
import subprocess
import time


CLK_TCK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid):
    """{tid: (thread name, CPU seconds)} of a process's live threads."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, _, rest = f.read().rpartition(")")
        except OSError:
            continue  # ended meanwhile
        fields = rest.split()
        out[tid] = (head.partition("(")[2], (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return out


def cpu_by_thread_name(before, after, seconds):
    """[(name, % of a core)] between two thread_cpu() snapshots, names with
    their trailing digits merged (perld-ingest-0 and -1: perld-ingest-N),
    highest first; a thread that ended in between is missing."""
    totals = {}
    for tid, (name, cpu) in after.items():
        base = re.sub(r"\d+$", "N", name)
        totals[base] = totals.get(base, 0.0) + cpu - before.get(tid, (name, 0.0))[1]
    return sorted(((n, 100.0 * c / seconds) for n, c in totals.items()), key=lambda x: -x[1])


class Daemon:
    def __init__(self, perld, state, config=None):
        self.proc = subprocess.Popen(
            [perld, "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
             "--state-dir", state] + (["--config", config] if config else []),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        listening = {}
        while len(listening) < 2:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("perld did not start")
            m = re.match(r"perld: (gRPC|HTTP) listening on (\S+)", line)
            if m:
                listening[m.group(1)] = m.group(2)
        self.grpc, self.http = listening["gRPC"], listening["HTTP"]

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def memory_kib(self):
        out = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0])
        return out

    def threads(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        return 0

    def parked(self):
        """perld_ingest_parked_clients from /metrics."""
        import urllib.request
        with urllib.request.urlopen(f"http://{self.http}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("perld_ingest_parked_clients "):
                    return int(float(line.split()[1]))
        return 0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)


def daemon_bench_rate(perlctl, target, bench, records):
    """records/s of one exact `perlctl bench ... --wait` run in the daemon."""
    out = subprocess.run([perlctl, "--target", target, "--json", "bench", *bench, "--wait"],
                         capture_output=True, text=True, check=True).stdout
    run = json.loads(out.strip().splitlines()[-1])  # the run as it ended, with its total
    total = run["total"]
    assert total["kind"] == "total" and total["records"] == records, run
    return float(total["recordsPerSecond"])


def query_latency_under_load(perlctl, query, target, calls):
    """GetPercentiles call latency (tests/bench/query_latency, total scope) while
    a 1-writer bench runs at full speed in the daemon with a 1 s interval, so the
    running total holds ~10^8 records: {"p50", "p99", "p99.9", "max"} in us."""
    started = subprocess.run([perlctl, "--target", target, "--json", "bench", "-writers", "1",
                              "-size", "1024", "-seconds", "30", "-time", "ns",
                              "-interval", "1", "--name", "loaded"],
                             capture_output=True, text=True, check=True).stdout
    run_id = str(json.loads(started)["id"])
    time.sleep(2)
    out = subprocess.run([query, "--target", target, "--run", run_id, "--calls", str(calls)],
                         capture_output=True, text=True, check=True).stdout
    subprocess.run([perlctl, "--target", target, "stop", run_id, "--wait"],
                   capture_output=True, check=True)
    return {k: float(v) for k, v in re.findall(r"(p50|p99|p99\.9|max)=([\d.]+) us", out)}


def print_table(rows):
    """The goal scripts' result: a Markdown table of (what, measured, goal) rows."""
    print("| what | measured | goal |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
