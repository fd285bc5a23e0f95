"""Settings: flag > environment > YAML > default, and clear errors for bad values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flight_server.config import OPTIONS, ConfigError, load_settings, parse_tokens_file
from flight_server.settings import CLIENT_ENV, BasicUser, ServerSettings, Token

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _yaml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


def test_defaults_without_anything() -> None:
    s = load_settings([], env={})
    assert s == ServerSettings()
    assert (s.root, s.host, s.port, s.metrics_port, s.workers) == ("./lance-data", "127.0.0.1", 8815, 9090, 1)
    assert not s.auth
    assert not s.tls


def test_precedence_flag_over_env_over_yaml_over_default(tmp_path: Path) -> None:
    yaml = "port: 1001\nworkers: 3\nlogLevel: debug\ncache:\n  pageBytes: 64MiB\n  decodedBytes: 1GiB\n"
    config = _yaml(tmp_path, yaml)
    env = {"LANCE_FLIGHT_CONFIG": config, "LANCE_FLIGHT_PORT": "2002", "LANCE_FLIGHT_WORKERS": "2"}
    s = load_settings(["--port", "3003"], env=env)
    assert s.port == 3003  # flag beats env and YAML
    assert s.workers == 2  # env beats YAML
    assert s.log_level == "DEBUG"  # YAML beats default (and is normalised)
    assert s.page_cache_bytes == 64 * 1024 * 1024
    assert s.decoded_cache_bytes == 1 << 30
    assert load_settings(["--decoded-cache-bytes", "0"], env={}).decoded_cache_bytes == 0
    assert s.metadata_cache_bytes == ServerSettings().metadata_cache_bytes  # default
    # --config beats LANCE_FLIGHT_CONFIG; an explicit config_file beats both.
    second = tmp_path / "second.yaml"
    second.write_text("port: 4004\n")
    assert load_settings(["--config", str(second)], env={"LANCE_FLIGHT_CONFIG": config}).port == 4004
    assert load_settings([], env={"LANCE_FLIGHT_CONFIG": str(second)}, config_file=config).port == 1001


def test_empty_env_value_falls_through(tmp_path: Path) -> None:
    config = _yaml(tmp_path, "host: 0.0.0.0\n")
    assert load_settings(["--config", config], env={"LANCE_FLIGHT_HOST": ""}).host == "0.0.0.0"


def test_helm_style_config_with_every_section(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# comment\nwriter\nreader ro\n\n")
    config = _yaml(
        tmp_path,
        f"""
