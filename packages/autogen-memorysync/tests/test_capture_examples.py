"""Issue 31's examples through the AutoGen adapter against a served memorysync-local.

Each conversation runs as a user runs one: a real ``AssistantAgent`` with a
``ReplayChatCompletionClient``, ``MemorySyncMemory`` with a ``session_id``, and
``capture_exchange`` after the run. What the server stored is read back through its
list route: the memory holds the user's own words, and an update leaves only the new
value current.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import date, datetime, timedelta
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.replay import ReplayChatCompletionClient

from autogen_memorysync import MemorySyncMemory
from shared.local_server import client_for, stored_history

REPLY = "Thanks for telling me, that's good to know."

Converse = Callable[..., Any]


@pytest.fixture
async def converse(served_local_server: Any) -> AsyncIterator[Converse]:
    """``await converse(user, *messages, session=...)``: one session, a run per message."""
    made: list[MemorySyncMemory] = []

    async def run(user: str, *messages: str, session: str = "chat") -> ReplayChatCompletionClient:
        memory = MemorySyncMemory(
            user_id=user,
            session_id=session,
            api_key=served_local_server.api_key,
            base_url=served_local_server.base_url,
        )
        made.append(memory)
        client = ReplayChatCompletionClient([REPLY] * len(messages))
        agent = AssistantAgent("assistant", model_client=client, memory=[memory])
        for message in messages:
            result = await agent.run(task=message)
            assert memory.capture_exchange(message, str(result.messages[-1].content))
        report = await memory.flush()
        assert report.delivered == 2 * len(messages)
        return client

    yield run
    for memory in made:
        await memory.close()


async def current(server: Any, user: str) -> list[str]:
    """The user's current memories' texts, through the list route."""
    async with client_for(server) as http:
        answer = await http.get(f"/v1/memory/{server.tenant_id}/{user}/list")
    assert answer.status_code == 200, answer.text
    return [str(m["text"]) for m in answer.json()["memories"]]


def holding(texts: list[str], words: str) -> list[str]:
    return [t for t in texts if words.casefold() in t.casefold()]


async def test_facts_inside_chatty_turns_are_kept_in_the_users_words(
    served_local_server: Any, converse: Converse
) -> None:
    await converse(
        "dana",
        "Hey! Long week. Btw I finally moved to Toronto last month, and my sister Ana is "
        "visiting in May.",
        "Ugh work has been crazy, I'm a nurse in the ER so nights are rough",
        "Oh and my cat Miso turned 3 yesterday, we got her a tiny cake.",
        "Also my favourite band is Radiohead, have you heard their new album?",
        "I signed up for a pottery class that starts in March",
        "we're driving to my parents' place in Ohio over Thanksgiving",
        "haha thanks, I'll check it out later",
    )
    texts = await current(served_local_server, "dana")

    for said in (
        "finally moved to Toronto last month",
        "sister Ana is visiting in May",
        "a nurse in the ER",
        "cat Miso turned 3 yesterday",
        "favourite band is Radiohead",
        "signed up for a pottery class that starts in March",
        "driving to my parents' place in Ohio over Thanksgiving",
    ):
        assert len(holding(texts, said)) == 1, (said, texts)
    assert holding(texts, "Finallies") == []
    assert holding(texts, "new album") == []  # the question is not a fact
    assert holding(texts, "check it out") == []  # a passing remark is not a fact
    assert holding(texts, "Ana")[0] != holding(texts, "Toronto")[0]  # one memory per clause


async def test_dates_said_with_a_fact_are_resolved_against_when_it_was_said(
    served_local_server: Any, converse: Converse
) -> None:
    await converse("eli", "I moved to Toronto last month, the winters are brutal.")
    async with client_for(served_local_server) as http:
        listed = await http.get(f"/v1/memory/{served_local_server.tenant_id}/eli/list")
    (memory,) = listed.json()["memories"]
    said = datetime.fromisoformat(str(memory["said_at"]).replace("Z", "+00:00")).date()
    month = date(said.year, said.month, 1) - timedelta(days=1)

    assert memory["text"] == (
        f"Moved to Toronto last month ({month:%B %Y}), the winters are brutal"
    )


async def test_a_fact_in_a_chatty_turn_reaches_the_model_in_a_later_session(
    served_local_server: Any, converse: Converse, kit: Any
) -> None:
    await converse("fay", "Oh and my cat Miso turned 3 yesterday, we got her a tiny cake.")
    client = await converse("fay", "How old is my cat?", session="later")

    (block,) = kit.blocks(kit.model_inputs(client)[0])
    assert "Miso turned 3" in str(block.content)


@pytest.mark.parametrize(
    "update",
    [
        "I live in Vancouver now.",
        "Now I live in Vancouver.",
        "We moved to Vancouver.",
        "Actually, I'm living in Vancouver these days.",
        "Update: I'm in Vancouver now.",
        "we relocated again, now in Vancouver",
    ],
)
async def test_a_move_however_phrased_leaves_only_the_new_city_current(
    served_local_server: Any, converse: Converse, update: str
) -> None:
    await converse("gus", "I moved to Toronto.", session="one")
    assert holding(await current(served_local_server, "gus"), "Toronto")

    await converse("gus", update, session="two")

    texts = await current(served_local_server, "gus")
    assert len(holding(texts, "Vancouver")) == 1, texts
    assert holding(texts, "Toronto") == []


@pytest.mark.parametrize(
    ("before", "change", "now"),
    [
        ("I drink coffee every morning.", "I gave up coffee", "gave up coffee"),
        ("I work at a bank in the city.", "I left the bank and joined a startup", "a startup"),
        ("I'm doing keto.", "I'm not doing keto any more, just low sugar now", "low sugar"),
        ("I play tennis on Sundays.", "I switched from tennis to golf", "to golf"),
    ],
)
async def test_a_change_of_job_or_habit_closes_the_old_fact(
    served_local_server: Any, converse: Converse, before: str, change: str, now: str
) -> None:
    await converse("hal", before, session="one")
    (old,) = await current(served_local_server, "hal")
    await converse("hal", change, session="two")

    texts = await current(served_local_server, "hal")
    assert old not in texts
    assert len(holding(texts, now)) == 1, texts


async def test_the_same_fact_said_three_times_is_one_current_memory(
    served_local_server: Any, converse: Converse
) -> None:
    await converse("ivy", *["I'm allergic to peanuts."] * 3)
    await converse("ivy", "I'm allergic to peanuts.", session="other")

    texts = await current(served_local_server, "ivy")
    history = stored_history(served_local_server, served_local_server.tenant_id, "ivy")
    # One memory per session that said it: clearing one session keeps the other's.
    assert holding(texts, "peanuts") == ["Allergic to peanuts"] * 2
    assert [h["content"] for h in history if h["role"] == "user"] == [
        "I'm allergic to peanuts."
    ] * 4
