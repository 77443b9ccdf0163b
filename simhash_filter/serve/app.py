"""The HTTP API (a Starlette application) over a :class:`~simhash_filter.serve.service.Service`: its routes, the
token, the limits and back-pressure, and one clear 4xx or 5xx with a one-line JSON ``error`` for every request
it cannot answer.  The routes and their documents are described in :mod:`.openapi` (``GET /openapi.json``).
"""

from __future__ import annotations

import asyncio
import hmac
import re
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from simhash_filter.serve.bodies import BadRequest, batch_pages, one_page, read_body
from simhash_filter.serve.metrics import CONTENT_TYPE, Metrics
from simhash_filter.serve.openapi import openapi
from simhash_filter.serve.service import Busy, IndexUnavailable, Service, logger

__all__ = ["RETRY_AFTER_SECONDS", "create_app"]

#: ``Retry-After`` of a request refused for back-pressure (429), and of one refused while the index fails (503).
RETRY_AFTER_SECONDS, INDEX_RETRY_AFTER_SECONDS = 1, 5
_HEX = re.compile(r"[0-9a-fA-F]{16}")
_NDJSON = "application/x-ndjson"

Handler = Callable[[Request, float], Awaitable[Response]]


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """*obj* as JSON, ended by a newline (a shell's prompt after ``curl`` starts on its own line)."""
    return Response(orjson.dumps(obj) + b"\n", status, headers, media_type="application/json")


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return json_response({"error": message}, status, headers)


def create_app(service: Service, *, token: str | None = None) -> Starlette:
    """The application; *token*: the bearer token every route but ``/healthz`` and ``/openapi.json`` asks for
    (None: none asked, for a service on the loopback interface)."""
    metrics = Metrics(service)
    limits = service.limits
    max_bytes = service.config.fingerprint.max_bytes
    expected = None if token is None else f"Bearer {token}".encode()

    def authorized(request: Request) -> bool:
        if expected is None:
            return True
        given = request.headers.get("authorization", "").encode("latin-1", "replace")
        return hmac.compare_digest(given, expected)

    def route(path: str, name: str, handler: Handler, method: str, *, auth: bool = True, admit: int = 0) -> Route:
        async def endpoint(request: Request) -> Response:
            start = time.monotonic()
            try:
                if auth and not authorized(request):
                    response = error(401, "a valid token is needed: Authorization: Bearer <token>",
                                     {"WWW-Authenticate": "Bearer"})  # fmt: skip
                elif admit < 0:
                    response = await handler(request, start + limits.request_seconds)
                else:
                    with service.admit(admit):
                        response = await handler(request, start + limits.request_seconds)
            except Busy as exc:
                metrics.refused.inc()
                response = error(429, f"busy ({exc}): send it again later", {"Retry-After": str(RETRY_AFTER_SECONDS)})
            except BadRequest as exc:
                response = error(exc.status, str(exc))
            except IndexUnavailable as exc:
                response = error(503, str(exc), {"Retry-After": str(INDEX_RETRY_AFTER_SECONDS)})
            except ClientDisconnect:
                response = error(400, "the client went away before its body was read")
            metrics.observe(name, response.status_code, time.monotonic() - start)
            return response

        return Route(path, endpoint, methods=[method], name=name)

    async def body(request: Request, deadline: float) -> bytes:
        headers = request.headers
        reading = read_body(request.stream(), headers.get("content-length"), headers.get("content-encoding"),
                            limits.body_bytes)  # fmt: skip
        try:
            return await asyncio.wait_for(reading, max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise BadRequest(408, f"the body did not arrive within {limits.request_seconds:g} s") from None

    async def decide(pages: list[Any], deadline: float, store: bool) -> list[dict[str, Any]]:
        try:
            return await service.decide(pages, store=store, timeout=max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            message = f"the pages were not fingerprinted within {limits.request_seconds:g} s; none was stored"
            raise BadRequest(503, message) from None

    def page_handler(store: bool) -> Handler:
        async def handle(request: Request, deadline: float) -> Response:
            data = await body(request, deadline)
            page = one_page(data, request.headers.get("content-type"), request.query_params.get("url"), max_bytes)
            [record] = await decide([page], deadline, store)
            return json_response(record)

        return handle

    async def batch(request: Request, deadline: float) -> Response:
        store = _flag(request.query_params.get("store"), "store")
        data = await body(request, deadline)
        pages = batch_pages(data, request.headers.get("content-type"), limits.batch_pages, max_bytes)
        del data
        with service.holding(len(pages)):
            records = await decide(pages, deadline, store)
        return Response(b"".join(orjson.dumps(r) + b"\n" for r in records), media_type=_NDJSON)

    async def fingerprint(request: Request, deadline: float) -> Response:
        text = request.path_params["fingerprint"]
        if not _HEX.fullmatch(text):
            raise BadRequest(400, f"not a fingerprint of 16 hex digits: {text[:40]!r}")
        k = service.index.k
        given = request.query_params.get("k")
        if given is not None:
            if not given.isdigit() or int(given) > k:
                raise BadRequest(400, f"k must be a whole number from 0 to the index's k, {k}: got {given[:20]!r}")
            k = int(given)
        matches = await service.query(int(text, 16), k)
        found = [{"url": m.key, "fingerprint": f"{m.fingerprint:016x}", "distance": m.distance} for m in matches]
        return json_response({"fingerprint": text.lower(), "k": k, "matches": found})

    async def stats(request: Request, deadline: float) -> Response:
        try:
            pages = await service.size()
        except Exception as exc:  # the index's store is down: said, not raised
            pages = None
            logger.warning("simhash: the index's size is unknown: %s", exc)
        counters = dict(sorted(service.stats.get_stats().items()))
        return json_response({"pages": pages, **service.description(), "uptime_seconds": round(
            time.time() - service.started, 1), "requests_in_flight": service.requests_in_flight,
            "pages_in_flight": service.pages_in_flight, "counters": counters})  # fmt: skip

    async def health(request: Request, deadline: float) -> Response:
        return json_response({"status": "ok", "fingerprinting": service.executor.where()})

    async def metrics_text(request: Request, deadline: float) -> Response:
        return Response(metrics.text(), media_type=CONTENT_TYPE)

    async def description(request: Request, deadline: float) -> Response:
        return json_response(openapi(token is not None))

    routes = [
        route("/v1/pages", "pages", page_handler(store=True), "POST", admit=1),
        route("/v1/pages/check", "check", page_handler(store=False), "POST", admit=1),
        route("/v1/batch", "batch", batch, "POST"),
        route("/v1/fingerprints/{fingerprint}", "fingerprints", fingerprint, "GET"),
        route("/v1/stats", "stats", stats, "GET"),
        route("/metrics", "metrics", metrics_text, "GET", admit=-1),
        route("/healthz", "healthz", health, "GET", auth=False, admit=-1),
        route("/openapi.json", "openapi", description, "GET", auth=False, admit=-1),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette):
        await service.start()
        logger.info("simhash: serving: fingerprinting %s", service.executor.where())
        try:
            yield
        finally:
            service.close()
            logger.info("simhash: stopped; the index is closed")

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return error(exc.status_code, exc.detail, dict(exc.headers or {}))

    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_error})


def _flag(value: str | None, name: str) -> bool:
    if value is None or value.lower() in {"1", "true", "yes"}:
        return True
    if value.lower() in {"0", "false", "no"}:
        return False
    raise BadRequest(400, f"{name} must be true or false, got {value[:20]!r}")
