"""Item 9: recall quality of memorysync-local on the labelled recall set (issue 14).

The set lives in ``packages/memorysync-local/tests/data/recall_{dev,holdout}.jsonl``:
each scenario is one user telling facts in natural turns in a first session (plus
ten unrelated facts every user tells, so that recall has to choose), then questions
asked in a later session, each with the fact that must come back (substrings of the
stored memory; ``*`` means any fact of the user, for "what do you know about me?").
Questions are in three bands: ``same`` (repeats the fact's words), ``related``
(derived forms or a near topic word) and ``paraphrase`` (no content word shared).

Every turn goes through the real ``add_turn`` route (the rule-based extractor
stores the facts) and every question through ``recall`` with ``k=5``; a case is a
hit@1 when the first memory is the expected fact and a hit@5 when it is among the
first five. ``holdout`` is never used to tune recall.

    python -m bench.recall_quality                   # every mode this install has
    python -m bench.recall_quality --modes lexical   # one mode
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from ._stats import Section

DATA = Path(__file__).resolve().parent.parent / "packages" / "memorysync-local" / "tests" / "data"
SPLITS = ("dev", "holdout")
BANDS = ("same", "related", "paraphrase")
K = 5
API_KEY = "ms_recall_quality_key"


@dataclass(frozen=True)
class Case:
    """One question about one scenario's facts."""

    split: str
    scenario: str
    band: str
    question: str
    expect: tuple[str, ...]


@dataclass(frozen=True)
class Scenario:
    split: str
    name: str
    turns: tuple[str, ...]
    cases: tuple[Case, ...]


def load(data: Path = DATA) -> list[Scenario]:
    """Every scenario of both splits, dev first."""
    noise = tuple(json.loads((data / "recall_noise.json").read_text(encoding="utf-8"))["turns"])
    scenarios = []
    for split in SPLITS:
        for line in (data / f"recall_{split}.jsonl").read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            cases = tuple(
                Case(split, row["scenario"], q["band"], q["question"], tuple(q["expect"]))
                for q in row["questions"]
            )
            # The user's own facts first, then the unrelated ones (newer): on a tie,
            # recency favours a distractor, never the answer.
            scenarios.append(Scenario(split, row["scenario"], (*row["turns"], *noise), cases))
    return scenarios


def is_expected(text: str, expect: Sequence[str]) -> bool:
    """Whether a recalled memory is (one of) the fact(s) the case expects."""
    return "*" in expect or any(e.lower() in text.lower() for e in expect)


@dataclass
class Tally:
    cases: int = 0
    hit1: int = 0
    hit5: int = 0
    misses: list[str] = field(default_factory=list)

    def add(self, texts: Sequence[str], case: Case) -> None:
        self.cases += 1
        hits = [is_expected(t, case.expect) for t in texts[:K]]
        self.hit1 += bool(hits[:1] and hits[0])
        self.hit5 += any(hits)
        if not any(hits):
            self.misses.append(f"{case.scenario} [{case.band}] {case.question}")


@dataclass
class ModeResult:
    mode: str
    tallies: dict[tuple[str, str], Tally]
    query_ms: float
    detail: str = ""


