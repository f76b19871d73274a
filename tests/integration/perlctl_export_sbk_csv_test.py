"""`perlctl export RUN --format sbk-csv [--out FILE]` (issue 28): an ended
run's windows and total in SBK's CSV layout after the fact, the file a
csvDir set before the run writes.

Three daemons, each with csvDir set:
  1. a 3 s bench run with 1 s windows: the exported file equals the csvDir
     file cell by cell (csv module), header identical, a Regular row per
     stored periodic window, the Total row's records the run's; the same
     bytes on stdout as with --out; a running run, an unknown run, a range
     and a bad --format are refused with a clear message;
  2. a windows-mode ingest run whose total window closes early on a 1 MB
     budget (inexact_total_test.py's) and whose segments cannot be kept
     (retention.maxTotalSegmentBytesPerRun 0): its total segments are Total
     rows as in csvDir, and its inexact total's percentile cells are empty
     in both;
     the same file once the restarted daemon restored the run from its
     state directory (its history then lists periodic windows first);
  3. retention.maxWindowsPerRun 3: only the newest windows are retained --
     stderr says how many are gone, and the rows exported equal csvDir's
     last rows, IDs included.
Every cell is compared, Date and Time too: both files take them from the
window's own end (Window.end_unix_ms) in the local time zone, and the
daemon and perlctl run here in the same one (another zone would move them:
the only column that may legitimately differ).
"""
import argparse
import csv
import importlib
import io
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import check, Daemon, IngestStream, wait_ended, finish  # noqa: E402

import grpc  # noqa: E402


def read_csv(text):
    rows = list(csv.reader(io.StringIO(text)))
    return (rows[0], rows[1:]) if rows else ([], [])


