"""``GET /metrics``: the crawl's ``simhash/...`` counters and the service's own, in Prometheus' text format
(prometheus-client), in a registry of the service's own (two services in one process do not mix).

A crawl's key becomes a metric named after it: ``simhash/near_duplicates`` is ``simhash_near_duplicates_total``,
``simhash/skipped/<reason>`` is ``simhash_skipped_total{reason="..."}``, ``simhash/distance/<d>`` is
``simhash_distance_total{distance="d"}``; the index's size and the maxima are gauges.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from simhash_filter.serve.service import Service

__all__ = ["CONTENT_TYPE", "Metrics"]

#: The media type of the text format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Keys that are levels or maxima, not counts.
_GAUGES = frozenset({"simhash/index_size", "simhash/candidates/max", "simhash/fingerprint_max_seconds"})
#: Keys whose last part is a label (``simhash/skipped/<reason>``, ``simhash/distance/<d>``): their middle part and
#: the label's name.
_LABELS = {"skipped": "reason", "distance": "distance"}


def _name(key: str) -> str:
    return key.replace("/", "_").replace("-", "_")


class _CrawlCounters:
    """A collector of the service's :class:`~simhash_filter.serve.service.Stats`, read at each scrape."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        values: dict[str, Any] = self.service.stats.get_stats()
        labelled = {part: CounterMetricFamily(f"simhash_{part}", f"pages by {label}", labels=[label])
                    for part, label in _LABELS.items()}  # fmt: skip
        for key, value in sorted(values.items()):
            parts = key.split("/")
            if not isinstance(value, int | float) or parts[0] != "simhash":
                continue
            if len(parts) == 3 and parts[1] in labelled:
                labelled[parts[1]].add_metric([parts[2]], value)
            elif key in _GAUGES:
                yield GaugeMetricFamily(_name(key), f"the crawl's {key}", value=value)
            else:
                yield CounterMetricFamily(_name(key), f"the crawl's {key}", value=value)
        yield from labelled.values()


class Metrics:
    """The registry of one service: its crawl counters, its requests by route and status, their seconds, the work in
    flight and the requests refused by back-pressure."""

    def __init__(self, service: Service) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_CrawlCounters(service))
        self.requests = Counter("simhash_serve_requests", "HTTP requests answered, by route and status",
                                ["route", "status"], registry=self.registry)  # fmt: skip
        buckets = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
        self.seconds = Histogram("simhash_serve_request_seconds", "seconds to answer a request, by route", ["route"],
                                 registry=self.registry, buckets=buckets)  # fmt: skip
        gauge = Gauge("simhash_serve_requests_in_flight", "requests being read or decided", registry=self.registry)
        gauge.set_function(lambda: service.requests_in_flight)
        gauge = Gauge("simhash_serve_pages_in_flight", "pages being fingerprinted or decided", registry=self.registry)
        gauge.set_function(lambda: service.pages_in_flight)
        self.refused = Counter("simhash_serve_refused", "requests refused with 429 (back-pressure)",
                               registry=self.registry)  # fmt: skip

    def observe(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, str(status)).inc()
        self.seconds.labels(route).observe(seconds)

    def text(self) -> bytes:
        return generate_latest(self.registry)
