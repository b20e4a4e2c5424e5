"""UserMemory against the fake server: validation, save, search, clear by scope."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from memorysync_core import (
    ClearResult,
    ContextRenderer,
    MemorySyncAPI,
    SaveOutcome,
    ServerError,
    UserMemory,
    ValidationError,
)
from shared.fake_server import FakeServer, Fault
from shared.local_server import stored_memories

from .conftest import API_KEY, FAST_RETRY


@pytest.fixture
async def memory(fake_server: FakeServer) -> AsyncIterator[UserMemory]:
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    mem = UserMemory(api, user_id="ann", session_id="support", surface="autogen", retry=FAST_RETRY)
    yield mem
    await mem.aclose()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"user_id": ""}, "user_id"),
        ({"session_id": " "}, "session_id"),
        ({"top_k": 0}, "top_k"),
        ({"recall_timeout": 0}, "recall_timeout"),
        ({"recall_timeout": float("inf")}, "recall_timeout"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs: dict[str, object], name: str) -> None:
    args: dict[str, object] = {"user_id": "u", "session_id": "s", "surface": "ag2", **kwargs}
    with pytest.raises(ValueError, match=name):
        UserMemory(MemorySyncAPI(API_KEY, base_url="http://127.0.0.1:9"), **args)  # type: ignore[arg-type]


def test_scope_is_surface_and_session(memory: UserMemory) -> None:
    assert memory.scope == "autogen::support"
    assert memory.capture("user", "hi").scope == "autogen::support"
    assert API_KEY not in repr(memory)


async def test_save_reports_kept_skipped_and_already_ingested(
    fake_server: FakeServer, memory: UserMemory
) -> None:
    first = await memory.save("Ann is vegetarian.")
    again = await memory.save("Ann is vegetarian.")
    fake_server.script(
        "/memory/add",
        [Fault.json({"status": "skipped", "reason": "no_high_value_content", "memory_ids": []})],
    )
    skipped = await memory.save("ok thanks")
    assert first == SaveOutcome(kept=True, memory_ids=(1,), reason=None)
    assert again == SaveOutcome(kept=True, memory_ids=(1,), reason="already_ingested")
    assert skipped == SaveOutcome(kept=False, memory_ids=(), reason="no_high_value_content")
    assert "Saved" in first.describe()
    assert "Already" in again.describe()
    assert "Not saved" in skipped.describe()
    assert len(fake_server.memories) == 1


async def test_explicit_calls_raise_after_bounded_retries(
    fake_server: FakeServer, memory: UserMemory
) -> None:
    fake_server.set_default("/v1/memory/add_turn", Fault.status(503))
    with pytest.raises(ServerError):
        await memory.add_user_turn("I live in Lisbon")
    bodies = [r.json for r in fake_server.requests_to("/v1/memory/add_turn")]
    assert len(bodies) == FAST_RETRY.attempts
    assert all(body == bodies[0] for body in bodies)  # same speaker and occurred_at
    fake_server.set_default("/memory/add", Fault.status(422))
    with pytest.raises(ValidationError):
        await memory.save("x")
    assert len(fake_server.requests_to("/memory/add")) == 1


async def test_search_filters_by_min_score(fake_server: FakeServer, memory: UserMemory) -> None:
    fake_server.seed_memory("ann", "Lives in Lisbon", score=0.9)
    fake_server.seed_memory("ann", "Has a cat", score=0.2)
    found = await memory.search("where", min_score=0.5)
    assert [m.text for m in found] == ["Lives in Lisbon"]
    assert fake_server.requests_to("/v1/memory/query")[0].json["k"] == memory.top_k


async def test_search_drops_what_the_renderers_min_score_drops_unless_told_otherwise(
    fake_server: FakeServer,
) -> None:
    fake_server.seed_memory("ann", "Lives in Lisbon", score=0.9)
    fake_server.seed_memory("ann", "Has a cat", score=0.2)
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    memory = UserMemory(
        api, user_id="ann", session_id="s", surface="ag2", renderer=ContextRenderer(min_score=0.5)
    )
    assert [m.text for m in await memory.search("where")] == ["Lives in Lisbon"]
    everything = await memory.search("where", min_score=0.0)
    assert sorted(m.text for m in everything) == ["Has a cat", "Lives in Lisbon"]
    await memory.aclose()


async def test_recall_renders_with_the_memory_renderer(fake_server: FakeServer) -> None:
    fake_server.seed_memory("ann", "Lives in {Lisbon} 100%", score=0.9)
    fake_server.seed_memory("ann", "Has a cat", score=0.2)
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    memory = UserMemory(
        api,
        user_id="ann",
        session_id="s",
        surface="ag2",
        renderer=ContextRenderer(template="Known: {context}", min_score=0.5),
    )
    result = await memory.recall("where")
    assert result.block == "Known: - Lives in {Lisbon} 100%"
    assert [m.text for m in result.memories] == ["Lives in {Lisbon} 100%"]
    await memory.aclose()


async def test_clear_session_forgets_only_this_sessions_memories_and_transcript(
    fake_server: FakeServer, memory: UserMemory
) -> None:
    mine_nested = fake_server.seed_memory("ann", "mine", session_id="autogen::support")
    other_session = fake_server.seed_memory("ann", "other", session_id="autogen::other")
    other_user = fake_server.seed_memory("bob", "bob's", session_id="autogen::support")
    fake_server.memories.append(  # the older, flat metadata shape
        {
            "memory_id": 99,
            "user_id": "ann",
            "text": "flat",
            "source": "autogen",
            "created_at": "2026-01-01T00:00:00Z",
            "metadata": {"session_id": "autogen::support"},
            "score": 0.5,
            "client_ref": None,
            "derived_from": None,
        }
    )
    await memory.record_turns([memory.capture("user", "hello"), memory.capture("assistant", "hi")])
    result = await memory.clear("session")
    assert isinstance(result, ClearResult)
    assert set(result.deleted_memory_ids) >= {mine_nested, 99}
    assert other_session not in result.deleted_memory_ids
    assert len(result.deleted_turn_ids) == 2
    left = {m["memory_id"] for m in fake_server.memories}
    assert left == {other_session, other_user}
    assert fake_server.history == []
    forget = fake_server.requests_to("/memory/forget")
    assert all(r.headers["x-end-user-id"] == "ann" for r in forget)


async def test_clear_user_forgets_every_memory_of_the_user_only(
    fake_server: FakeServer, memory: UserMemory
) -> None:
    fake_server.seed_memory("ann", "a", session_id="autogen::support")
    fake_server.seed_memory("ann", "b", session_id="ag2::elsewhere")
    bob = fake_server.seed_memory("bob", "c", session_id="autogen::support")
    result = await memory.clear("user")
    assert len(result.deleted_memory_ids) == 2
    assert [m["memory_id"] for m in fake_server.memories] == [bob]
    deletes = fake_server.requests_to("/v1/history/delete")
    assert deletes[0].json["session_id"] == "autogen::support"


async def test_clear_rejects_an_unknown_scope(memory: UserMemory) -> None:
    with pytest.raises(ValueError, match="scope"):
        await memory.clear("everything")  # type: ignore[arg-type]


async def test_record_turns_refuses_turns_from_another_scope(memory: UserMemory) -> None:
    from memorysync_core.adapters import CapturedTurn

    stranger = CapturedTurn.capture("user", "x", scope="ag2::other")
    with pytest.raises(ValueError, match="ag2::other"):
        await memory.record_turns([stranger])


async def test_search_cuts_long_queries_and_refuses_a_bad_k(
    memory: UserMemory, fake_server: FakeServer
) -> None:
    await memory.search("where " * 5000)
    sent = fake_server.requests_to("/v1/memory/query")[-1].json
    assert len(sent["prompt"]) == 16_000
    assert sent["k"] == memory.top_k
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="k must be"):
            await memory.search("where do I live?", k=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="query must be"):
        await memory.search("  ")


async def test_recall_cuts_long_prompts_instead_of_losing_the_turn(
    memory: UserMemory, fake_server: FakeServer
) -> None:
    await memory.recall("tell me " * 5000)
    sent = fake_server.requests_to("/v1/memory/recall")[-1].json
    assert len(sent["prompt"]) == 16_000


CHATTER = "  Melanie: Haha, sounds good - see you at the pottery class on Friday!  "


async def test_a_verbatim_save_stores_the_text_exactly_as_given_where_extraction_keeps_nothing(
    served_local_server: Any,
) -> None:
    api = MemorySyncAPI(served_local_server.api_key, base_url=served_local_server.base_url)
    memory = UserMemory(api, user_id="ann", session_id="notes", surface="demo")
    try:
        extracted = await memory.save(CHATTER)
        kept = await memory.save(CHATTER, verbatim=True)  # same text, same session
        again = await memory.save(CHATTER, verbatim=True)
    finally:
        await memory.aclose()
    assert not extracted.kept  # the extractor finds no durable fact in chatter
    assert kept.kept
    assert again.memory_ids == kept.memory_ids  # recognised, not stored twice
    stored = stored_memories(served_local_server, served_local_server.tenant_id, "ann")
    assert [row["text"] for row in stored] == [CHATTER]  # not reworded, not even stripped


async def test_a_verbatim_text_over_the_limit_is_refused_before_anything_is_sent(
    fake_server: FakeServer, memory: UserMemory
) -> None:
    with pytest.raises(ValueError, match="at most 16000 characters"):
        await memory.save("word " * 4000, verbatim=True)
    with pytest.raises(ValueError, match="verbatim must be True or False"):
        await memory.save("A fact.", verbatim="yes")  # type: ignore[arg-type]
    assert fake_server.requests_to("/memory/add") == []
