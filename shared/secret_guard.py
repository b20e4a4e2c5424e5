"""A pytest plugin that fails the session if a test API key shows up anywhere it should not.

For the whole session it captures every log record of every logger at every level,
DEBUG included (the formatted message, the raw args and the exception text), and the
text of every failed test report.
Tests add what else they produce: exception messages and reprs, ``repr()`` of objects,
dumped components. At the end of the session each captured text is searched for every
registered key; any hit fails the run with a report naming where it was seen (the key
itself is shown masked).

Use it in a test::

    from shared.secret_guard import TEST_API_KEY, observe

    def test_errors_do_not_leak(fake_server):
        api = MemorySyncAPI(TEST_API_KEY, base_url=fake_server.base_url)
        ...
        observe(caught.value, api, memory.dump_component())

``TEST_API_KEY`` is registered from the start; fixtures that use another key call
``register_secret(key)``. Loading: list ``"shared.secret_guard"`` in the root
conftest's ``pytest_plugins``.

Log levels: the plugin makes every logger produce every record and hands each one to
the guard first; the logger's own handlers (and ``caplog``, and pytest's reports) still
get only the records its configured level lets through, so no test sees more or fewer
records than it would without the plugin. ``logging.disable()`` is still honoured.
"""

from __future__ import annotations

import json
import logging
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

__all__ = [
    "TEST_API_KEY",
    "SecretGuard",
    "contains_secret",
    "guard",
    "observe",
    "register_secret",
    "secret_forms",
]

TEST_API_KEY = "ms_test_guard_k3y_7c1f9a2e5b804d36"
"""The well-known test API key: use it in fixtures, it must never show up in any output."""

_MIN_SECRET_CHARS = 8


@dataclass(frozen=True)
class _Seen:
    where: str
    test: str
    text: str


class SecretGuard:
    """Collects produced text and finds registered secrets in it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = {TEST_API_KEY}
        self._seen: list[_Seen] = []
        self.current_test = "<session>"

    @property
    def secrets(self) -> frozenset[str]:
        """The registered secrets."""
        with self._lock:
            return frozenset(self._secrets)

    @property
    def texts_seen(self) -> int:
        """How many texts were captured so far."""
        with self._lock:
            return len(self._seen)

    def register_secret(self, secret: str) -> None:
        """Search every captured text (earlier and later ones) for ``secret`` too."""
        if not isinstance(secret, str) or len(secret) < _MIN_SECRET_CHARS:
            raise ValueError(
                f"a secret must be a string of at least {_MIN_SECRET_CHARS} characters "
                f"(shorter ones match by accident), got {len(str(secret))} characters"
            )
        with self._lock:
            self._secrets.add(secret)

    def add_text(self, text: str, where: str) -> None:
        """Capture ``text`` (seen at ``where``) for the end-of-session search."""
        with self._lock:
            self._seen.append(_Seen(where, self.current_test, text))

    def observe(self, *values: object, where: str = "observed") -> None:
        """Capture what ``values`` show: exceptions, objects' reprs, dumped components."""
        for value in values:
            for label, text in _texts_of(value):
                self.add_text(text, f"{where}: {label}")

    def leaks(self) -> list[tuple[_Seen, str]]:
        """Every (captured text, secret) pair where the text contains the secret."""
        with self._lock:
            secrets = sorted(self._secrets)
            seen = list(self._seen)
        return [(item, s) for item in seen for s in secrets if contains_secret(item.text, s)]

    def find_in(self, text: str) -> list[str]:
        """The registered secrets ``text`` contains (masked), for immediate asserts."""
        return [_mask(s) for s in sorted(self.secrets) if contains_secret(text, s)]


def secret_forms(secret: str) -> set[str]:
    """``secret`` as it may be printed: as is, ``repr``-escaped, as escaped bytes."""
    forms = {secret, repr(secret)[1:-1], repr(secret.encode("utf-8"))[2:-1]}
    return {form for form in forms if form}


def contains_secret(text: str, secret: str) -> bool:
    """True when ``text`` shows ``secret`` in any of its printed forms."""
    return any(form in text for form in secret_forms(secret))


