"""Calibrating recall by meaning's cosine floor (``_recall.vectors.MIN_COSINE``) on chatty turns.

``bench/chatty_pairs.json`` holds things a user says in passing ("ugh, I'm lactose
intolerant so dairy wrecks my stomach every time"), each with a later question that
needs it but shares few or no words with it ("Can I have a milkshake?"). For each
split, one user's turns are stored verbatim (``POST /memory/add``) on a server with
the default embedder, and each question is asked with ``k=3`` at several floors:

- hit@1 / hit@3: the question's own turn is first / among the three recalled;
- unrelated: memories recalled for five questions that nothing stored answers.

The floor is chosen on ``dev`` only: the lowest floor with the best dev hit@3 (a
higher one only drops right answers that the words do not find). ``holdout`` is
reported beside it.

    python -m bench.cosine_floor [--embedder SPEC] [--split dev|holdout|both]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

PAIRS = Path(__file__).resolve().parent / "chatty_pairs.json"
FLOORS = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45)
API_KEY = "ms_cosine_floor_key"
UNRELATED = (
    "What's the capital of Peru?",
    "Explain how a transistor works.",
    "Write a haiku about autumn.",
    "What is 17 times 23?",
    "Translate hello into French.",
)


def sweep(embedder: Any, pairs: list[list[str]], floors: tuple[float, ...] = FLOORS) -> list[str]:
    """One markdown row per floor: hit@1, hit@3, unrelated memories per question."""
    from memorysync_local import create_app
    from memorysync_local._recall import vectors

    rows = []
    kept = vectors.MIN_COSINE
    try:
        for floor in floors:
            vectors.MIN_COSINE = floor
            with tempfile.TemporaryDirectory(prefix="cosine-floor-") as tmp:
                app = create_app(
                    str(Path(tmp) / "floor.db"), api_keys={API_KEY: "local"}, embedder=embedder
                )
                with TestClient(app, headers={"X-API-Key": API_KEY}) as client:
                    for turn, _ in pairs:
                        client.post(
                            "/memory/add",
                            headers={"X-End-User-Id": "u"},
                            json={"text": turn, "verbatim": True},
                        ).raise_for_status()

                    def recall(prompt: str) -> list[str]:
                        answer = client.post(
                            "/v1/memory/recall",
                            json={"tenant_id": "local", "user_id": "u", "prompt": prompt, "k": 3},
                        )
                        answer.raise_for_status()
                        return [str(m["value"]) for m in answer.json()["memories"]]

                    found = [(turn, recall(question)) for turn, question in pairs]
                    unrelated = sum(len(recall(q)) for q in UNRELATED) / len(UNRELATED)
                app.state.store.close()
            hit1 = sum(bool(got) and got[0] == turn for turn, got in found) / len(found)
            hit3 = sum(turn in got for turn, got in found) / len(found)
            rows.append(f"| {floor:.2f} | {hit1:.2f} | {hit3:.2f} | {unrelated:.1f} |")
    finally:
        vectors.MIN_COSINE = kept
    return rows


def main(argv: list[str] | None = None) -> int:
    from memorysync_local._recall.embedder_setting import load_embedder
    from memorysync_local._recall.embedding import DEFAULT_EMBEDDER

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    parser.add_argument(
        "--split", choices=("dev", "holdout", "both"), default="both", help="which split to run"
    )
    args = parser.parse_args(argv)
    embedder = load_embedder(args.embedder)
    data = json.loads(PAIRS.read_text(encoding="utf-8"))
    for split in ("dev", "holdout") if args.split == "both" else (args.split,):
        print(f"\n{split} ({len(data[split])} turns, embedder {args.embedder}), k=3\n")
        print("| floor | hit@1 | hit@3 | unrelated recalled per question |")
        print("| ---: | ---: | ---: | ---: |")
        print("\n".join(sweep(embedder, data[split])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
