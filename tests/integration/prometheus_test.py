"""perld's Prometheus exporter against the real tools (issue 11):

  * a daemon with runs of SBK's four dashboard actions (three in-process
    benches and one `perlctl load` stream labelled action=Write_OnlyReading)
    and prometheus.names: both;
  * /metrics passes `promtool check metrics` -- clean for perld's names, and
    only the naming lint for SBK's own camelCase/ns names;
  * every metric name SBK's Grafana dashboard queries
    (sbk_dashboard_metrics.txt) and every one perld's dashboard
    (deploy/grafana/perld-dashboard.json) queries is exported;
  * the cardinality cap leaves the oldest runs out and counts them;
  * a real `prometheus` server on loopback scrapes perld, and the quantile it
    stored for a finished run's latest window equals perld's own
    GetPercentiles answer for that window, exactly; every query of perld's
    Grafana dashboard (its variables and panels, as Grafana substitutes them)
    is valid PromQL there and has series for a run (Grafana itself is not a
    Debian package: its JSON model is checked by these queries only);
  * gRPC calls are counted by method and code.
Run by Debian's /usr/bin/python3.
"""
import argparse
import decimal
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perld_it import (ROOT, Daemon, check, finish, load_stubs,  # noqa: E402
                      start_prometheus)

HERE = os.path.dirname(os.path.abspath(__file__))
# The dashboard's percentiles: SBK's defaults plus those its panels name.
PERCENTILES = [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85, 90, 92.25,
               92.5, 95, 97.5, 99, 99.25, 99.5, 99.75, 99.9, 99.95, 99.99]


def http_get(address, path, timeout=10):
    with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def metric_names(text):
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0))
    return names


def promtool(text):
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, (p.stdout + p.stderr).strip()


def dashboard_names(path):
    """Metric names in every PromQL expression of a Grafana dashboard."""
    with open(path) as f:
        board = json.load(f)
    names = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "expr" and isinstance(value, str):
                    for token in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", value):
                        if token.startswith(("perld_", "process_")):
                            names.add(token)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
    walk(board)
    return names


def dashboard_queries(path):
    """(panel title, expr) of every target, and the template variables' queries."""
    with open(path) as f:
        board = json.load(f)
    targets = []

    def walk(panel):
        for t in panel.get("targets", []):
            targets.append((panel.get("title", ""), t["expr"]))
        for inner in panel.get("panels", []):
            walk(inner)
    for panel in board["panels"]:
        walk(panel)
    variables = {v["name"]: v["query"]["query"] for v in board["templating"]["list"]
                 if v.get("type") == "query"}
    return targets, variables


# Panels whose series exist only after an event this test does not cause.
MAY_BE_EMPTY = {"gRPC errors by method and code", "Ingest"}


def grafana_regex_escape(value):
    """A variable's value as Grafana's Prometheus data source puts it into a
    =~"..." matcher: regex metacharacters escaped with a backslash that is
    itself escaped for the PromQL string."""
    return re.sub(r"([$^*{}\[\]'+?.()|])", r"\\\\\1", value)


