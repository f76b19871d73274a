"""The deployment files as far as this machine can check them offline:

- yamllint on the Kubernetes manifests, the compose example and the
  Prometheus configurations;
- every Kubernetes object has apiVersion, kind, metadata.name and the perld
  namespace; workloads run as non-root with a read-only root filesystem,
  probe /healthz and /readyz on a named port, and carry the Prometheus
  scrape annotations; the edge DaemonSet names itself after its node
  (PERLD_NODE_ID) and forwards to the root Service;
- every perld.yaml embedded in a ConfigMap passes `perld --check-config`,
  and the edge's upstream.target resolves to the root Service's name;
- `promtool check config` on the compose example's prometheus.yml;
- the Dockerfile: multi-stage, a non-root USER, a HEALTHCHECK, a state
  VOLUME, an init as PID 1.
(`kubectl --dry-run=client` needs an API server for discovery, and building
the image needs a base image: neither is available offline here.)

  /usr/bin/python3 tests/integration/deploy_test.py --perld build/release/daemon/bench/perld
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perld_it  # noqa: E402
from perld_it import check, ROOT  # noqa: E402

DEPLOY = os.path.join(ROOT, "deploy")
YAMLLINT = "{extends: default, rules: {line-length: {max: 120}, document-start: disable, " \
           "comments: {min-spaces-from-content: 1}, truthy: {check-keys: false}}}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perld", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="perld-deploy-")
    k8s = os.path.join(DEPLOY, "kubernetes")
    files = [os.path.join(k8s, f) for f in sorted(os.listdir(k8s))] + [
        os.path.join(DEPLOY, "compose", f) for f in sorted(os.listdir(os.path.join(DEPLOY, "compose")))
    ] + [os.path.join(DEPLOY, "prometheus", "prometheus.yml")]
    if shutil.which("yamllint"):
        r = subprocess.run(["yamllint", "-f", "parsable", "-d", YAMLLINT] + files,
                           capture_output=True, text=True)
        check(r.returncode == 0, f"yamllint: {len(files)} files ({r.stdout.strip()[:600]})")
    else:
        print("skip: yamllint is not installed")

    objects = []
    for f in files[:len(os.listdir(k8s))]:
        with open(f) as fh:
            objects += [(os.path.basename(f), o) for o in yaml.safe_load_all(fh) if o]
    kinds = sorted(o["kind"] for _, o in objects)
    check(kinds == ["ConfigMap", "ConfigMap", "DaemonSet", "Deployment", "Namespace",
                    "PersistentVolumeClaim", "Service"], f"the objects: {kinds}")
    for name, o in objects:
        meta = o.get("metadata", {})
        check(o.get("apiVersion") and meta.get("name") and
              (o["kind"] == "Namespace" or meta.get("namespace") == "perld"),
              f"{name}: {o['kind']} {meta.get('name')} has apiVersion, name, namespace perld")
    by_kind = {o["kind"] + "/" + o["metadata"]["name"]: o for _, o in objects}
    service = by_kind["Service/perld-root"]
    for key in ("Deployment/perld-root", "DaemonSet/perld-edge"):
        spec = by_kind[key]["spec"]["template"]
        pod, container = spec["spec"], spec["spec"]["containers"][0]
        ports = {p["name"] for p in container["ports"]}
        check(pod["securityContext"]["runAsNonRoot"] and
              container["securityContext"]["readOnlyRootFilesystem"] and
              container["securityContext"]["allowPrivilegeEscalation"] is False,
              f"{key}: non-root, read-only root filesystem, no privilege escalation")
        check(container["livenessProbe"]["httpGet"]["path"] == "/healthz" and
              container["readinessProbe"]["httpGet"]["path"] == "/readyz" and
              container["livenessProbe"]["httpGet"]["port"] in ports,
              f"{key}: probes /healthz and /readyz on a named port")
        annotations = spec["metadata"]["annotations"]
        check(annotations.get("prometheus.io/scrape") == "true" and
              annotations.get("prometheus.io/port") == "9719",
              f"{key}: Prometheus scrape annotations")
        check(spec["metadata"]["labels"].items() >= {"app.kubernetes.io/name": "perld"}.items(),
              f"{key}: labelled app.kubernetes.io/name=perld")
    check(service["spec"]["selector"] ==
          by_kind["Deployment/perld-root"]["spec"]["template"]["metadata"]["labels"],
          "the root Service selects the root pods")
    edge_env = by_kind["DaemonSet/perld-edge"]["spec"]["template"]["spec"]["containers"][0]["env"]
    check(any(e["name"] == "PERLD_NODE_ID" and
              e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName" for e in edge_env),
          "the edge names itself after its node (PERLD_NODE_ID)")
    for key in ("ConfigMap/perld-root-config", "ConfigMap/perld-edge-config"):
        path = os.path.join(tmp, key.split("/")[1] + ".yaml")
        with open(path, "w") as f:
            f.write(by_kind[key]["data"]["perld.yaml"])
        r = subprocess.run([args.perld, "--check-config", path], capture_output=True, text=True)
        check(r.returncode == 0, f"{key}: perld --check-config ({r.stderr.strip()[:300]})")
    edge_config = yaml.safe_load(by_kind["ConfigMap/perld-edge-config"]["data"]["perld.yaml"])
    check(edge_config["upstream"]["target"] == "perld-root.perld.svc:9717",
          "the edge forwards to the root Service")

    compose = yaml.safe_load(open(os.path.join(DEPLOY, "compose", "compose.yaml")))
    check(set(compose["services"]) == {"perld", "prometheus", "grafana"},
          "compose: perld, Prometheus and Grafana")
    for volume in compose["services"]["grafana"]["volumes"]:
        source = volume.split(":")[0]
        check(os.path.exists(os.path.join(DEPLOY, "compose", source)),
              f"compose: {source} exists")
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "config",
                            os.path.join(DEPLOY, "compose", "prometheus.yml")],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"promtool check config compose/prometheus.yml ({r.stderr[:200]})")

    docker = open(os.path.join(DEPLOY, "Dockerfile")).read()
    froms = [line for line in docker.splitlines() if line.startswith("FROM ")]
    check(len(froms) == 2, "Dockerfile: multi-stage (build, then run)")
    for needle in ("USER perld", "HEALTHCHECK", "VOLUME /var/lib/perld", "tini",
                   "scripts/install-deps.sh", "EXPOSE 9717 9719"):
        check(needle in docker, f"Dockerfile: {needle}")
    return perld_it.finish()


if __name__ == "__main__":
    sys.exit(main())
