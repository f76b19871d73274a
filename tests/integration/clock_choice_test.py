#!/usr/bin/env python3
"""`clock: auto | tsc | monotonic` (issue 31) end to end, against the real
binaries:

  * perld bench, perlctl bench (a daemon run) and perlctl load take --clock;
    each run's clock line / metadata says which clock timed it: CLOCK_MONOTONIC
    for monotonic, the calibrated TSC for auto where the kernel trusts it,
    and "FORCED by clock: tsc" with the cross-CPU check's figures for tsc;
  * the daemon's `clock` key is the default of its benches, is taken on
    SIGHUP for new benches, and a forced TSC says so in the daemon's log;
  * the refusal: with two CPUs that disagree (the product's test hook
    PERLD_TEST_TSC_SKEW_NS skews the last CPU's reading in the check) tsc
    is refused with the measured skew -- perld bench exits 2, perlctl load 1,
    a daemon run is FAILED_PRECONDITION, a daemon whose config says
    `clock: tsc` does not start, and SIGHUP to `clock: tsc` keeps the old one.

On a CPU without an invariant TSC, tsc is refused everywhere ("constant_tsc")
and the test checks that instead of the forced clock.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import Daemon, check, finish  # noqa: E402

SKEW = {"PERLD_TEST_TSC_SKEW_NS": "50000"}


def invariant_tsc():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return " constant_tsc" in line and " nonstop_tsc" in line
    return False


def cpus_allowed():
    return len(os.sched_getaffinity(0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    ap.add_argument("--perlctl", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-clock-")
    pb, rpc, _ = perld_it.load_stubs(tmp)
    import grpc
    forced_ok = invariant_tsc()
    two_cpus = cpus_allowed() >= 2

    def run(cmd, env=None, timeout=120):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, **env) if env else None)
        return p.returncode, p.stdout, p.stderr

    # --- perld bench --clock -------------------------------------------------
    bench = [args.perld, "bench", "-writers", "1", "-records", "20000", "-time", "ns"]
    rc, out, err = run(bench + ["--clock", "monotonic"])
    check(rc == 0 and "PerL Clock: CLOCK_MONOTONIC (clock: monotonic)" in out,
          f"perld bench --clock monotonic: the clock line says CLOCK_MONOTONIC ({rc}, "
          f"{err.strip()[-200:]})")
    rc, out, err = run(bench + ["--clock", "tsc"])
    if forced_ok:
        check(rc == 0 and re.search(r"PerL Clock: calibrated TSC .*FORCED by clock: tsc \(.*"
                                    r"CPUs agree with CLOCK_MONOTONIC: offsets", out),
              f"perld bench --clock tsc: the clock line says FORCED and what the check measured "
              f"({rc}, {[l for l in out.splitlines() if 'Clock' in l]})")
    else:
        check(rc == 2 and "constant_tsc" in err, f"perld bench --clock tsc refused ({err.strip()})")
    if forced_ok and two_cpus:
        rc, out, err = run(bench + ["--clock", "tsc"], env=SKEW)
        check(rc == 2 and re.search(r"--clock tsc: refused: the TSC of CPU \d+ and CPU \d+ "
                                    r"disagree by [45]\d{4}\.\d ns", err),
              f"perld bench --clock tsc, skewed CPUs: exit 2 with the measured skew "
              f"({rc}, {err.strip()})")

    # --- a daemon: its clock key, perlctl bench --clock, perlctl load --clock -
    config = os.path.join(tmp, "perld.yaml")
    with open(config, "w") as f:
        f.write("clock: monotonic\n")
    log = os.path.join(tmp, "perld.log")
    d = Daemon(args.perld, os.path.join(tmp, "state"), config=config, log=log,
               env=SKEW if two_cpus else None)
    query = rpc.QueryStub(grpc.insecure_channel(d.grpc))

    def ctl(*cmd, env=None):
        return run([args.perlctl, "--target", d.grpc] + list(cmd), env=env)

    def clock_of(run_name):
        return query.GetRun(pb.GetRunRequest(run=run_name), timeout=10).run.clock

    def daemon_bench(name, *extra):
        return ctl("bench", "-writers", "1", "-records", "20000", "-time", "ns", "--name", name,
                   "--wait", *extra)

    rc, _, err = daemon_bench("by-config")
    check(rc == 0 and clock_of("by-config").startswith("CLOCK_MONOTONIC (clock: monotonic)"),
          f"clock: monotonic is the daemon benches' default ({clock_of('by-config')!r})")
    rc, _, err = daemon_bench("asked-auto", "--clock", "auto")
    auto = clock_of("asked-auto") if rc == 0 else ""
    check(rc == 0 and (auto.startswith("calibrated TSC") or "TSC not used" in auto) and
          "FORCED" not in auto,
          f"perlctl bench --clock auto: the auto rule, not the daemon's key ({auto!r})")
    rc, _, err = daemon_bench("asked-tsc", "--clock", "tsc")
    if forced_ok and two_cpus:
        check(rc == 1 and "FAILED_PRECONDITION" in err and "refused: the TSC of CPU" in err,
              f"perlctl bench --clock tsc on skewed CPUs: FAILED_PRECONDITION with the skew "
              f"({rc}, {err.strip()[-200:]})")
    elif forced_ok:
        check(rc == 0 and "FORCED by clock: tsc" in clock_of("asked-tsc"),
              f"perlctl bench --clock tsc: the run's clock says FORCED ({rc})")
    else:
        check(rc == 1 and "constant_tsc" in err, f"perlctl bench --clock tsc refused ({err})")

    # SIGHUP: tsc refused here (skewed), so new benches keep monotonic; then auto.
    if forced_ok and two_cpus:
        with open(config, "w") as f:
            f.write("clock: tsc\n")
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while "keeping clock: monotonic" not in open(log).read() and time.time() < deadline:
            time.sleep(0.1)
        text = open(log).read()
        check("SIGHUP: clock: clock tsc: refused: the TSC of CPU" in text and
              "keeping clock: monotonic" in text,
              "SIGHUP to a refused clock: tsc: the log says why and keeps monotonic")
        rc, _, _ = daemon_bench("after-refused-reload")
        check(rc == 0 and clock_of("after-refused-reload").startswith("CLOCK_MONOTONIC"),
              "after the refused reload new benches still time with CLOCK_MONOTONIC")
    with open(config, "w") as f:
        f.write("clock: auto\n")
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    reloaded = False
    while not reloaded and time.time() < deadline:
        rc, _, _ = daemon_bench("after-reload")
        reloaded = rc == 0 and not clock_of("after-reload").startswith("CLOCK_MONOTONIC (clock:")
        if not reloaded:
            time.sleep(0.2)
    check(reloaded, f"SIGHUP to clock: auto: new benches take it ({clock_of('after-reload')!r})")

    # perlctl load --clock: the client's clock, listed with the run's clients.
    load = ["load", "-writers", "1", "-records", "20000", "-time", "ns"]
    rc, _, err = ctl(*load, "--run", "load-mono", "--clock", "monotonic")
    clients = query.GetClients(pb.GetClientsRequest(run="load-mono"), timeout=10).clients
    check(rc == 0 and clients and clients[0].clock.startswith("CLOCK_MONOTONIC"),
          f"perlctl load --clock monotonic: the client's clock ({rc}, "
          f"{[c.clock for c in clients]}, {err.strip()[-200:]})")
    if forced_ok:
        rc, _, err = ctl(*load, "--run", "load-tsc", "--clock", "tsc")
        clients = query.GetClients(pb.GetClientsRequest(run="load-tsc"), timeout=10).clients
        check(rc == 0 and clients and "FORCED by clock: tsc" in clients[0].clock,
              f"perlctl load --clock tsc: the client's clock says FORCED ({rc}, "
              f"{[c.clock for c in clients]})")
    if forced_ok and two_cpus:
        rc, _, err = ctl(*load, "--run", "load-skewed", "--clock", "tsc", env=SKEW)
        check(rc == 1 and "--clock tsc: refused: the TSC of CPU" in err,
              f"perlctl load --clock tsc on skewed CPUs: exit 1 with the skew ({rc}, {err.strip()})")
    check(d.stop() == 0, "SIGTERM, exit 0")

    # A daemon whose config forces the TSC: loud in its log; refused: no start.
    with open(config, "w") as f:
        f.write("clock: tsc\n")
    if forced_ok:
        log2 = os.path.join(tmp, "perld-tsc.log")
        d = Daemon(args.perld, os.path.join(tmp, "state-tsc"), config=config, log=log2)
        check(re.search(r"warning bench clock: calibrated TSC .*FORCED by clock: tsc",
                        open(log2).read()) is not None,
              "clock: tsc: the daemon's log warns that the bench clock is a forced TSC")
        check(d.stop() == 0, "SIGTERM, exit 0")
    if forced_ok and two_cpus:
        p = subprocess.run([args.perld, "--grpc-listen", "127.0.0.1:0", "--http-listen",
                            "127.0.0.1:0", "--state-dir", os.path.join(tmp, "state-refused"),
                            "--config", config], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, **SKEW))
        check(p.returncode != 0 and "clock tsc: refused: the TSC of CPU" in p.stderr,
              f"clock: tsc on skewed CPUs: perld does not start, and says why "
              f"({p.returncode}, {p.stderr.strip()[-300:]})")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
