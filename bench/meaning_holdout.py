"""Recall by meaning on the default server: right paraphrases found, look-alikes and
unrelated questions left empty (issue 34).

A file shaped ``{"paraphrase": [[memory, question], ...], "lookalike": [[memory,
question], ...], "unrelated_questions": [question, ...]}`` is evaluated on the server
a user gets (``create_app`` with the default embedder unless ``--embedder`` is given),
every memory stored verbatim through ``POST /memory/add`` and every question asked
through ``POST /v1/memory/recall`` with ``k=3``:

- **paraphrase hit@1 / hit@3**: every paraphrase and look-alike memory is stored for
  one user; each paraphrase question's own memory is first / among the three recalled;
- **look-alike wrong recalls**: each look-alike memory alone for a user of its own, its
  question asked: the number of memories recalled, summed over the pairs (goal 0);
- **unrelated**: memories recalled per unrelated question, for the one user holding
  everything (the file's questions; ``bench/cosine_floor.py``'s when it has none).

``--split NAME`` reads the file's ``NAME`` key first (``bench/chatty_pairs.json`` holds
``dev`` and ``holdout`` lists of ``[turn, question]``: paraphrases only). A folder as
``--file`` runs every ``.json`` file in it. Default: ``bench/data/meaning_holdout/``,
the held-out set, run once, after every choice was made on dev data:

    python -m bench.meaning_holdout
    python -m bench.meaning_holdout --file bench/data/meaning_dev/pairs.json
    python -m bench.meaning_holdout --file bench/chatty_pairs.json --split dev
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from .cosine_floor import UNRELATED

HERE = Path(__file__).resolve().parent
HOLDOUT = HERE / "data" / "meaning_holdout"
API_KEY = "ms_meaning_holdout_key"
K = 3


@dataclass
class Pairs:
    """One evaluation's data (see the module docstring)."""

    paraphrase: list[tuple[str, str]]
    lookalike: list[tuple[str, str]] = field(default_factory=list)
    unrelated: list[str] = field(default_factory=list)


@dataclass
class Result:
    """What one evaluation measured, and what went wrong, for ``--misses``."""

    hit1: float
    hit3: float
    lookalike_recalled: int
    lookalike_pairs_wrong: int
    unrelated_per_question: float
    misses: list[str]


def load(path: Path, split: str | None = None) -> Pairs:
    """The pairs of a file (its ``split`` key first, if given)."""
    data: Any = json.loads(path.read_text(encoding="utf-8"))
    if split is not None:
        data = data[split]
    if isinstance(data, list):
        data = {"paraphrase": data}
    return Pairs(
        paraphrase=[(str(m), str(q)) for m, q in data.get("paraphrase", [])],
        lookalike=[(str(m), str(q)) for m, q in data.get("lookalike", [])],
        unrelated=[str(q) for q in data.get("unrelated_questions", [])] or list(UNRELATED),
    )


def evaluate(pairs: Pairs, embedder: Any) -> Result:
    """The three figures on a fresh server (a temporary database)."""
    from memorysync_local import create_app

    misses: list[str] = []
    with tempfile.TemporaryDirectory(prefix="meaning-") as tmp:
        app = create_app(str(Path(tmp) / "m.db"), api_keys={API_KEY: "local"}, embedder=embedder)
        with TestClient(app, headers={"X-API-Key": API_KEY}) as client:

            def keep(user: str, texts: list[str]) -> None:
                for text in texts:
                    client.post(
                        "/memory/add",
                        headers={"X-End-User-Id": user},
                        json={"text": text, "verbatim": True},
                    ).raise_for_status()

            def recall(user: str, prompt: str) -> list[str]:
                answer = client.post(
                    "/v1/memory/recall",
                    json={"tenant_id": "local", "user_id": user, "prompt": prompt, "k": K},
                )
                answer.raise_for_status()
                return [str(m["value"]) for m in answer.json()["memories"]]

            keep("one", [m for m, _ in pairs.paraphrase] + [m for m, _ in pairs.lookalike])
            hit1 = hit3 = 0
            for memory, question in pairs.paraphrase:
                got = recall("one", question)
                hit1 += bool(got) and got[0] == memory
                hit3 += memory in got
                if memory not in got:
                    misses.append(f"paraphrase missed: {question!r} -> {got} (wanted {memory!r})")
            recalled = wrong = 0
            for i, (memory, question) in enumerate(pairs.lookalike):
                keep(f"alone-{i}", [memory])
                got = recall(f"alone-{i}", question)
                recalled += len(got)
                wrong += bool(got)
                if got:
                    misses.append(f"look-alike recalled: {question!r} -> {got}")
            unrelated = 0
            for question in pairs.unrelated:
                got = recall("one", question)
                unrelated += len(got)
                if got:
                    misses.append(f"unrelated recalled: {question!r} -> {got}")
        app.state.store.close()
    count = max(1, len(pairs.paraphrase))
    return Result(
        hit1=hit1 / count,
        hit3=hit3 / count,
        lookalike_recalled=recalled,
        lookalike_pairs_wrong=wrong,
        unrelated_per_question=unrelated / max(1, len(pairs.unrelated)),
        misses=misses,
    )


def row(name: str, pairs: Pairs, result: Result) -> str:
    """One markdown table row."""
    return (
        f"| {name} | {len(pairs.paraphrase)} | {result.hit1:.2f} | {result.hit3:.2f} "
        f"| {result.lookalike_recalled} ({result.lookalike_pairs_wrong} of "
        f"{len(pairs.lookalike)} pairs) | {result.unrelated_per_question:.2f} |"
    )


def main(argv: list[str] | None = None) -> int:
    from memorysync_local._recall import vectors
    from memorysync_local._recall.embedder_setting import load_embedder
    from memorysync_local._recall.embedding import DEFAULT_EMBEDDER

    parser = argparse.ArgumentParser(
        prog="python -m bench.meaning_holdout", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--file", type=Path, default=HOLDOUT, help="a pairs file or a folder")
    parser.add_argument("--split", help="read this key of the file first (e.g. dev)")
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    parser.add_argument("--misses", action="store_true", help="print every miss")
    parser.add_argument(
        "--floor", type=float, help="MIN_COSINE for this run (calibrating on dev data only)"
    )
    args = parser.parse_args(argv)
    files = sorted(args.file.glob("*.json")) if args.file.is_dir() else [args.file]
    if not files or not all(path.is_file() for path in files):
        parser.error(f"no pairs file at {args.file}")
    if args.floor is not None:
        vectors.MIN_COSINE = args.floor
    embedder = load_embedder(args.embedder)
    print(f"embedder {getattr(embedder, 'name', args.embedder)}, floor {vectors.MIN_COSINE}, k={K}")
    print()
    print(
        "| file | paraphrases | hit@1 | hit@3 | look-alikes: memories recalled "
        "(goal 0) | unrelated: recalled per question |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    details: list[str] = []
    for path in files:
        pairs = load(path, args.split)
        result = evaluate(pairs, embedder)
        name = path.name + (f" [{args.split}]" if args.split else "")
        print(row(name, pairs, result))
        details.extend(f"{name}: {miss}" for miss in result.misses)
    if args.misses:
        print()
        print("\n".join(details) or "no misses")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
