"""The Helm chart: rendered with several value sets by Helm's own library, validated against the
Kubernetes schemas, and checked for the wiring the server depends on."""

from __future__ import annotations

import base64
import json
from typing import Any

import helm_python as helm
import jsonschema
import pytest
import yaml

from tests.deploy.chart import (
    CHART_DIR,
    NAMESPACE,
    RELEASE,
    Obj,
    by_kind,
    container,
    deep_merge,
    default_values,
    env_map,
    iter_pod_specs,
    objects,
    one,
    render,
    validate_all,
)
from tests.deploy.value_sets import VALUE_SETS

FULLNAME = f"{RELEASE}-lance-flight"


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any], list[Obj]]:
    name = request.param
    values = VALUE_SETS[name]
    return name, values, objects(render(values))


def _config(objs: list[Obj]) -> dict[str, Any]:
    cm = by_kind(objs, "ConfigMap")[0]
    loaded: dict[str, Any] = yaml.safe_load(cm["data"]["config.yaml"])
    return loaded


def _deployment(objs: list[Obj]) -> Obj:
    return one(objs, "Deployment")


# --- every object is a valid Kubernetes object ---------------------------------------------------


def test_every_object_validates(rendered: tuple[str, dict[str, Any], list[Obj]]) -> None:
    _, values, objs = rendered
    assert {"ConfigMap", "Deployment", "Service"} <= {o["kind"] for o in objs}
    validate_all(objs)
    report = helm.lint(CHART_DIR, values, strict=True, kube_version="v1.25.0")
    assert report["errors"] == [], report


def test_validator_rejects_a_broken_object() -> None:
    # The check above must be able to fail: an unknown field and a wrong type are both caught.
    deployment = _deployment(objects(render()))
    container(deployment)  # sanity: the object is the one we think
    broken = deep_merge(deployment, {"spec": {"replicas": "three"}})
    with pytest.raises(AssertionError, match="replicas"):
        validate_all([broken])
    typo = deep_merge(deployment, {"spec": {"replica": 3}})
    with pytest.raises(AssertionError, match="replica"):
        validate_all([typo])


def test_chart_lints_clean() -> None:
    report = helm.lint(CHART_DIR, strict=True, kube_version="v1.25.0")
    assert report["errors"] == []
    # Only the advisory "icon is recommended" (severity 1) is tolerated.
    assert all(m["severity"] <= 1 for m in report["messages"]), report["messages"]


def test_default_kinds() -> None:
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objects(render()))
    assert kinds == sorted(
        [
            ("ConfigMap", FULLNAME),
            ("Deployment", FULLNAME),
            ("PodDisruptionBudget", FULLNAME),
            ("Service", FULLNAME),
            ("Service", f"{FULLNAME}-headless"),
            ("ServiceAccount", FULLNAME),
            ("Pod", f"{FULLNAME}-test-readyz"),
        ]
    )


# --- the container as the server expects it ------------------------------------------------------


def test_command_probes_and_ports(rendered: tuple[str, dict[str, Any], list[Obj]]) -> None:
    _, values, objs = rendered
    config = _config(objs)
    ctr = container(_deployment(objs))
    assert ctr["command"] == ["lance-flight", "serve", "--config", "/etc/lance-flight/config.yaml"]
    assert ctr.get("args", []) == values.get("extraArgs", [])
    ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    workers = config["workers"]
    expected = {("flight" if k == 0 else f"flight-{k}"): config["port"] + k for k in range(workers)}
    expected["metrics"] = config["metricsPort"]
    assert ports == expected
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        assert ctr[probe]["httpGet"] == {"path": path, "port": "metrics"}, probe
    mounts = {m["mountPath"]: m for m in ctr["volumeMounts"]}
    assert mounts["/etc/lance-flight/config.yaml"]["subPath"] == "config.yaml"


