"""The installed client library as a user sees it: `cmake --install` of this
build into a temporary prefix, client/examples built against it with
find_package(perld) in a Debug configuration (NDEBUG undefined, against the
release library), then run against a real perld in raw and windows mode:
every record acknowledged and counted.

  /usr/bin/python3 tests/integration/client_package_test.py --build build/release \\
      --perld build/release/daemon/bench/perld
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import check, Daemon  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--perld", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-package-")
    prefix = os.path.join(tmp, "prefix")
    r = subprocess.run(["cmake", "--install", args.build, "--prefix", prefix],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"cmake --install ({r.stderr.strip()[:200]})")
    for path in ("include/perld/client.h", "lib/cmake/perld/perldConfig.cmake",
                 "lib/libperld_client.so", "bin/perld", "bin/perlctl",
                 "share/perld/proto/perld/v1/ingest.proto"):
        check(os.path.exists(os.path.join(prefix, path)), f"installed {path}")
    installed = sorted(os.listdir(os.path.join(prefix, "include", "perld")))
    check(installed == ["client.h"], f"only the public header is installed ({installed})")
    example = os.path.join(perld_it.ROOT, "client", "examples")
    build = os.path.join(tmp, "example")
    r = subprocess.run(["cmake", "-S", example, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}",
                        "-DCMAKE_BUILD_TYPE=Debug"], capture_output=True, text=True)
    check(r.returncode == 0, f"find_package(perld) configures ({r.stderr.strip()[:300]})")
    r = subprocess.run(["cmake", "--build", build], capture_output=True, text=True)
    check(r.returncode == 0, f"the example builds against perld::client ({r.stdout[-300:]})")
    binary = os.path.join(build, "record_example")
    d = Daemon(args.perld, os.path.join(tmp, "state"))
    for mode in ("raw", "windows"):
        r = subprocess.run([binary, d.grpc, "example-" + mode, mode, "200000", "3"],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and "600000 records, acked yes" in r.stdout,
              f"{mode}: {r.stdout.strip()} {r.stderr.strip()[:200]}")
    check(d.stop() == 0, "daemon stops")
    return perld_it.finish()


if __name__ == "__main__":
    sys.exit(main())
