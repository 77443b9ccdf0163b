"""``simhash-filter serve``: its options, the token, the index opened, and the server (uvicorn) run until it is told
to stop (SIGTERM, Ctrl-C): then it takes no new connection, answers the requests it holds, and closes the index.

Importing this module imports neither the server nor its framework: without the ``serve`` extra the command says
how to install it.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
from typing import Any

from simhash_filter.cli.common import EXIT_FAILED, EXIT_OK, UsageError, filter_config, warn
from simhash_filter.cli.dedup import add_index_options
from simhash_filter.config import available_cpus
from simhash_filter.index.backends import error_message, open_errors, redact_uri
from simhash_filter.index.nearduplicate import open_index

__all__ = ["DEFAULT_PORT", "TOKEN_ENV", "add_serve_parser", "cmd_serve"]

DEFAULT_PORT = 8750
#: The environment variable that holds the token (or ``--token-file``); never an option, seen by ``ps``.
TOKEN_ENV = "SIMHASH_SERVE_TOKEN"
INSTALL_HINT = (
    "serve needs the serve extra: pip install 'simhash-filter[serve]' (from a checkout: pip install -e '.[serve]')"
)
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _token(args: argparse.Namespace) -> str | None:
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as exc:
            raise UsageError(f"cannot read --token-file {args.token_file}: {exc.strerror or exc}") from None
        if not token:
            raise UsageError(f"--token-file {args.token_file} is empty")
        return token
    return os.environ.get(TOKEN_ENV, "").strip() or None


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from simhash_filter.serve.app import create_app
        from simhash_filter.serve.service import Limits, Service
    except ImportError as exc:
        warn(f"{INSTALL_HINT} ({exc})")
        return EXIT_FAILED
    config = filter_config(args)
    token = _token(args)
    host = args.host or "127.0.0.1"
    if token is None and not _is_loopback(host):
        raise UsageError(f"--host {host} needs a token: set {TOKEN_ENV} or --token-file (without one the service "
                         "listens on the loopback interface only)")  # fmt: skip
    for name in ("workers", "max_body", "max_batch", "max_pages", "max_requests"):
        if getattr(args, name) < (0 if name == "workers" else 1):
            raise UsageError(f"--{name.replace('_', '-')} must be >= {0 if name == 'workers' else 1}")
    if not args.request_timeout > 0:
        raise UsageError("--request-timeout must be > 0")
    limits = Limits(
        body_bytes=args.max_body,
        batch_pages=args.max_batch,
        request_seconds=args.request_timeout,
        pages_in_flight=max(args.max_pages, args.max_batch),
        requests_in_flight=args.max_requests,
    )
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    try:
        index = open_index(config, args.index)
    except open_errors() as exc:
        warn(f"cannot open index {redact_uri(args.index)!r}: {error_message(exc, args.index)}")
        return EXIT_FAILED
    service = Service(config, index, args.index, processes=args.workers, limits=limits)
    app = create_app(service, token=token)
    log = logging.getLogger("simhash_filter.serve")
    log.info("simhash: the index at %s holds %d pages", redact_uri(args.index), len(index))
    if token is None:
        log.warning("simhash: no token (%s or --token-file): listening on the loopback interface only", TOKEN_ENV)
    scheme_host = f"[{host}]" if ":" in host else host
    log.info("simhash: API at http://%s:%d/v1/..., its description at /openapi.json", scheme_host, args.port)
    server = uvicorn.Server(uvicorn.Config(
        app, host=host, port=args.port, log_config=None, access_log=args.access_log, lifespan="on",
        timeout_graceful_shutdown=int(args.request_timeout) + 5, limit_concurrency=args.max_requests * 4,
        timeout_keep_alive=5, server_header=False))  # fmt: skip
    try:
        server.run()
    finally:
        if not server.started:  # stopped before it served (the port taken): close what it opened
            service.close()
    return EXIT_OK if server.started else EXIT_FAILED


SERVE_EPILOG = f"""\
examples:
  simhash-filter serve --index crawl.idx                         # on 127.0.0.1:{DEFAULT_PORT}, an on-disk index
  {TOKEN_ENV}=$(cat token) simhash-filter serve --host 0.0.0.0 --index 'redis://redis.internal:6379/0?prefix=site'
  curl -s --data-binary @page.html -H 'Content-Type: text/html; charset=utf-8' \\
      'http://127.0.0.1:{DEFAULT_PORT}/v1/pages?url=https://a.example/x'

exit status: after a stop, by the signal that stopped it (SIGTERM, Ctrl-C), as uvicorn ends; 1 the index or the port
  could not be had; 2 a usage error"""


def add_serve_parser(sub: Any, threshold: argparse.ArgumentParser, model: argparse.ArgumentParser) -> None:
    """Add ``serve`` to the ``simhash-filter`` parser (``threshold``: -k and -t, ``model``: the model options)."""
    p = sub.add_parser(
        "serve",
        parents=[model, threshold],
        help="an HTTP service that decides pages in an index, for crawlers in any language",
        description="Serve near-duplicate decisions over HTTP: POST a page (or a batch, or WARC records), get the "
        "crawl's decision; the index is one the crawl and dedup open too (memory://, a directory, redis://). "
        "The API is described at /openapi.json and in docs/service.md. Needs the serve extra.",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--index", default="memory://", metavar="URI",
                   help="index store, as the crawl's SIMHASH_BACKEND: memory://, a directory, redis://... "
                   "(default: memory://)")  # fmt: skip
    add_index_options(p)
    p.add_argument("--host", default=None, metavar="ADDR",
                   help=f"address to listen on (default: 127.0.0.1; another needs a token, {TOKEN_ENV})")  # fmt: skip
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})")
    p.add_argument("--token-file", metavar="FILE",
                   help=f"file holding the bearer token requests must show (or the environment's {TOKEN_ENV})")
    p.add_argument("--workers", type=int, default=min(available_cpus(), 8), metavar="N",
                   help="worker processes that fingerprint pages; 0: in the server's own thread "
                   "(default: one per CPU, at most 8)")  # fmt: skip
    p.add_argument("--max-body", type=int, default=32 << 20, metavar="BYTES",
                   help="largest request body, decompressed (default: 32 MiB): 413 beyond")  # fmt: skip
    p.add_argument("--max-batch", type=int, default=1000, metavar="N",
                   help="most pages in one batch request (default: 1000): 413 beyond")  # fmt: skip
    p.add_argument("--max-pages", type=int, default=4000, metavar="N",
                   help="most pages in flight over all requests (default: 4000): 429 with Retry-After beyond")
    p.add_argument("--max-requests", type=int, default=64, metavar="N",
                   help="most requests in flight (default: 64): 429 with Retry-After beyond")  # fmt: skip
    p.add_argument("--request-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="time a request has to send its body and have its pages fingerprinted (default: 30): 408 or "
                   "503 beyond, nothing stored")  # fmt: skip
    p.add_argument("--access-log", action="store_true", help="log every request (uvicorn's access log)")
    p.set_defaults(func=cmd_serve, parser=p)
