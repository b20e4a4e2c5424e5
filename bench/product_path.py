"""The product path (issue 31): chatty conversations through the AutoGen adapter.

Drives the adapter exactly as a user does: for every session a real ``AssistantAgent``
with ``autogen_ext``'s ``ReplayChatCompletionClient`` (the scripted assistant replies)
and a ``MemorySyncMemory`` with its own ``session_id``; ``capture_exchange`` after every
run; a served ``memorysync-local`` (``memorysync-local serve`` in a child process, over
loopback, default settings unless ``--embedder`` is given: recall by meaning with the
shipped model; ``--embedder none`` is word recall). The questions are asked in a
later session, each as a run of the agent, and scored on the memory block that reached
the model (the ``memorysync_...`` message in the replay client's input):

- **hit**: every part of the answer is in the block (case-insensitive);
- **stale**: the block shows an old value as current (a line holding an old value and no
  word saying it is over: "quit", "left", "not", "instead", ...);
- **junk**: stored memories that hold none of the user's fact words, per 100 user turns
  (counted after the conversations, before the questions);
- **stored**: the answer is in the user's current memories at all (the ceiling of recall).

The data (``bench/data/product_path/``) was written for this benchmark: ten users, thirty
sessions, ninety questions in seven bands. The split is per user and was fixed before
any tuning; ``holdout`` is run once, at the end.

    python -m bench.product_path                       # dev, default server
    python -m bench.product_path --embedder model2vec:PATH
    python -m bench.product_path --split holdout        # once, at the end
    python -m bench.product_path --misses              # print each miss (dev)
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import logging
import os
import re
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import httpx

from ._server import _free_port, stop_child, wait_until_listening

DATA = Path(__file__).resolve().parent / "data" / "product_path" / "conversations.txt"
SPLITS = ("dev", "holdout")
BANDS = (
    "same words",
    "other word forms",
    "paraphrase",
    "implied",
    "temporal",
    "update",
    "two facts",
)
API_KEY = "ms_product_path_key"
TENANT = "local"
SYSTEM = "You are a friendly personal assistant."
# Words that mark a line as about a past or ended state, so an old value in it is not stale.
PAST = re.compile(
    r"\b(quit|left|leaving|not|no longer|any ?more|gave up|stopped|switched|instead|sold|"
    r"used to|formerly|previously|moved out|earlier|superseded|until)\b",
    re.IGNORECASE,
)
BLOCK_SOURCE = re.compile(r"memorysync_[0-9a-f]{16}")
GOAL_HIT, GOAL_STALE, GOAL_JUNK = 0.9, 0, 2.0


@dataclass(frozen=True)
class Question:
    """One question: its band, text, answer groups (all needed, any alternative) and
    the old values that must not be shown as current."""

    band: str
    text: str
    answers: tuple[tuple[str, ...], ...]
    stale: tuple[str, ...] = ()


@dataclass
class User:
    """One user: three sessions of (user message, assistant reply) and the questions."""

    name: str
    split: str = "dev"
    facts: tuple[str, ...] = ()
    sessions: list[list[tuple[str, str]]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def _month(today: date, step: int) -> tuple[str, ...]:
    """The month ``step`` months from ``today``: its name and ``YYYY-MM``."""
    index = today.year * 12 + today.month - 1 + step
    year, month = divmod(index, 12)
    return calendar.month_name[month + 1], f"{year}-{month + 1:02d}"


def expand(alternative: str, today: date) -> tuple[str, ...]:
    """``{last_month}``, ``{next_month}``, ``{this_year}`` filled in from ``today``."""
    fills = {
        "{last_month}": _month(today, -1),
        "{next_month}": _month(today, 1),
        "{this_year}": (str(today.year),),
    }
    for key, values in fills.items():
        if key in alternative:
            return tuple(alternative.replace(key, value) for value in values)
    return (alternative,)


def load(path: Path = DATA, today: date | None = None) -> list[User]:
    """The users of ``conversations.txt`` (see the data folder's README)."""
    today = today or datetime.now(timezone.utc).date()
    users: list[User] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, rest = line.partition(":")
        rest = rest.strip()
        if key == "user":
            users.append(User(rest))
        elif key == "split":
            users[-1].split = rest
        elif key == "facts":
            users[-1].facts = tuple(w.strip().lower() for w in rest.split(","))
        elif key == "session":
            users[-1].sessions.append([])
        elif key == "U":
            users[-1].sessions[-1].append((rest, ""))
        elif key == "A":
            said, _ = users[-1].sessions[-1][-1]
            users[-1].sessions[-1][-1] = (said, rest)
        elif line.startswith("Q "):
            band, text, answers, *extra = (part.strip() for part in line[2:].split("|"))
            groups = tuple(
                tuple(a for alt in group.split("/") for a in expand(alt.strip(), today))
                for group in answers.split(";")
            )
            stale: tuple[str, ...] = ()
            if extra:
                stale = tuple(s.strip() for s in extra[0].removeprefix("stale:").split("/"))
            users[-1].questions.append(Question(band, text, groups, stale))
        else:
            raise ValueError(f"unreadable line in {path}: {line!r}")
    return users


def hit(block: str, question: Question) -> bool:
    """Every answer group has an alternative in ``block``."""
    low = block.lower()
    return all(any(alt.lower() in low for alt in group) for group in question.answers)


def stale(block: str, question: Question) -> bool:
    """A line of ``block`` shows an old value with no word saying it is over."""
    for line in block.lower().splitlines():
        if any(old.lower() in line for old in question.stale) and not PAST.search(line):
            return True
    return False


def is_junk(text: str, facts: Sequence[str]) -> bool:
    """A stored memory holding none of the user's fact words (at a word's start)."""
    return not any(re.search(r"\b" + re.escape(word), text, re.IGNORECASE) for word in facts)


class Served:
    """``memorysync-local serve`` in a child process on a free loopback port."""

    def __init__(self, embedder: str | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="memorysync-product-path-")
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "memorysync_local._cli", "serve"]
        command += ["--db", str(Path(self._tmp.name) / "product.db"), "--port", str(self.port)]
        command += ["--log-level", "warning"]
        if embedder is not None:  # None: the server as installed, no option
            command += ["--embedder", embedder]
        env = {**os.environ, "MEMORYSYNC_LOCAL_API_KEYS": API_KEY}
        self._process = subprocess.Popen(command, env=env)
        wait_until_listening(self._process, self.base_url, timeout=300)

    def memories(self, user: str) -> list[dict[str, Any]]:
        """Every stored memory of ``user`` (``/x-local/v1/memories``)."""
        answer = httpx.get(
            self.base_url + "/x-local/v1/memories",
            params={"user_id": user},
            headers={"X-API-Key": API_KEY},
            timeout=30,
        )
        answer.raise_for_status()
        return list(answer.json()["memories"])

    def stop(self) -> None:
        stop_child(self._process)
        self._tmp.cleanup()