def test_security_context(rendered: tuple[str, dict[str, Any], list[Obj]]) -> None:
    _, _, objs = rendered
    deployment = _deployment(objs)
    pod = deployment["spec"]["template"]["spec"]
    ctr = container(deployment)
    sc = ctr["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["automountServiceAccountToken"] is False
    # A read-only root needs a writable /tmp.
    tmp = next(m for m in ctr["volumeMounts"] if m["mountPath"] == "/tmp")
    volume = next(v for v in pod["volumes"] if v["name"] == tmp["name"])
    assert "emptyDir" in volume
    # Every mount has a volume and every pod in the chart runs non-root.
    names = {v["name"] for v in pod["volumes"]}
    assert {m["name"] for m in ctr["volumeMounts"]} <= names
    for spec in iter_pod_specs(objs):
        assert spec["securityContext"]["runAsNonRoot"] is True


def test_advertise_env(rendered: tuple[str, dict[str, Any], list[Obj]]) -> None:
    _, values, objs = rendered
    config = _config(objs)
    env = env_map(container(_deployment(objs)))
    names = [e["name"] for e in container(_deployment(objs))["env"]]
    if config["advertise"]:
        # An explicit advertise in the file must not be overridden by the env (env wins over file).
        assert "LANCE_FLIGHT_ADVERTISE" not in env
        return
    # The kubelet expands $(POD_IP) only when POD_IP is defined earlier in the list.
    assert names.index("POD_IP") < names.index("LANCE_FLIGHT_ADVERTISE")
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    scheme = "grpc+tls" if config["tls"]["certFile"] else "grpc"
    locations = env["LANCE_FLIGHT_ADVERTISE"]["value"].split(",")
    assert locations == [f"{scheme}://$(POD_IP):{config['port'] + k}" for k in range(config["workers"])]
    for extra in values.get("extraEnv", []):
        assert env[extra["name"]] == extra


def test_tls_pods_can_advertise_their_headless_dns_name() -> None:
    host = f"$(POD_NAME).{FULLNAME}-headless.$(POD_NAMESPACE).svc"
    values = deep_merge(VALUE_SETS["production"], {"advertiseHost": host})
    deployment = _deployment(objects(render(values)))
    pod = deployment["spec"]["template"]["spec"]
    # Kubernetes publishes <hostname>.<subdomain> only when a headless Service has that name.
    assert pod["subdomain"] == f"{FULLNAME}-headless"
    env = container(deployment)["env"]
    names = [e["name"] for e in env]
    assert max(names.index("POD_NAME"), names.index("POD_NAMESPACE")) < names.index("LANCE_FLIGHT_ADVERTISE")
    advertise = env_map(container(deployment))["LANCE_FLIGHT_ADVERTISE"]["value"]
    assert advertise.split(",") == [f"grpc+tls://{host}:{8815 + k}" for k in range(4)]


def test_services_reach_the_pods(rendered: tuple[str, dict[str, Any], list[Obj]]) -> None:
    _, _, objs = rendered
    deployment = _deployment(objs)
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    container_ports = {p["name"]: p["containerPort"] for p in container(deployment)["ports"]}
    services = by_kind(objs, "Service")
    assert len(services) == 2
    headless = next(s for s in services if s["metadata"]["name"].endswith("-headless"))
    normal = next(s for s in services if s is not headless)
    assert headless["spec"]["clusterIP"] == "None"
    assert "clusterIP" not in normal["spec"]
    for svc in services:
        assert svc["spec"]["selector"].items() <= pod_labels.items()
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] in container_ports, port
    # Clients dial pod addresses behind the headless name directly: its ports are the container ports.
    assert {p["name"]: p["port"] for p in headless["spec"]["ports"]} == container_ports
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    # The helm test pod must not be picked up by the Services or the PDB.
    for pod in by_kind(objs, "Pod"):
        assert not normal["spec"]["selector"].items() <= pod["metadata"]["labels"].items()


