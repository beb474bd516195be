#!/usr/bin/env python3
"""test_dashboards.py ROOT - the Grafana dashboard and the Prometheus rules
under deploy/: the dashboard JSON loads, has panels with PromQL targets and
its variables; every sluice_* metric they name (histogram suffixes taken
off) is listed in docs/metrics.md; the rules file parses as YAML, each rule
has an expression, alert names are unique and every alert has a severity
and a summary; with promtool installed, `promtool check rules` passes too
(Debian's `prometheus` package has it; skipped, not failed, without)."""
import json
import os
import re
import shutil
import subprocess
import sys

import yaml

root = sys.argv[1] if len(sys.argv) > 1 else "."
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


metrics_doc = open(os.path.join(root, "docs/metrics.md")).read()
listed = set(re.findall(r"`(sluice_[a-z_]+)`", metrics_doc))
check(len(listed) > 20, "docs/metrics.md lists fewer than 20 metrics")


def metric_names(expr):
    names = set()
    for m in re.findall(r"\b(sluice_[a-z_]+)", expr):
        names.add(re.sub(r"_(bucket|count|sum)$", "", m))
    return names


dash = json.load(open(os.path.join(root, "deploy/grafana/sluice.json")))
check(dash.get("uid") and dash.get("title"), "dashboard without uid or title")
variables = {v["name"] for v in dash.get("templating", {}).get("list", [])}
check({"datasource", "ttft_target", "itl_target"} <= variables, f"dashboard variables: {variables}")
panels = dash.get("panels", [])
check(len(panels) >= 8, f"{len(panels)} panels")
seen_ids = set()
used = set()
for p in panels:
    check(p.get("id") not in seen_ids, f"panel id {p.get('id')} twice")
    seen_ids.add(p.get("id"))
    targets = p.get("targets", [])
    check(targets, f"panel '{p.get('title')}' has no target")
    for t in targets:
        expr = t.get("expr", "")
        check(expr.strip(), f"panel '{p.get('title')}': empty expression")
        check(expr.count("(") == expr.count(")"), f"unbalanced parentheses: {expr}")
        for v in re.findall(r"\$([a-z_]+)", expr):
            check(v in variables, f"panel '{p.get('title')}': unknown variable ${v}")
        used |= metric_names(expr)
for m in sorted(used - listed):
    failures.append(f"dashboard names {m}, not in docs/metrics.md")
for need in ("sluice_gateway_ttft_seconds", "sluice_gateway_inter_token_seconds",
             "sluice_gateway_queue_depth", "sluice_worker_kv_occupancy",
             "sluice_gateway_completion_tokens_total", "sluice_worker_inflight"):
    check(need in used, f"dashboard does not show {need}")

rules_path = os.path.join(root, "deploy/prometheus/sluice-rules.yml")
rules = yaml.safe_load(open(rules_path))
alerts = []
for g in rules.get("groups", []):
    check(g.get("name") and g.get("rules"), f"group without name or rules: {g}")
    for r in g.get("rules", []):
        check(r.get("expr"), f"rule without expr: {r}")
        check(("alert" in r) != ("record" in r), f"rule is neither alert nor record: {r}")
        for m in metric_names(r.get("expr", "")):
            check(m in listed, f"rule names {m}, not in docs/metrics.md")
        if "alert" in r:
            alerts.append(r["alert"])
            check(r.get("labels", {}).get("severity"), f"alert {r['alert']} without severity")
            check(r.get("annotations", {}).get("summary"), f"alert {r['alert']} without summary")
check(len(alerts) == len(set(alerts)), f"alert names repeat: {alerts}")
check({"SluiceTTFTBudgetBurnFast", "SluiceKVCacheNearFull", "SluiceWorkerNotReady"} <= set(alerts),
      f"alerts: {alerts}")

promtool = shutil.which("promtool")
if promtool:
    r = subprocess.run([promtool, "check", "rules", rules_path], capture_output=True, text=True)
    check(r.returncode == 0, f"promtool check rules: {r.stdout}{r.stderr}")
    print("promtool check rules: " + ("ok" if r.returncode == 0 else "failed"))
else:
    print("promtool not installed: the rules were parsed and checked here only")

for f in failures:
    print("FAIL:", f)
print(f"{len(panels)} panels, {len(alerts)} alerts, {len(used)} metrics used: "
      + ("ok" if not failures else f"{len(failures)} failure(s)"))
sys.exit(1 if failures else 0)
