"""PostgreSQL ranks exactly as SQLite does, on the labelled recall set.

Every scenario of the set (``tests/data/recall_{dev,holdout}.jsonl``, each user's own
facts then the ten unrelated ones) is told through ``add_turn`` to a server on SQLite
and to one on PostgreSQL, in the same order; then every question is asked of both
with ``k=5``, by words alone and fused with recall by meaning (a deterministic test
embedder: pgvector's vectors against SQLite's blobs, through the same in-memory
index). The two answers must be the same memories, in the same order, with the same
scores: the word index differs (FTS5 against a GIN-indexed ``tsvector``), the
candidates, term statistics and scores must not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.recall_quality import Scenario, load
from memorysync_local import embedded
from memorysync_local._recall.words import query_stems

KEY = "ms_same_ranking"


def _client(server: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=server.transport, base_url=server.base_url, headers={"X-API-Key": KEY}
    )


async def _answers(
    target: str, scenarios: list[Scenario], embedder: Any = None
) -> list[list[tuple[Any, ...]]]:
    answers: list[list[tuple[Any, ...]]] = []
    with embedded(target, api_key=KEY, embedder=embedder) as server:
        async with _client(server) as c:
            for scenario in scenarios:
                user = f"user-{scenario.name}"
                for turn in scenario.turns:
                    body = {"tenant_id": "local", "user_id": user, "text": turn, "source": "t"}
                    (await c.post("/v1/memory/add_turn", json=body)).raise_for_status()
            for scenario in scenarios:
                for case in scenario.cases:
                    body = {
                        "tenant_id": "local",
                        "user_id": f"user-{scenario.name}",
                        "prompt": case.question,
                        "k": 5,
                    }
                    found = (await c.post("/v1/memory/recall", json=body)).json()["memories"]
                    answers.append([(m["memory_id"], m["text"], m["score"]) for m in found])
    return answers


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
async def test_every_question_of_the_recall_set_gets_the_same_top_5_on_both_backends(
    tmp_path: Path, postgres_url: str, hash_embedder: Any, mode: str
) -> None:
    scenarios = load()
    assert sum(len(s.cases) for s in scenarios) >= 150
    embedder = hash_embedder if mode == "hybrid" else None
    on_sqlite = await _answers(str(tmp_path / "recall.db"), scenarios, embedder)
    on_postgres = await _answers(postgres_url, scenarios, embedder)
    # The set recalls, mostly (117 of 193 with exact Snowball stems, issue 34: derived
    # forms such as "allergies" / "allergic" are left to recall by meaning).
    assert sum(bool(answer) for answer in on_sqlite) >= 110
    different = [
        (case.question, sqlite, postgres)
        for case, sqlite, postgres in zip(
            (case for s in scenarios for case in s.cases), on_sqlite, on_postgres, strict=True
        )
        if sqlite != postgres
    ]
    assert different == []


@pytest.mark.parametrize("prompt", ["asthma", "Texas", "violins", "allergic?", "寿司"])
def test_word_forms_find_the_same_candidates_on_both_backends(
    tmp_path: Path, postgres_url: str, prompt: str
) -> None:
    facts = [
        "I have asthma.",
        "I grew up in Texas.",
        "My sister plays the violin.",
        "I am allergic to peanuts and have allergy shots.",
        "The text was long.",
        "我喜欢寿司和拉面。",
    ]
    found = []
    for target in (str(tmp_path / "forms.db"), postgres_url):
        with embedded(target, api_key=KEY) as server:
            for fact in facts:
                server.store.add_memory(
                    _caller(), user_id="ana", text=fact, source="t", tags=None,
                    importance=None, session_id=None, metadata=None, client_ref=None,
                    verbatim=True,
                )  # fmt: skip
            found.append(
                [
                    (m["memory_id"], m["score"])
                    for m in server.store.search("local", "ana", prompt, 5)
                ]
            )
    assert query_stems(prompt)
    assert found[0]
    assert found[0] == found[1]


def _caller() -> Any:
    from memorysync_local._plans import Caller

    return Caller("k", "local", False, None)
