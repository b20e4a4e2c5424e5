"""Errors that say what to do (issue 12, item 9, core part)."""

from __future__ import annotations

import logging
import socket

import pytest

from memorysync_core import MemorySyncAPI, RecallResult, RetryPolicy, UserMemory
from memorysync_core.errors import APIConnectionError, ServerError
from shared.fake_server import FakeServer, Fault

from .conftest import API_KEY

NO_RETRY = RetryPolicy(attempts=1)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def test_a_connection_error_names_the_base_url_and_the_operation() -> None:
    base_url = closed_port_url()
    api = MemorySyncAPI(API_KEY, base_url=base_url)
    memory = UserMemory(api, user_id="u", surface="test", session_id="s", retry=NO_RETRY)
    try:
        with pytest.raises(APIConnectionError) as turn:
            await api.add_turn(user_id="u", text="I live in Oslo.")
        with pytest.raises(APIConnectionError) as cleared:
            await memory.clear()
        with pytest.raises(APIConnectionError) as saved:
            await memory.save("I live in Oslo.")
    finally:
        await api.aclose()
    for caught, operation in ((turn, "add a turn"), (cleared, "clear memories"), (saved, "save")):
        message = str(caught.value)
        assert message.startswith(f"could not {operation}"), message
        assert base_url in message, message
        assert not message.startswith("GET /org/projects"), message
        assert API_KEY not in message
    # The internal route stays available for diagnosis.
    assert turn.value.route == "/org/projects"


async def test_a_key_echoed_as_request_id_is_scrubbed(
    fake_server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    echo = {"x-request-id": f"req-{API_KEY}"}
    fake_server.set_default("/v1/memory/query", Fault.status(503, headers=echo))
    fake_server.set_default("/v1/memory/recall", Fault.status(503, headers=echo))
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    memory = UserMemory(api, user_id="u", surface="test", session_id="s", retry=NO_RETRY)
    try:
        with pytest.raises(ServerError) as caught:
            await api.query(user_id="u", prompt="p")
        with caplog.at_level(logging.DEBUG, logger="memorysync"):
            assert await memory.recall("Where do I live?", timeout=5.0) is RecallResult.EMPTY
    finally:
        await api.aclose()
    assert caught.value.request_id == "req-***"
    for text in (repr(caught.value), str(caught.value), caplog.text):
        assert API_KEY not in text
    assert "req-***" in caplog.text
