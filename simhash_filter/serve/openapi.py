"""The service's OpenAPI 3.1 description, served at ``GET /openapi.json`` (tests check that it names every route)."""

from __future__ import annotations

from typing import Any

from simhash_filter import __version__

__all__ = ["openapi"]

_DECISION = {
    "type": "object",
    "description": "A page's decision: simhash-filter dedup's record (url, fingerprint, duplicate_of, distance) with "
    "its status, the similarity to the page it duplicates and whether an entry was stored.",
    "required": ["url", "status", "fingerprint", "duplicate_of", "distance", "similarity", "stored"],
    "properties": {
        "url": {"type": ["string", "null"]},
        "status": {"type": "string", "description": "ok (checked), or why not: not_html, empty, too_few_features, "
                   "malformed (a batch line; see reason), error, worker_died"},
        "fingerprint": {"type": ["string", "null"], "description": "16 hex digits"},
        "duplicate_of": {"type": ["string", "null"], "description": "URL of the stored page it duplicates; null: kept"},
        "distance": {"type": ["integer", "null"]},
        "similarity": {"type": ["number", "null"]},
        "stored": {"type": "boolean", "description": "an entry was added (never by a check; not for the page's own "
                   "entry found again)"},
        "reason": {"type": "string"},
        "warc_date": {"type": "string"},
        "warc_record_id": {"type": "string"},
    },
}
_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}
_PAGE_BODY = {
    "required": True,
    "content": {
        "text/html": {"schema": {"type": "string", "format": "binary"},
                      "example": "<html><body><p>The page's bytes as downloaded.</p></body></html>"},
        "application/warc": {"schema": {"type": "string", "format": "binary"},
                             "description": "one WARC response record (gzipped or not); its URL is the record's"},
    },
}


def _errors(*codes: int) -> dict[str, Any]:
    said = {400: "bad request", 401: "no or wrong token", 408: "the body did not arrive in time",
            413: "over a limit (body bytes, pages per batch)", 415: "an unknown charset or Content-Encoding",
            422: "a WARC body without an HTML response", 429: "busy: send it again after Retry-After",
            503: "the index failed, or the pages were not fingerprinted in time"}  # fmt: skip
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    return {str(code): {"description": said[code], **error} for code in codes}


_URL = {"name": "url", "in": "query", "description": "the page's URL (not needed with a WARC record)",
        "schema": {"type": "string"}}  # fmt: skip
_PAGE_ERRORS = _errors(400, 401, 408, 413, 415, 422, 429, 503)


def openapi(token: bool) -> dict[str, Any]:
    """The description; *token*: the routes ask for a bearer token."""
    decision = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Decision"}}}}
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "simhash-filter", "version": __version__,
                 "description": "Near-duplicate decisions on web pages, the same as a Scrapy crawl's and "
                                "simhash-filter dedup's, in a shared index."},
        "paths": {
            "/v1/pages": {"post": {
                "summary": "Check a page and store it: kept, or a near-duplicate of a stored page",
                "parameters": [_URL], "requestBody": _PAGE_BODY,
                "responses": {"200": {"description": "the decision", **decision}, **_PAGE_ERRORS}}},
            "/v1/pages/check": {"post": {
                "summary": "Check a page without storing it (read-only)",
                "parameters": [_URL], "requestBody": _PAGE_BODY,
                "responses": {"200": {"description": "the decision", **decision}, **_PAGE_ERRORS}}},
            "/v1/batch": {"post": {
                "summary": "Decide a batch of pages in order, as simhash-filter dedup decides the same stream",
                "parameters": [{"name": "store", "in": "query", "schema": {"type": "boolean", "default": True},
                                "description": "false: check only"}],
                "requestBody": {"required": True, "content": {
                    "application/x-ndjson": {"schema": {"type": "string"},
                                             "example": '{"url": "https://a.example/x", "html": "<html>...</html>"}\n'},
                    "application/warc": {"schema": {"type": "string", "format": "binary"}}}},
                "responses": {"200": {"description": "one decision a line, in input order", "content": {
                    "application/x-ndjson": {"schema": {"$ref": "#/components/schemas/Decision"}}}},
                    **_PAGE_ERRORS}}},
            "/v1/fingerprints/{fingerprint}": {"get": {
                "summary": "The stored pages within k of a fingerprint, nearest first",
                "parameters": [{"name": "fingerprint", "in": "path", "required": True,
                                "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{16}$"}},
                               {"name": "k", "in": "query", "schema": {"type": "integer", "minimum": 0}}],
                "responses": {"200": {"description": "the matches"}, **_errors(400, 401, 429, 503)}}},
            "/v1/stats": {"get": {"summary": "The index's size, the configuration, the limits and the counters",
                                  "responses": {"200": {"description": "the stats"}, **_errors(401, 429)}}},
            "/metrics": {"get": {"summary": "The counters in Prometheus' text format",
                                 "responses": {"200": {"description": "text/plain; version=0.0.4"},
                                               **_errors(401)}}},
            "/healthz": {"get": {"summary": "Whether the service answers (no token asked)", "security": [],
                                 "responses": {"200": {"description": "it does"}}}},
            "/openapi.json": {"get": {"summary": "This description (no token asked)", "security": [],
                                      "responses": {"200": {"description": "OpenAPI 3.1"}}}},
        },
        "components": {"schemas": {"Decision": _DECISION, "Error": _ERROR}},
    }
    if token:
        doc["components"]["securitySchemes"] = {"token": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"token": []}]
    return doc