def check_dashboard_in_prometheus(prom, instance, run_id):
    """Every variable and panel query of perld's dashboard, as Grafana sends
    it (variables substituted), evaluated by the real Prometheus scraping
    perld: valid PromQL with series for the selected run."""
    targets, variables = dashboard_queries(os.path.join(ROOT, "deploy", "grafana",
                                                        "perld-dashboard.json"))

    def label_values(query):
        m = re.fullmatch(r"label_values\((.*), (\w+)\)", query)
        selector = m.group(1).replace("$instance", grafana_regex_escape(instance))
        _, _, body = http_get(prom, f"/api/v1/label/{m.group(2)}/values?match[]=" +
                              urllib.parse.quote(selector))
        return json.loads(body)["data"]
    instances = label_values(variables["instance"])
    run_ids = label_values(variables["run_id"])
    check(instance in instances and str(run_id) in run_ids,
          f"the dashboard's variables list this perld ({instances}) and the run ({run_ids})")
    empty = []
    for title, expr in targets:
        q = expr.replace("$instance", grafana_regex_escape(instance)).replace(
            "$run_id", grafana_regex_escape(str(run_id)))
        result, deadline = [], time.time() + 20
        while True:
            try:
                _, _, body = http_get(prom, "/api/v1/query?query=" + urllib.parse.quote(q))
                answer = json.loads(body)
            except urllib.error.HTTPError as e:  # 400: Prometheus refused the PromQL
                answer = {"status": "error", "error": e.read().decode()[:200]}
            check(answer["status"] == "success", f"Prometheus evaluates {q} ({answer.get('error')})")
            result = answer["data"]["result"]
            if result or title in MAY_BE_EMPTY or time.time() > deadline:
                break
            time.sleep(0.5)  # rate() needs two scrapes
        if not result and title not in MAY_BE_EMPTY:
            empty.append(f"{title}: {q}")
    check(empty == [], f"every panel of the dashboard ({len(targets)} queries) has series "
                       f"in Prometheus (empty: {empty[:3]})")