def differences(header, want, got):
    """Cells of `got` that differ from `want` (row by row), as 'row N COLUMN: a != b'."""
    out = []
    if len(want) != len(got):
        out.append(f"{len(got)} rows != {len(want)}")
    for i, (a, b) in enumerate(zip(want, got)):
        if len(a) != len(b):
            out.append(f"row {i + 1}: {len(b)} cells != {len(a)}")
        for name, x, y in zip(header, a, b):
            if x != y:
                out.append(f"row {i + 1} {name}: {y!r} != csvDir {x!r}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-sbk-csv-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    ipb = importlib.import_module("perld.v1.ingest_pb2")
    irpc = importlib.import_module("perld.v1.ingest_pb2_grpc")

    def start(name, extra_config=""):
        csv_dir = os.path.join(tmp, name, "csv")
        config = os.path.join(tmp, name + ".yaml")
        with open(config, "w") as f:
            f.write(f"csvDir: {csv_dir}\n{extra_config}")
        d = Daemon(args.perld, os.path.join(tmp, name, "state"), config=config,
                   log=os.path.join(tmp, name + ".log"))
        return d, csv_dir, rpc.QueryStub(grpc.insecure_channel(d.grpc))

    def ctl(d, *cmd):
        p = subprocess.run([args.perlctl, "--target", d.grpc] + list(cmd), capture_output=True,
                           text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def csv_dir_file(csv_dir, run_id):
        with open(os.path.join(csv_dir, f"run-{run_id}.csv")) as f:
            return f.read()

    def export(d, run, name):
        """Exports `run` with --out; returns (exit code, text, stderr)."""
        path = os.path.join(tmp, name + ".csv")
        rc, _, err = ctl(d, "export", str(run), "--format", "sbk-csv", "--out", path)
        text = ""
        if rc == 0 and os.path.exists(path):
            with open(path) as f:
                text = f.read()
        return rc, text, err

    # The comparison itself must see a changed cell (the test can fail).
    check(differences(["ID", "Records"], [["1", "10"]], [["1", "11"]]) ==
          ["row 1 Records: '11' != csvDir '10'"], "the comparison sees a changed cell")

    # 1. A bench run: the exported file is the csvDir file.
    d, csv_dir, query = start("bench")
    rc, out, err = ctl(d, "bench", "-writers", "2", "-size", "100", "-seconds", "3",
                       "-interval", "1", "-time", "ns", "--name", "sbk", "--wait")
    check(rc == 0, f"bench -seconds 3 -interval 1 --wait ({err.strip()[-200:]})")
    run = query.GetRun(pb.GetRunRequest(run="sbk"), timeout=10)
    history = query.GetWindowHistory(pb.GetWindowHistoryRequest(run="sbk"), timeout=10).windows
    periodic = [w for w in history if w.kind == pb.Window.KIND_PERIODIC]
    segments = [w for w in history if w.kind == pb.Window.KIND_TOTAL_SEGMENT]
    want_header, want = read_csv(csv_dir_file(csv_dir, run.run.id))
    rc, text, err = export(d, "sbk", "bench")
    got_header, got = read_csv(text)
    check(rc == 0 and err == "",
          f"export sbk --format sbk-csv --out: exit 0, quiet ({err.strip()})")
    check(got_header == want_header and got_header[:3] == ["ID", "Date", "Time"] and
          got_header[-1] == "Percentile_Count_99.99",
          f"the header is csvDir's ({len(got_header)} columns)")
    diffs = differences(want_header, want, got)
    check(len(want) >= 4 and not diffs,
          f"every cell of {len(got)} rows equals csvDir's ({diffs[:4]})")
    regular = [r for r in got if r[4] == "Regular"]
    check(len(periodic) >= 3 and len(regular) == len(periodic),
          f"a Regular row per stored periodic window ({len(regular)} rows, {len(periodic)} "
          f"windows)")
    check(len(got) == len(periodic) + len(segments) + 1 and got and got[-1][4] == "Total",
          "then a Total row per segment, and the run total last")
    if got:
        total = dict(zip(got_header, got[-1]))
        check(int(total["Records"]) == run.total.records > 0 and
              int(total["Records"]) == sum(w.records for w in periodic),
              f"the Total row's records are the run's ({total['Records']}, {run.total.records})")
        check([r[0] for r in got] == [str(i) for i in range(1, len(got) + 1)],
              "IDs 1..N, as csvDir numbers them")
        check(total["Writers"] == "2" and total["Readers"] == "0" and
              total["Action"] == "Writing" and total["Storage"] == "PerlBench" and
              total["LatencyTimeUnit"] == "NANOSECONDS",
              f"writers, readers, action, storage, unit from the run "
              f"({[total[k] for k in ('Writers', 'Readers', 'Action', 'Storage')]})")
    rc, stdout, _ = ctl(d, "export", str(run.run.id), "--format", "sbk-csv")
    check(rc == 0 and stdout == text, "without --out: the same bytes on stdout")

    # Refusals.
    rc, out, err = ctl(d, "export", "no-such-run", "--format", "sbk-csv")
    check(rc == 1 and "NOT_FOUND" in err and "no-such-run" in err and out == "",
          f"an unknown run: exit 1, NOT_FOUND naming it ({rc}, {err.strip()})")
    rc, _, err = ctl(d, "export", "sbk", "--format", "sbk-csv", "--windows", "1-2")
    check(rc == 2 and "no range" in err, f"a range: usage error, exit 2 ({rc})")
    rc, _, err = ctl(d, "export", "sbk", "--format", "sbk")
    check(rc == 2 and "sbk-csv" in err, f"a bad --format names sbk-csv ({rc})")
    rc, _, err = ctl(d, "bench", "-writers", "1", "-seconds", "60", "-interval", "1",
                     "--name", "long")
    check(rc == 0, f"a 60 s bench started ({err.strip()[-120:]})")
    rc, out, err = ctl(d, "export", "long", "--format", "sbk-csv")
    check(rc == 1 and "still running" in err and out == "",
          f"a running run: exit 1, still running ({rc}, {err.strip()})")
    ctl(d, "stop", "long", "--wait")
    check(d.stop() == 0, "daemon 1: SIGTERM, exit 0")

    # 2. Total segments and an inexact total (an ingest run over a 1 MB
    # total budget, no room to keep its segments): Total rows per segment,
    # empty percentile cells.
    d, csv_dir, query = start("segments", "exactTotalLatencyMaxMemoryMB: 1\n"
                              "reportingIntervalMs: 200\ningest:\n  maxPairsPerReport: 50000\n"
                              "retention:\n  maxTotalSegmentBytesPerRun: 0\n")
    s = IngestStream(irpc.IngestStub(grpc.insecure_channel(d.grpc)), ipb, ipb.IngestOpen(
        run_name="wide", client_id="w", client_name="w", mode=ipb.IngestOpen.MODE_WINDOWS,
        time_unit=pb.TIME_UNIT_NS))
    opened = s.recv().opened
    distinct = 40_000
    for k in range(8):
        first = 1000 + k * distinct
        s.ask(window=ipb.WindowReport(
            sequence=k + 1, records=distinct, bytes=distinct, valid_latency_records=distinct,
            min_latency=first, max_latency=first + distinct - 1,
            total_latency=sum(first + i for i in range(distinct)),
            latency_delta=[first] + [1] * (distinct - 1), count=[1] * distinct))
    s.finish(8)
    run = wait_ended(query, pb, opened.run_id)
    history = query.GetWindowHistory(pb.GetWindowHistoryRequest(run=str(opened.run_id)),
                                     timeout=10).windows
    n_segments = sum(1 for w in history if w.kind == pb.Window.KIND_TOTAL_SEGMENT)
    want_header, want = read_csv(csv_dir_file(csv_dir, opened.run_id))
    rc, text, err = export(d, opened.run_id, "segments")
    got_header, got = read_csv(text)
    diffs = differences(want_header, want, got)
    check(rc == 0 and got_header == want_header and not diffs,
          f"segments: every cell equals csvDir's ({rc}, {diffs[:4]}, {err.strip()})")
    check(not run.total.exact_total and n_segments >= 1 and
          sum(1 for r in got if r[4] == "Total") == n_segments + 1,
          f"a Total row per total segment ({n_segments}) and the run's")
    if got:
        total = dict(zip(got_header, got[-1]))
        cells = [v for k, v in total.items() if k.startswith("Percentile")]
        check(cells and all(v == "" for v in cells) and int(total["Records"]) == 8 * distinct,
              "the inexact total: exact records, empty percentile cells")
    check(d.stop() == 0, "daemon 2: SIGTERM, exit 0")
    # Restarted, the daemon restores the run from its state directory (its
    # periodic windows listed before its segments): the same file.
    d, csv_dir, query = start("segments", "exactTotalLatencyMaxMemoryMB: 1\n")
    rc, text, err = export(d, opened.run_id, "restored")
    got_header, got = read_csv(text)
    diffs = differences(want_header, want, got)
    check(rc == 0 and got_header == want_header and not diffs,
          f"restored from the state directory: every cell equals csvDir's ({rc}, {diffs[:4]}, "
          f"{err.strip()})")
    check(d.stop() == 0, "daemon 2 restarted: SIGTERM, exit 0")

    # 3. Retention dropped the oldest windows: say so, export the rest.
    d, csv_dir, query = start("retention", "retention:\n  maxWindowsPerRun: 3\n")
    rc, _, err = ctl(d, "bench", "-writers", "1", "-seconds", "2", "-interval", "0.2",
                     "-time", "ns", "--name", "short", "--wait")
    run = query.GetRun(pb.GetRunRequest(run="short"), timeout=10)
    want_header, want = read_csv(csv_dir_file(csv_dir, run.run.id))
    rc, text, err = export(d, "short", "retention")
    got_header, got = read_csv(text)
    gone = len(want) - len(got)
    check(rc == 0 and gone >= 5 and f"oldest {gone} window(s)" in err,
          f"retention: exit 0, stderr names the {gone} windows gone ({err.strip()})")
    diffs = differences(want_header, want[gone:], got)
    check(got_header == want_header and len(got) == 3 and not diffs,
          f"retention: the retained rows are csvDir's last {len(got)}, IDs included "
          f"({diffs[:4]})")
    check(d.stop() == 0, "daemon 3: SIGTERM, exit 0")
    return finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
