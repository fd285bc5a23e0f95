"""Value sets the chart is rendered with: the defaults and three deployments people actually run."""

from __future__ import annotations

from typing import Any

_CERT = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
_KEY = "-----BEGIN PRIVATE KEY-----\nMIIBfake\n-----END PRIVATE KEY-----\n"

VALUE_SETS: dict[str, dict[str, Any]] = {
    # helm install demo helm/lance-flight
    "defaults": {},
    # Shared S3 root with inline credentials, autoscaled, inline tokens.
    "s3-autoscaled": {
        "config": {
            "root": "s3://lance-bucket/datasets",
            "s3": {"endpoint": "http://seaweedfs-s3.storage:8333", "region": "us-east-1"},
            "cache": {"pageBytes": 4294967296},
            "logLevel": "DEBUG",
        },
        "secrets": {
            "s3": {"accessKeyId": "AKIAEXAMPLE", "secretAccessKey": "s3cr3t-example"},
            "auth": {"tokens": [{"token": "writer-token-1"}, {"token": "reader-token-1", "readOnly": True}]},
        },
        "autoscaling": {
            "enabled": True,
            "minReplicas": 2,
            "maxReplicas": 6,
            "targetMemoryUtilizationPercentage": 80,
        },
        "resources": {"requests": {"cpu": "2", "memory": "6Gi"}, "limits": {"memory": "8Gi"}},
    },
    # Everything from Secrets someone else manages, mTLS, 4 workers a pod, locked-down network.
    "production": {
        "config": {"root": "s3://prod-lake/lance", "workers": 4, "s3": {"region": "eu-west-1"}},
        "secrets": {
            "s3": {
                "existingSecret": "lake-credentials",
                "accessKeyIdKey": "id",
                "secretAccessKeyKey": "secret",
            },
            "auth": {"existingSecret": "flight-tokens", "existingSecretKey": "tokens.txt"},
            "tls": {"existingSecret": "flight-tls", "verifyClient": True},
        },
        "image": {
            "repository": "registry.example.com/lance-flight",
            "digest": "sha256:" + "ab" * 32,
        },
        "replicaCount": 3,
        "podDisruptionBudget": {"minAvailable": 2, "maxUnavailable": None},
        "networkPolicy": {
            "enabled": True,
            "allowExternal": False,
            "extraIngress": [{"namespaceSelector": {"matchLabels": {"team": "spark"}}}],
            "metricsIngress": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
        },
        "metrics": {
            "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
            "grafanaDashboard": {"enabled": True, "annotations": {"grafana_folder": "Lance"}},
            "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}, "errorRatio": 0.02},
        },
        "extraEnv": [{"name": "LANCE_FLIGHT_LOG_LEVEL", "value": "WARNING"}],
        "extraArgs": ["--max-concurrent-streams", "128"],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "lance-flight"}},
            }
        ],
        "priorityClassName": "high-priority",
        "terminationGracePeriodSeconds": 120,
    },
    # Local root on a PVC, inline TLS, reached through a LoadBalancer.
    "pvc-tls-loadbalancer": {
        "fullnameOverride": "flight",
        "persistence": {"enabled": True, "size": "50Gi", "storageClass": "fast-ssd"},
        "secrets": {"tls": {"cert": _CERT, "key": _KEY}},
        "service": {
            "type": "LoadBalancer",
            "loadBalancerSourceRanges": ["10.0.0.0/8"],
            "externalTrafficPolicy": "Local",
        },
        "config": {"advertise": "grpc+tls://flight.example.com:8815"},
        "podDisruptionBudget": {"enabled": False},
        "serviceAccount": {"create": False, "name": "existing-sa"},
    },
}