def evaluate(
    mode: str,
    make_app: Callable[[str], Any],
    scenarios: Sequence[Scenario],
    *,
    detail: str = "",
) -> ModeResult:
    """Tell every scenario's facts through ``add_turn``, then ask every question."""
    tallies = {(s, b): Tally() for s in (*SPLITS, "all") for b in (*BANDS, "all")}
    query_seconds = 0.0
    queries = 0
    with tempfile.TemporaryDirectory(prefix="recall-quality-") as tmp:
        app = make_app(str(Path(tmp) / "recall.db"))
        headers = {"X-API-Key": API_KEY}
        with TestClient(app) as client:
            for scenario in scenarios:
                user = f"user-{scenario.name}"
                for turn in scenario.turns:
                    answer = client.post(
                        "/v1/memory/add_turn",
                        headers=headers,
                        json={
                            "tenant_id": "local",
                            "user_id": user,
                            "text": turn,
                            "source": "recall-quality",
                            "metadata": {"session_id": "first"},
                        },
                    )
                    answer.raise_for_status()
                for case in scenario.cases:
                    started = time.perf_counter()
                    answer = client.post(
                        "/v1/memory/recall",
                        headers=headers,
                        json={
                            "tenant_id": "local",
                            "user_id": user,
                            "prompt": case.question,
                            "k": K,
                        },
                    )
                    query_seconds += time.perf_counter() - started
                    queries += 1
                    answer.raise_for_status()
                    texts = [str(m["value"]) for m in answer.json().get("memories", [])]
                    for split in (case.split, "all"):
                        for band in (case.band, "all"):
                            tallies[(split, band)].add(texts, case)
        store = getattr(app.state, "store", None)
        if store is not None:
            store.close()
    return ModeResult(mode, tallies, 1000 * query_seconds / max(1, queries), detail)


def _lexical_app(db_path: str) -> Any:
    from memorysync_local import create_app

    return create_app(db_path, api_keys={API_KEY: "local"})


def available_modes() -> dict[str, Callable[[str], Any]]:
    """The recall modes this install can run without a download."""
    return {"lexical": _lexical_app}


def table(results: Sequence[ModeResult]) -> str:
    """hit@1 / hit@5 per mode, split and band, as markdown."""
    lines = [
        "| mode | split | band | cases | hit@1 | hit@5 |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for result in results:
        for split in (*SPLITS, "all"):
            for band in (*BANDS, "all"):
                tally = result.tallies[(split, band)]
                if not tally.cases:
                    continue
                lines.append(
                    f"| {result.mode} | {split} | {band} | {tally.cases} "
                    f"| {tally.hit1 / tally.cases:.2f} | {tally.hit5 / tally.cases:.2f} |"
                )
    return "\n".join(lines)


def run(
    *, quick: bool = False, modes: Mapping[str, Callable[[str], Any]] | None = None
) -> list[Section]:
    """Item 9 for ``python -m bench``: every available mode on both splits."""
    del quick  # the set is small: always run it whole
    chosen = dict(modes or available_modes())
    scenarios = load()
    results = [evaluate(name, make, scenarios) for name, make in chosen.items()]
    cases = sum(len(s.cases) for s in scenarios)
    notes = [
        f"{result.mode}: {result.query_ms:.2f} ms per recall on average (in-process)"
        + (f"; {result.detail}" if result.detail else "")
        for result in results
    ]
    return [
        Section(
            title="9. Recall quality on the labelled recall set (memorysync-local)",
            setup=(
                f"{cases} questions over {len(scenarios)} users "
                "(`packages/memorysync-local/tests/data/recall_*.jsonl`), every fact told "
                "through `add_turn`, every question through `recall` with k=5. `holdout` was "
                "written with `dev`, before any tuning, and never used to tune."
            ),
            notes=notes,
            markdown=table(results) + _semantic_quality(),
        )
    ]


def _semantic_quality() -> str:
    """The opt-in real-model run's figures (``bench/semantic_quality.md``), when present."""
    path = Path(__file__).resolve().parent / "semantic_quality.md"
    return "\n\n" + path.read_text(encoding="utf-8").strip() if path.exists() else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.recall_quality")
    parser.add_argument("--modes", nargs="+", help="modes to run (default: all available)")
    parser.add_argument("--misses", action="store_true", help="list the dev split's misses")
    args = parser.parse_args(argv)
    modes = available_modes()
    if args.modes:
        modes = {name: modes[name] for name in args.modes}
    scenarios = load()
    for name, make in modes.items():
        result = evaluate(name, make, scenarios)
        print(table([result]))
        print(f"{result.query_ms:.2f} ms per recall", file=sys.stderr)
        if args.misses:
            # Only dev: looking at holdout's misses would be tuning on it.
            for band in BANDS:
                for miss in result.tallies[("dev", band)].misses:
                    print("  miss:", miss)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
