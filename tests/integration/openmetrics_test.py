"""/metrics in OpenMetrics 1.0.0 (issue 29) against the real tools:

  * content negotiation: Prometheus' Accept header gets
    `application/openmetrics-text; version=1.0.0`, no Accept header, `*/*` and
    text/plain get text 0.0.4 as before (and pass `promtool check metrics`);
  * the OpenMetrics text follows the format's rules: `# EOF` last and once,
    no blank lines, metadata before its family's samples, counter families
    named without `_total` and their samples with it, `# UNIT` a suffix of
    its family, `_created` of a run's counters equal to the run's start;
    the same series and values as the 0.0.4 text apart from `_created`;
  * a real `prometheus` (Debian's 2.42, whose scrapes prefer OpenMetrics)
    scrapes perld: the target is up with no lastError, it stored the
    `_created` series only OpenMetrics carries, and the p99 it stored for a
    finished run equals perld's /metrics text and GetPercentiles, exactly.
Run by Debian's /usr/bin/python3.
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
from perld_it import Daemon, check, finish, load_stubs, start_prometheus  # noqa: E402

PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,"
                     "application/openmetrics-text;version=0.0.1;q=0.75,"
                     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
OM_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})? (\S+)$')


def get(address, path, accept=None):
    request = urllib.request.Request(f"http://{address}{path}")
    if accept is not None:
        request.add_header("Accept", accept)
    with urllib.request.urlopen(request, timeout=10) as r:
        return r.headers.get("Content-Type"), r.read().decode()


def series(text):
    """{(name, labels): value} of a text's samples."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            m = SAMPLE.match(line)
            if m:
                out[(m.group(1), m.group(2) or "")] = m.group(3)
    return out


