"""The opt-in LLM extractor over real HTTP against a scripted OpenAI-compatible endpoint
(the test kit's fake server): updates, deletes, and the rule extractor taking over on
malformed JSON, a timeout or a 429, each with a WARNING."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from memorysync_local import embedded
from memorysync_local._extraction.llm import OpenAIExtractor, parse_extractor_spec
from shared.fake_server import FakeServer, Fault
from shared.openai_chat import CHAT_ROUTE, chat_answer, chat_base_url, decisions

KEY = "sk-test-llm-extractor-key"


@pytest.fixture
def server(fake_server: FakeServer, tmp_path: Any) -> Iterator[Any]:
    extractor = OpenAIExtractor(base_url=chat_base_url(fake_server), api_key=KEY, timeout=2.0)
    with embedded(str(tmp_path / "llm.db"), extractor=extractor) as local:
        yield local
    extractor.close()


def tell(server: Any, text: str) -> dict[str, Any]:
    answer: dict[str, Any] = server.store.add_turn(
        _caller(server), user_id="ana", text=text, role="user", speaker=None,
        occurred_at=None, metadata=None, source="test",
    )  # fmt: skip
    return answer


def _caller(server: Any) -> Any:
    return server.app.state.keys.lookup(server.api_key)


def listed(server: Any, *, history: bool = False) -> list[dict[str, Any]]:
    from memorysync_local._storage.records import ReadWindow

    items, _ = server.store.list_memories("local", "ana", 0, 0, ReadWindow(history=history))
    return items


def test_an_update_supersedes_the_memory_the_model_names(
    server: Any, fake_server: FakeServer
) -> None:
    fake_server.script(
        CHAT_ROUTE, [decisions({"event": "ADD", "id": None, "text": "Lives in Lisbon"})]
    )
    tell(server, "I live in Lisbon.")
    [lisbon] = listed(server)
    fake_server.script(
        CHAT_ROUTE,
        [decisions({"event": "UPDATE", "id": lisbon["memory_id"], "text": "Lives in Toronto"})],
    )
    assert tell(server, "I moved to Toronto.")["processing_status"] == "completed"
    assert [m["text"] for m in listed(server)] == ["Lives in Toronto"]
    old = [m for m in listed(server, history=True) if m["state"] == "superseded"]
    assert [m["memory_id"] for m in old] == [lisbon["memory_id"]]
    request = fake_server.requests_to(CHAT_ROUTE)[-1]
    assert f"id {lisbon['memory_id']}: Lives in Lisbon" in request.json["messages"][1]["content"]
    assert request.json["response_format"]["type"] == "json_schema"
    assert request.headers["authorization"] == f"Bearer {KEY}"


def test_a_delete_closes_the_memory_and_adds_none(server: Any, fake_server: FakeServer) -> None:
    fake_server.script(CHAT_ROUTE, [decisions({"event": "ADD", "id": None, "text": "Eats meat"})])
    tell(server, "I eat meat.")
    [meat] = listed(server)
    fake_server.script(
        CHAT_ROUTE, [decisions({"event": "DELETE", "id": meat["memory_id"], "text": None})]
    )
    tell(server, "I stopped eating meat.")
    assert listed(server) == []
    [closed] = listed(server, history=True)
    assert (closed["state"], closed["superseded_by"]) == ("superseded", None)


def test_an_id_the_model_was_not_shown_changes_nothing(
    server: Any, fake_server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_server.script(
        CHAT_ROUTE, [decisions({"event": "ADD", "id": None, "text": "Lives in Lisbon"})]
    )
    tell(server, "I live in Lisbon.")
    fake_server.script(CHAT_ROUTE, [decisions({"event": "DELETE", "id": 999, "text": None})])
    with caplog.at_level(logging.WARNING, logger="memorysync.local"):
        tell(server, "Forget it.")
    assert [m["text"] for m in listed(server)] == ["Lives in Lisbon"]
    assert "named memory 999, not one it was shown" in caplog.text


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (chat_answer("not json at all"), "the answer is not the decisions JSON"),
        (chat_answer(json.dumps({"decisions": "ADD"})), "'decisions' is not a list"),
        (Fault.malformed_json(), "the answer is not the decisions JSON"),
        (Fault.rate_limited(), "answered 429"),
        (Fault.hang(), "timed out"),
    ],
    ids=["prose", "wrong-shape", "malformed-json", "429", "timeout"],
)
def test_the_rule_extractor_takes_over_with_a_warning(
    server: Any,
    fake_server: FakeServer,
    caplog: pytest.LogCaptureFixture,
    fault: Fault,
    reason: str,
) -> None:
    fake_server.script(CHAT_ROUTE, [fault])
    with caplog.at_level(logging.WARNING, logger="memorysync.local"):
        tell(server, "I live in Lisbon.")
    assert [m["text"] for m in listed(server)] == ["Lives in Lisbon"]
    [warning] = [r for r in caplog.records if "LLM extractor failed" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert reason in warning.getMessage()
    assert KEY not in caplog.text


def test_the_key_never_shows() -> None:
    extractor = OpenAIExtractor("gpt-test", api_key=KEY)
    assert KEY not in repr(extractor)
    extractor.close()


@pytest.mark.parametrize(
    ("spec", "parsed"), [("rules", ("rules", None)), ("openai:gpt-x", ("openai", "gpt-x"))]
)
def test_extractor_specs(spec: str, parsed: tuple[str, str | None]) -> None:
    assert parse_extractor_spec(spec) == parsed


def test_a_bad_extractor_spec_names_the_choices() -> None:
    with pytest.raises(ValueError, match="'llama' is not one of rules, openai"):
        parse_extractor_spec("llama")


def test_embedded_takes_the_spec_and_reads_the_endpoint_from_the_environment(
    fake_server: FakeServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", chat_base_url(fake_server))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fake_server.script(CHAT_ROUTE, [decisions({"event": "ADD", "id": None, "text": "Likes tea"})])
    with embedded(str(tmp_path / "spec.db"), extractor="openai:gpt-test") as local:
        tell(local, "I like tea.")
        assert [m["text"] for m in listed(local)] == ["Likes tea"]
        local.store.extractor.close()
    assert fake_server.requests_to(CHAT_ROUTE)[0].json["model"] == "gpt-test"


def test_serve_refuses_an_unknown_extractor_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    from memorysync_local._cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--db", ":memory:", "--extractor", "llama"])
    assert exit_info.value.code == 2
    assert "extractor 'llama' is not one of rules, openai[:MODEL]" in capsys.readouterr().err


def test_in_the_background_the_model_is_called_once_per_turn_and_never_for_filler(
    fake_server: FakeServer, tmp_path: Any
) -> None:
    extractor = OpenAIExtractor(base_url=chat_base_url(fake_server), api_key=KEY, timeout=2.0)
    fake_server.set_default(
        CHAT_ROUTE, decisions({"event": "ADD", "id": None, "text": "Likes green tea"})
    )
    with embedded(str(tmp_path / "bg.db"), extractor=extractor, async_extraction=True) as local:
        assert tell(local, "I like green tea.")["processing_status"] == "distilling"
        assert tell(local, "ok, thanks!")["processing_status"] == "skipped_low_value"
        assert local.store.wait_for_extraction(60)
        assert [m["text"] for m in listed(local)] == ["Likes green tea"]
    extractor.close()
    assert len(fake_server.requests_to(CHAT_ROUTE)) == 1
