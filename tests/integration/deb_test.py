"""The Debian package, for real: `cpack -G DEB` in the release build, its
dependencies (from dpkg-shlibdeps), `dpkg -i`, `perld --version` and
`perld --check-config /etc/perld/perld.yaml` from the installed paths, the
installed perld answering /healthz (the time from `dpkg -i` to the answer is
printed: the deploy issue's goal is under 5 s), `dpkg -r` removing every
installed file but the configuration, `dpkg --purge` removing that too.
Needs root (dpkg); skipped otherwise.

  /usr/bin/python3 tests/integration/deb_test.py --build build/release
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import check  # noqa: E402

INSTALLED = ["/usr/bin/perld", "/usr/bin/perlctl", "/usr/lib/systemd/system/perld.service",
             "/usr/share/perld/perld.yaml", "/usr/lib/libperld_client.so.0",
             "/usr/share/perld/proto/perld/v1/perld.proto", "/usr/include/perld/client.h"]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: dpkg -i needs root")
        print("PASSED")
        return 0
    if run(["dpkg-query", "-W", "perld"]).returncode == 0:
        print("skip: a perld package is installed on this machine already")
        print("PASSED")
        return 0
    tmp = tempfile.mkdtemp(prefix="perld-deb-")
    r = run(["cpack", "-G", "DEB", "-B", tmp], cwd=args.build)
    debs = glob.glob(os.path.join(tmp, "perld_*.deb"))
    check(r.returncode == 0 and len(debs) == 1, f"cpack -G DEB builds one package ({r.stderr[-300:]})")
    if not debs:
        return perld_it.finish()
    deb = debs[0]
    info = run(["dpkg-deb", "-I", deb]).stdout
    depends = re.search(r"^ Depends: (.*)$", info, re.M)
    check(depends is not None and all(lib in depends.group(1) for lib in
                                      ("libgrpc++", "libprotobuf", "libyaml-cpp", "libsqlite3",
                                       "libsystemd0", "libc6")),
          f"the package depends on the libraries it links ({depends.group(1) if depends else ''})")
    print(f"package: {os.path.basename(deb)}, {os.path.getsize(deb)} bytes")

    proc = None
    try:
        t0 = time.monotonic()
        r = run(["dpkg", "-i", deb])
        check(r.returncode == 0, f"dpkg -i ({r.stderr.strip()[-300:]})")
        for path in INSTALLED + ["/etc/perld/perld.yaml"]:
            check(os.path.exists(path), f"installed: {path}")
        version = run(["/usr/bin/perld", "--version"])
        check(version.returncode == 0 and version.stdout.startswith("perld "),
              f"/usr/bin/perld --version ({version.stdout.strip()})")
        checked = run(["/usr/bin/perld", "--check-config", "/etc/perld/perld.yaml"])
        check(checked.returncode == 0, "perld --check-config /etc/perld/perld.yaml")
        # The installed daemon, as the unit starts it (ports on loopback 0
        # here, and a state directory of the test's).
        proc = subprocess.Popen(["/usr/bin/perld", "--config", "/etc/perld/perld.yaml",
                                 "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
                                 "--state-dir", os.path.join(tmp, "state")],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        http = None
        while http is None:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.match(r"perld: HTTP listening on (\S+)", line)
            if m:
                http = m.group(1)
        healthy = False
        deadline = time.monotonic() + 30
        while http and not healthy and time.monotonic() < deadline:
            try:
                healthy = urllib.request.urlopen(f"http://{http}/healthz",
                                                 timeout=2).read() == b"ok\n"
            except OSError:
                time.sleep(0.02)
        elapsed = time.monotonic() - t0
        check(healthy, "the installed perld answers /healthz")
        print(f"from dpkg -i to /healthz answered: {elapsed:.2f} s (goal: under 5 s)")
        proc.terminate()
        check(proc.wait(timeout=60) == 0, "the installed perld exits 0 on SIGTERM")
        proc = None

        r = run(["dpkg", "-r", "perld"])
        check(r.returncode == 0, f"dpkg -r ({r.stderr.strip()[-300:]})")
        left = [p for p in INSTALLED if os.path.exists(p)]
        check(not left, f"dpkg -r removes every installed file ({left})")
        check(os.path.exists("/etc/perld/perld.yaml"), "dpkg -r keeps /etc/perld/perld.yaml")
        r = run(["dpkg", "--purge", "perld"])
        check(r.returncode == 0 and not os.path.exists("/etc/perld"),
              "dpkg --purge removes /etc/perld")
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        if run(["dpkg-query", "-W", "perld"]).returncode == 0:
            run(["dpkg", "--purge", "perld"])
    return perld_it.finish()


if __name__ == "__main__":
    sys.exit(main())
