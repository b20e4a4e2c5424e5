"""OpenTelemetry spans and metrics for recall, delivery and the explicit calls.

Everything goes through ``opentelemetry-api`` when it is importable (the ``otel`` extra;
AutoGen, Agent Framework and ag2 1.x install it already) and is a no-op otherwise.
Without an SDK configured, the API's own no-op tracer and meter answer.
``MEMORYSYNC_TELEMETRY=off`` turns it all off (the benchmark's baseline).

Privacy: spans never carry the API key, the user's text, the query or the memories.
The user id is recorded as a short SHA-256 digest and the query not at all, unless
:func:`configure_telemetry` says otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from ._version import __version__

try:  # opentelemetry-api is optional: memorysync-core[otel]
    from opentelemetry import context as otel_context
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace as otel_trace
    from opentelemetry.metrics import _internal as otel_metrics_internal

    _AVAILABLE = True
except ImportError:  # pragma: no cover - the core session runs without it too
    _AVAILABLE = False

# Providers named in the environment are loaded by the API's public getters only.
_PROVIDERS_FROM_ENVIRONMENT = any(
    name in os.environ for name in ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")
)
_UNKNOWN = object()

INSTRUMENTATION_NAME = "memorysync"
AttributeValue = str | bool | int | float


@dataclass(frozen=True)
class TelemetrySettings:
    """What spans may record beyond counts and timings; both off by default."""

    record_query: bool = False
    record_user_id: bool = False


class _State:
    enabled = _AVAILABLE and os.environ.get("MEMORYSYNC_TELEMETRY", "").lower() != "off"
    settings = TelemetrySettings()
    instruments: _Instruments | None = None
    tracer: tuple[object, Any] | None = None  # (provider, its tracer)


def _configured(module: Any, attribute: str, getter: Callable[[], Any]) -> Any:
    """The provider an application configured (SDK or other), or None while none is.

    The API's own global is read directly while it is unset: asking the public getter on
    every span is most of what telemetry costs an application that does not trace. Until
    a provider is set, the API's proxy would only hand out no-op spans and instruments.
    """
    provider: Any = getattr(module, attribute, _UNKNOWN)
    if provider is None and not _PROVIDERS_FROM_ENVIRONMENT:
        return None
    if provider is _UNKNOWN or provider is None:
        provider = getter()
    return None if type(provider).__name__.lstrip("_").startswith("Proxy") else provider


def _tracer() -> Any:
    """The tracer of the configured provider, or None while none is configured."""
    provider = _configured(otel_trace, "_TRACER_PROVIDER", otel_trace.get_tracer_provider)
    if provider is None:
        return None
    cached = _State.tracer
    if cached is None or cached[0] is not provider:
        cached = (provider, provider.get_tracer(INSTRUMENTATION_NAME, __version__))
        _State.tracer = cached
    return cached[1]


def configure_telemetry(*, record_query: bool = False, record_user_id: bool = False) -> None:
    """Choose what spans record beyond counts and timings (process-wide).

    ``record_query=True`` puts the recall or search query on the span as
    ``memorysync.query``: a privacy choice, since the query is the user's own words.
    ``record_user_id=True`` records ``memorysync.user_id`` as given instead of a digest.

    Example:
        ```python
        from memorysync_core import configure_telemetry

        configure_telemetry(record_query=True)  # e.g. in a development environment
        ```
    """
    for name, value in (("record_query", record_query), ("record_user_id", record_user_id)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")
    _State.settings = TelemetrySettings(record_query, record_user_id)


def set_enabled(enabled: bool) -> None:
    """Turn spans and metrics on or off (the benchmark's baseline); API needed for on."""
    _State.enabled = bool(enabled) and _AVAILABLE


def tracing() -> bool:
    """True when spans are recorded: telemetry on and an SDK's tracer provider set."""
    return _State.enabled and _tracer() is not None


def user_attributes(user_id: str) -> dict[str, AttributeValue]:
    """``memorysync.user_id``: a 16-hex-digit SHA-256 digest unless configured otherwise."""
    if _State.settings.record_user_id:
        return {"memorysync.user_id": user_id}
    return {"memorysync.user_id": hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:16]}


def query_attributes(query: str) -> dict[str, AttributeValue]:
    """``memorysync.query`` when recording the query was chosen; nothing otherwise."""
    return {"memorysync.query": query} if _State.settings.record_query else {}


class _NoSpan:
    """Stands in for a span when telemetry is off."""

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Ignored."""

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        """Ignored."""

    def add_event(self, name: str, attributes: Mapping[str, AttributeValue] | None = None) -> None:
        """Ignored."""


_NO_SPAN = _NoSpan()


@contextlib.contextmanager
def span(
    name: str, attributes: Mapping[str, AttributeValue] | None = None, *, root: bool = False
) -> Iterator[Any]:
    """A span named ``name`` under the current one (``root``: a trace of its own).

    An exception marks the span as an error with ``error.type`` (the class name) and is
    re-raised; its message is not recorded, since a server's error text may quote the
    user's words.
    """
    tracer = _tracer() if _State.enabled else None
    if tracer is None:
        yield _NO_SPAN
        return
    with tracer.start_as_current_span(
        name,
        context=otel_context.Context() if root else None,
        attributes=dict(attributes or {}),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            current.set_attribute("error.type", type(exc).__name__)
            current.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, type(exc).__name__))
            raise


def capture_context() -> object | None:
    """The caller's trace context, to attach on another thread with :func:`attached`."""
    return otel_context.get_current() if tracing() else None


@contextlib.contextmanager
def attached(captured: object | None) -> Iterator[None]:
    """Run the block under a context captured on another thread, so spans nest there."""
    if captured is None or not _State.enabled:
        yield
        return
    token = otel_context.attach(captured)  # type: ignore[arg-type]
    try:
        yield
    finally:
        otel_context.detach(token)


class _Traced(Protocol):
    def span_attributes(self) -> dict[str, AttributeValue]: ...


P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S", bound=_Traced)


# An async method of a traced object: explicit_call wraps one without changing its type.
AsyncMethod = Callable[Concatenate[S, P], Awaitable[T]]


def explicit_call(name: str) -> Callable[[AsyncMethod[S, P, T]], AsyncMethod[S, P, T]]:
    """Run an explicit async method in a span ``name`` with its object's span attributes."""

    def wrap(method: AsyncMethod[S, P, T]) -> AsyncMethod[S, P, T]:
        @functools.wraps(method)
        async def traced(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            if not tracing():
                return await method(self, *args, **kwargs)
            with span(name, self.span_attributes()):
                return await method(self, *args, **kwargs)

        return traced

    return wrap


class _Instruments:
    """The metric instruments (see docs/observability.md for names and units)."""

    def __init__(self) -> None:
        meter = otel_metrics.get_meter(INSTRUMENTATION_NAME, __version__)
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
            description="Captured turns the server refused or the queue dropped.",
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


def instruments() -> _Instruments | None:
    """The metric instruments, or None when telemetry is off or no SDK meter is set."""
    if not _State.enabled:
        return None
    meters = _configured(otel_metrics_internal, "_METER_PROVIDER", otel_metrics.get_meter_provider)
    if meters is None:
        return None
    if _State.instruments is None:
        _State.instruments = _Instruments()
    return _State.instruments
