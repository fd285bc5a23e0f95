"""The rendered Deployment runs: start ``lance-flight`` with the exact command line, environment and
config file the chart renders (free ports, a temporary root and config path substituted) and hit the
probes the kubelet would hit.

These tests need the ``lance-flight`` console script (``flight_server.cli``). Without it they fail,
on purpose: a chart whose command does not exist is broken.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.flight as flight
import pytest
import yaml

from lance_format.core.config import KERNEL_CACHE_ENV, KERNEL_SEED_ENV
from lance_format.core.jit import kernel_cache_dir
from loadtest.load.server import free_port
from tests.deploy.chart import CHART_DIR, Obj, by_kind, container, deep_merge, objects, one, render
from tests.deploy.value_sets import VALUE_SETS

CONFIG_PATH = "/etc/lance-flight/config.yaml"
VENV_BIN = Path(sys.executable).parent
#: A cold start imports pyarrow and opens the root; generous so a loaded machine does not flake.
START_TIMEOUT_S = 60.0
#: SIGTERM drains and exits; the chart gives 60 s, an idle server needs far less.
STOP_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.1


def _expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: defined variables are replaced, $$ escapes, the rest stays."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, value)


def _secret_value(objs: list[Obj], name: str, key: str) -> str:
    for secret in by_kind(objs, "Secret"):
        if secret["metadata"]["name"] == name:
            return base64.b64decode(secret["data"][key]).decode()
    raise AssertionError(f"Secret {name} is not rendered by the chart")


def _container_env(ctr: Obj, objs: list[Obj], pod_ip: str) -> dict[str, str]:
    """The environment the kubelet would give the container (downward API and secrets resolved)."""
    env: dict[str, str] = {}
    for entry in ctr.get("env", []):
        name = entry["name"]
        if "value" in entry:
            env[name] = _expand(entry["value"], env)
            continue
        source = entry["valueFrom"]
        if "fieldRef" in source:
            downward = {"status.podIP": pod_ip, "metadata.name": "pod-0", "metadata.namespace": "analytics"}
            env[name] = downward[source["fieldRef"]["fieldPath"]]
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[name] = _secret_value(objs, ref["name"], ref["key"])
        else:
            raise AssertionError(f"unhandled env source {source}")
    return env


@dataclass
class RunningServer:
    process: subprocess.Popen[bytes]
    config: dict[str, Any]
    env: dict[str, str]
    log: Path

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.config['metricsPort']}{path}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def _http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
    except http.client.HTTPException:
        # Polling a free port in the ephemeral range before the server binds it can connect the
        # socket to itself (TCP simultaneous open): the "answer" is our own request line.
        return None


def _wait_for(server: RunningServer, path: str, status: int = 200) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    last: int | None = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"server exited with {server.process.returncode}:\n{server.output()}")
        last = _http_status(server.url(path))
        if last == status:
            return
        time.sleep(POLL_INTERVAL_S)
    raise AssertionError(
        f"{path} answered {last}, not {status}, within {START_TIMEOUT_S}s:\n{server.output()}"
    )


def _start(values: dict[str, Any], tmp_path: Path) -> Iterator[RunningServer]:
    executable = VENV_BIN / "lance-flight"
    assert executable.exists(), (
        f"{executable} does not exist: the chart runs `lance-flight serve --config ...`, the console "
        "script of flight_server.cli (pyproject [project.scripts])"
    )
    workers = int(values.get("config", {}).get("workers", 1))
    base = free_port(workers + 1)
    local = {
        "config": {
            "root": str(tmp_path / "data"),
            "host": "127.0.0.1",
            "port": base,
            "metricsPort": base + workers,
        }
    }
    objs = objects(render(deep_merge(values, local)))
    deployment = one(objs, "Deployment")
    ctr = container(deployment)
    config_text: str = by_kind(objs, "ConfigMap")[0]["data"]["config.yaml"]
    config: dict[str, Any] = yaml.safe_load(config_text)

    # Files the pod would get from its volumes, at temporary paths.
    config_file = tmp_path / "config.yaml"
    if config["auth"]["tokensFile"]:
        pod = deployment["spec"]["template"]["spec"]
        directory = str(Path(config["auth"]["tokensFile"]).parent)
        mount = next(m for m in ctr["volumeMounts"] if m["mountPath"] == directory)
        volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])["secret"]
        key = next(i["key"] for i in volume["items"] if i["path"] == Path(config["auth"]["tokensFile"]).name)
        tokens_file = tmp_path / "tokens"
        tokens_file.write_text(_secret_value(objs, volume["secretName"], key))
        config_text = config_text.replace(config["auth"]["tokensFile"], str(tokens_file))
    config_file.write_text(config_text)

    command = [str(config_file) if arg == CONFIG_PATH else arg for arg in ctr["command"]]
    assert command != ctr["command"], "the rendered command does not name the config file"
    argv = command + list(ctr.get("args", []))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANCE_FLIGHT_", "AWS_"))}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    rendered_env = _container_env(ctr, objs, pod_ip="127.0.0.1")
    env.update(rendered_env)
    # The pod's kernel cache is an empty /tmp emptyDir seeded from the kernels the image compiled at
    # build time. Here: an empty directory of this test, seeded from the kernels this test session
    # compiled (tests/conftest.py). The chart's fixed /tmp path would be shared between runs of
    # other checkouts, whose stale entries make the server compile for a minute before it is ready.
    assert rendered_env.get(KERNEL_CACHE_ENV), "the chart does not give the kernels a writable cache"
    env[KERNEL_CACHE_ENV] = str(tmp_path / "kernels")
    env[KERNEL_SEED_ENV] = kernel_cache_dir()

    log = tmp_path / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT)
    server = RunningServer(process, config, rendered_env, log)
    try:
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def default_server(tmp_path: Path) -> Iterator[RunningServer]:
    yield from _start({}, tmp_path)


@pytest.fixture
def secured_server(tmp_path: Path) -> Iterator[RunningServer]:
    values = {
        "config": {"workers": 2, "logLevel": "DEBUG", "cache": {"pageBytes": 64 * 1024 * 1024}},
        "secrets": {
            "auth": {"tokens": [{"token": "deploy-writer"}, {"token": "deploy-reader", "readOnly": True}]}
        },
        "extraArgs": ["--max-take-rows", "5000"],
        "extraEnv": [{"name": "LANCE_FLIGHT_MAX_CONCURRENT_STREAMS", "value": "16"}],
    }
    yield from _start(values, tmp_path)


def _locations(server: RunningServer) -> list[str]:
    return server.env["LANCE_FLIGHT_ADVERTISE"].split(",")


def test_default_deployment_serves_its_probes(default_server: RunningServer) -> None:
    _wait_for(default_server, "/healthz")
    _wait_for(default_server, "/readyz")
    metrics = urllib.request.urlopen(default_server.url("/metrics"), timeout=5).read().decode()
    assert "# TYPE" in metrics
    # The advertised location (the pod IP the chart puts in LANCE_FLIGHT_ADVERTISE) answers Flight.
    (location,) = _locations(default_server)
    assert location == f"grpc://127.0.0.1:{default_server.config['port']}"
    with flight.FlightClient(location) as client:
        assert list(client.list_flights()) == []
    # SIGTERM (what the kubelet sends) drains and exits 0.
    default_server.process.send_signal(signal.SIGTERM)
    assert default_server.process.wait(STOP_TIMEOUT_S) == 0, default_server.output()


def test_secured_deployment_with_workers_tokens_and_extra_flags(secured_server: RunningServer) -> None:
    _wait_for(secured_server, "/healthz")
    _wait_for(secured_server, "/readyz")
    locations = _locations(secured_server)
    port = secured_server.config["port"]
    assert locations == [f"grpc://127.0.0.1:{port}", f"grpc://127.0.0.1:{port + 1}"]
    token_header = [(b"authorization", b"Bearer deploy-writer")]
    for location in locations:
        with flight.FlightClient(location) as client:
            with pytest.raises(flight.FlightUnauthenticatedError):
                list(client.list_flights())
            options = flight.FlightCallOptions(headers=token_header, timeout=10)
            assert list(client.list_flights(options=options)) == []
    secured_server.process.send_signal(signal.SIGTERM)
    assert secured_server.process.wait(STOP_TIMEOUT_S) == 0, secured_server.output()


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_rendered_config_is_what_the_server_loads(name: str, tmp_path: Path) -> None:
    # The chart's `config:` keys are the server's keys: every rendered config.yaml loads, and each
    # value lands in the setting of the same name.
    from flight_server.config import load_settings

    objs = objects(render(VALUE_SETS[name]))
    text: str = by_kind(objs, "ConfigMap")[0]["data"]["config.yaml"]
    config: dict[str, Any] = yaml.safe_load(text)
    # Mounted secret files, at temporary paths.
    for section, key in (
        ("auth", "tokensFile"),
        ("tls", "certFile"),
        ("tls", "keyFile"),
        ("tls", "clientCaFile"),
    ):
        path = config[section][key]
        if path:
            local = tmp_path / Path(path).name
            local.write_text("placeholder-token\n" if key == "tokensFile" else "PEM\n")
            text = text.replace(path, str(local))
    config_file = tmp_path / "config.yaml"
    config_file.write_text(text)
    settings = load_settings([], {}, str(config_file))
    expected = {
        "root": config["root"],
        "host": config["host"],
        "port": config["port"],
        "metrics_port": config["metricsPort"],
        "workers": config["workers"],
        "metadata_cache_bytes": config["cache"]["metadataBytes"],
        "page_cache_bytes": config["cache"]["pageBytes"],
        "s3_endpoint": config["s3"]["endpoint"],
        "s3_region": config["s3"]["region"],
        "s3_anonymous": config["s3"]["anonymous"],
        "max_take_rows": config["limits"]["maxTakeRows"],
        "max_message_bytes": config["limits"]["maxMessageBytes"],
        "max_concurrent_streams": config["limits"]["maxConcurrentStreams"],
        "shutdown_grace_seconds": config["shutdownGraceSeconds"],
        "log_level": config["logLevel"],
        "log_format": config["logFormat"],
    }
    assert {k: getattr(settings, k) for k in expected} == expected
    assert bool(settings.tokens_file) == bool(config["auth"]["tokensFile"])
    assert bool(settings.tls_cert) == bool(config["tls"]["certFile"])
    assert bool(settings.tls_client_ca) == bool(config["tls"]["clientCaFile"])
    advertise = [a for a in config["advertise"].split(",") if a]
    if advertise:
        assert list(settings.advertise) == advertise


def test_chart_config_keys_are_the_servers() -> None:
    # Drift guard both ways: every key the chart's schema allows is a server key, and every server
    # key is in the chart except the two that hold secrets (they come from Secrets, not the ConfigMap).
    from flight_server.config import OPTIONS

    def flatten(schema: dict[str, Any], prefix: str = "") -> set[str]:
        keys: set[str] = set()
        for key, sub in schema["properties"].items():
            if sub.get("type") == "object" and "properties" in sub:
                keys |= flatten(sub, f"{prefix}{key}.")
            else:
                keys.add(prefix + key)
        return keys

    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    chart_keys = flatten(schema["properties"]["config"])
    server_keys = {opt.key for opt in OPTIONS}
    assert chart_keys <= server_keys, chart_keys - server_keys
    assert server_keys - chart_keys == {"auth.tokens", "auth.users"}
