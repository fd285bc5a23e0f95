"""The chart's Grafana dashboard and PrometheusRule alerts: rendered, valid, and querying metrics the
server really exports."""

from __future__ import annotations

import json
import re
from typing import Any

import helm_python as helm
import pytest

from flight_server.metrics import Metrics
from tests.deploy.chart import CHART_DIR, NAMESPACE, RELEASE, by_kind, objects, one, render, validate_all

FULLNAME = f"{RELEASE}-lance-flight"
DASHBOARD = CHART_DIR / "dashboards" / "lance-flight.json"
_METRIC = re.compile(r"\b((?:lance_flight|process)_[a-z_]+)\b")


def _exported() -> set[str]:
    """Every series name a server's /metrics carries (counters with _total, histogram series)."""
    names = {"up"}
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
    for family in Metrics().registry.collect():
        names |= {family.name + s for s in suffixes.get(family.type, ("",))}
    return names


def _balanced(expr: str) -> bool:
    depth = {"(": 0, "{": 0, "[": 0}
    closing = {")": "(", "}": "{", "]": "["}
    for ch in re.sub(r'"[^"]*"', "", expr):
        if ch in depth:
            depth[ch] += 1
        elif ch in closing:
            depth[closing[ch]] -= 1
            if depth[closing[ch]] < 0:
                return False
    return all(v == 0 for v in depth.values())


def _dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p["targets"]]


def test_dashboard_queries_only_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "lance-flight"
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "namespace", "job"}
    exprs = _dashboard_exprs(dashboard)
    assert len(exprs) >= 15
    exported = _exported()
    used = {m for e in exprs for m in _METRIC.findall(e)}
    assert used <= exported, used - exported
    # Every family the server exports is on the dashboard (python_* / gc aside).
    families = {
        re.sub(r"_(total|bucket|sum|count)$", "", n) for n in exported if n.startswith("lance_flight")
    }
    shown = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in used}
    assert families - shown <= {"lance_flight_cache_hit_ratio"}, families - shown
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        for target in panel["targets"]:
            assert _balanced(target["expr"]), target["expr"]
            assert 'namespace=~"$namespace", job=~"$job"' in target["expr"]


def test_dashboard_config_map_for_the_grafana_sidecar() -> None:
    assert not [o for o in objects(render()) if o["metadata"]["name"].endswith("-dashboard")]
    objs = objects(render({"metrics": {"grafanaDashboard": {"enabled": True, "namespace": "monitoring"}}}))
    validate_all(objs)
    cm = one(objs, "ConfigMap", f"{FULLNAME}-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == "monitoring"
    assert json.loads(cm["data"]["lance-flight.json"]) == json.loads(DASHBOARD.read_text())


def _rules(values: dict[str, Any]) -> list[dict[str, Any]]:
    rule = one(
        objects(render({"metrics": {"prometheusRule": {"enabled": True, **values}}})), "PrometheusRule"
    )
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    (group,) = rule["spec"]["groups"]
    rules: list[dict[str, Any]] = group["rules"]
    return rules


def test_alert_rules_are_complete_and_query_exported_metrics() -> None:
    assert not by_kind(objects(render()), "PrometheusRule")
    rules = _rules({})
    assert {r["alert"] for r in rules} == {
        "LanceFlightDown",
        "LanceFlightHighErrorRate",
        "LanceFlightSlowCalls",
        "LanceFlightCommitConflicts",
        "LanceFlightObjectStoreRetries",
    }
    exported = _exported()
    for r in rules:
        assert set(r) == {"alert", "expr", "for", "labels", "annotations"}, r["alert"]
        assert re.fullmatch(r"\d+[smh]", r["for"])
        assert r["labels"]["severity"] in ("critical", "warning", "info")
        assert r["annotations"]["summary"]
        assert _balanced(r["expr"]), r["expr"]
        assert set(_METRIC.findall(r["expr"])) <= exported, r["alert"]
        # Each selects this release's scrape job: the Service the ServiceMonitor scrapes.
        assert f'namespace="{NAMESPACE}", job="{FULLNAME}"' in r["expr"], r["alert"]
    assert (
        "{{ $labels.pod }}"
        in next(r for r in rules if r["alert"] == "LanceFlightDown")["annotations"]["summary"]
    )


def test_alert_thresholds_and_extra_rules_come_from_values() -> None:
    extra = {"alert": "Custom", "expr": "vector(1)", "labels": {"severity": "info"}}
    rules = {
        r["alert"]: r for r in _rules({"errorRatio": 0.02, "p99LatencySeconds": 0.75, "extraRules": [extra]})
    }
    assert rules["LanceFlightHighErrorRate"]["expr"].endswith("> 0.02")
    assert rules["LanceFlightHighErrorRate"]["annotations"]["summary"].startswith("More than 2% ")
    assert rules["LanceFlightSlowCalls"]["expr"].endswith("> 0.75")
    assert rules["Custom"] == extra


@pytest.mark.parametrize(
    "values",
    [
        {"prometheusRule": {"errorRatio": 2}},
        {"prometheusRule": {"p99LatencySeconds": 0}},
        {"prometheusRule": {"threshold": 1}},
        {"grafanaDashboard": {"labels": {"grafana_dashboard": 1}}},
    ],
)
def test_schema_rejects_bad_observability_values(values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        render({"metrics": values})
