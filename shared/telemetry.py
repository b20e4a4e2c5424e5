"""OpenTelemetry's SDK with in-memory exporters, for tests that read spans and metrics.

The ``otel`` fixture installs the SDK's tracer and meter providers once per process
(OpenTelemetry allows one global provider of each) and clears what they recorded
before each test::

    def test_recall_is_traced(otel):
        ...
        (recall,) = otel.spans("memorysync.recall")
        assert recall.attributes["memorysync.memories"] == 1
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def _own_random_ids() -> Any:
    import random

    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class OwnRandomIds(IdGenerator):
        """Span and trace ids from a generator of its own, never the global one."""

        def __init__(self) -> None:
            self._random = random.Random()

        def generate_span_id(self) -> int:
            return self._random.getrandbits(64) or 1

        def generate_trace_id(self) -> int:
            return self._random.getrandbits(128) or 1

    return OwnRandomIds()


def _no_exemplars() -> dict[str, Any]:
    """Exemplar sampling off: its reservoirs draw from the global random generator too."""
    try:
        from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter
    except ImportError:  # SDKs before exemplars have nothing to turn off
        return {}
    return {"exemplar_filter": AlwaysOffExemplarFilter()}


class Recorded:
    """What the SDK recorded: finished spans and the metric points."""

    def __init__(self) -> None:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        self.exporter = InMemorySpanExporter()
        # The SDK's default ids come from the global random generator, which property-based
        # tests own: spans made on a server thread during a Hypothesis draw would move it.
        provider = TracerProvider(id_generator=_own_random_ids())
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        trace.set_tracer_provider(provider)
        self.reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[self.reader], **_no_exemplars()))
        self.tracer = trace.get_tracer("tests")

    def spans(self, name: str | None = None) -> list[Any]:
        """Finished spans (named ``name``), in the order they ended."""
        finished = list(self.exporter.get_finished_spans())
        return [span for span in finished if name is None or span.name == name]

    def children(self, parent: Any) -> list[Any]:
        """The finished spans whose parent is ``parent``."""
        return [
            span
            for span in self.spans()
            if span.parent is not None and span.parent.span_id == parent.context.span_id
        ]

    def metric(self, name: str) -> list[Any]:
        """The data points of metric ``name`` collected now (empty when never recorded)."""
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        for resource in data.resource_metrics if data is not None else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points

    def total(self, name: str) -> float:
        """The sum over a counter's points (0 when never recorded)."""
        return sum(point.value for point in self.metric(name))

    def every_attribute_value(self) -> list[str]:
        """Every span and event attribute value, as text, for leak checks."""
        values: list[str] = []
        for span in self.spans():
            values.extend(str(value) for value in (span.attributes or {}).values())
            for event in span.events:
                values.extend(str(value) for value in (event.attributes or {}).values())
            values.append(span.name)
        return values


_RECORDED: list[Recorded] = []


@pytest.fixture
def otel() -> Iterator[Recorded]:
    """The SDK's in-memory record, emptied for this test."""
    if not _RECORDED:
        _RECORDED.append(Recorded())
    recorded = _RECORDED[0]
    recorded.exporter.clear()
    recorded.reader.get_metrics_data()  # drain what earlier tests left (delta readers)
    yield recorded
    recorded.exporter.clear()
