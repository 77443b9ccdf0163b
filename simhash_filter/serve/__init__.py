"""``simhash-filter serve``: the filter as an HTTP service for crawlers in any language (docs/service.md).

:mod:`.service` decides pages (no HTTP), :mod:`.bodies` reads requests' bodies within limits, :mod:`.app` is the
HTTP API, :mod:`.metrics` its Prometheus counters, :mod:`.openapi` its description, :mod:`.command` the command.
Needs the ``serve`` extra (Starlette, uvicorn, prometheus-client).
"""
