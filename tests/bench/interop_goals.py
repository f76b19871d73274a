"""Issue 29's goals for the interop formats, against the real daemon:

  1. `perlctl export RUN --format hlog` of a run with 1,000 stored windows
     (0.1 s windows of a 100 s, 2-writer `-time ns` bench) takes < 1 s
     (process included, median of 5), every window's count in the log;
  2. `perlctl import --format fio` of a 10 M-line fio latency log (one line
     per I/O, as `write_lat_log` with `log_avg_msec=0` writes it: synthetic
     lognormal latencies in ns, 4 KiB writes) runs at >= 2 M latencies/s end
     to end (parse, stream, perld's exact merge; acknowledged), the run's
     records equal to the log's lines.

  /usr/bin/python3 tests/bench/interop_goals.py --build build/release
  /usr/bin/python3 tests/bench/interop_goals.py --build build/release --smoke   # tiny
  # only the import, with another perlctl (an A/B of two builds, one daemon build)
  /usr/bin/python3 tests/bench/interop_goals.py --build build/release --only import \
      --perlctl /tmp/old/build/client/perlctl/perlctl
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
import perld_it  # noqa: E402
from goals_daemon import Daemon, print_table  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; nothing judged")
    ap.add_argument("--only", choices=("export", "import"), help="time one of the two")
    ap.add_argument("--perlctl", help="the perlctl to time (default: the build's)")
    args = ap.parse_args()
    perld = os.path.join(args.build, "daemon", "bench", "perld")
    perlctl = args.perlctl or os.path.join(args.build, "client", "perlctl", "perlctl")
    seconds, lines = ("2", 100_000) if args.smoke else ("100", 10_000_000)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Daemon(perld, os.path.join(tmp, "state"))
        ctl = [perlctl, "--target", d.grpc]
        try:
            if args.only != "import":
                export_goal(ctl, seconds, tmp, rows)
            if args.only != "export":
                import_goal(ctl, lines, tmp, rows)
        finally:
            d.stop()
    print_table(rows)
    return perld_it.finish()  # exactness only: nothing timed is judged


def export_goal(ctl, seconds, tmp, rows):
    """1. `export --format hlog` of a 1,000-window run, median of 5."""
    out = subprocess.run(ctl + ["--json", "bench", "-writers", "2", "-seconds", seconds,
                                "-interval", "0.1", "-time", "ns", "--name", "long",
                                "--wait"], capture_output=True, text=True, check=True)
    total = json.loads(out.stdout.strip().splitlines()[-1])
    windows = json.loads(subprocess.run(ctl + ["--json", "show", "long"],
                                        capture_output=True, text=True,
                                        check=True).stdout)["latest"]["seq"]
    log = os.path.join(tmp, "long.hlog")
    took = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run(ctl + ["export", "long", "--format", "hlog", "--out", log],
                       capture_output=True, check=True)
        took.append(time.perf_counter() - t0)
    with open(log) as f:
        intervals = sum(1 for line in f if line[:1].isdigit() or line.startswith("Tag="))
    perld_it.check(intervals == windows, f"one interval per window ({intervals})")
    rows.append((f"export --format hlog of {windows} windows "
                 f"({total['total']['records']:,} records), median of 5",
                 f"{statistics.median(took):.2f} s (max {max(took):.2f})", "< 1 s"))


def import_goal(ctl, lines, tmp, rows):
    """2. `import --format fio` of a `lines`-line fio latency log, one run."""
    fio = os.path.join(tmp, "job_lat.1.log")
    rng = random.Random(29)
    with open(fio, "w") as f:
        for i in range(lines):
            f.write(f"{i // 1000}, {int(rng.lognormvariate(11, 0.6))}, 1, 4096, "
                    f"{(i % 2048) * 4096}\n")
    t0 = time.perf_counter()
    p = subprocess.run(ctl + ["import", "--format", "fio", fio, "--run", "fio"],
                       capture_output=True, text=True)
    took = time.perf_counter() - t0
    perld_it.check(p.returncode == 0, f"import finished ({p.stderr.strip()[-200:]})")
    got = json.loads(subprocess.run(ctl + ["--json", "show", "fio-write"],
                                    capture_output=True, text=True,
                                    check=True).stdout)["total"]["records"]
    perld_it.check(got == lines, f"the run holds every line ({got:,} of {lines:,})")
    rows.append((f"import --format fio of {lines:,} lines (parse, stream, exact merge, "
                 f"acknowledged)", f"{lines / took / 1e6:.2f} M latencies/s "
                 f"({took:.1f} s)", ">= 2 M/s"))


if __name__ == "__main__":
    sys.exit(main())
