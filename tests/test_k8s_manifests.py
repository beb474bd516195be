#!/usr/bin/env python3
"""test_k8s_manifests.py SRC - the Kubernetes manifests of deploy/k8s/ hold
together: every document parses and sits in the `sluice` namespace, every
volume, ConfigMap, Secret (and key), PersistentVolumeClaim and port a
manifest names exists, selectors match pod labels, and the configurations
in the ConfigMap agree with the pods: each --config file is a key of the
mounted ConfigMap, each file a configuration names (certificate, key,
pepper, Redis password, model) lies under a mount of that container and,
under a Secret, is one of its keys; the gateway's worker sockets are the
workers' sockets on a volume both share; its port is the container's; its
Redis URL names the Redis Service and port, with the password the Redis
container requires.  Prints one line per check; exit 1 when any fails."""
import json
import os
import posixpath
import re
import sys

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed")
    sys.exit(77)

fails = 0


def check(what, ok, detail=""):
    global fails
    print(("ok   " if ok else "FAIL ") + what + ("" if ok or not detail else ": " + detail))
    if not ok:
        fails += 1


src = sys.argv[1]
kdir = os.path.join(src, "deploy", "k8s")
docs = []
for name in sorted(os.listdir(kdir)):
    if not name.endswith(".yaml"):
        continue
    with open(os.path.join(kdir, name)) as f:
        for d in yaml.safe_load_all(f):
            if d is not None:
                docs.append((name, d))
check("manifests parse (%d documents)" % len(docs), len(docs) >= 8)

by_kind = {}
for name, d in docs:
    ok = all(k in d for k in ("apiVersion", "kind", "metadata")) and "name" in d["metadata"]
    check("%s: %s has apiVersion, kind, metadata.name" % (name, d.get("kind")), ok)
    if not ok:
        continue
    if d["kind"] != "Namespace":
        check("%s: %s/%s in namespace sluice" % (name, d["kind"], d["metadata"]["name"]),
              d["metadata"].get("namespace") == "sluice")
    by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
check("the sluice Namespace exists", "sluice" in by_kind.get("Namespace", {}))

configmaps = by_kind.get("ConfigMap", {})
secrets = by_kind.get("Secret", {})
pvcs = by_kind.get("PersistentVolumeClaim", {})


def secret_keys(s):
    return set((s.get("data") or {}).keys()) | set((s.get("stringData") or {}).keys())


def container_ports(c):
    out = set()
    for p in c.get("ports") or []:
        out.add(p["containerPort"])
        if "name" in p:
            out.add(p["name"])
    return out


pods = {}  # workload name -> pod spec
for kind in ("DaemonSet", "Deployment", "StatefulSet"):
    for wname, w in by_kind.get(kind, {}).items():
        spec = w["spec"]
        tmpl = spec["template"]
        labels = tmpl["metadata"].get("labels") or {}
        sel = spec["selector"]["matchLabels"]
        check("%s %s: selector matches the pod labels" % (kind, wname),
              all(labels.get(k) == v for k, v in sel.items()))
        pspec = tmpl["spec"]
        pods[wname] = (labels, pspec)
        vols = {v["name"]: v for v in pspec.get("volumes") or []}
        for v in vols.values():
            if "configMap" in v:
                check("%s: volume %s's ConfigMap %s exists" % (wname, v["name"], v["configMap"]["name"]),
                      v["configMap"]["name"] in configmaps)
            if "secret" in v:
                check("%s: volume %s's Secret %s exists" % (wname, v["name"], v["secret"]["secretName"]),
                      v["secret"]["secretName"] in secrets)
            if "persistentVolumeClaim" in v:
                cn = v["persistentVolumeClaim"]["claimName"]
                check("%s: volume %s's claim %s exists" % (wname, v["name"], cn), cn in pvcs)
        for c in pspec["containers"]:
            for m in c.get("volumeMounts") or []:
                check("%s/%s: mount %s names a volume" % (wname, c["name"], m["name"]),
                      m["name"] in vols)
            for e in c.get("env") or []:
                ref = (e.get("valueFrom") or {}).get("secretKeyRef")
                if ref:
                    check("%s/%s: env %s: Secret %s has key %s" % (wname, c["name"], e["name"],
                                                                 ref["name"], ref["key"]),
                          ref["name"] in secrets and ref["key"] in secret_keys(secrets[ref["name"]]))
            for probe in ("readinessProbe", "livenessProbe"):
                hg = (c.get(probe) or {}).get("httpGet")
                if hg:
                    check("%s/%s: %s port %s is a container port" % (wname, c["name"], probe, hg["port"]),
                          hg["port"] in container_ports(c))

for sname, s in by_kind.get("Service", {}).items():
    sel = s["spec"]["selector"]
    match = [(w, p) for w, (labels, p) in pods.items()
             if all(labels.get(k) == v for k, v in sel.items())]
    check("Service %s selects a pod template" % sname, len(match) == 1)
    for port in s["spec"]["ports"]:
        target = port.get("targetPort", port["port"])
        ok = any(target in container_ports(c) for _, p in match for c in p["containers"])
        check("Service %s: targetPort %s is a container port" % (sname, target), ok)


