"""The plain manifests (deploy/k8s), the container image recipe and the compose file.

No Docker engine or cluster is available to the tests, so the Dockerfile and compose file are
checked statically: what they declare must agree with the chart and the server's contract.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import dockerfile
import pytest
import yaml

from tests.deploy.chart import (
    DEPLOY_DIR,
    K8S_DIR,
    Obj,
    by_kind,
    container,
    env_map,
    load_yaml_objects,
    objects,
    one,
    render,
    validate_all,
)

DOCKERFILE = DEPLOY_DIR / "Dockerfile"
DOCKERIGNORE = DEPLOY_DIR / "Dockerfile.dockerignore"
COMPOSE = DEPLOY_DIR / "compose.yaml"
CHART_COMMAND = ["lance-flight", "serve", "--config", "/etc/lance-flight/config.yaml"]


def _kustomize_objects() -> list[Obj]:
    kustomization = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())
    out: list[Obj] = []
    for name in kustomization["resources"]:
        out.extend(load_yaml_objects(K8S_DIR / name))
    return out


def _chart_default_deployment() -> Obj:
    return one(objects(render()), "Deployment")


# --- deploy/k8s ----------------------------------------------------------------------------------


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    files = {p.name for p in K8S_DIR.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)


def test_plain_manifests_validate() -> None:
    objs = _kustomize_objects()
    assert sorted(o["kind"] for o in objs) == sorted(
        ["ServiceAccount", "ConfigMap", "Deployment", "Service", "Service", "PodDisruptionBudget"]
    )
    validate_all(objs)


def test_plain_manifests_match_the_chart() -> None:
    objs = _kustomize_objects()
    plain = container(one(objs, "Deployment"))
    chart = container(_chart_default_deployment())
    for key in ("command", "ports", "startupProbe", "livenessProbe", "readinessProbe", "securityContext"):
        # The chart spells out probe defaults (initialDelaySeconds 0, successThreshold 1) that the
        # plain manifests leave to Kubernetes; compare what is set on both sides.
        got, want = plain[key], chart[key]
        if isinstance(want, dict):
            want = {k: v for k, v in want.items() if k in got or v not in (0, 1)}
        assert got == want, key
    assert plain["image"].split(":")[0] == chart["image"].split(":")[0]
    assert env_map(plain)["LANCE_FLIGHT_ADVERTISE"] == env_map(chart)["LANCE_FLIGHT_ADVERTISE"]
    assert [m["mountPath"] for m in plain["volumeMounts"]] == [m["mountPath"] for m in chart["volumeMounts"]]
    plain_pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    chart_pod = _chart_default_deployment()["spec"]["template"]["spec"]
    assert plain_pod["securityContext"] == chart_pod["securityContext"]
    # The plain config file holds the same settings as the chart's default values.
    plain_config = yaml.safe_load(one(objs, "ConfigMap")["data"]["config.yaml"])
    chart_config = yaml.safe_load(by_kind(objects(render()), "ConfigMap")[0]["data"]["config.yaml"])
    for key, value in plain_config.items():
        if isinstance(value, dict):
            assert value.items() <= chart_config[key].items(), key
        else:
            assert chart_config[key] == value, key


def test_plain_services_select_the_pods() -> None:
    objs = _kustomize_objects()
    deployment = one(objs, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"] for p in container(deployment)["ports"]}
    for svc in by_kind(objs, "Service"):
        assert svc["spec"]["selector"].items() <= labels.items()
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= ports
    assert one(objs, "Service", "lance-flight-headless")["spec"]["clusterIP"] == "None"
    assert one(objs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= labels.items()


# --- deploy/Dockerfile ---------------------------------------------------------------------------


def _final_stage() -> list[dockerfile.Command]:
    """The final stage's instructions, parsed by Docker's own (Go) Dockerfile parser."""
    commands = list(dockerfile.parse_file(str(DOCKERFILE)))
    starts = [i for i, c in enumerate(commands) if c.cmd == "FROM"]
    assert starts, "no FROM"
    return commands[starts[-1] :]


def _only(stage: list[dockerfile.Command], cmd: str) -> dockerfile.Command:
    found = [c for c in stage if c.cmd == cmd]
    assert len(found) == 1, f"expected one {cmd} in the final stage, found {len(found)}"
    return found[0]


def test_dockerfile_entrypoint_matches_the_chart() -> None:
    stage = _final_stage()
    entrypoint = _only(stage, "ENTRYPOINT")
    assert entrypoint.json, "ENTRYPOINT must be exec form (shell form swallows SIGTERM)"
    assert list(entrypoint.value) == CHART_COMMAND
    assert container(_chart_default_deployment())["command"] == CHART_COMMAND
    assert not [c for c in stage if c.cmd == "CMD"]  # extra `docker run` arguments are appended flags
    assert _only(stage, "STOPSIGNAL").value == ("SIGTERM",)


def test_dockerfile_runs_as_a_numeric_non_root_user() -> None:
    stage = _final_stage()
    user = _only(stage, "USER")
    uid, _, gid = user.value[0].partition(":")
    assert uid.isdigit(), "runAsNonRoot can only verify a numeric uid"
    assert int(uid) != 0
    assert gid.isdigit()
    assert int(gid) != 0
    chart_pod = _chart_default_deployment()["spec"]["template"]["spec"]
    assert chart_pod["securityContext"]["runAsUser"] == int(uid)
    assert chart_pod["securityContext"]["runAsGroup"] == int(gid)
    # USER comes after every RUN of the final stage: nothing runs as root once the image starts.
    last_run = max(i for i, c in enumerate(stage) if c.cmd == "RUN")
    assert stage.index(user) > last_run


def test_dockerfile_exposes_ports_and_checks_health() -> None:
    stage = _final_stage()
    exposed = {int(p.split("/")[0]) for c in stage if c.cmd == "EXPOSE" for p in c.value}
    chart_ports = {p["containerPort"] for p in container(_chart_default_deployment())["ports"]}
    assert exposed == chart_ports == {8815, 9090}
    health = _only(stage, "HEALTHCHECK")
    assert {f.partition("=")[0] for f in health.flags} >= {"--interval", "--timeout", "--start-period"}
    assert health.json, "exec-form HEALTHCHECK"
    kind, *argv = health.value
    assert kind == "CMD"
    assert argv[:2] == ["python", "-c"]
    assert "/healthz" in argv[2]
    assert "'9090'" in argv[2]
    compile(argv[2], "<healthcheck>", "exec")  # the probe script is valid Python
    # The default config baked into the image listens beyond loopback on the exposed ports.
    default_config = yaml.safe_load((DEPLOY_DIR / "config.yaml").read_text())
    assert default_config["host"] == "0.0.0.0"
    assert {default_config["port"], default_config["metricsPort"]} == exposed
    copies = [c.value for c in stage if c.cmd == "COPY" and not c.flags]
    assert ("deploy/config.yaml", "/etc/lance-flight/config.yaml") in copies


def test_dockerfile_bakes_compiled_kernels_in_as_the_cache_seed() -> None:
    """The build stage compiles every kernel into a directory of the copied venv; the final stage
    names it as the seed of the (writable, /tmp) kernel cache, so a new pod does not compile."""
    commands = list(dockerfile.parse_file(str(DOCKERFILE)))
    final = _final_stage()
    build = commands[: len(commands) - len(final)]
    env: dict[str, str] = {}
    for c in final:
        if c.cmd == "ENV":
            env.update(zip(c.value[::2], c.value[1::2], strict=True))
    seed = env["LANCE_FORMAT_KERNEL_SEED_DIR"]
    assert env["LANCE_FORMAT_KERNEL_CACHE_DIR"].startswith("/tmp/")  # the chart's emptyDir
    compiles = [c for c in build if c.cmd == "RUN" and "compile_kernels()" in c.value[0]]
    assert len(compiles) == 1
    assert f"LANCE_FORMAT_KERNEL_CACHE_DIR={seed} " in compiles[0].value[0]
    copied = [c.value for c in final if c.cmd == "COPY" and "--from=build" in c.flags]
    assert any(seed.startswith(dst.rstrip("/") + "/") and src == dst for src, dst in copied), copied


#: Allocates, writes and frees 64 MiB of Arrow pool buffers three times, waits past mimalloc's
#: default purge delay (1 s), does it once more and prints the page faults of that last round.
_REFAULT_SCRIPT = """
import resource, time
import numpy as np, pyarrow as pa
assert pa.default_memory_pool().backend_name == "mimalloc", pa.default_memory_pool().backend_name
def faults(): return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def burst():
    bufs = [np.frombuffer(pa.allocate_buffer(8 << 20), np.uint8) for _ in range(8)]
    for b in bufs: b[:] = 1
