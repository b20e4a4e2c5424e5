"""Recall's dialog rules read a speaker given as data, never a label in the text (issue 34).

Through the real server (embedded and over HTTP; on PostgreSQL with
``MEMORYSYNC_TEST_BACKEND=postgres``): memories without a ``speaker`` field are ranked
by their words alone, whatever their text starts with; a speaker given as data is
matched by its name as written; a turn's neighbours are read by its position in its
session, whatever ids other writers took in between.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from memorysync_local._plans import Caller
from memorysync_local._storage.records import NewMemory
from memorysync_local._storage.target import open_storage
from shared.local_server import client_for


async def add(
    client: httpx.AsyncClient,
    text: str,
    *,
    user: str = "ana",
    session: str | None = None,
    speaker: str | None = None,
) -> int:
    body: dict[str, Any] = {"text": text, "verbatim": True}
    if session is not None:
        body["session_id"] = session
    if speaker is not None:
        body["speaker"] = speaker
    answer = await client.post("/memory/add", json=body, headers={"X-End-User-ID": user})
    assert answer.status_code == 200, answer.text
    return int(answer.json()["id"])


async def recall(client: httpx.AsyncClient, prompt: str, *, user: str = "ana") -> list[Any]:
    asked = {"tenant_id": "local", "user_id": user, "prompt": prompt, "k": 5}
    answer = await client.post("/v1/memory/recall", json=asked)
    assert answer.status_code == 200, answer.text
    return [(m["value"], m["score"]) for m in answer.json()["memories"]]


def texts(found: list[Any]) -> list[str]:
    return [text for text, _ in found]


@pytest.mark.parametrize("label", ["Note", "Reminder", "TODO", "Update"])
async def test_a_label_in_the_text_is_no_speaker_its_memories_borrow_nothing(
    client: httpx.AsyncClient, label: str
) -> None:
    # Read as a speaker, "TODO" made the third memory the same speaker's turn two on
    # from the match: it was recalled for the passport, matching no word of it.
    said = (
        f"{label}: renew the passport",
        "Lunch with Bob went well",
        f"{label}: water the plants",
    )
    for text in said:
        await add(client, text, session="s1")
    for text in said:
        await add(client, text, user="bea")  # no session: no neighbour to read
    found = await recall(client, "When does my passport expire?")
    assert texts(found) == [f"{label}: renew the passport"]
    assert found == await recall(client, "When does my passport expire?", user="bea")


@pytest.mark.parametrize("served", [False, True], ids=["embedded", "served"])
async def test_a_fact_after_a_question_is_not_taken_for_its_answer_without_speakers(
    make_local_server: Callable[..., Any], served: bool
) -> None:
    # Word recall alone: what is checked is that the dialog rule borrows nothing.
    server = make_local_server(served=served, embedder="none")
    async with client_for(server) as client:
        for text in ("Did I tell you about my allergies?", "Bought new running shoes"):
            await add(client, text, session="s1")
        assert texts(await recall(client, "What about my allergies?")) == [
            "Did I tell you about my allergies?"
        ]


async def test_a_label_naming_a_prompt_word_raises_nothing(client: httpx.AsyncClient) -> None:
    # The two match "lake" and "summer" alike and have as many words: the newest wins
    # the tie. Read as a speaker named in the prompt, "Summer:" raised the first.
    await add(client, "Summer: barbecue by the lake")
    await add(client, "Swam in the lake in summer")
    assert texts(await recall(client, "What did I do at the lake last summer?"))[0] == (
        "Swam in the lake in summer"
    )


async def test_a_speaker_named_summer_is_not_named_by_last_summer(
    client: httpx.AsyncClient,
) -> None:
    await add(client, "Had a barbecue by the lake", speaker="Summer", session="s1")
    await add(client, "Swam in the lake", speaker="Bob", session="s1")
    # "summer" is a word here, not her name: the two match "lake" alike, the newest wins.
    assert texts(await recall(client, "What did I do at the lake last summer?"))[0] == (
        "Swam in the lake"
    )
    # Her name as written: what she said first.
    assert texts(await recall(client, "What did Summer do at the lake?"))[0] == (
        "Had a barbecue by the lake"
    )


@pytest.mark.parametrize("written", ["Émile", "E\u0301mile"], ids=["composed", "decomposed"])
async def test_a_non_ascii_speaker_given_as_data_is_named(
    client: httpx.AsyncClient, written: str
) -> None:
    await add(client, "I cooked a ratatouille", speaker=written, session="s1")
    await add(client, "I cooked pasta", speaker="Bob", session="s1")
    found = await client.post(
        "/v1/memory/recall",
        json={"tenant_id": "local", "user_id": "ana", "prompt": "What did Émile cook?"},
    )
    first = found.json()["memories"][0]
    assert (first["value"], first["speaker"]) == ("I cooked a ratatouille", "Émile")


async def test_a_blank_speaker_is_refused(client: httpx.AsyncClient) -> None:
    answer = await client.post(
        "/memory/add",
        json={"text": "hi", "verbatim": True, "speaker": "  "},
        headers={"X-End-User-ID": "ana"},
    )
    assert answer.status_code == 422
    assert "speaker" in answer.text


LIBRARY = ("What kind of books do you keep in your library?", "Mostly Tolkien, and poetry")


async def test_neighbours_are_read_by_position_in_the_session_not_by_id(
    client: httpx.AsyncClient,
) -> None:
    # Another session's turns, and another user's, take the ids between the question
    # and its answer: by id, the answer had no neighbour and was not recalled.
    await add(client, LIBRARY[0], speaker="Melanie", session="books")
    await add(client, "We went camping", speaker="Melanie", session="trip")
    await add(client, "Hello there", speaker="Bob", user="bea", session="books")
    await add(client, LIBRARY[1], speaker="Caroline", session="books")
    assert texts(await recall(client, "What books are in the library?")) == list(LIBRARY)


async def test_the_facts_of_a_transcript_turn_keep_the_name_its_payload_carries(
    client: httpx.AsyncClient,
) -> None:
    appended = await client.post(
        "/v1/history/append",
        json={
            "tenant_id": "local",
            "user_id": "ana",
            "session_id": "s1",
            "turns": [
                {"role": "user", "content": "I work as a nurse.", "payload": {"name": "Ana"}},
                {"role": "user", "content": "I live in Lisbon.", "payload": {"id": 3}},
            ],
        },
    )
    assert appended.status_code == 200, appended.text
    listed = await client.get("/v1/memory/local/ana/list")
    speakers = {m["text"]: m.get("speaker") for m in listed.json()["memories"]}
    assert speakers == {"Works as a nurse": "Ana", "Lives in Lisbon": None}


def test_concurrent_writers_give_each_session_contiguous_positions(
    make_local_server: Callable[..., Any],
) -> None:
    server = make_local_server()
    caller = Caller("k", "local", False, None)

    def write(session: str) -> None:
        for number in range(10):
            server.store.add_memory(
                caller,
                user_id="ana",
                text=f"turn {number} of {session}",
                source="t",
                tags=None,
                importance=None,
                session_id=session,
                metadata=None,
                client_ref=None,
                verbatim=True,
                speaker="Ana",
            )

    writers = [threading.Thread(target=write, args=(f"s{n}",)) for n in range(4)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    with server.store.db.read() as session:
        ids = session.memories.newest_ids("local", "ana", 100)
        lines = session.memories.lines(ids, "local", "ana")
    by_session: dict[str, list[tuple[int, str]]] = {}
    for line in sorted(lines):  # by id
        assert line.session_id is not None
        assert line.position is not None
        by_session.setdefault(line.session_id, []).append((line.position, line.text))
    assert len(by_session) == 4
    for name, places in by_session.items():
        # Written in order by one thread: positions 1..10 in that order, whatever the ids.
        assert places == [(n + 1, f"turn {n} of {name}") for n in range(10)]


async def test_turns_beside_each_other_by_position_survive_interleaved_writes(
    make_local_server: Callable[..., Any],
) -> None:
    server = make_local_server(embedder="none")  # the dialog rule alone, no meaning
    caller = Caller("k", "local", False, None)
    # Two sessions written turn by turn, alternately: every id neighbour is the other's.
    sessions = {
        "books": LIBRARY,
        "pets": ("Do you have any pets at home?", "Two cats, Luna and Sol"),
    }
    for index in range(2):
        for name, said in sessions.items():
            server.store.add_memory(
                caller,
                user_id="ana",
                text=said[index],
                source="t",
                tags=None,
                importance=None,
                session_id=name,
                metadata=None,
                client_ref=None,
                verbatim=True,
                speaker=("Melanie", "Caroline")[index],
            )
    async with client_for(server) as client:
        assert texts(await recall(client, "What books are in the library?")) == list(LIBRARY)
        assert texts(await recall(client, "Any pets at home?")) == list(sessions["pets"])


def test_a_file_an_older_server_made_gets_the_columns_at_open(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")

    def turn(text: str, speaker: str | None) -> NewMemory:
        return NewMemory(
            "local", "ana", text, "other", None, "s1", {}, "add", None, None, "x", "x", None,
            speaker,
        )  # fmt: skip

    storage = open_storage(path)
    with storage.write() as session:
        session.memories.insert(turn("old turn", None))
    storage.close()
    with closing(sqlite3.connect(path)) as conn, conn:  # as an older server left it
        conn.execute("DROP INDEX memories_in_session")
        conn.execute("ALTER TABLE memories DROP COLUMN speaker")
        conn.execute("ALTER TABLE memories DROP COLUMN session_position")
    storage = open_storage(path)
    try:
        with storage.write() as session:
            new = session.memories.insert(turn("new turn", "Ana"))
        with storage.read() as session:
            lines = session.memories.lines([1, new], "local", "ana")
    finally:
        storage.close()
    assert [(m.text, m.speaker, m.position) for m in lines] == [
        ("old turn", None, None),
        ("new turn", "Ana", 1),
    ]