def mount_of(pspec, c, path):
    """The (mount, volume) under which `path` lies in container c, else None."""
    vols = {v["name"]: v for v in pspec.get("volumes") or []}
    best = None
    for m in c.get("volumeMounts") or []:
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best[0]["mountPath"]):
                best = (m, vols.get(m["name"]))
    return best


def file_exists_in(pspec, c, path, what):
    mv = mount_of(pspec, c, path)
    check("%s: %s %s lies under a mount" % (c["name"], what, path), mv is not None)
    if not mv or not mv[1]:
        return
    m, v = mv
    rel = posixpath.relpath(path, m["mountPath"])
    if "secret" in v:
        keys = secret_keys(secrets.get(v["secret"]["secretName"], {}))
        check("%s: %s %s is key %s of Secret %s" % (c["name"], what, path, rel,
                                                   v["secret"]["secretName"]), rel in keys)
    if "configMap" in v:
        keys = set((configmaps.get(v["configMap"]["name"], {}).get("data") or {}).keys())
        check("%s: %s %s is key %s of ConfigMap %s" % (c["name"], what, path, rel,
                                                      v["configMap"]["name"]), rel in keys)


def config_of(pspec, c):
    """The parsed JSON configuration that c's --config names."""
    cmd = c.get("command", []) + c.get("args", [])
    if "--config" not in cmd:
        return None
    path = cmd[cmd.index("--config") + 1]
    file_exists_in(pspec, c, path, "--config")
    mv = mount_of(pspec, c, path)
    if not mv or not mv[1] or "configMap" not in mv[1]:
        return None
    data = configmaps[mv[1]["configMap"]["name"]]["data"][posixpath.relpath(path, mv[0]["mountPath"])]
    try:
        return json.loads(data)
    except ValueError as e:
        check("%s: %s is JSON" % (c["name"], path), False, str(e))
        return None


redis_services = by_kind.get("Service", {})
seen_gateway = False
for wname, (labels, pspec) in pods.items():
    worker_socks = {}
    gateways = []
    for c in pspec["containers"]:
        cfg = config_of(pspec, c)
        if not cfg:
            continue
        if "worker" in cfg:
            w = cfg["worker"]
            file_exists_in(pspec, c, w["model"], "worker.model")
            check("%s: worker.model_sha256 is pinned" % c["name"],
                  re.fullmatch(r"[0-9a-f]{64}", w.get("model_sha256", "")) is not None)
            mv = mount_of(pspec, c, w["socket"])
            check("%s: worker.socket %s lies under a mount" % (c["name"], w["socket"]), mv is not None)
            worker_socks[w["socket"]] = (c["name"], mv[0]["name"] if mv else None)
        if "gateway" in cfg:
            gateways.append((c, cfg["gateway"]))
    for c, g in gateways:
        seen_gateway = seen_gateway or bool(worker_socks)
        for k in ("tls_cert_file", "tls_key_file", "pepper_file", "admin_credentials_file"):
            if k in g:
                file_exists_in(pspec, c, g[k], "gateway." + k)
        red = g.get("redis", {})
        if "password_file" in red:
            file_exists_in(pspec, c, red["password_file"], "gateway.redis.password_file")
        check("%s: gateway.port %s is a container port" % (c["name"], g.get("port", 8443)),
              g.get("port", 8443) in container_ports(c))
        gw_socks = {w["socket"] for w in g.get("workers", [])}
        check("%s: gateway.workers' sockets are this pod's workers' sockets" % c["name"],
              gw_socks == set(worker_socks), "%s vs %s" % (sorted(gw_socks), sorted(worker_socks)))
        for s in gw_socks & set(worker_socks):
            mv = mount_of(pspec, c, s)
            check("%s: socket %s is on the volume %s shares with %s" % (c["name"], s, c["name"],
                                                                      worker_socks[s][0]),
                  mv is not None and mv[0]["name"] == worker_socks[s][1])
        m = re.fullmatch(r"redis://([^:/]+)(?::(\d+))?", red.get("url", ""))
        if not m:
            continue
        host, port = m.group(1), int(m.group(2) or 6379)
        hm = re.fullmatch(r"([a-z0-9-]+)\.([a-z0-9-]+)\.svc(\.cluster\.local)?", host)
        svc = redis_services.get(hm.group(1)) if hm else None
        check("%s: redis.url host %s is a Service in namespace sluice" % (c["name"], host),
              svc is not None and hm.group(2) == "sluice")
        if not svc:
            continue
        check("%s: redis.url port %d is a port of Service %s" % (c["name"], port, hm.group(1)),
              any(p["port"] == port for p in svc["spec"]["ports"]))
        for rw, (rl, rp) in pods.items():
            if not all(rl.get(k) == v for k, v in svc["spec"]["selector"].items()):
                continue
            for rc in rp["containers"]:
                if "--requirepass" in (rc.get("args") or []) + (rc.get("command") or []):
                    check("%s: Redis %s requires a password: gateway.redis.password_file is set"
                          % (c["name"], rw), "password_file" in red)

check("a pod has a gateway and workers", seen_gateway)
sys.exit(1 if fails else 0)
