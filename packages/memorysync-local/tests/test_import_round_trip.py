"""Export then import is a lossless round trip (issue 33 items 1 and 5).

Before: ``import_export()`` sent each fact through ``/memory/add``, so the server's
own wordings were refused as ``no_high_value_content`` (18 memories came back as 14),
supersession was decided again in import order ("Lives in Lisbon" ended current and
"Moved to Porto" superseded), and two equal turns without id, time or ``seq`` became
one. Now an import stores what was exported: the round trip is compared field by
field (every field but the ids, links compared by what they point to) through the
core, the command line and the official client's routes, on the suite's backend
(``MEMORYSYNC_TEST_BACKEND=postgres`` runs it on PostgreSQL).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memorysync_core import EXPORT_SCHEMA, MemorySyncAPI, UserMemory
from memorysync_local._cli import build_parser
from memorysync_local._cli.data_commands import run_data_command
from shared.local_server import stored_history

# Eighteen user turns, each one memory (the attack run's reproduction).
TURNS = [
    "I'm a software engineer.",
    "I don't eat meat.",
    "I'm 34.",
    "I have a dog named Rex.",
    "I live in Lisbon.",
    "I'm allergic to peanuts.",
    "I prefer window seats.",
    "My sister is Maria.",
    "I play the violin.",
    "I speak Portuguese.",
    "My favourite colour is green.",
    "I drive a Tesla.",
    "I work at Acme.",
    "I love hiking.",
    "My partner is Sam.",
    "I have a cat named Luna.",
    "I drink green tea every morning.",
    "I moved to Porto.",
]


def comparable(data: dict[str, Any]) -> dict[str, Any]:
    """An export without its ids, time of export and user: each memory's successor
    named by its text; what must be equal after a round trip."""
    texts = {m["memory_id"]: m["text"] for m in data["memories"]}
    memories = []
    for memory in data["memories"]:
        item = {k: v for k, v in memory.items() if k != "memory_id"}
        if "superseded_by" in item:
            item["superseded_by"] = texts.get(item["superseded_by"], item["superseded_by"])
        memories.append(item)
    transcripts = {
        session: [{k: v for k, v in turn.items() if k != "id"} for turn in turns]
        for session, turns in data["transcripts"].items()
    }
    return {
        "schema": data["schema"],
        "complete": data["complete"],
        "sessions": data["sessions"],
        "memories": sorted(memories, key=lambda m: json.dumps(m, sort_keys=True)),
        "transcripts": transcripts,
    }


def memory_of(srv: Any, user: str) -> tuple[MemorySyncAPI, UserMemory]:
    api = MemorySyncAPI(api_key=srv.api_key, base_url=srv.base_url, transport=srv.transport)
    return api, UserMemory(api, user_id=user, session_id="s", surface="autogen")


async def test_eighteen_recorded_turns_come_back_as_they_were_through_the_core(
    make_local_server: Callable[..., Any],
) -> None:
    srv = make_local_server()
    api, ana = memory_of(srv, "ana")
    _, bo = memory_of(srv, "bo")
    try:
        for text in TURNS:
            await ana.record_exchange(text, "Noted.")
        exported = await ana.export()
        assert len(exported["memories"]) == 18
        states = {m["text"]: m for m in exported["memories"]}
        porto = states["Moved to Porto"]["memory_id"]
        assert states["Lives in Lisbon"]["superseded_by"] == porto

        report = await bo.import_export(exported)
        assert report.verbatim is True
        assert (report.memories_created, report.memories_skipped) == (18, 0)
        assert (report.turns_created, report.turns_skipped) == (36, 0)
        assert report.skipped == ()
        imported = await bo.export()
        assert comparable(imported) == comparable(exported)
        again = {m["text"]: m for m in imported["memories"]}
        assert again["Lives in Lisbon"]["state"] == "superseded"
        assert again["Lives in Lisbon"]["superseded_by"] == again["Moved to Porto"]["memory_id"]
        assert again["Moved to Porto"]["state"] == "current"
        # Recall on the new user says where the user lives now.
        recalled = await api.recall(user_id="bo", prompt="Where do I live?", k=3)
        texts = [m["text"] for m in recalled["memories"]]
        assert "Moved to Porto" in texts
        assert "Lives in Lisbon" not in texts

        # Importing the same export again stores nothing.
        second = await bo.import_export(exported)
        assert (second.memories_created, second.turns_created) == (0, 0)
        assert (second.memories_skipped, second.turns_skipped) == (18, 36)
        assert comparable(await bo.export()) == comparable(exported)
    finally:
        await ana.aclose()
        await bo.aclose()


async def test_a_superseded_memory_whose_successor_was_deleted_keeps_its_state(
    make_local_server: Callable[..., Any],
) -> None:
    # A link to a memory the export does not hold: the state and its time are kept.
    srv = make_local_server()
    _, ana = memory_of(srv, "ana")
    try:
        for text in ("I live in Lisbon.", "I moved to Porto."):
            await ana.record_exchange(text, "Noted.")
        exported = await ana.export()
        porto = next(m for m in exported["memories"] if m["text"] == "Moved to Porto")
        exported["memories"].remove(porto)
        exported["transcripts"] = {}
        _, cy = memory_of(srv, "cy")
        await cy.import_export(exported)
        [lisbon] = (await cy.export())["memories"]
        [source] = exported["memories"]
        assert lisbon["state"] == "superseded"
        assert lisbon["valid_until"] == source["valid_until"]
        assert lisbon["superseded_by"] is None
        await cy.aclose()
    finally:
        await ana.aclose()


def export_with_equal_turns() -> dict[str, Any]:
    turn = {"role": "user", "content": "no id turn"}
    return {
        "schema": EXPORT_SCHEMA,
        "user_id": "ana",
        "memories": [],
        "transcripts": {"s1": [dict(turn), dict(turn), {"role": "assistant", "content": "ok"}]},
    }


async def test_equal_turns_without_id_time_or_seq_are_each_imported(
    make_local_server: Callable[..., Any],
) -> None:
    srv = make_local_server()
    _, ana = memory_of(srv, "ana")
    try:
        report = await ana.import_export(export_with_equal_turns())
        assert (report.turns_created, report.turns_skipped) == (3, 0)
        listed = await ana.api.list_history(user_id="ana", session_id="s1")
        assert [t["content"] for t in listed["items"]] == ["no id turn", "no id turn", "ok"]
        again = await ana.import_export(export_with_equal_turns())
        assert (again.turns_created, again.turns_skipped) == (0, 3)
    finally:
        await ana.aclose()


async def test_without_the_import_route_the_contract_routes_are_used_with_the_same_keys(
    fake_server: Any,
) -> None:
    # The hosted service has no /x-local/v1/import: facts go through /memory/add (not
    # verbatim), turns through /v1/history/append, equal turns with distinct keys.
    api = MemorySyncAPI(api_key="ms_test", base_url=fake_server.base_url)
    memory = UserMemory(api, user_id="ana", session_id="s", surface="autogen")
    try:
        data = export_with_equal_turns()
        data["memories"] = [{"memory_id": 7, "text": "Lives in Porto", "state": "current"}]
        report = await memory.import_export(data)
        assert report.verbatim is False
        assert (report.memories_created, report.turns_created) == (1, 3)
        [added] = fake_server.requests_to("/memory/add")
        assert added.json["text"] == "Lives in Porto"
        assert added.json["client_ref"].startswith("import:")
        [appended] = fake_server.requests_to("/v1/history/append")
        keys = [t["idempotency_key"] for t in appended.json["turns"]]
        assert len(set(keys)) == 3
        assert appended.json["extract"] is False
    finally:
        await memory.aclose()


def cli(*argv: str, stdin: str | None = None) -> tuple[int, Any]:
    out = io.StringIO()
    status = run_data_command(build_parser().parse_args([*argv, "--json"]), out)
    return status, json.loads(out.getvalue()) if out.getvalue() else None


async def test_the_command_line_round_trip_and_the_core_share_the_keys(
    make_local_server: Callable[..., Any], tmp_path: Path
) -> None:
    srv = make_local_server()
    _, ana = memory_of(srv, "ana")
    try:
        for text in TURNS[:6]:
            await ana.record_exchange(text, "Noted.")
        await ana.record_exchange("I moved to Porto.", "Noted.")
    finally:
        await ana.aclose()
    db = str(srv.db_path)
    file = tmp_path / "ana.json"
    assert cli("export", "ana", "--db", db, "-o", str(file))[0] == 0
    status, summary = cli("import", "bo", str(file), "--db", db)
    assert status == 0
    assert summary == {
        "user_id": "bo", "memories_created": 7, "memories_skipped": 0,
        "turns_created": 14, "turns_skipped": 0,
    }  # fmt: skip
    exported = json.loads(file.read_text("utf-8"))
    again = tmp_path / "bo.json"
    assert cli("export", "bo", "--db", db, "-o", str(again))[0] == 0
    assert comparable(json.loads(again.read_text("utf-8"))) == comparable(exported)
    # The CLI's keys are the core's: the core importing the same file stores nothing.
    _, bo = memory_of(srv, "bo")
    try:
        report = await bo.import_export(exported)
        assert (report.memories_created, report.turns_created) == (0, 0)
        assert (report.memories_skipped, report.turns_skipped) == (7, 14)
    finally:
        await bo.aclose()
    assert cli("import", "bo", str(file), "--db", db)[1]["memories_skipped"] == 7


def test_the_command_line_refuses_a_file_that_is_not_an_export(
    make_local_server: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    srv = make_local_server()
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "something else"}', "utf-8")
    status, _ = cli("import", "bo", str(bad), "--db", str(srv.db_path))
    assert status == 2
    assert "not a MemorySync export" in capsys.readouterr().err


def without(items: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    kept = [{k: v for k, v in item.items() if k not in names} for item in items]
    return sorted(kept, key=lambda item: json.dumps(item, sort_keys=True))


async def test_what_the_official_client_wrote_reads_back_the_same_from_the_new_user(
    make_local_server: Callable[..., Any],
) -> None:
    memorysync = pytest.importorskip("memorysync", minversion="1.10.1")
    srv = make_local_server()

    def official(user: str) -> Any:
        return memorysync.AsyncMemorySyncClient(
            srv.api_key, srv.base_url, end_user_id=user, transport=srv.transport
        )

    ana, bo = official("ana"), official("bo")
    _, core_ana = memory_of(srv, "ana")
    _, core_bo = memory_of(srv, "bo")
    sessions = ("autogen::s1", "ag2::support")
    try:
        for text, when in (("I live in Lisbon.", "03-01"), ("I moved to Porto.", "04-01")):
            await ana.add_turn(
                tenant_id="local", user_id="ana", text=text, session_id=sessions[0],
                occurred_at=f"2026-{when}T10:00:00Z", source="autogen",
            )  # fmt: skip
        await ana.add(
            "I always book aisle seats.", tags=["travel"], importance=0.7, session_id="s2",
            metadata={"channel": "web"}, source="app",
        )  # fmt: skip
        await ana.append_history(
            tenant_id="local", user_id="ana", session_id=sessions[1], source="ag2",
            turns=[
                {"role": "user", "content": "I work as a nurse.", "seq": 1,
                 "occurred_at": "2026-05-01T09:00:00Z", "payload": {"name": "ana"}},
                {"role": "assistant", "content": "Thanks for sharing.", "seq": 2},
            ],
        )  # fmt: skip
        report = await core_bo.import_export(await core_ana.export())
        assert report.verbatim is True
        assert report.skipped == ()

        source, copy = await ana.export_all(), await bo.export_all()
        assert len(source.memories) == 4
        assert without(copy.memories, "id") == without(source.memories, "id")
        listed = [
            (await c.list_memories(tenant_id="local", user_id=u, limit=0))["memories"]
            for c, u in ((ana, "ana"), (bo, "bo"))
        ]
        assert without(listed[1], "memory_id") == without(listed[0], "memory_id")
        assert "Lives in Lisbon" not in [m["text"] for m in listed[1]]  # superseded
        for session in sessions[1:]:  # (add_turn writes facts, not transcript turns)
            turns = [
                (await c.list_history(tenant_id="local", user_id=u, session_id=session))["items"]
                for c, u in ((ana, "ana"), (bo, "bo"))
            ]
            assert turns[0]
            assert [{k: v for k, v in t.items() if k != "id"} for t in turns[1]] == [
                {k: v for k, v in t.items() if k != "id"} for t in turns[0]
            ]
        recalled = await bo.recall(tenant_id="local", user_id="bo", prompt="Where do I live?")
        assert recalled["memories"][0]["value"] == "Moved to Porto"
    finally:
        for client in (ana, bo):
            await client.aclose()
        await core_ana.aclose()
        await core_bo.aclose()


async def test_a_large_export_goes_in_calls_of_100_each_one_add_of_the_plan(
    make_local_server: Callable[..., Any],
) -> None:
    from memorysync_local import Plan

    srv = make_local_server(plans={"ms_local_dev_key": Plan("free", 3)})
    _, ana = memory_of(srv, "ana")
    try:
        data = export_with_equal_turns()
        data["transcripts"] = {"s1": [{"role": "user", "content": f"turn {n}"} for n in range(250)]}
        data["memories"] = [{"text": f"Likes colour {n}", "kind": "preference"} for n in range(5)]
        report = await ana.import_export(data)  # 1 call of memories, 3 of turns: 4 adds
        assert (report.memories_created, report.turns_created) == (5, 200)
        assert report.turns_skipped == 50
        assert {s.reason for s in report.skipped} == {"plan_limit_reached"}
        # (Over a free plan's limit reads come back empty: the file is read directly.)
        stored = stored_history(srv, "local", "ana", "s1")
        assert [t["content"] for t in stored] == [f"turn {n}" for n in range(200)]
    finally:
        await ana.aclose()


def test_the_command_line_reads_an_export_from_standard_input(
    make_local_server: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    srv = make_local_server()
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(export_with_equal_turns())))
    status, summary = cli("import", "bo", "-", "--db", str(srv.db_path))
    assert status == 0
    assert (summary["turns_created"], summary["turns_skipped"]) == (3, 0)


async def test_long_turns_are_sent_in_calls_the_server_accepts(
    make_local_server: Callable[..., Any],
) -> None:
    # 100 turns of 16,000 four-byte characters and a 60 kB payload each: one call of
    # 100 would be 12 MB, over the server's 8 MiB body limit (413).
    srv = make_local_server()
    _, ana = memory_of(srv, "ana")
    try:
        turn = {"role": "user", "content": "😀" * 16_000, "payload": {"blob": "x" * 60_000}}
        data = export_with_equal_turns()
        data["transcripts"] = {"s1": [dict(turn, seq=n) for n in range(100)]}
        report = await ana.import_export(data)
        assert (report.turns_created, report.turns_skipped) == (100, 0)
        assert len(stored_history(srv, "local", "ana", "s1")) == 100
    finally:
        await ana.aclose()