def test_secrets_are_mounted_where_the_config_points(rendered: tuple[str, dict[str, Any], list[Obj]]) -> None:
    name, values, objs = rendered
    config = _config(objs)
    deployment = _deployment(objs)
    pod = deployment["spec"]["template"]["spec"]
    ctr = container(deployment)
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in ctr["volumeMounts"]}
    secrets = {s["metadata"]["name"]: s for s in by_kind(objs, "Secret")}
    sv = deep_merge(default_values()["secrets"], values.get("secrets", {}))

    def mounted_secret(path: str) -> tuple[str, str]:
        directory, _, filename = path.rpartition("/")
        volume = volumes[mounts[directory]["name"]]["secret"]
        items = {i["path"]: i["key"] for i in volume.get("items", [])}
        return volume["secretName"], items.get(filename, filename)

    if sv["auth"]["existingSecret"] or sv["auth"]["tokens"]:
        secret_name, key = mounted_secret(config["auth"]["tokensFile"])
        assert key == sv["auth"]["existingSecretKey"]
        if sv["auth"]["existingSecret"]:
            assert secret_name == sv["auth"]["existingSecret"]
            assert secret_name not in secrets
        else:
            lines = base64.b64decode(secrets[secret_name]["data"][key]).decode().splitlines()
            assert lines == [t["token"] + (" ro" if t.get("readOnly") else "") for t in sv["auth"]["tokens"]]
    else:
        assert config["auth"]["tokensFile"] == ""

    if sv["tls"]["existingSecret"] or sv["tls"]["cert"]:
        cert_secret, cert_key = mounted_secret(config["tls"]["certFile"])
        key_secret, key_key = mounted_secret(config["tls"]["keyFile"])
        assert (cert_key, key_key) == ("tls.crt", "tls.key")
        assert cert_secret == key_secret
        if sv["tls"]["verifyClient"]:
            assert mounted_secret(config["tls"]["clientCaFile"]) == (cert_secret, "ca.crt")
        if not sv["tls"]["existingSecret"]:
            assert secrets[cert_secret]["type"] == "kubernetes.io/tls"
            assert base64.b64decode(secrets[cert_secret]["data"]["tls.crt"]).decode() == sv["tls"]["cert"]
    else:
        assert config["tls"] == {"certFile": "", "keyFile": "", "clientCaFile": ""}

    env = env_map(ctr)
    if sv["s3"]["existingSecret"] or sv["s3"]["accessKeyId"]:
        ref = env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"]
        assert ref["key"] == sv["s3"]["accessKeyIdKey"]
        assert (
            env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["key"] == sv["s3"]["secretAccessKeyKey"]
        )
        if not sv["s3"]["existingSecret"]:
            data = secrets[ref["name"]]["data"]
            assert base64.b64decode(data[ref["key"]]).decode() == sv["s3"]["accessKeyId"]
    else:
        assert "AWS_ACCESS_KEY_ID" not in env
    # No secret value ever lands in the ConfigMap.
    cm_text = by_kind(objs, "ConfigMap")[0]["data"]["config.yaml"]
    for token in sv["auth"]["tokens"]:
        assert token["token"] not in cm_text, name
    if sv["s3"]["secretAccessKey"]:
        assert sv["s3"]["secretAccessKey"] not in cm_text


def test_config_carries_the_values_verbatim(rendered: tuple[str, dict[str, Any], list[Obj]]) -> None:
    _, values, objs = rendered
    config = _config(objs)
    defaults = default_values()["config"]
    expected = deep_merge(defaults, values.get("config", {}))
    # Apart from the secret paths the chart fills in, the file is exactly `config:`.
    for key in ("auth", "tls"):
        expected.pop(key)
        config.pop(key)
    assert config == expected


