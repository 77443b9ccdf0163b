"""Fixtures with real Redis servers (``devsites/redis_server.py``), imported by ``tests/conftest.py``.

Without ``redis-server`` the Redis tests fail under CI (``CI`` set: CI must run them) and are skipped
elsewhere, with the way to install it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from devsites.redis_server import INSTALL_HINT, RedisCluster, RedisServer, redis_server_binary


def require_redis_server() -> None:
    """Fail (under CI) or skip (elsewhere) when ``redis-server`` is missing."""
    if redis_server_binary() is None:
        message = f"redis-server is not installed: {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One Redis server shared by the session's tests (each test uses its own key prefix)."""
    require_redis_server()
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    with server:
        yield server


@pytest.fixture
def own_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis server for one test (that may stop and restart it), with an append-only file."""
    require_redis_server()
    server = RedisServer(tmp_path_factory.mktemp("redis-own"), appendonly=True)
    with server:
        yield server


#: The password of :func:`password_redis_server` (the secret the tests look for in every output).
REDIS_PASSWORD = "S3cret-pw-91e4"


@pytest.fixture(scope="session")
def password_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis server that asks for :data:`REDIS_PASSWORD`, shared by the session's tests."""
    require_redis_server()
    with RedisServer(tmp_path_factory.mktemp("redis-pw"), password=REDIS_PASSWORD) as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A local 3-node Redis Cluster (three masters, no replicas)."""
    require_redis_server()
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster"))
    with cluster:
        yield cluster


@pytest.fixture
def redis_prefix() -> str:
    """A key prefix no other test uses."""
    return f"test-{uuid.uuid4().hex[:12]}"