def _memory(served: Served, user: str, session: str) -> Any:
    from autogen_memorysync import MemorySyncMemory

    return MemorySyncMemory(
        user_id=user, session_id=session, api_key=API_KEY, base_url=served.base_url
    )


def _agent(replies: Sequence[str], memory: Any) -> tuple[Any, Any]:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_ext.models.replay import ReplayChatCompletionClient

    client = ReplayChatCompletionClient(list(replies))
    agent = AssistantAgent("assistant", model_client=client, memory=[memory], system_message=SYSTEM)
    return agent, client


async def converse(served: Served, user: User) -> None:
    """Every session of ``user``: a run per message, ``capture_exchange`` after each."""
    for number, session in enumerate(user.sessions, 1):
        memory = _memory(served, user.name, f"chat-{number}")
        agent, _ = _agent([reply for _, reply in session], memory)
        for said, _ in session:
            result = await agent.run(task=said)
            memory.capture_exchange(said, str(result.messages[-1].content))
        await memory.flush()
        await memory.close()


def _last_block(client: Any) -> str:
    from autogen_core.models import UserMessage

    messages = client.create_calls[-1]["messages"]
    blocks = [
        str(m.content)
        for m in messages
        if isinstance(m, UserMessage) and BLOCK_SOURCE.fullmatch(m.source or "")
    ]
    return blocks[-1] if blocks else ""


async def ask(served: Served, user: User) -> list[tuple[Question, str]]:
    """The questions in a later session; each one's block as the model received it."""
    memory = _memory(served, user.name, "questions")
    replies = ["Let me look at what you told me."] * len(user.questions)
    agent, client = _agent(replies, memory)
    asked = []
    for question in user.questions:
        result = await agent.run(task=question.text)
        asked.append((question, _last_block(client)))
        memory.capture_exchange(question.text, str(result.messages[-1].content))
        await memory.flush()  # the next question comes after this exchange is stored
    await memory.close()
    return asked


