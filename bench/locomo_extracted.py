"""LoCoMo through the default extractor (issue 31): the path an adapter's user takes.

``bench/locomo.py`` stores every turn verbatim (``"Speaker: text"``, one memory per
turn, through ``POST /memory/add`` with ``verbatim: true``): a path no adapter takes.
Here every turn goes through ``POST /v1/memory/add_turn`` as a user turn, its text as
the speaker wrote it, said at its session's date (``occurred_at``) and with its session
as ``session_id``: the rule extractor decides what becomes a memory (none, one per
clause, a change closing an older fact). A memory counts as its turn's (the memories a
turn adds are read back after it); the questions, splits, k and scoring are
``bench/locomo.py``'s, so the two tables sit side by side.

    python -m bench.locomo_extracted                 # word recall, both splits
    python -m bench.locomo_extracted --static PATH   # + hybrid with a model2vec folder
    python -m bench.locomo_extracted --split dev
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from .locomo import (
    API_KEY,
    DATA,
    KS,
    SPLITS,
    Conversation,
    ModeResult,
    Ranker,
    evaluate,
    load,
    static_embedder,
    table,
    times,
    word_app,
)


def extracted(make_app: Callable[[str], Any]) -> Ranker:
    """A ranker over memorysync-local: every turn through ``add_turn`` (the extractor)."""

    def ranker(conversation: Conversation) -> Callable[[str], list[str]]:
        tmp = tempfile.TemporaryDirectory(prefix="locomo-extracted-")
        app = make_app(str(Path(tmp.name) / "locomo.db"))
        client = TestClient(app)
        user = f"locomo-{conversation.sample_id}"
        headers = {"X-API-Key": API_KEY}
        listing = f"/v1/memory/local/{user}/list"
        turn_of: dict[int, str] = {}
        for dia_id, speaker, text in conversation.turns:
            session = dia_id.split(":")[0]
            said: dict[str, object] = {
                "tenant_id": "local",
                "user_id": user,
                "text": text,
                "role": "user",
                "speaker": speaker,
                "metadata": {"session_id": session},
            }
            if session in conversation.dates:
                said["occurred_at"] = conversation.dates[session]
            client.post("/v1/memory/add_turn", headers=headers, json=said).raise_for_status()
            newest = client.get(listing, headers=headers, params={"limit": 20})
            newest.raise_for_status()
            for memory in newest.json()["memories"]:
                turn_of.setdefault(int(memory["memory_id"]), dia_id)
        store = app.state.store
        ranker.stored += len(turn_of)  # type: ignore[attr-defined]

        def ask(prompt: str) -> list[str]:
            answer = client.post(
                "/v1/memory/recall",
                headers=headers,
                json={"tenant_id": "local", "user_id": user, "prompt": prompt, "k": max(KS)},
            )
            answer.raise_for_status()
            ranked: list[str] = []
            for found in answer.json().get("memories", []):
                dia_id = turn_of.get(int(found["memory_id"]))
                if dia_id is not None and dia_id not in ranked:
                    ranked.append(dia_id)  # a turn's clauses are one turn
            return ranked

        def close() -> None:
            store.close()
            tmp.cleanup()

        ask.close = close  # type: ignore[attr-defined]
        return ask

    ranker.stored = 0  # type: ignore[attr-defined]
    return ranker


def run_modes(
    conversations: Sequence[Conversation], embedders: Mapping[str, Any], *, word: bool = True
) -> tuple[list[ModeResult], dict[str, int]]:
    """Word recall and hybrid per embedder, every turn through the extractor; the
    memories each mode stored."""
    results: list[ModeResult] = []
    stored: dict[str, int] = {}
    modes = ({"word": None} if word else {}) | {f"hybrid ({n})": e for n, e in embedders.items()}
    for name, embedder in modes.items():
        started = time.perf_counter()
        ranker = extracted(word_app(embedder))
        results.append(evaluate(f"{name}, extracted", ranker, conversations))
        stored[name] = ranker.stored  # type: ignore[attr-defined]
        print(f"  {name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return results, stored


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.locomo_extracted")
    parser.add_argument("--static", help="a model2vec model folder: adds hybrid")
    parser.add_argument("--data", type=Path, default=DATA, help="locomo10.json's path")
    parser.add_argument("--no-word", action="store_true", help="leave out word recall")
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    args = parser.parse_args(argv)
    conversations = [c for c in load(args.data) if args.split in ("all", c.split)]
    embedders = {}
    if args.static:
        embedders[f"static {Path(args.static).name}"] = static_embedder(args.static)
    results, stored = run_modes(conversations, embedders, word=not args.no_word)
    turns = sum(len(c.turns) for c in conversations)
    print(
        f"{turns} turns through the default extractor; memories stored: "
        + ", ".join(f"{mode} {count}" for mode, count in stored.items())
    )
    for split in ("holdout", "dev"):
        if any(c.split == split for c in conversations):
            print()
            print(table(results, split))
    print()
    print("\n".join(f"- {line}" for line in times(results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
