"""The public surface and the secrecy of keys."""

from __future__ import annotations

import logging
from importlib.metadata import version
from typing import Any

import pytest

import memorysync_local
from memorysync_local import embedded
from memorysync_local._plans import Caller, KeyRing
from shared.local_server import client_for


def test_all_is_exactly_the_public_surface() -> None:
    assert sorted(memorysync_local.__all__) == sorted(
        [
            "DEV_API_KEY",
            "EMBEDDED_BASE_URL",
            "EmbeddedServer",
            "ExplicitExtractor",
            "Extraction",
            "Extractor",
            "ExtractorFeatures",
            "ExtractorSetting",
            "Fact",
            "Plan",
            "RelatedMemory",
            "Retraction",
            "RuleBasedExtractor",
            "ServedServer",
            "TextOnlyExtractor",
            "__version__",
            "create_app",
            "embedded",
            "serve_in_thread",
        ]
    )
    public = {n for n in dir(memorysync_local) if not n.startswith("_")} | {"__version__"}
    assert public == set(memorysync_local.__all__)
    assert memorysync_local.__version__ == version("memorysync-local")


def test_embedded_gives_everything_an_adapter_needs() -> None:
    with embedded() as srv:
        assert srv.api_key == "ms_local_dev_key"
        assert srv.base_url == "http://memorysync.local"
        assert srv.tenant_id == "local"
        assert srv.db_path == ":memory:"
        assert type(srv.transport).__name__ == "ASGITransport"


def test_no_repr_shows_a_key(served_local_server: Any) -> None:
    with embedded(api_key="ms_secret_embedded") as srv:
        texts = [repr(srv), repr(srv.app.state.keys)]
    texts += [repr(served_local_server)]
    ring = KeyRing({"ms_secret_ring": "t"}, (), {})
    texts.append(repr(ring))
    caller = ring.lookup("ms_secret_ring")
    assert isinstance(caller, Caller)
    texts.append(repr(caller))
    assert not any("ms_secret" in t or "ms_local_dev_key" in t for t in texts)


async def test_no_log_line_or_error_carries_the_key(
    local_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with client_for(local_server, "ms_typo_secret") as wrong:
        answer = await wrong.get("/org/projects")
    async with client_for(local_server) as c:
        await c.post("/v1/memory/add_turn", json={"tenant_id": "x", "user_id": "u", "text": "hi"})
    assert "ms_typo_secret" not in answer.text
    assert "ms_typo_secret" not in caplog.text
    assert local_server.api_key not in caplog.text