def test_autoscaling_owns_the_replica_count() -> None:
    objs = objects(render(VALUE_SETS["s3-autoscaled"]))
    assert "replicas" not in _deployment(objs)["spec"]
    hpa = one(objs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": FULLNAME}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 6)
    assert {m["resource"]["name"] for m in hpa["spec"]["metrics"]} == {"cpu", "memory"}
    assert _deployment(objects(render({"replicaCount": 4})))["spec"]["replicas"] == 4


def test_network_policy_opens_every_worker_port() -> None:
    objs = objects(render(VALUE_SETS["production"]))
    policy = one(objs, "NetworkPolicy")
    flight_rule, metrics_rule = policy["spec"]["ingress"]
    assert flight_rule["ports"] == [{"protocol": "TCP", "port": 8815, "endPort": 8818}]
    peers = flight_rule["from"]
    assert peers[0] == {"podSelector": {"matchLabels": {f"{FULLNAME}-client": "true"}}}
    assert peers[1] == {"namespaceSelector": {"matchLabels": {"team": "spark"}}}
    assert metrics_rule["ports"] == [{"protocol": "TCP", "port": 9090}]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= (
        _deployment(objs)["spec"]["template"]["metadata"]["labels"].items()
    )
    open_policy = one(objects(render({"networkPolicy": {"enabled": True}})), "NetworkPolicy")
    assert "from" not in open_policy["spec"]["ingress"][0]


def test_service_monitor_scrapes_the_normal_service_only() -> None:
    objs = objects(render(VALUE_SETS["production"]))
    monitor = one(objs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    endpoint = monitor["spec"]["endpoints"][0]
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")
    selector = monitor["spec"]["selector"]
    selected = []
    for svc in by_kind(objs, "Service"):
        labels = svc["metadata"]["labels"]
        matches = selector["matchLabels"].items() <= labels.items() and all(
            expr["operator"] == "DoesNotExist" and expr["key"] not in labels
            for expr in selector["matchExpressions"]
        )
        if matches:
            selected.append(svc["metadata"]["name"])
            assert "metrics" in {p["name"] for p in svc["spec"]["ports"]}
    assert selected == [FULLNAME]


def test_pdb_and_persistence() -> None:
    prod = objects(render(VALUE_SETS["production"]))
    assert one(prod, "PodDisruptionBudget")["spec"] == {
        "minAvailable": 2,
        "selector": {
            "matchLabels": {"app.kubernetes.io/name": "lance-flight", "app.kubernetes.io/instance": RELEASE}
        },
    }
    pvc_set = objects(render(VALUE_SETS["pvc-tls-loadbalancer"]))
    assert not by_kind(pvc_set, "PodDisruptionBudget")
    pvc = one(pvc_set, "PersistentVolumeClaim")
    assert pvc["spec"]["storageClassName"] == "fast-ssd"
    data = next(v for v in _deployment(pvc_set)["spec"]["template"]["spec"]["volumes"] if v["name"] == "data")
    assert data["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    existing = objects(render({"persistence": {"existingClaim": "shared-rwx"}}))
    assert not by_kind(existing, "PersistentVolumeClaim")
    data = next(
        v for v in _deployment(existing)["spec"]["template"]["spec"]["volumes"] if v["name"] == "data"
    )
    assert data["persistentVolumeClaim"]["claimName"] == "shared-rwx"


def test_config_change_rolls_the_pods() -> None:
    def annotations(values: dict[str, Any]) -> dict[str, str]:
        meta: dict[str, str] = _deployment(objects(render(values)))["spec"]["template"]["metadata"][
            "annotations"
        ]
        return meta

    base = annotations({})
    assert annotations({})["checksum/config"] == base["checksum/config"]
    assert annotations({"config": {"logLevel": "DEBUG"}})["checksum/config"] != base["checksum/config"]
    tokens = {"secrets": {"auth": {"tokens": [{"token": "abcdefgh1"}]}}}
    assert annotations(tokens)["checksum/secret"] != base["checksum/secret"]


def test_image_reference() -> None:
    assert container(_deployment(objects(render())))["image"] == "lance-flight:0.1.0"
    pinned = container(_deployment(objects(render(VALUE_SETS["production"]))))["image"]
    assert pinned == "registry.example.com/lance-flight@sha256:" + "ab" * 32
    tagged = container(_deployment(objects(render({"image": {"repository": "r/x", "tag": "9.9"}}))))
    assert tagged["image"] == "r/x:9.9"


def test_notes_point_spark_at_the_headless_service() -> None:
    notes = render()["lance-flight/templates/NOTES.txt"]
    assert f"grpc://{FULLNAME}-headless.{NAMESPACE}.svc:8815" in notes
    assert "authentication is off" in notes
    secured = render(VALUE_SETS["production"])["lance-flight/templates/NOTES.txt"]
    assert f"grpc+tls://{FULLNAME}-headless.{NAMESPACE}.svc:8815" in secured
    assert "authentication is off" not in secured


def test_long_release_names_fit_dns_labels() -> None:
    release = "a-very-long-release-name-that-goes-on-and-on-for-ever"  # 53 chars: Helm's maximum
    helm.validate_release_name(release)
    objs = objects(render({}, release=release))
    for obj in objs:
        assert len(obj["metadata"]["name"]) <= 63, obj["metadata"]["name"]
    validate_all(objs)


# --- values.schema.json ---------------------------------------------------------------------------


def test_schema_is_valid_and_accepts_the_defaults() -> None:
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    defaults = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    jsonschema.Draft7Validator(schema).validate(defaults)
    # Every default value is described by the schema (additionalProperties is false at the top).
    assert set(defaults) <= set(schema["properties"])


BAD_VALUES: list[tuple[dict[str, Any], str]] = [
    ({"config": {"port": 0}}, "/config/port"),
    ({"config": {"port": 70000}}, "/config/port"),
    ({"config": {"metricsPort": -1}}, "/config/metricsPort"),
    ({"config": {"workers": 0}}, "/config/workers"),
    ({"config": {"workers": "4"}}, "/config/workers"),
    ({"config": {"logLevel": "LOUD"}}, "/config/logLevel"),
    ({"config": {"logFormat": "xml"}}, "/config/logFormat"),
    ({"config": {"cache": {"pageBytes": -1}}}, "/config/cache/pageBytes"),
    ({"config": {"advertise": "http://x:1"}}, "/config/advertise"),
    ({"config": {"rot": "/data"}}, "rot"),
    # Tokens belong in a Secret, not in the ConfigMap.
    ({"config": {"auth": {"tokens": "abc"}}}, "tokens"),
    ({"config": {"s3": {"endpoint": "seaweedfs:8333"}}}, "/config/s3/endpoint"),
    ({"secrets": {"auth": {"tokens": ["bare-string-token"]}}}, "/secrets/auth/tokens/0"),
    ({"secrets": {"auth": {"tokens": [{"token": "short"}]}}}, "/secrets/auth/tokens/0/token"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"image": {"digest": "latest"}}, "/image/digest"),
    ({"service": {"type": "ExternalName"}}, "/service/type"),
    ({"replicaCount": -1}, "/replicaCount"),
    ({"persistence": {"size": "ten gigs"}}, "/persistence/size"),
    ({"metrics": {"serviceMonitor": {"interval": "often"}}}, "/metrics/serviceMonitor/interval"),
    ({"livenessProbe": {"periodSeconds": 0}}, "/livenessProbe/periodSeconds"),
    ({"replicas": 3}, "replicas"),
]


@pytest.mark.parametrize(("values", "where"), BAD_VALUES, ids=[w for _, w in BAD_VALUES])
def test_schema_rejects_bad_values(values: dict[str, Any], where: str) -> None:
    with pytest.raises(helm.HelmValuesError, match=where):
        render(values)
    with helm.Chart.load(CHART_DIR) as chart, pytest.raises(helm.HelmValuesError):
        chart.validate_schema(values)


BAD_COMBINATIONS: list[tuple[dict[str, Any], str]] = [
    ({"secrets": {"s3": {"accessKeyId": "AKIA"}}}, "secretAccessKey is empty"),
    ({"secrets": {"tls": {"cert": "PEM"}}}, "tls.key is empty"),
    ({"secrets": {"tls": {"verifyClient": True}}}, "verifyClient needs TLS"),
    ({"secrets": {"tls": {"cert": "PEM", "key": "PEM", "verifyClient": True}}}, "needs secrets.tls.clientCa"),
    ({"podDisruptionBudget": {"minAvailable": 1}}, "only one of minAvailable and maxUnavailable"),
    ({"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}}, "maxReplicas must be"),
    ({"config": {"workers": 4, "metricsPort": 8817}}, "collides with the Flight worker ports 8815-8818"),
    ({"service": {"metricsPort": 8815}}, "must differ"),
    ({"config": {"shutdownGraceSeconds": 90}}, "shutdownGraceSeconds must be below"),
    (
        {"autoscaling": {"enabled": True, "targetCPUUtilizationPercentage": None}},
        "autoscaling needs targetCPUUtilizationPercentage",
    ),
]


@pytest.mark.parametrize(("values", "message"), BAD_COMBINATIONS, ids=[m for _, m in BAD_COMBINATIONS])
def test_template_rejects_bad_combinations(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmRenderError, match=message):
        render(values)


def test_readme_names_the_rendered_headless_service() -> None:
    # The README's example release "lake" in namespace "analytics" must match what the chart renders.
    readme = (CHART_DIR.parents[1] / "README.md").read_text()
    assert "helm install lake helm/lance-flight -n analytics" in readme
    objs = objects(render({}, release="lake"))
    headless = next(s for s in by_kind(objs, "Service") if s["spec"].get("clusterIP") == "None")
    port = next(p["port"] for p in headless["spec"]["ports"] if p["name"] == "flight")
    assert f'"grpc://{headless["metadata"]["name"]}.{NAMESPACE}.svc:{port}"' in readme
    assert NAMESPACE == "analytics"
