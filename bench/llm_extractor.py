"""Item 15: what the opt-in LLM extractor costs per turn, against a scripted endpoint.

Each case of the knowledge-update set (``knowledge_updates.jsonl``) is replayed: the
user's 8 unrelated facts and first fact are stored by the rule extractor, then the
later turn goes through ``add_turn`` on a server whose extractor is
``OpenAIExtractor``, pointed at the test kit's fake server scripted to answer
``NONE``. Counted per turn: chat requests, and the prompt's size (system prompt,
related memories and the message) in characters, with tokens estimated as
characters / 4 (English text with a GPT tokenizer is about 4 characters a token;
the scripted endpoint counts nothing). The model's answer is one short JSON object.
The decisions themselves are the script's, so no quality figure is reported here.

    python -m bench.llm_extractor
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from ._stats import Section
from .knowledge_updates import TIMES, load

CHARS_PER_TOKEN = 4


def measure() -> dict[str, Any]:
    """Requests per turn and prompt sizes over every case's later turn."""
    from memorysync_local import embedded
    from memorysync_local._extraction.llm import OpenAIExtractor
    from shared.fake_server import FakeServer
    from shared.openai_chat import CHAT_ROUTE, chat_base_url, decisions

    cases, noise = load()
    sizes: list[int] = []
    related: list[int] = []
    with FakeServer() as chat, tempfile.TemporaryDirectory(prefix="llm-cost-") as tmp:
        chat.set_default(CHAT_ROUTE, decisions({"event": "NONE", "id": None, "text": None}))
        db = str(Path(tmp) / "cost.db")
        extractor = OpenAIExtractor(base_url=chat_base_url(chat), api_key="sk-bench-scripted")
        with embedded(db) as rules, embedded(db, extractor=extractor) as llm:
            for case in cases:
                user = f"user-{case.id}"
                for text in (*noise, *case.turns):
                    _tell(rules, user, text, TIMES[1])
                before = len(chat.requests_to(CHAT_ROUTE))
                _tell(llm, user, case.update, TIMES[2])
                sent = chat.requests_to(CHAT_ROUTE)[before:]
                for request in sent:
                    messages = request.json["messages"]
                    sizes.append(sum(len(m["content"]) for m in messages))
                    related.append(messages[1]["content"].count("\n- id "))
        extractor.close()
    return {
        "turns": len(cases),
        "requests": len(sizes),
        "chars_mean": statistics.fmean(sizes),
        "chars_max": max(sizes),
        "related_mean": statistics.fmean(related),
    }


def _tell(server: Any, user: str, text: str, when: str) -> None:
    caller = server.app.state.keys.lookup(server.api_key)
    server.store.add_turn(
        caller, user_id=user, text=text, role="user", speaker=None,
        occurred_at=when, metadata=None, source="bench",
    )  # fmt: skip


def table(found: dict[str, Any]) -> str:
    """The figures as markdown."""
    per_turn = found["requests"] / found["turns"]
    return "\n".join(
        [
            "| turns | chat requests per turn | memories shown per request (mean) "
            "| prompt chars (mean / max) | est. prompt tokens (mean / max) |",
            "| ---: | ---: | ---: | ---: | ---: |",
            f"| {found['turns']} | {per_turn:.2f} | {found['related_mean']:.1f} "
            f"| {found['chars_mean']:.0f} / {found['chars_max']} "
            f"| {found['chars_mean'] / CHARS_PER_TOKEN:.0f} / "
            f"{found['chars_max'] / CHARS_PER_TOKEN:.0f} |",
        ]
    )


def run(*, quick: bool = False) -> list[Section]:
    """Item 15 for ``python -m bench``."""
    del quick
    return [
        Section(
            title="15. LLM extractor: cost per turn (scripted OpenAI-compatible endpoint)",
            setup=(
                "Each knowledge-update case's later turn through `add_turn` with "
                "`OpenAIExtractor` against the test kit's scripted endpoint, after the "
                "user's 9 earlier facts; tokens estimated as characters / 4."
            ),
            markdown=table(measure()),
        )
    ]


def main() -> int:
    """Print the table."""
    print(table(measure()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