def om_problems(text):
    """The OpenMetrics rules perld's text must keep, as a list of problems."""
    problems = []
    lines = text.split("\n")
    if lines[-1] != "" or lines[-2] != "# EOF":
        problems.append("does not end with # EOF")
    if text.count("# EOF") != 1:
        problems.append("# EOF more than once")
    families = {}
    family = None
    for line in lines[:-2]:
        if line == "":
            problems.append("blank line")
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if parts[1] not in ("HELP", "TYPE", "UNIT"):
                problems.append("comment: " + line)
                continue
            name = parts[2]
            if parts[1] == "TYPE":
                if name in families:
                    problems.append("family twice: " + name)
                families[name] = parts[3]
                family = name
                if parts[3] == "counter" and name.endswith("_total"):
                    problems.append("counter family with _total: " + name)
            elif parts[1] == "UNIT" and not name.endswith("_" + parts[3]):
                problems.append("unit not a suffix: " + line)
            elif parts[1] == "HELP" and len(parts) < 4:
                problems.append("empty HELP: " + line)
            continue
        m = SAMPLE.match(line)
        if not m:
            problems.append("not a sample: " + line)
            continue
        name = m.group(1)
        kind = families.get(family)
        allowed = {"counter": ["_total", "_created"],
                   "summary": ["", "_sum", "_count", "_created"]}.get(kind, [""])
        if family is None or name not in [family + s for s in allowed]:
            problems.append(f"sample {name} in family {family} ({kind})")
    return problems[:10]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    import grpc
    if shutil.which("promtool") is None or shutil.which("prometheus") is None:
        check(False, "promtool and prometheus are installed (Debian package prometheus)")
        return finish()
    tmp = tempfile.mkdtemp(prefix="perld-openmetrics-")
    pb, rpc, _ = load_stubs(tmp)
    config = os.path.join(tmp, "perld.yaml")
    with open(config, "w") as f:
        f.write("reportingIntervalMs: 300\npercentiles: [50, 99, 99.9]\n"
                "prometheus:\n  names: both\n")
    d = Daemon(args.perld, os.path.join(tmp, "state"), config,
               log=os.path.join(tmp, "perld.log"))
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))
    try:
        p = subprocess.run([args.perlctl, "--target", d.grpc, "bench", "-writers", "1",
                            "-size", "100", "-records", "200000", "-time", "ns",
                            "--name", "om-run", "--wait"],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, f"bench om-run ran ({p.stderr.strip()[:100]})")
        run = query.GetRun(pb.GetRunRequest(run="om-run"), timeout=10).run
        run_id = run.id

        # Negotiation.
        for accept in (None, "*/*", "text/plain;version=0.0.4"):
            ctype, _ = get(d.http, "/metrics", accept)
            check(ctype == TEXT_TYPE, f"Accept {accept!r} gets text 0.0.4 ({ctype})")
        ctype, om = get(d.http, "/metrics", PROMETHEUS_ACCEPT)
        check(ctype == OM_TYPE, f"Prometheus' Accept gets OpenMetrics ({ctype})")
        _, text = get(d.http, "/metrics")
        pr = subprocess.run(["promtool", "check", "metrics"], input=text,
                            capture_output=True, text=True, timeout=60)
        lint = [line for line in (pr.stdout + pr.stderr).splitlines()
                if line.strip() and not line.startswith("SBK_")]
        check(not lint, f"promtool check metrics: the 0.0.4 text is clean apart from SBK's names "
                        f"({lint[:3]})")

        # The OpenMetrics rules and the same series as 0.0.4.
        problems = om_problems(om)
        check(not problems, f"the OpenMetrics text keeps the format's rules ({problems})")
        ident = f'{{run_id="{run_id}",run="om-run",source="bench"}}'
        om_series, text_series = series(om), series(text)
        check(om_series.get(("perld_run_records_total", ident)) ==
              text_series.get(("perld_run_records_total", ident)) == "200000",
              "perld_run_records_total is the same sample in both formats")
        check(om_series.get(("perld_run_records_created", ident)) ==
              text_series.get(("perld_run_start_time_seconds", ident)),
              "a run's counters have _created = the run's start")
        check("# TYPE perld_run_records counter" in om and
              "# UNIT perld_run_latency_seconds seconds" in om and
              "# UNIT perld_run_bytes bytes" in om, "counter family names and # UNIT lines")
        volatile = ("perld_uptime_seconds", "perld_scrapes_total", "perld_last_scrape",
                    "perld_http_", "process_", "perld_grpc_", "perld_memory")
        missing = [k for k in text_series if (k[0], k[1]) not in om_series and
                   not k[0].startswith(volatile)]
        check(not missing, f"every 0.0.4 series is in the OpenMetrics text ({missing[:3]})")

        # A real Prometheus server scrapes perld with OpenMetrics preferred.
        prom, prom_addr = start_prometheus(tmp, d.http)

        def instant(expr):
            try:
                _, body = get(prom_addr, "/api/v1/query?query=" + urllib.parse.quote(expr))
                result = json.loads(body)["data"]["result"]
                return result[0]["value"][1] if result else None
            except OSError:
                return None

        try:
            expr = f'perld_run_latency_seconds{{run_id="{run_id}",quantile="0.99"}}'
            stored = None
            deadline = time.time() + 60
            while stored is None and time.time() < deadline:
                stored = instant(expr)
                if stored is None:
                    time.sleep(0.5)
            check(stored is not None, f"prometheus scraped perld ({expr} = {stored})")
            answer = query.GetPercentiles(pb.GetPercentilesRequest(
                run=str(run_id), percentiles=[99],
                scope=pb.GetPercentilesRequest.SCOPE_LATEST), timeout=10)
            ns = answer.percentiles[0].latency
            exact = decimal.Decimal(ns) / decimal.Decimal(10**9)
            in_text = om_series.get(("perld_run_latency_seconds",
                                     ident[:-1] + ',quantile="0.99"}'))
            check(stored is not None and in_text is not None and ns > 0 and
                  float(stored) == float(exact) == float(in_text),
                  f"Prometheus' p99 ({stored} s) equals /metrics ({in_text}) and "
                  f"GetPercentiles ({ns} ns)")
            created = instant(f'perld_run_records_created{{run_id="{run_id}"}}')
            check(created is not None and float(created) == float(
                  text_series.get(("perld_run_start_time_seconds", ident), "nan")),
                  f"Prometheus stored perld_run_records_created ({created}): the scrape "
                  "was OpenMetrics")
            check(instant('up{job="perld"}') == "1", "up == 1")
            _, body = get(prom_addr, "/api/v1/targets")
            targets = json.loads(body)["data"]["activeTargets"]
            check([(t["health"], t["lastError"]) for t in targets] == [("up", "")],
                  f"the target is up without scrape errors "
                  f"({[(t['health'], t['lastError']) for t in targets]})")
        finally:
            prom.terminate()
            prom.wait(timeout=30)
    finally:
        d.stop()
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