for _ in range(3): burst()
time.sleep(1.5)
before = faults(); burst(); print(faults() - before)
"""


def _final_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for c in _final_stage():
        if c.cmd == "ENV":
            env.update(zip(c.value[::2], c.value[1::2], strict=True))
    return env


def test_dockerfile_keeps_arrow_pool_pages_between_scans() -> None:
    """The image sets mimalloc (Arrow's pool) to keep freed pages, and that setting works with the
    installed pyarrow: a burst of allocations after an idle pause faults (almost) no pages in. The
    Spark benchmark's driver, which hosts the servers, uses the image's setting."""
    import subprocess
    import sys

    import pyarrow as pa

    from flight_server.entry import POOL_ENVIRONMENT
    from loadtest.bench_spark import SERVER_ENV

    if pa.default_memory_pool().backend_name != "mimalloc":
        pytest.skip("Arrow's default pool is not mimalloc here")
    env = _final_env()
    assert env["MIMALLOC_PURGE_DELAY"] == "-1"
    assert {k: env[k] for k in SERVER_ENV} == SERVER_ENV == POOL_ENVIRONMENT
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("MIMALLOC_")}
    run_env["MIMALLOC_PURGE_DELAY"] = env["MIMALLOC_PURGE_DELAY"]
    out = subprocess.run(
        [sys.executable, "-c", _REFAULT_SCRIPT], env=run_env, capture_output=True, text=True, check=True
    )
    # mimalloc's default hands the 64 MiB back after the pause: ~330 faults (2 MiB huge pages and
    # 4 KiB ones) bring it back; kept, the burst reuses it.
    assert int(out.stdout) < 32, out.stdout


def test_the_command_sets_the_pool_environment_before_pyarrow_loads() -> None:
    """``lance-flight`` (any install, not only the image) keeps Arrow's freed pages: its entry point
    sets the variable where the user did not, in a process that has not loaded pyarrow yet."""
    import subprocess
    import sys
    import tomllib

    scripts = tomllib.loads((DEPLOY_DIR.parent / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["lance-flight"] == "flight_server.entry:main"
    probe = (
        "import sys, os; import flight_server.entry as e; assert 'pyarrow' not in sys.modules; "
        "e.main(['--help']); print(os.environ.get('MIMALLOC_PURGE_DELAY'))"
    )
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("MIMALLOC_")}
    command = [sys.executable, "-c", probe]
    out = subprocess.run(command, env=run_env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "-1"
    run_env["MIMALLOC_PURGE_DELAY"] = "500"  # the user's own value wins
    out = subprocess.run(command, env=run_env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "500"


def test_dockerfile_copies_only_what_the_context_keeps() -> None:
    sources = []
    for command in dockerfile.parse_file(str(DOCKERFILE)):
        if command.cmd == "COPY" and not any(f.startswith("--from=") for f in command.flags):
            sources.extend(command.value[:-1])
    assert sources
    patterns = [p for p in DOCKERIGNORE.read_text().splitlines() if p and not p.startswith("#")]
    assert patterns[0] == "*"
    kept = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    for source in sources:
        assert source.rstrip("/").removeprefix("./") in kept, f"{source} is excluded from the build context"
        assert (DEPLOY_DIR.parent / source).exists(), source
    for needed in ("pyproject.toml", "lance_format", "flight_server"):
        assert needed in kept


# --- deploy/compose.yaml -------------------------------------------------------------------------


def test_compose_runs_the_image_on_seaweedfs() -> None:
    compose: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    server = services["lance-flight"]
    assert server["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert (DEPLOY_DIR / server["build"]["context"] / server["build"]["dockerfile"]).resolve() == DOCKERFILE
    env = server["environment"]
    assert env["LANCE_FLIGHT_ROOT"].startswith("s3://lance/")
    assert env["LANCE_FLIGHT_S3_ENDPOINT"] == "http://seaweedfs:8333"
    # The server's S3 keys are an identity SeaweedFS knows.
    identities = json.loads((DEPLOY_DIR / "seaweedfs" / "s3.json").read_text())["identities"]
    creds = {(c["accessKey"], c["secretKey"]) for i in identities for c in i["credentials"]}
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) in creds
    assert {"8815:8815", "9090:9090"} <= set(server["ports"])
    assert server["read_only"] is True
    assert "/tmp" in server["tmpfs"]
    assert server["depends_on"]["create-bucket"]["condition"] == "service_completed_successfully"
    bucket = services["create-bucket"]
    assert "s3.bucket.create -name lance" in " ".join(bucket["command"])
    assert bucket["depends_on"]["seaweedfs"]["condition"] == "service_healthy"
    weed = services["seaweedfs"]
    assert "-s3.config=/etc/seaweedfs/s3.json" in weed["command"]
    assert "-s3.port=8333" in weed["command"]
    assert any(v.startswith("./seaweedfs/s3.json:/etc/seaweedfs/s3.json") for v in weed["volumes"])


@pytest.mark.parametrize(
    "path", [DOCKERFILE, COMPOSE, DOCKERIGNORE, *sorted(K8S_DIR.glob("*.yaml"))], ids=str
)
def test_deploy_files_have_no_tabs_or_trailing_space(path: Path) -> None:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        assert "\t" not in line, f"{path.name}:{number}"
        assert line == line.rstrip(), f"{path.name}:{number}"
