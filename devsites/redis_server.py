"""Real Redis servers for the tests and the benchmark: ``redis-server`` processes on free ports of
127.0.0.1, each in its own directory, and a 3-node Redis Cluster made of them.

Debian's ``redis-server`` package provides the binaries (``make test`` installs it).

    python -m devsites.redis_server    # starts one server, prints its URL, serves until stdin is closed
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

import redis

INSTALL_HINT = "install it with 'apt-get install redis-server' (make test does)"
START_TIMEOUT = 10.0


def redis_server_binary() -> str | None:
    """The path of ``redis-server``, or None."""
    return shutil.which("redis-server")


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(*, cluster: bool = False) -> int:
    """A port free on 127.0.0.1 (and, for a cluster node, its bus port: port + 10000)."""
    for _ in range(200):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if not cluster:
            return port
        if port < 55000 and _port_free(port + 10000):
            return port
    raise RuntimeError("no free port found")


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1 with its data in *directory*.

    Persistence is off unless *appendonly*; *args* are more ``redis-server`` options.  The port stays the
    same across :meth:`stop` and :meth:`start`, so clients can reconnect.
    """

    def __init__(
        self,
        directory: Path,
        *,
        port: int | None = None,
        appendonly: bool = False,
        args: Sequence[str] = (),
        cluster: bool = False,
        password: str | None = None,
    ) -> None:
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError(f"redis-server is not installed: {INSTALL_HINT}")
        self.binary = binary
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cluster = cluster
        self.port = port or free_port(cluster=cluster)
        self.appendonly = appendonly
        self.args = list(args)
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def log(self) -> Path:
        return self.directory / "redis.log"

    def client(self, **kwargs: object) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=5, **kwargs)  # type: ignore[arg-type]

    def command(self) -> list[str]:
        cmd = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--logfile", str(self.log),
            "--daemonize", "no",
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
        ]  # fmt: skip
        if self.password:
            cmd += ["--requirepass", self.password]
        if self.cluster:
            cmd += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"]
        return cmd + self.args

    def start(self) -> RedisServer:
        """Start the server and wait until it answers PING."""
        if self.process is not None and self.process.poll() is None:
            return self
        self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self._wait_ready()
        except BaseException:
            self.process.kill()
            self.process.wait()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        client = self.client(socket_connect_timeout=0.5)
        try:
            while True:
                if self.process.poll() is not None:
                    log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
                    raise RuntimeError(f"redis-server exited with {self.process.returncode}:\n{log}")
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                except redis.ResponseError as exc:  # LOADING: still reading its data
                    if "LOADING" not in str(exc):
                        raise
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {self.port} did not answer within {START_TIMEOUT} s")
                time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        """Stop the server (SIGTERM: it writes its append-only file and exits) and wait."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def used_memory(self) -> int:
        """``used_memory`` of ``INFO memory``, in bytes."""
        with contextlib.closing(self.client()) as client:
            return int(client.info("memory")["used_memory"])

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class RedisCluster:
    """Three master nodes (no replicas) on 127.0.0.1, made a cluster with ``redis-cli --cluster create``."""

    def __init__(self, directory: Path, nodes: int = 3, appendonly: bool = False) -> None:
        self.nodes = [
            RedisServer(Path(directory) / f"node{i}", cluster=True, appendonly=appendonly) for i in range(nodes)
        ]

    @property
    def url(self) -> str:
        """The URL of the first node (a cluster client discovers the others)."""
        return self.nodes[0].url

    def start(self) -> RedisCluster:
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> RedisCluster:
        for node in self.nodes:
            node.start()
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError(f"redis-cli is not installed: {INSTALL_HINT}")
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        subprocess.run(
            [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=30,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            states = []
            for node in self.nodes:
                with contextlib.closing(node.client()) as client:
                    info = client.execute_command("CLUSTER", "INFO")
                text = info.decode() if isinstance(info, bytes) else str(info)
                states.append("cluster_state:ok" in text)
            if all(states):
                return self
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis cluster did not become ready")
            time.sleep(0.05)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextlib.contextmanager
def temporary_server(directory: Path, **kwargs: object) -> Iterator[RedisServer]:
    """A started server, stopped at the end."""
    server = RedisServer(directory, **kwargs)  # type: ignore[arg-type]
    try:
        yield server.start()
    finally:
        server.stop()


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, temporary_server(Path(tmp)) as server:
        print(server.url, flush=True)
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
