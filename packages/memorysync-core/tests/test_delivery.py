"""Retries and the delivery queue: same keys on every attempt, one write per turn."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import pytest

from memorysync_core import (
    APIConnectionError,
    AuthError,
    DeliveryReport,
    InsufficientStorageError,
    MemorySyncAPI,
    NotFoundError,
    RateLimitError,
    ResponseFormatError,
    RetryPolicy,
    ServerError,
    UserMemory,
    ValidationError,
)
from memorysync_core._delivery.queue import DeliveryQueue
from memorysync_core._wire.retry import call_with_retries
from memorysync_core.adapters import CapturedTurn
from shared.fake_server import FakeServer, Fault

from .conftest import API_KEY, FAST_RETRY

APPEND = "/v1/history/append"


def make_memory(fake_server: FakeServer, retry: RetryPolicy = FAST_RETRY) -> UserMemory:
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="t", source="ag2")
    return UserMemory(api, user_id="u", session_id="s", surface="ag2", retry=retry)


def queue_for(memory: UserMemory, **kwargs: object) -> DeliveryQueue:
    async def deliver(turns: Sequence[CapturedTurn]) -> None:
        # One attempt per call: the queue owns the retrying.
        await memory.api.append_history(
            user_id=memory.user_id,
            session_id=memory.scope,
            turns=[item for t in turns for item in t.history_items()],
            source=memory.surface,
        )

    kwargs.setdefault("policy", FAST_RETRY)
    return DeliveryQueue(deliver, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- policy


def test_the_policy_retries_transient_failures_only() -> None:
    policy = RetryPolicy()
    assert policy.is_retryable(APIConnectionError("x"))
    assert policy.is_retryable(ServerError("x", status_code=503))
    assert policy.is_retryable(RateLimitError("x"))
    assert policy.is_retryable(ResponseFormatError("x"))
    for error in (
        ValidationError("x", status_code=422),
        AuthError("x", status_code=401),
        NotFoundError("x", status_code=404),
        ValueError("x"),
    ):
        assert not policy.is_retryable(error)


def test_a_429_asking_to_wait_past_the_cap_is_an_exhausted_quota_and_not_retried() -> None:
    policy = RetryPolicy(max_retry_after=30.0)
    assert policy.is_retryable(RateLimitError("x", retry_after=30.0))
    assert not policy.is_retryable(RateLimitError("x", retry_after=86_400.0))


def test_backoff_grows_is_capped_and_honours_retry_after_up_to_its_cap() -> None:
    policy = RetryPolicy(base_delay=0.25, max_delay=8.0, max_retry_after=30.0, jitter=0.0)
    error = ServerError("x", status_code=500)
    assert [policy.delay(n, error) for n in (1, 2, 3, 4, 10)] == [0.25, 0.5, 1.0, 2.0, 8.0]
    assert policy.delay(1, RateLimitError("x", retry_after=12.0)) == 12.0
    assert policy.delay(1, RateLimitError("x", retry_after=3600.0)) == 30.0
    jittered = RetryPolicy(base_delay=1.0, jitter=0.25)
    assert all(0.75 <= jittered.delay(1, error) <= 1.25 for _ in range(50))


@pytest.mark.parametrize(
    "kwargs", [{"attempts": 0}, {"base_delay": -1}, {"jitter": 2}, {"max_delay": float("nan")}]
)
def test_bad_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


async def test_call_with_retries_stops_after_the_attempts_and_raises_the_last_error() -> None:
    calls = 0

    async def failing() -> None:
        nonlocal calls
        calls += 1
        raise ServerError(f"fail {calls}", status_code=503)

    with pytest.raises(ServerError, match="fail 3"):
        await call_with_retries(failing, FAST_RETRY)
    assert calls == 3


async def test_call_with_retries_never_retries_a_validation_error() -> None:
    calls = 0

    async def refused() -> None:
        nonlocal calls
        calls += 1
        raise ValidationError("bad", status_code=422)

    with pytest.raises(ValidationError):
        await call_with_retries(refused, FAST_RETRY, attempts=5)
    assert calls == 1


async def test_explicit_record_turns_retries_with_the_same_keys(fake_server: FakeServer) -> None:
    fake_server.script(APPEND, [Fault.status(503), Fault.reset()])
    memory = make_memory(fake_server)
    turns = [memory.capture("user", "I live in Lisbon."), memory.capture("assistant", "Noted.")]
    answer = await memory.record_turns(turns)
    assert [item["created"] for item in answer["items"]] == [True, True]
    bodies = [r.json for r in fake_server.requests_to(APPEND)]
    assert len(bodies) == 3
    assert bodies[0] == bodies[1] == bodies[2]
    assert [t["idempotency_key"] for t in bodies[0]["turns"]] == [t.idempotency_key for t in turns]
    assert len(fake_server.accepted_turns) == 2
    await memory.aclose()


async def test_a_retry_after_the_write_landed_is_not_a_second_row(fake_server: FakeServer) -> None:
    # The first attempt is stored but its answer is lost: the resend is recognised.
    memory = make_memory(fake_server)
    turn = memory.capture("user", "I live in Lisbon.")
    await memory.record_turns([turn])
    again = await memory.record_turns([turn])
    assert again["items"][0]["created"] is False
    assert len(fake_server.accepted_turns) == 1
    repeat = await memory.record_turns([memory.capture("user", "I live in Lisbon.")])
    assert repeat["items"][0]["created"] is True
    await memory.aclose()


# ---------------------------------------------------------------------------- queue


async def test_the_queue_delivers_each_turn_once_through_failures(fake_server: FakeServer) -> None:
    fake_server.script(APPEND, [Fault.status(503), Fault.rate_limited(0), Fault.close()])
    memory = make_memory(fake_server)
    queue = queue_for(memory)
    turns = [memory.capture("user", f"fact {i}") for i in range(3)]
    assert all([queue.submit(turn) for turn in turns])
    assert (await queue.flush(timeout=10)).all_delivered
    attempts = fake_server.requests_to(APPEND)
    assert len(attempts) == 4
    keys = [[t["idempotency_key"] for t in r.json["turns"]] for r in attempts]
    assert keys == [[t.idempotency_key for t in turns]] * 4
    assert [t["content"] for t in fake_server.accepted_turns] == ["fact 0", "fact 1", "fact 2"]
    assert queue.pending == 0
    assert (await queue.aclose()).all_delivered
    await memory.aclose()


async def test_the_queue_batches_in_order_at_most_max_batch(fake_server: FakeServer) -> None:
    memory = make_memory(fake_server)
    queue = queue_for(memory, max_batch=2)
    turns = [memory.capture("user", f"t{i}") for i in range(5)]
    for turn in turns:
        queue.submit(turn)
    assert (await queue.flush(timeout=10)).all_delivered
    sizes = [len(r.json["turns"]) for r in fake_server.requests_to(APPEND)]
    assert all(size <= 2 for size in sizes)
    assert sum(sizes) == 5
    assert [t["content"] for t in fake_server.accepted_turns] == [f"t{i}" for i in range(5)]
    await queue.aclose()
    await memory.aclose()


async def test_a_422_drops_the_batch_without_retrying(
    fake_server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_server.script(APPEND, [Fault.status(422)])
    memory = make_memory(fake_server)
    queue = queue_for(memory)
    queue.submit(memory.capture("user", "my secret sentence"))
    with caplog.at_level(logging.DEBUG, logger="memorysync.delivery"):
        report = await queue.flush(timeout=10)
    assert report == DeliveryReport(refused=1, reasons=("ValidationError (status 422)",))
    assert len(fake_server.requests_to(APPEND)) == 1
    assert queue.dropped == 1
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "dropped 1 turns" in errors[0].getMessage()
    assert "422" in errors[0].getMessage()
    assert "my secret sentence" not in caplog.text
    await queue.aclose()
    await memory.aclose()


async def test_a_507_full_server_is_typed_and_never_retried(
    fake_server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 26 item 1: a full disk answered 503 "busy" and the queue retried it forever;
    # memorysync-local now answers 507, which lasts until space is freed: refused, once.
    assert not RetryPolicy().is_retryable(InsufficientStorageError("x", status_code=507))
    fake_server.set_default(APPEND, Fault.status(507))
    memory = make_memory(fake_server)
    with pytest.raises(InsufficientStorageError) as caught:
        await call_with_retries(
            lambda: memory.api.append_history(
                user_id="u", session_id="s", turns=[{"role": "user", "content": "hi"}]
            ),
            FAST_RETRY,
        )
    assert isinstance(caught.value, ServerError)  # code catching 5xx still catches it
    assert caught.value.status_code == 507
    assert len(fake_server.requests_to(APPEND)) == 1
    queue = queue_for(memory)
    queue.submit(memory.capture("user", "I live in Oslo."))
    with caplog.at_level(logging.DEBUG, logger="memorysync.delivery"):
        report = await queue.flush(timeout=10)
    assert report == DeliveryReport(refused=1, reasons=("InsufficientStorageError (status 507)",))
    assert len(fake_server.requests_to(APPEND)) == 2
    assert "507" in caplog.text
    await queue.aclose()
    await memory.aclose()


async def test_one_refused_turn_does_not_take_its_batch_with_it() -> None:
    memory = UserMemory(
        MemorySyncAPI(API_KEY, base_url="http://127.0.0.1:9"),
        user_id="ann",
        session_id="s",
        surface="ag2",
    )
    delivered: list[str] = []
    attempts: list[int] = []

    async def deliver(turns: Sequence[CapturedTurn]) -> None:
        attempts.append(len(turns))
        if any("\x00" in turn.text for turn in turns):
            raise ValidationError("turns.1.content: NUL", status_code=422)
        delivered.extend(turn.text for turn in turns)

    queue = DeliveryQueue(deliver, policy=FAST_RETRY, max_batch=100)
    texts = ["I live in Oslo.", "bad\x00turn", "Noted.", "I like tea.", "Sure."]
    for text in texts:
        queue.submit(memory.capture("user", text))
    report = await queue.flush(timeout=10)
    assert (report.delivered, report.refused, report.pending) == (4, 1, 0)
    assert delivered == ["I live in Oslo.", "Noted.", "I like tea.", "Sure."]
    assert queue.dropped == 1
    assert attempts[0] == 5  # one batch first; halves only after the refusal
    await queue.aclose()


async def test_flush_reports_the_undelivered_turns_while_the_server_stays_down(
    fake_server: FakeServer,
) -> None:
    fake_server.set_default(APPEND, Fault.status(503))
    memory = make_memory(fake_server)
    queue = queue_for(memory, policy=RetryPolicy(base_delay=0.01, max_delay=0.01, jitter=0))
    for i in range(3):
        queue.submit(memory.capture("user", f"t{i}"))
    await fake_server.wait_for_requests_async(3, APPEND)
    assert (await queue.flush(timeout=0.05)).pending == 3
    assert queue.pending == 3
    fake_server.set_default(APPEND, None)
    assert (await queue.flush(timeout=10)).all_delivered
    assert len(fake_server.accepted_turns) == 3
    await queue.aclose()
    await memory.aclose()


async def test_aclose_returns_the_undelivered_count_and_stops_the_worker(
    fake_server: FakeServer,
) -> None:
    fake_server.set_default(APPEND, Fault.status(500))
    memory = make_memory(fake_server)
    queue = queue_for(memory, policy=RetryPolicy(base_delay=0.01, max_delay=0.01, jitter=0))
    queue.submit(memory.capture("user", "t"))
    await fake_server.wait_for_requests_async(1, APPEND)
    assert (await queue.aclose(timeout=0.05)).pending == 1
    assert queue.submit(memory.capture("user", "late")) is False
    await memory.aclose()


async def test_aclose_stops_a_worker_whose_cancellation_was_swallowed() -> None:
    # asyncio.wait_for (up to 3.11) returns the request's answer, and drops the
    # cancellation, when both land together: the stress run hung here on a 500.
    attempts = 0
    first = asyncio.Event()

    async def deliver(turns: Sequence[CapturedTurn]) -> None:
        nonlocal attempts
        attempts += 1
        first.set()
        with contextlib.suppress(asyncio.CancelledError):  # swallowed, as in that race
            await asyncio.Event().wait()
        raise ServerError("server error", status_code=500)

    api = MemorySyncAPI(API_KEY, base_url="http://127.0.0.1:9", tenant_id="t")
    memory = UserMemory(api, user_id="u", session_id="s", surface="ag2")
    queue = DeliveryQueue(deliver, policy=RetryPolicy(base_delay=0.01, max_delay=0.01, jitter=0))
    queue.submit(memory.capture("user", "t"))
    await first.wait()
    report = await asyncio.wait_for(queue.aclose(timeout=0.01), 30)
    assert report.pending == 1
    assert attempts == 1  # no retry after the close
    await memory.aclose()


async def test_overflow_is_refused_and_logged(
    fake_server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    memory = make_memory(fake_server)
    queue = queue_for(memory, max_pending=2)
    with caplog.at_level(logging.WARNING, logger="memorysync.delivery"):
        accepted = [queue.submit(memory.capture("user", f"t{i}")) for i in range(3)]
    assert accepted == [True, True, False]
    assert queue.dropped == 1
    assert any("queue full" in r.getMessage() for r in caplog.records)
    report = await queue.flush(timeout=10)
    assert (report.delivered, report.refused, report.reasons) == (2, 1, ("queue full",))
    assert len(fake_server.accepted_turns) == 2
    await queue.aclose()
    await memory.aclose()


async def test_submit_never_waits_on_the_network(fake_server: FakeServer) -> None:
    fake_server.set_default(APPEND, Fault.hang())
    memory = make_memory(fake_server)
    queue = queue_for(memory)
    # The server never answers: a submit that waited on it would never return.
    for i in range(100):
        assert queue.submit(memory.capture("user", f"t{i}"))
    assert queue.pending == 100
    assert (await queue.aclose(timeout=0.01)).pending == 100
    await memory.aclose()


def test_bad_queue_bounds_are_refused() -> None:
    async def deliver(turns: Sequence[CapturedTurn]) -> None:
        return None

    with pytest.raises(ValueError, match="max_pending"):
        DeliveryQueue(deliver, max_pending=0)
    with pytest.raises(ValueError, match="max_batch"):
        DeliveryQueue(deliver, max_batch=101)
