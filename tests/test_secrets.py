"""A backend URI's credentials are never shown: not in the crawl's log, the command line's output, the
stats, exception messages or reprs.  Each test feeds a URI with a user name and a password through one
path that names the backend and greps everything it printed for the password."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import redis
from conftest_redis import REDIS_PASSWORD
from filter_crawler import filter_crawler
from test_cli import run_cli

from devsites.redis_server import RedisServer
from simhash_filter import SimhashDownloaderMiddleware
from simhash_filter.crawl.crawlfilter import IndexUnavailable
from simhash_filter.index.backends import open_backend, redact_text, redact_uri
from simhash_filter.index.tables import TableDesign

SECRET = REDIS_PASSWORD
USER = "default"  # requirepass gives the default user this password
DESIGN = TableDesign.parse("4x16/k3")
CLOSED = "127.0.0.1:1"  # nothing listens on port 1: connection refused at once


@pytest.fixture
def uri(password_redis_server: RedisServer, redis_prefix: str) -> str:
    """A URI of the server with a user name and the password, and an index prefix of its own."""
    return f"redis://{USER}:{SECRET}@127.0.0.1:{password_redis_server.port}/0?prefix={redis_prefix}"


@pytest.fixture
def down_uri(redis_prefix: str) -> str:
    """The same kind of URI on a port where no server listens."""
    return f"redis://{USER}:{SECRET}@{CLOSED}/0?prefix={redis_prefix}"


def assert_no_secret(*texts: object) -> None:
    for text in texts:
        assert SECRET not in str(text), f"the password leaked into: {text}"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("redis://alice:pw@h:6379/0?prefix=site", "redis://alice:***@h:6379/0?prefix=site"),
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("rediss://alice:p%40ss@h/0", "rediss://alice:***@h/0"),
        ("redis://:p@ss@h:6379/0", "redis://:***@h:6379/0"),  # an unquoted '@' in the password
        ("redis://alice@h:6379/0", "redis://alice@h:6379/0"),  # a user name alone is kept
        (
            "redis://h:6379/0?prefix=site&password=pw&username=bob&ssl_password=x&client_name=c",
            "redis://h:6379/0?prefix=site&password=***&username=bob&ssl_password=***&client_name=c",
        ),
        ("file:///var/idx?max_age=3600", "file:///var/idx?max_age=3600"),
        ("/var/lib/crawl/idx", "/var/lib/crawl/idx"),
        ("memory://", "memory://"),
    ],
)
def test_redact_uri_masks_passwords_and_secret_options(raw: str, shown: str) -> None:
    """redact_uri masks the password of user:password@ and secret query options as ***, keeping the rest."""
    assert redact_uri(raw) == shown


def test_redact_text_masks_a_uri_and_its_password_in_a_message() -> None:
    """redact_text masks a URI and its bare password wherever they appear in a message (messages of other code)."""
    raw = f"redis://u:{SECRET}@h:1/0?password={SECRET}x"
    text = redact_text(f"bad {raw!r}, also {SECRET} and {SECRET}x", raw)
    assert_no_secret(text)
    assert "redis://u:***@h:1/0?password=***" in text


def test_crawl_start_log_line_stats_and_reprs_hide_the_password(
    uri: str, down_uri: str, password_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The crawl's start line names the backend as redis://default:***@host:port/db; its stats, the reprs and
    the error of a crawl whose server is down never show the password."""
    with caplog.at_level(logging.DEBUG):
        crawler = filter_crawler({"SIMHASH_BACKEND": uri, "SIMHASH_PROCESSES": 0})
        mw = SimhashDownloaderMiddleware.from_crawler(crawler)
        backend = mw.filter.index.backend
        assert_no_secret(repr(mw.filter.index), repr(backend), repr(backend.client), backend.info())
        mw.filter.spider_closed(None, "finished")
    start = [r.getMessage() for r in caplog.records if r.getMessage().startswith("simhash filter: action=")]
    assert len(start) == 1
    assert f"backend=redis://{USER}:***@127.0.0.1:{password_redis_server.port}/0?prefix=" in start[0]
    assert_no_secret(caplog.text, crawler.stats.get_stats())
    with caplog.at_level(logging.DEBUG), pytest.raises(IndexUnavailable) as failed:
        filter_crawler({"SIMHASH_BACKEND": down_uri, "SIMHASH_PROCESSES": 0})
    assert isinstance(failed.value.error, redis.exceptions.ConnectionError)
    assert_no_secret(failed.value, repr(failed.value), caplog.text)


