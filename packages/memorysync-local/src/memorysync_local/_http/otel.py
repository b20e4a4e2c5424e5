"""OpenTelemetry for the server: one span per request, through FastAPI's instrumentation.

``memorysync-local[otel]`` installs ``opentelemetry-instrumentation-fastapi`` (the
maintained instrumentation), the SDK and the OTLP/HTTP exporter. ``serve --otel`` and
``embedded(..., otel=True)`` instrument the app; ``serve --otel`` also starts the SDK
with the OTLP exporter, configured by the standard ``OTEL_EXPORTER_OTLP_*`` variables.
Query strings never reach a span: a client may have put a key in one.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI

logger = logging.getLogger("memorysync.local")

# Span attributes that may carry the query string, in old and new semantic conventions.
_WITH_QUERY = ("http.target", "http.url", "url.full", "url.query")


def _without_query(span: Any, scope: dict[str, Any]) -> None:
    if not span.is_recording():
        return
    path = scope.get("path", "")
    for key in _WITH_QUERY:
        value = getattr(span, "attributes", {}).get(key)
        if isinstance(value, str) and "?" in value:
            span.set_attribute(key, value.split("?", 1)[0])
        elif key == "url.query" and value:
            span.set_attribute(key, "")
    if path:
        span.set_attribute("url.path", path)


def instrument(app: FastAPI) -> bool:
    """Add a span per request to ``app``; False (and a log line) without the extra."""
    try:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    except ImportError:
        logger.warning(
            "OpenTelemetry requested but not installed: pip install 'memorysync-local[otel]'"
        )
        return False
    FastAPIInstrumentor.instrument_app(app, server_request_hook=_without_query)
    return True


def start_sdk() -> str:
    """Start the SDK with the OTLP/HTTP exporter; a sentence saying what happened."""
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        return (
            "OpenTelemetry: the SDK or the OTLP exporter is not installed "
            "(pip install 'memorysync-local[otel]'); no spans are exported"
        )
    provider = TracerProvider(resource=Resource.create({"service.name": "memorysync-local"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return "OpenTelemetry: exporting spans over OTLP/HTTP (OTEL_EXPORTER_OTLP_* variables)"