def trim_count(http_addr):
    """perld_malloc_trims_total, or None when /metrics lacks it."""
    m = re.search(r"^perld_malloc_trims_total (\S+)$", http_get(http_addr, "/metrics")[2], re.M)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    import grpc
    if shutil.which("promtool") is None or shutil.which("prometheus") is None:
        check(False, "promtool and prometheus are installed (Debian package prometheus)")
        return finish()
    with tempfile.TemporaryDirectory() as tmp:
        pb, rpc, _ = load_stubs(tmp)
        config = os.path.join(tmp, "perld.yaml")
        with open(config, "w") as f:
            f.write("reportingIntervalMs: 300\n"
                    f"percentiles: [{', '.join(str(p) for p in PERCENTILES)}]\n"
                    "limits:\n  maxRunningRuns: 8\n"
                    "prometheus:\n  names: both\n  maxRuns: 6\n"
                    "mallocTrimIntervalMs: 200\n")
        d = Daemon(args.perld, os.path.join(tmp, "state"), config)
        channel = grpc.insecure_channel(d.grpc)
        query = rpc.QueryStub(channel)

        def ctl(*cmd):
            p = subprocess.run([args.perlctl, "--target", d.grpc] + list(cmd),
                               capture_output=True, text=True, timeout=120)
            return p.returncode, p.stdout, p.stderr

        try:
            # One run per action of SBK's dashboard; the first is left out by maxRuns 6.
            runs = [("old-writing", ["-writers", "1"]),
                    ("sbk-writing", ["-writers", "1"]),
                    ("sbk-reading", ["-readers", "1"]),
                    ("sbk-write-reading", ["-writers", "1", "-readers", "1"])]
            for name, workers in runs:
                rc, _, err = ctl("bench", *workers, "-size", "100", "-records", "300000",
                                 "-time", "ns", "--name", name, "--wait")
                check(rc == 0, f"bench {name} ran ({err.strip()[:100]})")
            # A running run's samples follow its windows from scrape to scrape
            # (the exporter re-renders a run only when it published a window).
            rc, out, _ = ctl("--json", "bench", "-writers", "1", "-size", "100",
                             "-throughput", "1", "-seconds", "30", "-time", "ns",
                             "--name", "live-run")
            live_id = json.loads(out)["id"] if rc == 0 else 0
            seen = []
            deadline = time.time() + 20
            while time.time() < deadline and len(set(seen)) < 3:
                m = re.search(r'^perld_run_records_total\{run_id="%d",[^}]*\} (\d+)$' % live_id,
                              http_get(d.http, "/metrics")[2], re.M)
                if m:
                    seen.append(int(m.group(1)))
                time.sleep(0.1)
            check(len(set(seen)) >= 3 and seen == sorted(seen),
                  f"a running run's records_total rises from scrape to scrape ({sorted(set(seen))[:5]})")
            ctl("stop", "live-run", "--wait")

            # A run that drops at a tiny pending bound: records + drops == requested.
            ctl("bench", "-writers", "2", "-records", "400000", "-time", "ns",
                "--maxPendingPerWorker", "2", "--overflow", "drop", "--name", "dropping",
                "--wait")
            rc, _, err = ctl("load", "-writers", "1", "-size", "100", "-records", "300000",
                             "-time", "ns", "--run", "sbk-write-onlyreading",
                             "--label", "action=Write_OnlyReading")
            check(rc == 0, f"perlctl load with action=Write_OnlyReading ran ({err.strip()[:100]})")
            deadline = time.time() + 60
            while time.time() < deadline:
                listed = query.ListRuns(pb.ListRunsRequest(), timeout=10)
                if all(r.state != pb.RUN_STATE_RUNNING for r in listed.runs):
                    break
                time.sleep(0.1)

            status, ctype, text = http_get(d.http, "/metrics")
            check(status == 200 and ctype == "text/plain; version=0.0.4; charset=utf-8",
                  f"/metrics 200 with the 0.0.4 content type ({ctype})")
            names = metric_names(text)

            # promtool: perld's own families are clean; SBK's names only break naming lint.
            perld_only = "\n".join(
                block for block in re.split(r"\n(?=# HELP )", text)
                if not block.startswith("# HELP SBK_")) + "\n"
            rc, report = promtool(perld_only)
            check(rc == 0 and report == "", f"promtool: perld's families clean ({report[:300]})")
            rc, report = promtool(text)
            lint = [line for line in report.splitlines()
                    if not (line.startswith("SBK_") and
                            ("snake_case" in line or "abbreviated units" in line))]
            check(lint == [], f"promtool: with SBK names only naming lint is reported ({lint[:3]})")

            # Every name SBK's dashboard queries.
            with open(os.path.join(HERE, "sbk_dashboard_metrics.txt")) as f:
                wanted = [line.strip() for line in f if line.strip() and not line.startswith("#")]
            missing = [n for n in wanted if n not in names]
            check(len(wanted) > 200 and missing == [],
                  f"all {len(wanted)} names of SBK's dashboard are exported (missing {missing[:8]})")
            # Every name perld's dashboard queries.
            board = dashboard_names(os.path.join(ROOT, "deploy", "grafana",
                                                 "perld-dashboard.json"))
            missing = sorted(n for n in board if n not in names)
            check(len(board) >= 8 and missing == [],
                  f"all {len(board)} names of deploy/grafana/perld-dashboard.json are exported "
                  f"(missing {missing[:8]})")
            check('component="sbm"' in text and 'action="Write_OnlyReading"' in text,
                  "the ingest run is component sbm with its labelled action")

            def sample(name, run):
                m = re.search(r'^%s\{run_id="\d+",run="%s",[^}]*\} (\S+)$' % (name, run),
                              text, re.M)
                return int(m.group(1)) if m else None
            recorded = sample("perld_run_records_total", "dropping")
            dropped = sample("perld_run_dropped_timestamps_total", "dropping")
            check(recorded is not None and dropped is not None and dropped > 0 and
                  recorded + dropped == 400000,
                  f"records_total + dropped_timestamps_total == 400000 ({recorded} + {dropped})")

            # Cardinality: 7 runs, maxRuns 6 -> the oldest left out and counted.
            check('run="old-writing"' not in text and 'run="sbk-writing"' in text,
                  "prometheus.maxRuns leaves the oldest run out")
            check(re.search(r"^perld_exporter_runs_omitted 1$", text, re.M) is not None,
                  "perld_exporter_runs_omitted counts it")
            check(re.search(r'^perld_grpc_requests_total\{method="perld.v1.Control/StartBench",'
                            r'code="OK"\} 6$', text, re.M) is not None,
                  "gRPC calls counted by method and code")

            # A real Prometheus server scrapes perld.
            writing = query.GetRun(pb.GetRunRequest(run="sbk-writing"), timeout=10).run.id
            prom, prom_addr = start_prometheus(tmp, d.http)
            try:
                expr = f'perld_run_latency_seconds{{run_id="{writing}",quantile="0.99"}}'
                stored = None
                deadline = time.time() + 60
                while stored is None and time.time() < deadline:
                    try:
                        _, _, body = http_get(prom_addr,
                                              "/api/v1/query?query=" + urllib.parse.quote(expr))
                        result = json.loads(body)["data"]["result"]
                        if result:
                            stored = result[0]["value"][1]
                    except OSError:
                        pass
                    if stored is None:
                        time.sleep(0.5)
                check(stored is not None, f"prometheus scraped perld ({expr} = {stored})")
                answer = query.GetPercentiles(pb.GetPercentilesRequest(
                    run=str(writing), percentiles=[99],
                    scope=pb.GetPercentilesRequest.SCOPE_LATEST), timeout=10)
                ns = answer.percentiles[0].latency
                exact = float(decimal.Decimal(ns) / decimal.Decimal(10**9))
                check(stored is not None and float(stored) == exact and ns > 0,
                      f"Prometheus' p99 ({stored} s) equals perld's GetPercentiles ({ns} ns)")
                _, _, body = http_get(prom_addr, "/api/v1/targets")
                health = [t["health"] for t in json.loads(body)["data"]["activeTargets"]]
                check(health == ["up"], f"the perld target is up ({health})")
                check_dashboard_in_prometheus(prom_addr, d.http, writing)
            finally:
                prom.terminate()
                prom.wait(timeout=30)

            # The allocator's free pages go back every mallocTrimIntervalMs.
            trims = trim_count(d.http)
            check(trims is not None and trims >= 1,
                  f"perld_malloc_trims_total counts the trims every 200 ms ({trims})")
            m = re.search(r"^perld_state_sqlite_memory_bytes (\S+)$",
                          http_get(d.http, "/metrics")[2], re.M)
            check(m is not None and float(m.group(1)) > 0,
                  "perld_state_sqlite_memory_bytes says what SQLite holds "
                  f"({m.group(1) if m else None})")

            # finishedRunSeconds: 0 (SIGHUP) -> ended runs leave /metrics, stay queryable.
            # mallocTrimIntervalMs: 0 (reloaded) -> no more trims.
            with open(config, "w") as f:
                f.write("reportingIntervalMs: 300\n"
                        "prometheus:\n  names: both\n  finishedRunSeconds: 0\n"
                        "mallocTrimIntervalMs: 0\n")
            d.proc.send_signal(signal.SIGHUP)
            deadline = time.time() + 20
            while time.time() < deadline and "perld_run_info{" in http_get(d.http, "/metrics")[2]:
                time.sleep(0.2)
            _, _, text = http_get(d.http, "/metrics")
            check("perld_run_info{" not in text and "SBK_Writing_Records_total{" not in text,
                  "finishedRunSeconds: 0 drops every ended run from /metrics")
            _, _, runs_json = http_get(d.http, "/api/runs")
            # 7 runs and the paced live-run's response view (issue 30).
            check(len(json.loads(runs_json)["runs"]) == 8,
                  "the ended runs stay queryable (/api/runs lists all 8)")
            time.sleep(0.5)  # the trim interval in progress at the reload has ended
            before = trim_count(d.http)
            time.sleep(1.0)
            after = trim_count(d.http)
            check(before is not None and after == before,
                  f"mallocTrimIntervalMs: 0 stops the trims ({before} -> {after})")
        finally:
            channel.close()
            check(d.stop() == 0, "daemon stops cleanly")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