@pytest.mark.parametrize(
    "options",
    ["&bogus=1", "&retries=many", "&retry_backoff=slow", "&max_age=old", "&cluster=maybe", "&bucket_bits=x"],
)
def test_bad_redis_options_hide_the_password(options: str) -> None:
    """The ValueError for a bad option of a Redis URI shows the URI with its password masked."""
    with pytest.raises(ValueError) as failed:
        open_backend(f"redis://{USER}:{SECRET}@127.0.0.1:6379/0?prefix=p{options}", k=3, design=DESIGN)
    assert_no_secret(failed.value)
    assert f"redis://{USER}:***@127.0.0.1:6379/0" in str(failed.value)


@pytest.mark.parametrize(
    "uri",
    [
        f"redis://{USER}:{SECRET}@/0",  # no host
        f"nosuch://{USER}:{SECRET}@h/0",  # unknown scheme
        f"://{USER}:{SECRET}@h/0",  # no scheme
        f"file:///tmp/idx?password={SECRET}&bogus=1",
        f"file:///tmp/idx?password={SECRET}&buffer_size=big",
        f"file:///tmp/idx?password={SECRET}&readonly=perhaps",
    ],
)
def test_bad_uris_hide_the_password(uri: str) -> None:
    """The ValueError for a malformed URI, an unknown scheme or a bad file option masks secrets."""
    with pytest.raises(ValueError) as failed:
        open_backend(uri, k=3, design=DESIGN)
    assert_no_secret(failed.value)


def test_cli_with_the_server_up_hides_the_password(uri: str, pages_file: Path, tmp_path: Path) -> None:
    """dedup --index, index stats (text and JSON), query and export print the URI with its password masked."""
    runs = [
        run_cli("dedup", str(pages_file), "--index", f"{uri}-dedup", "--no-progress"),  # an index of its own
        run_cli("index", "stats", uri),
        run_cli("index", "stats", "--json", uri),
        run_cli("index", "query", uri, "0123456789abcdef"),
        run_cli("index", "export", uri),
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert_no_secret(run.stdout, run.stderr)
    assert runs[1].stdout.splitlines()[0].startswith(f"index    redis://{USER}:***@127.0.0.1:")


@pytest.mark.parametrize(
    "command",
    [
        ["index", "stats", "{uri}"],
        ["index", "stats", "--json", "{uri}"],
        ["index", "query", "{uri}", "0123456789abcdef"],
        ["index", "export", "{uri}"],
        ["index", "delete", "{uri}", "https://a.example/x"],
        ["index", "compact", "{uri}"],
        ["dedup", "{pages}", "--index", "{uri}", "--no-progress"],
    ],
    ids=lambda c: "-".join(a for a in c if "{" not in a),
)
@pytest.mark.parametrize("where", ["down", "bad-option", "memory-option"])
def test_cli_failures_hide_the_password(command: list[str], where: str, down_uri: str, pages_file: Path) -> None:
    """A store that is unreachable or a URI with a bad option fails in one line naming the URI, password masked."""
    uri = {
        "down": down_uri,
        "bad-option": f"redis://{USER}:{SECRET}@127.0.0.1:6379/0?prefix=p&bogus=1",
        "memory-option": f"memory://?password={SECRET}",
    }[where]
    run = run_cli(*(arg.format(uri=uri, pages=pages_file) for arg in command))
    assert run.returncode == 1
    assert_no_secret(run.stdout, run.stderr)
    assert "***" in run.stderr


def test_stats_json_hides_a_password_given_as_an_option(password_redis_server: RedisServer, redis_prefix: str) -> None:
    """A password passed as ?password= works and is masked in what index stats prints."""
    uri = f"redis://127.0.0.1:{password_redis_server.port}/0?prefix={redis_prefix}&password={SECRET}"
    text, as_json = run_cli("index", "stats", uri), run_cli("index", "stats", "--json", uri)
    assert text.returncode == 0 and as_json.returncode == 0, text.stderr + as_json.stderr
    assert_no_secret(text.stdout, text.stderr, as_json.stdout, as_json.stderr)
    assert "password=***" in text.stdout
    assert json.loads(as_json.stdout)["backend"] == "RedisBackend"