@dataclass
class Tally:
    """Per band: questions, hits, stale blocks, answers present in current memories."""

    questions: int = 0
    hits: int = 0
    stale: int = 0
    stored: int = 0


@dataclass
class Result:
    """One run: per-band tallies, junk memories and user turns, and the misses."""

    bands: dict[str, Tally]
    junk: int
    turns: int
    memories: int
    misses: list[str]
    junk_texts: list[str]


def _current(memory: dict[str, Any]) -> bool:
    return str(memory.get("state", "current")) == "current"


async def measure(users: Sequence[User], embedder: str | None = None) -> Result:
    """Converse, count junk, ask: the whole product path for ``users``."""
    bands = {band: Tally() for band in BANDS}
    misses: list[str] = []
    junk_texts: list[str] = []
    junk = turns = stored_count = 0
    served = Served(embedder)
    try:
        for user in users:
            await converse(served, user)
            stored = served.memories(user.name)
            stored_count += len(stored)
            turns += sum(len(session) for session in user.sessions)
            for memory in stored:
                if is_junk(str(memory["text"]), user.facts):
                    junk += 1
                    junk_texts.append(f"{user.name}: {memory['text']}")
            current = "\n".join(str(m["text"]) for m in stored if _current(m))
            for question, block in await ask(served, user):
                tally = bands[question.band]
                tally.questions += 1
                found = hit(block, question)
                tally.hits += found
                tally.stale += stale(block, question)
                in_store = hit(current, question)
                tally.stored += in_store
                if not found or stale(block, question):
                    shown = block.split("<user_memories>")[-1].replace("\n", " / ")
                    where = "" if in_store else " (answer not stored)"
                    misses.append(
                        f"[{question.band}] {user.name}: {question.text}{where} -> {shown[:300]}"
                    )
    finally:
        served.stop()
    return Result(bands, junk, turns, stored_count, misses, junk_texts)


def table(result: Result, title: str) -> str:
    """The markdown table: per band hit, stale, stored; junk per 100 user turns."""
    lines = [
        f"**{title}**",
        "",
        "| band | questions | hit | stale | answer stored |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    total = Tally()
    for band, tally in result.bands.items():
        if not tally.questions:
            continue
        total.questions += tally.questions
        total.hits += tally.hits
        total.stale += tally.stale
        total.stored += tally.stored
        lines.append(
            f"| {band} | {tally.questions} | {tally.hits / tally.questions:.2f} | "
            f"{tally.stale} | {tally.stored / tally.questions:.2f} |"
        )
    lines.append(
        f"| **all** | {total.questions} | **{total.hits / max(total.questions, 1):.2f}** | "
        f"**{total.stale}** | {total.stored / max(total.questions, 1):.2f} |"
    )
    per_100 = 100 * result.junk / max(result.turns, 1)
    lines += [
        "",
        f"Junk: {result.junk} of {result.memories} stored memories, "
        f"**{per_100:.1f} per 100 user turns** ({result.turns} turns).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.product_path", description=__doc__)
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="dev")
    parser.add_argument(
        "--embedder",
        action="append",
        default=[],
        metavar="SPEC",
        help="run with `memorysync-local serve --embedder SPEC` too (repeatable); "
        "the default server (recall by meaning with the shipped model) is always run; "
        "`--embedder none` is word recall",
    )
    parser.add_argument("--no-default", action="store_true", help="skip the default server")
    parser.add_argument("--misses", action="store_true", help="print every miss and junk")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    logging.basicConfig(level=logging.ERROR)
    users = [u for u in load(args.data) if args.split in ("all", u.split)]
    specs: list[str | None] = [*([] if args.no_default else [None]), *args.embedder]
    sessions = sum(len(u.sessions) for u in users)
    print(
        f"{len(users)} users, {sessions} sessions, "
        f"{sum(len(u.questions) for u in users)} questions ({args.split})"
    )
    for spec in specs:
        result = asyncio.run(measure(users, spec))
        name = "default server (shipped model)" if spec is None else f"--embedder {spec}"
        print()
        print(table(result, f"{args.split}, {name}"))
        if args.misses:
            print("\nmisses:")
            print("\n".join(f"- {m}" for m in result.misses))
            print("\njunk:")
            print("\n".join(f"- {j}" for j in result.junk_texts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