root: s3://bucket/prefix
advertise: "grpc://a:1,grpc://b:2"
cache: {{metadataBytes: 1024, pageBytes: 0}}
auth: {{tokensFile: "{tokens}"}}
tls: {{certFile: "", keyFile: "", clientCaFile: ""}}
s3: {{endpoint: "http://s3:8333", region: us-east-1, anonymous: true}}
limits: {{maxTakeRows: 10, maxMessageBytes: 1Mi, maxConcurrentStreams: 4}}
shutdownGraceSeconds: 2.5
logFormat: JSON
""",
    )
    s = load_settings(["--config", config], env={})
    assert s.advertise == ("grpc://a:1", "grpc://b:2")
    assert s.tokens_file == str(tokens)
    assert s.auth
    assert (s.max_take_rows, s.max_message_bytes, s.max_concurrent_streams) == (10, 1024 * 1024, 4)
    assert s.storage_options == {
        "aws_endpoint": "http://s3:8333",
        "aws_region": "us-east-1",
        "anonymous": "true",
    }
    assert s.shutdown_grace_seconds == 2.5
    assert s.log_format == "json"


def test_tokens_and_users_from_env() -> None:
    s = load_settings([], env={"LANCE_FLIGHT_TOKENS": "a, b:ro", "LANCE_FLIGHT_USERS": "ann:pw,bob:x:y:ro"})
    assert s.tokens == (Token("a"), Token("b", read_only=True))
    assert s.users == (BasicUser("ann", "pw"), BasicUser("bob", "x:y", read_only=True))


def test_aws_env_vars_are_honoured_below_ours() -> None:
    s = load_settings([], env={"AWS_ENDPOINT_URL": "http://x:1", "AWS_REGION": "eu-west-1"})
    assert (s.s3_endpoint, s.s3_region) == ("http://x:1", "eu-west-1")
    s = load_settings([], env={"AWS_ENDPOINT_URL": "http://x:1", "LANCE_FLIGHT_S3_ENDPOINT": "http://y:2"})
    assert s.s3_endpoint == "http://y:2"


def test_bool_flag_both_ways() -> None:
    assert load_settings(["--s3-anonymous"], env={}).s3_anonymous
    assert not load_settings(["--no-s3-anonymous"], env={"LANCE_FLIGHT_S3_ANONYMOUS": "yes"}).s3_anonymous


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--port", "abc"], {}, r"port from flag --port: 'abc'"),
        (["--port", "70000"], {}, r"between 0 and 65535"),
        ([], {"LANCE_FLIGHT_WORKERS": "0"}, r"workers from environment variable LANCE_FLIGHT_WORKERS"),
        (["--metrics-port", "-2"], {}, r"metricsPort"),
        (["--log-level", "loud"], {}, r"expected one of DEBUG"),
        (["--page-cache-bytes", "lots"], {}, r"byte count"),
        (["--max-message-bytes", "0"], {}, r"must be > 0"),
        ([], {"LANCE_FLIGHT_S3_ANONYMOUS": "maybe"}, r"true or false"),
        (["--advertise", "http://x:1"], {}, r"not a grpc://host:port"),
        (["--advertise", "grpc://x"], {}, r"not a grpc://host:port"),
        ([], {"LANCE_FLIGHT_TOKENS": "a b"}, r"no whitespace"),
        ([], {"LANCE_FLIGHT_USERS": "nopassword"}, r"user:password"),
        (["--tls-key", "k.pem"], {}, r"go together"),
        (["--port", "65535", "--workers", "2"], {}, r"past port 65535"),
        (["--no-such-flag"], {}, r"bad command line"),
        (["--root", ""], {}, r"root must not be empty"),
        (["--shutdown-grace", "-1"], {}, r"between 0 and 3600"),
        (["--decoded-cache-bytes", "-5"], {}, r"decodedBytes.*byte count"),
        ([], {"LANCE_FLIGHT_LATEST_VERSION_SECONDS": "soon"}, r"latestVersionSeconds from environment"),
        (["--latest-version-seconds", "7200"], {}, r"between 0 and 3600"),
        (["--gil-switch-ms", "-1"], {}, r"gilSwitchMs.*between 0 and 100"),
        ([], {"LANCE_FLIGHT_GIL_SWITCH_MS": "nan"}, r"gilSwitchMs from environment"),
    ],
)
def test_bad_values_name_key_and_source(argv: list[str], env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(argv, env=env)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_settings(["--tls-cert", str(tmp_path / "c"), "--tls-key", str(tmp_path / "k")], env={})
    with pytest.raises(ConfigError, match=r"config file .*No such file"):
        load_settings(["--config", str(tmp_path / "missing.yaml")], env={})
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(["--config", _yaml(tmp_path, "port: [1,\n")], env={})
    with pytest.raises(ConfigError, match="mapping"):
        load_settings(["--config", _yaml(tmp_path, "- 1\n- 2\n")], env={})
    with pytest.raises(ConfigError, match=r"unknown key 'cache.pagebytes'"):
        load_settings(["--config", _yaml(tmp_path, "cache:\n  pagebytes: 1\n")], env={})
    with pytest.raises(ConfigError, match=r"limits\.maxTakeRows from config file"):
        load_settings(["--config", _yaml(tmp_path, "limits:\n  maxTakeRows: 1.5\n")], env={})
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(["--tokens-file", str(tmp_path / "nope")], env={})


def test_tokens_file_format(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("a\nb ro  # reader\n")
    assert parse_tokens_file(str(path)) == (Token("a"), Token("b", read_only=True))
    path.write_text("a rw\n")
    with pytest.raises(ConfigError, match=r"tokens:1: expected"):
        parse_tokens_file(str(path))
    path.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="holds no token"):
        load_settings(["--tokens-file", str(path)], env={})


def test_tls_advertise_must_match_scheme(tmp_path: Path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("x")
    key.write_text("y")
    flags = ["--tls-cert", str(cert), "--tls-key", str(key)]
    assert load_settings(flags, env={}).scheme == "grpc+tls"
    with pytest.raises(ConfigError, match="grpc\\+tls://"):
        load_settings([*flags, "--advertise", "grpc://h:1"], env={})
    with pytest.raises(ConfigError, match=r"needs tls\.certFile"):
        load_settings(["--tls-client-ca", str(cert)], env={})


def test_docs_list_every_key_flag_and_env() -> None:
    text = DOCS.read_text()
    for opt in OPTIONS:
        assert f"`{opt.key}`" in text, opt.key
        if opt.flag:
            assert f"`{opt.flag}`" in text, opt.flag
        for env in opt.envs:
            assert f"`{env}`" in text, env
    # ... and nothing the loader does not know.
    documented = set(re.findall(r"`(LANCE_FLIGHT_[A-Z0-9_]+)`", text))
    known = {env for opt in OPTIONS for env in opt.envs} | {"LANCE_FLIGHT_CONFIG", *CLIENT_ENV}
    assert documented <= known, documented - known


def test_gil_switch_interval_from_flag_env_and_yaml(tmp_path: Path) -> None:
    assert load_settings([], env={}).gil_switch_ms == 1.0  # the default: shorter than Python's 5 ms
    config = _yaml(tmp_path, "limits:\n  gilSwitchMs: 2.5\n")
    assert load_settings(["--config", config], env={}).gil_switch_ms == 2.5
    env = {"LANCE_FLIGHT_GIL_SWITCH_MS": "0.5"}
    assert load_settings(["--config", config], env=env).gil_switch_ms == 0.5
    assert load_settings(["--gil-switch-ms", "0"], env=env).gil_switch_ms == 0.0
