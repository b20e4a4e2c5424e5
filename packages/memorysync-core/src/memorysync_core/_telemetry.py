"""OpenTelemetry spans and metrics for recall, delivery and the explicit calls.

Everything goes through ``opentelemetry-api`` when it is installed (the ``otel`` extra)
and is a no-op otherwise. Without an SDK configured, the API's own no-op tracer and
meter answer, so the cost is a few attribute lookups per call.

Privacy: spans never carry the API key, the user's text, the query or the memories. The
user id is recorded as a short SHA-256 digest unless ``TelemetrySettings.record_user_id``
is set; the query text only when ``record_query`` is set.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

try:  # opentelemetry-api is optional: memorysync-core[otel]
    from opentelemetry import context as _otel_context
    from opentelemetry import metrics as _otel_metrics
    from opentelemetry import trace as _otel_trace
except ImportError:  # pragma: no cover - exercised by the core session without the extra
    _otel_context = None  # type: ignore[assignment]
    _otel_metrics = None  # type: ignore[assignment]
    _otel_trace = None  # type: ignore[assignment]

from ._version import __version__

INSTRUMENTATION_NAME = "memorysync"
Attributes = Mapping[str, "str | bool | int | float"]


@dataclass(frozen=True)
class TelemetrySettings:
    """What the spans may record beyond counts and timings; both are off by default.

    ``record_query``: put the recall or search query on the span
    (``memorysync.query``). A privacy choice: the query is the user's own words.
    ``record_user_id``: put the user id as given instead of its digest.
    """

    record_query: bool = False
    record_user_id: bool = False


DEFAULT_SETTINGS = TelemetrySettings()


def enabled() -> bool:
    """True when ``opentelemetry-api`` is importable."""
    return _otel_trace is not None


def user_attribute(user_id: str, settings: TelemetrySettings = DEFAULT_SETTINGS) -> str:
    """The user id as spans record it: a 16-hex-digit SHA-256 digest unless opted out."""
    if settings.record_user_id:
        return user_id
    return hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:16]


class _NoSpan:
    """Stands in for a span when the API is absent."""

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Attributes) -> None:
        pass

    def add_event(self, name: str, attributes: Attributes | None = None) -> None:
        pass

    def is_recording(self) -> bool:
        return False


_NO_SPAN = _NoSpan()


@contextlib.contextmanager
def span(name: str, attributes: Attributes | None = None) -> Iterator[Any]:
    """A span named ``name`` under the current one; exceptions are recorded, not swallowed."""
    if _otel_trace is None:
        yield _NO_SPAN
        return
    tracer = _otel_trace.get_tracer(INSTRUMENTATION_NAME, __version__)
    with tracer.start_as_current_span(name, attributes=dict(attributes or {})) as current:
        yield current


def capture_context() -> object | None:
    """The caller's trace context, to attach on another thread (``attached``)."""
    if _otel_context is None:
        return None
    return _otel_context.get_current()


@contextlib.contextmanager
def attached(captured: object | None) -> Iterator[None]:
    """Run the block under a context captured on another thread, so spans nest there."""
    if _otel_context is None or captured is None:
        yield
        return
    token = _otel_context.attach(captured)  # type: ignore[arg-type]
    try:
        yield
    finally:
        _otel_context.detach(token)


class _Instruments:
    """The metric instruments, made on first use from the global meter provider."""

    def __init__(self) -> None:
        meter = _otel_metrics.get_meter(INSTRUMENTATION_NAME, __version__)  # type: ignore[union-attr]
        self.recall_duration = meter.create_histogram(
            "memorysync.recall.duration",
            unit="ms",
            description="Time from the start of a recall to its result, budget included.",
        )
        self.budget_exhausted = meter.create_counter(
            "memorysync.recall.budget_exhausted",
            unit="{recall}",
            description="Recalls that ran out of their budget and returned nothing.",
        )
        self.turns_delivered = meter.create_counter(
            "memorysync.turns.delivered", unit="{turn}", description="Captured turns stored."
        )
        self.turns_refused = meter.create_counter(
            "memorysync.turns.refused",
            unit="{turn}",
            description="Captured turns the server refused (4xx) or the queue dropped.",
        )
        self.turns_retried = meter.create_counter(
            "memorysync.turns.retried",
            unit="{turn}",
            description="Captured turns sent again after a transient failure.",
        )
        self.queue_depth = meter.create_up_down_counter(
            "memorysync.delivery.queue_depth",
            unit="{turn}",
            description="Captured turns waiting for delivery.",
        )


_instruments: _Instruments | None = None


def instruments() -> _Instruments | None:
    """The metric instruments, or None without ``opentelemetry-api``."""
    global _instruments
    if _otel_metrics is None:
        return None
    if _instruments is None:
        _instruments = _Instruments()
    return _instruments
