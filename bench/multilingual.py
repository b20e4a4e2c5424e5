"""Issue 34, item 4: recall per language on the multilingual recall set.

The set is ``bench/data/multilingual/*.json`` (see its README): per language one
user, 24 facts stored verbatim through ``POST /memory/add``, and one question per
fact asked through ``POST /v1/memory/recall`` with ``k=5``. A case is a hit@5 when
its fact is among the five memories recalled, a hit@1 when it is the first.

    python -m bench.multilingual                      # words alone (--embedder none)
    python -m bench.multilingual --embedder model2vec # with recall by meaning
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from memorysync_local import embedded

DATA = Path(__file__).parent / "data" / "multilingual"
K = 5


def load() -> list[dict[str, Any]]:
    """Every language's file, in name order."""
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(DATA.glob("*.json"))]


async def _run(language: dict[str, Any], embedder: str) -> list[tuple[str, int | None]]:
    """(split, rank of the expected fact or None) per case."""
    found: list[tuple[str, int | None]] = []
    with embedded(":memory:", embedder=embedder) as server:
        async with httpx.AsyncClient(
            transport=server.transport,
            base_url=server.base_url,
            headers={"X-API-Key": server.api_key, "X-End-User-ID": "user"},
        ) as client:
            for fact in language["facts"]:
                answer = await client.post("/memory/add", json={"text": fact, "verbatim": True})
                answer.raise_for_status()
            for case in language["cases"]:
                answer = await client.post(
                    "/v1/memory/recall",
                    json={"tenant_id": server.tenant_id, "user_id": "user",
                          "prompt": case["question"], "k": K},
                )  # fmt: skip
                answer.raise_for_status()
                values = [m["value"] for m in answer.json()["memories"]]
                rank = values.index(case["expected"]) if case["expected"] in values else None
                found.append((case["split"], rank))
    return found


def _row(name: str, split: str, ranks: list[int | None]) -> str:
    hit1 = sum(rank == 0 for rank in ranks) / len(ranks)
    hit5 = sum(rank is not None for rank in ranks) / len(ranks)
    return f"| {name} | {split} | {len(ranks)} | {hit1:.2f} | {hit5:.2f} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.multilingual")
    parser.add_argument("--embedder", default="none", help="the server's --embedder")
    parser.add_argument("--misses", action="store_true", help="list the questions missed")
    args = parser.parse_args(argv)
    print(f"embedder: {args.embedder}; k={K}")
    print("| language | split | cases | hit@1 | hit@5 |")
    print("| --- | --- | ---: | ---: | ---: |")
    for language in load():
        found = asyncio.run(_run(language, args.embedder))
        for split in ("dev", "holdout", "all"):
            ranks = [rank for s, rank in found if split in (s, "all")]
            print(_row(language["name"], split, ranks))
        if args.misses:
            for case, (_, rank) in zip(language["cases"], found, strict=True):
                if rank is None:
                    print(f"  miss ({case['split']}): {case['question']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
