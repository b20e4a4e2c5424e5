"""memorysync-local latency over loopback at 1k / 10k / 100k memories for one user.

For each size, a fresh SQLite file is filled directly (one transaction of
synthetic facts, so that loading 100k rows takes seconds, not an hour of
requests), then the server is served by uvicorn on a free loopback port and
timed over real HTTP: ``POST /v1/memory/recall`` with varied prompts and
``POST /v1/memory/add_turn`` with fresh user turns (each stores one fact). It
also reports the fact extractor's precision and recall on the labelled set.

    python bench/server_bench.py                 # the three sizes
    python bench/server_bench.py 1000 5000       # other sizes

``run(sizes)`` returns the markdown (another bench script embeds it).
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from memorysync_local import Fact, RuleBasedExtractor, serve_in_thread
from memorysync_local._service.facts import FactContext

LABELS = (
    Path(__file__).resolve().parent.parent
    / "packages"
    / "memorysync-local"
    / "tests"
    / "data"
    / "extraction_labels.jsonl"
)
REQUESTS = 200
WARMUP = 20
USER = "bench-user"


def _split(words: str) -> list[str]:
    return words.split()


_SUBJECTS = (
    "Lives in {city}",
    "Prefers {food} for dinner",
    "Allergic to {food}",
    "Works as a {job} in {city}",
    "Plans to visit {city} next {season}",
    "User's {relative} lives in {city}",
    "Enjoys {hobby} on weekends",
    "User's {relative} is a {job}",
    "Usually drinks {drink} in the morning",
    "Is learning {hobby}",
)
_WORDS = {
    "city": _split(
        "Lisbon Porto Oslo Kyoto Lima Austin Leeds Cork Nairobi Seoul Utrecht Krakow "
        "Toronto Madrid Melbourne Chicago Berlin Dublin Quito Hanoi"
    ),
    "food": _split(
        "peanuts shellfish sushi lentils tofu pasta curry olives mushrooms ramen tacos "
        "dumplings paella kimchi falafel risotto"
    ),
    "job": _split(
        "nurse teacher chef pilot welder architect paralegal baker dentist plumber "
        "florist translator"
    ),
    "season": _split("spring summer autumn winter"),
    "relative": _split("sister brother mother father daughter son cousin aunt uncle partner"),
    "hobby": _split(
        "sailing chess pottery bouldering cello knitting surfing birdwatching woodworking tango"
    ),
    "drink": _split("oolong espresso matcha cocoa kefir"),
}
_PROMPTS = (
    "what should I cook tonight with {food}?",
    "plan a weekend trip to {city}",
    "gift ideas for my {relative}",
    "any {hobby} clubs nearby?",
    "is {drink} good before a run?",
    "jobs for a {job} abroad",
)


def _fill(rng: random.Random, template: str) -> str:
    return template.format(**{k: rng.choice(v) for k, v in _WORDS.items()})


def load_facts(db_path: str, users: Sequence[str], per_user: int, rng: random.Random) -> float:
    """Insert ``per_user`` synthetic facts for each of ``users`` (tenant ``local``) in one
    transaction, straight into the store; seconds the insert took."""
    from memorysync_local import create_app

    app = create_app(db_path, api_keys={"ms_bench": "local"})
    store = app.state.store
    batches = [
        (
            FactContext(
                tenant_id="local",
                user_id=user,
                source="bench",
                session_id="bench::load",
                metadata={},
                origin="add",
                request_id="req_bench",
            ),
            [Fact(_fill(rng, rng.choice(_SUBJECTS))) for _ in range(per_user)],
        )
        for user in users
    ]
    started = time.perf_counter()
    with store.facts.write() as session:
        for ctx, facts in batches:
            store.facts.insert(session, facts, ctx)
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def _percentiles(samples: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99


def _time_requests(size: int, rng: random.Random) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        db_path = str(Path(tmp) / f"bench-{size}.db")
        load_seconds = load_facts(db_path, [USER], size, rng)
        with serve_in_thread(db_path, api_key="ms_bench") as srv:
            headers = {"X-API-Key": srv.api_key}
            with httpx.Client(base_url=srv.base_url, headers=headers, timeout=60) as client:
                recall_ms: list[float] = []
                add_ms: list[float] = []
                for i in range(WARMUP + REQUESTS):
                    prompt = _fill(rng, rng.choice(_PROMPTS))
                    started = time.perf_counter()
                    answer = client.post(
                        "/v1/memory/recall",
                        json={"tenant_id": "local", "user_id": USER, "prompt": prompt, "k": 5},
                    )
                    if i >= WARMUP:
                        recall_ms.append((time.perf_counter() - started) * 1000)
                    answer.raise_for_status()
                for i in range(WARMUP + REQUESTS):
                    text = (
                        f"I {rng.choice(['love', 'hate', 'prefer'])} {_fill(rng, '{food}')} #{i}."
                    )
                    started = time.perf_counter()
                    answer = client.post(
                        "/v1/memory/add_turn",
                        json={
                            "tenant_id": "local",
                            "user_id": USER,
                            "text": text,
                            "source": "bench",
                        },
                    )
                    if i >= WARMUP:
                        add_ms.append((time.perf_counter() - started) * 1000)
                    answer.raise_for_status()
    return {
        "load": (load_seconds, 0.0),
        "recall": _percentiles(recall_ms),
        "add_turn": _percentiles(add_ms),
    }


def extractor_quality() -> dict[str, tuple[float, float, int]]:
    """(precision, recall, turns) of "the turn has a fact", per split and overall."""
    rows = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line]
    extractor = RuleBasedExtractor()
    result: dict[str, tuple[float, float, int]] = {}
    for split in ("dev", "holdout", "all"):
        chosen = [r for r in rows if split == "all" or r["split"] == split]
        tp = fp = fn = 0
        for row in chosen:
            predicted = bool(extractor.extract(row["text"]).facts)
            gold = row["label"] == "fact"
            tp += predicted and gold
            fp += predicted and not gold
            fn += gold and not predicted
        result[split] = (tp / max(1, tp + fp), tp / max(1, tp + fn), len(chosen))
    return result


def run(sizes: Sequence[int] = (1000, 10000, 100000)) -> str:
    """Benchmark each size and return the results as markdown (also printed)."""
    rng = random.Random(20261129)
    lines = [
        "### memorysync-local over loopback (one user)",
        "",
        f"{REQUESTS} timed requests per cell after {WARMUP} warm-up requests; uvicorn on "
        "127.0.0.1, one httpx client, sequential requests; SQLite in WAL mode on a temp file.",
        "",
        "| memories | load (s) | recall p50 (ms) | recall p99 (ms) | add_turn p50 (ms) "
        "| add_turn p99 (ms) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size in sizes:
        cell = _time_requests(size, rng)
        lines.append(
            f"| {size:,} | {cell['load'][0]:.2f} | {cell['recall'][0]:.2f} "
            f"| {cell['recall'][1]:.2f} | {cell['add_turn'][0]:.2f} | {cell['add_turn'][1]:.2f} |"
        )
    quality = extractor_quality()
    lines.extend(
        (
            "",
            "### Fact extractor on the labelled set",
            "",
            "| split | turns | precision | recall |",
            "| --- | ---: | ---: | ---: |",
        )
    )
    for split, (precision, recall, turns) in quality.items():
        lines.append(f"| {split} | {turns} | {precision:.3f} | {recall:.3f} |")
    lines.extend(("", "`holdout` was written after the rules and never used to tune them."))
    table = "\n".join(lines) + "\n"
    print(table)
    return table


if __name__ == "__main__":
    chosen = tuple(int(a) for a in sys.argv[1:]) or (1000, 10000, 100000)
    run(chosen)