def _texts_of(value: object) -> Iterator[tuple[str, str]]:
    if isinstance(value, BaseException):
        for link in _chain(value):
            name = type(link).__name__
            yield f"{name} str", str(link)
            yield f"{name} repr", repr(link)
            yield f"{name} args", repr(link.args)
            yield f"{name} formatted", "".join(traceback.format_exception_only(type(link), link))
        return
    if isinstance(value, str):
        yield "text", value
        return
    dump = getattr(value, "model_dump_json", None)
    if callable(dump):  # a pydantic model, e.g. a ComponentModel from dump_component()
        yield f"{type(value).__name__} json", str(dump())
    elif isinstance(value, (dict, list, tuple)):
        yield f"{type(value).__name__} json", json.dumps(value, default=repr)
    yield f"{type(value).__name__} repr", repr(value)
    yield f"{type(value).__name__} str", str(value)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack = [exc]
    while stack:
        link = stack.pop()
        if id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        stack.extend(x for x in (link.__cause__, link.__context__) if x is not None)


def _mask(secret: str) -> str:
    return secret[:4] + "…" + f"({len(secret)} chars)"


class _CaptureHandler(logging.Handler):
    """Keeps the text of every record: formatted message, args and exception text."""

    def __init__(self, target: SecretGuard) -> None:
        super().__init__(logging.DEBUG)
        self._target = target
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            parts = [self.format(record), repr(record.args)]
            if record.exc_info and record.exc_info[1] is not None:
                parts.append("".join(traceback.format_exception(*record.exc_info)))
            if record.exc_text:
                parts.append(record.exc_text)
            if record.stack_info:
                parts.append(record.stack_info)
            self._target.add_text("\n".join(parts), f"log record on {record.name!r}")
        except Exception:  # a logging handler must never raise into the code under test
            self.handleError(record)


guard = SecretGuard()
"""The session's guard (module-level, so fixtures and helpers can reach it)."""


def register_secret(secret: str) -> None:
    """Register another key to search for (see :class:`SecretGuard`)."""
    guard.register_secret(secret)


def observe(*values: object, where: str = "observed") -> None:
    """Capture exceptions, reprs or dumped components for the end-of-session search."""
    guard.observe(*values, where=where)


# --------------------------------------------------------------------------- pytest hooks

_handler: _CaptureHandler | None = None
_original_is_enabled_for = logging.Logger.isEnabledFor
_original_call_handlers = logging.Logger.callHandlers


def _see_everything(self: logging.Logger, level: int) -> bool:
    # Every record is produced (logging.disable() still wins)...
    return not self.manager.disable >= level


def _deliver(self: logging.Logger, record: logging.LogRecord) -> None:
    # ...the guard sees it, and everyone else sees exactly what they saw before.
    if _handler is not None:
        _handler.handle(record)
    if _original_is_enabled_for(self, record.levelno):
        _original_call_handlers(self, record)


def pytest_configure(config: pytest.Config) -> None:
    global _handler
    _handler = _CaptureHandler(guard)
    logging.Logger.isEnabledFor = _see_everything  # type: ignore[method-assign]
    logging.Logger.callHandlers = _deliver  # type: ignore[method-assign]


def pytest_unconfigure(config: pytest.Config) -> None:
    global _handler
    logging.Logger.isEnabledFor = _original_is_enabled_for  # type: ignore[method-assign]
    logging.Logger.callHandlers = _original_call_handlers  # type: ignore[method-assign]
    _handler = None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    guard.current_test = item.nodeid


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        guard.add_text(report.longreprtext, f"failure report ({report.when})")
    for name, content in report.sections:
        guard.add_text(content, f"report section {name!r}")


@pytest.fixture
def secret_guard() -> SecretGuard:
    """The session's :class:`SecretGuard` (``observe``, ``register_secret``, ``find_in``)."""
    return guard


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    leaks = guard.leaks()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if not leaks:
        if reporter is not None and session.config.option.verbose > 0:
            reporter.write_line(
                f"secret guard: {guard.texts_seen} captured texts, no registered key found"
            )
        return
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if reporter is not None:
        reporter.section("secret guard: a test API key leaked", sep="!", red=True)
        for seen, secret in leaks[:50]:
            reporter.write_line(f"{_mask(secret)} in {seen.where} during {seen.test}")
        if len(leaks) > 50:
            reporter.write_line(f"... and {len(leaks) - 50} more")
