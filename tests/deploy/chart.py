"""Render the Helm chart offline and validate Kubernetes objects, for the deploy tests.

Rendering goes through Helm's own Go library (``helm-python-sdk`` binds ``libhelm_c.so``, which
ships inside its wheel: no helm binary, no download, no cluster). Validation uses the Kubernetes
OpenAPI schemas bundled in ``kubernetes-validate`` (also offline).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART_DIR = REPO / "helm" / "lance-flight"
K8S_DIR = REPO / "deploy" / "k8s"
DEPLOY_DIR = REPO / "deploy"

RELEASE = "demo"
NAMESPACE = "analytics"

#: Oldest Kubernetes the chart claims (Chart.yaml kubeVersion) and the newest schemas bundled.
KUBE_VERSIONS = ("1.25.0", kubernetes_validate.utils.latest_version())

#: Kinds that are not part of Kubernetes itself (no bundled schema); checked structurally instead.
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule"}

Obj = dict[str, Any]


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``base`` updated recursively with ``override`` (neither is modified)."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def render(values: Mapping[str, Any] | None = None, *, release: str = RELEASE) -> dict[str, str]:
    """Render the chart like ``helm template`` does; returns template path -> manifest text.

    Raises ``helm_python.HelmValuesError`` when the values break ``values.schema.json`` and
    ``helm_python.HelmRenderError`` when a template ``fail``s.
    """
    with helm.Chart.load(CHART_DIR) as chart:
        return chart.render(
            dict(values) if values is not None else None,
            name=release,
            namespace=NAMESPACE,
            is_install=True,
        )


def default_values() -> dict[str, Any]:
    """The chart's values.yaml as Helm loads it."""
    with helm.Chart.load(CHART_DIR) as chart:
        return chart.values


def objects(manifests: Mapping[str, str]) -> list[Obj]:
    """Every Kubernetes object in the rendered manifests (NOTES.txt is not a manifest)."""
    out: list[Obj] = []
    for path, text in sorted(manifests.items()):
        if path.endswith(".txt"):
            continue
        out.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return out


def load_yaml_objects(path: Path) -> list[Obj]:
    """The objects of a multi-document YAML file."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def by_kind(objs: list[Obj], kind: str) -> list[Obj]:
    """The objects of one kind."""
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    """The single object of ``kind`` (and ``name`` when given); fails when there is not exactly one."""
    found = [o for o in by_kind(objs, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, (
        f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in found]}"
    )
    return found[0]


def validate_all(objs: list[Obj]) -> None:
    """Validate every object against the strict Kubernetes schemas (unknown fields are errors)."""
    for obj in objs:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                where = ".".join(str(p) for p in exc.path)
                raise AssertionError(
                    f"{obj['kind']}/{obj['metadata']['name']} invalid for Kubernetes {version} at {where}: "
                    f"{exc.message}"
                ) from None


def container(deployment: Obj) -> Obj:
    """The lance-flight container of a Deployment."""
    containers = deployment["spec"]["template"]["spec"]["containers"]
    match = [c for c in containers if c["name"] == "lance-flight"]
    assert len(match) == 1
    return dict(match[0])


def env_map(ctr: Obj) -> dict[str, Obj]:
    """A container's env entries by name."""
    return {e["name"]: e for e in ctr.get("env", [])}


def iter_pod_specs(objs: list[Obj]) -> Iterator[Obj]:
    """The pod specs of every workload object."""
    for obj in objs:
        if obj["kind"] == "Deployment":
            yield obj["spec"]["template"]["spec"]
        elif obj["kind"] == "Pod":
            yield obj["spec"]
