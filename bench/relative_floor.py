"""A cosine floor relative to the question, measured on dev data (issue 34; not shipped).

The shipped floor (``_recall.vectors.MIN_COSINE`` 0.25) is absolute, and the shipped
model's unrelated chatty pairs average a cosine of about 0.32 (bench/results.md 18b),
so most memories clear it. Each variant here replaces that floor, for one question,
by how much a memory must stand out from the question's cosines to texts in general,
never lower than 0.25 (the absolute floor stays as a minimum):

- ``abs=X``: the absolute floor X (``abs=0.25`` is the product);
- ``user=Z``: the mean + Z standard deviations of the question's cosines to the
  asking user's own stored memories (``user-med=D``: their median + D); a user with
  fewer than ``MIN_USER`` memories has no statistic and gets the absolute floor;
- ``bg=Z``: the mean + Z standard deviations of the question's cosines to the 100
  everyday texts of ``tools/distill_background.txt`` (fixed, not the user's);
- ``pool=Z``: the same over the user's memories and the background texts together, so
  the background decides for a user with one memory and the user's own texts weigh
  more as they grow;
- ``either=Z``: ``user=Z`` from ``MIN_USER`` memories on, ``bg=Z`` below;
- ``cap=N`` (not a floor, for comparison): the shipped floor, and at most N of the
  memories found by meaning alone (sharing no word with the prompt) take part.

A memory whose cosine does not clear the question's floor gets no lift; above it, the
lift is the product's (``VECTOR_WEIGHT`` x the share of the way from the floor to 1).
The variant is installed by replacing the recall service's ``hybrid`` in this process
(and, for the product path, in the served child: ``python -m bench.relative_floor
--serve VARIANT serve ...`` is what the child runs). The product's code is unchanged.

    python -m bench.relative_floor --variant abs=0.25 --variant user=1.5
    python -m bench.relative_floor --variant pool=1.5 --product-path
    python -m bench.relative_floor --cost
    python -m bench.relative_floor --file PAIRS.json --variant abs=0.25 --variant bg=0.5

Tuned on dev data only: ``bench/data/meaning_dev/pairs.json`` (``--file``'s default),
``bench/chatty_pairs.json`` ``dev``, the product path's dev users and the collision
table; a held-out ``--file`` is run once, after every choice.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BACKGROUND = HERE.parent / "tools" / "distill_background.txt"
DEV_FILE = HERE / "data" / "meaning_dev" / "pairs.json"
CHATTY = HERE / "chatty_pairs.json"
ABSOLUTE = 0.25
MIN_USER = 10
# The collision table of tests/test_word_analyzer.py, and its paraphrase that must stay found.
COLLISIONS = [
    ("I had to cancel my gym membership.", "Do I have cancer?"),
    ("I love a good party.", "Who is my partner?"),
    ("My general practitioner is Dr. Lee.", "Am I generous?"),
]
MILKSHAKE = ("I am lactose intolerant.", "Can I have a milkshake?")


@dataclass
class Variant:
    """One floor rule (see the module docstring), and what computing it cost."""

    kind: str
    value: float
    background: Any = None
    costs: list[float] = field(default_factory=list)

    @classmethod
    def parse(cls, spec: str) -> Variant:
        kind, _, value = spec.partition("=")
        if kind not in ("abs", "user", "user-med", "bg", "pool", "either", "cap"):
            raise ValueError(f"unknown variant {spec!r}")
        return cls(kind, float(value))

    @property
    def name(self) -> str:
        return f"{self.kind}={self.value:g}"

    def floor(self, probe: Any, matrix: Any) -> float:
        """The question's floor, given the user's vectors (rows) and the probe."""
        np = _np()
        if self.kind in ("abs", "cap"):
            return self.value if self.kind == "abs" else ABSOLUTE
        started = time.perf_counter()
        users = matrix @ probe if len(matrix) else np.zeros(0, dtype=np.float32)
        own = len(users) >= MIN_USER
        if self.kind in ("bg", "pool") or (self.kind == "either" and not own):
            back = self.background @ probe
            cosines = np.concatenate([users, back]) if self.kind == "pool" else back
        elif own:
            cosines = users
        else:
            return ABSOLUTE
        if self.kind == "user-med":
            bar = float(np.median(cosines)) + self.value
        else:
            bar = float(cosines.mean() + self.value * cosines.std())
        self.costs.append(time.perf_counter() - started)
        return max(ABSOLUTE, bar)


def _np() -> Any:
    import numpy

    return numpy


def background_vectors(embedder: Any) -> Any:
    """The background texts' unit vectors (one row each)."""
    from memorysync_local._recall.vectors import pack

    np = _np()
    texts = [
        line.strip()
        for line in BACKGROUND.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return np.stack([np.frombuffer(pack(v), dtype=np.float32) for v in embedder.embed(texts)])


def install(variant: Variant, embedder: Any) -> None:
    """Make the recall service rank with ``variant``'s floor in this process."""
    from memorysync_local._recall import vectors
    from memorysync_local._recall.dialog import in_dialog
    from memorysync_local._recall.ranking import word_scores
    from memorysync_local._service import memories

    variant.background = background_vectors(embedder)

    def hybrid(
        session: Any,
        index: Any,
        probe: Any,
        tenant: str,
        user_id: str,
        prompt: str,
        limit: int,
        stats: Any = None,
    ) -> list[tuple[int, float]]:
        found = word_scores(session, tenant, user_id, prompt, limit, stats)
        reported: Any = vectors._clamped
        if probe is not None:
            _, matrix, _ = index._current(session.vectors, tenant, user_id)
            floor = variant.floor(probe, matrix)
            nearest = index.nearest(session.vectors, tenant, user_id, probe, limit)
            close = [(memory_id, cosine) for memory_id, cosine in nearest if cosine > floor]
            if variant.kind == "cap":
                # At most ``value`` memories that share no word with the prompt (best first).
                worded = {memory_id for memory_id, _ in found}
                alone = [i for i, _ in close if i not in worded][: int(variant.value)]
                close = [(i, c) for i, c in close if i in worded or i in alone]
            # The lift is measured from the question's floor (one thread asks at a time here).
            vectors.MIN_COSINE = floor
            try:
                found, reported = vectors._fused(found, close)
            finally:
                vectors.MIN_COSINE = ABSOLUTE
        return [
            (memory_id, reported(memory_id, value))
            for memory_id, value in in_dialog(session, tenant, user_id, found, limit, prompt)
        ]

    memories.hybrid = hybrid  # type: ignore[attr-defined]


def collision(embedder: Any) -> str:
    """The collision table on the installed variant: rows recalled alone, the one user."""
    from .meaning_holdout import Pairs, evaluate

    pairs = Pairs(
        paraphrase=[MILKSHAKE],
        lookalike=COLLISIONS,
        unrelated=[question for _, question in COLLISIONS],
    )
    result = evaluate(pairs, embedder)
    rows = [
        str(i + 1)
        for i, (_, question) in enumerate(COLLISIONS)
        if any(f"look-alike recalled: {question!r}" in miss for miss in result.misses)
    ]
    one = round(result.unrelated_per_question * len(COLLISIONS))
    return (
        f"milkshake {'found' if result.hit1 else 'MISSED'}; rows recalled alone: "
        f"{', '.join(rows) or 'none'}; one user (3 + lactose): {one} recalled for 3 questions"
    )


def product_path(spec: str, misses: bool = False) -> str:
    """The product path's dev users on a child server running ``spec``."""
    from . import product_path as path

    real = subprocess.Popen

    def popen(command: list[str], **kwargs: Any) -> Any:
        at = command.index("memorysync_local._cli")
        command = [*command[:at], "bench.relative_floor", "--serve", spec, *command[at + 1 :]]
        return real(command, **kwargs)

    subprocess.Popen = popen  # type: ignore[misc,assignment]
    try:
        users = [u for u in path.load() if u.split == "dev"]
        result = asyncio.run(path.measure(users))
    finally:
        subprocess.Popen = real  # type: ignore[misc]
    tally = result.bands["paraphrase"]
    hits = sum(t.hits for t in result.bands.values())
    questions = sum(t.questions for t in result.bands.values())
    stale = sum(t.stale for t in result.bands.values())
    shown = "".join(f"\n    - {miss}" for miss in result.misses) if misses else ""
    return shown + (
        f"\n  product path dev: all {hits / questions:.2f} ({hits}/{questions}), paraphrase "
        f"{tally.hits / max(1, tally.questions):.2f} ({tally.hits}/{tally.questions}), "
        f"stale {stale}"
    )


def _timed(work: Any, *args: Any) -> float:
    """Median microseconds of ``work(*args)`` over 50 calls."""
    times = []
    for _ in range(50):
        started = time.perf_counter()
        work(*args)
        times.append(time.perf_counter() - started)
    return 1e6 * statistics.median(times)


def _by_moments(probe: Any, mean_row: Any, second: Any) -> float:
    """mean + 1.5 std of the cosines from the rows' mean and second moment (kept per
    user and updated as rows are added): two products of 128 dimensions, any size."""
    mean = float(probe @ mean_row)
    return mean + 1.5 * float(_np().sqrt(max(0.0, float(probe @ second @ probe) - mean * mean)))


def _by_cosines(cosines: Any) -> float:
    return float(cosines.mean() + 1.5 * cosines.std())


def cost(embedder: Any) -> list[str]:
    """Microseconds per recall for each statistic at several user sizes (random rows)."""
    from memorysync_local._recall.vectors import pack

    np = _np()
    rng = np.random.default_rng(0)
    probe = np.frombuffer(pack(embedder.embed(["Where was I born?"])[0]), dtype=np.float32)
    lines = [
        "| memories | all cosines (the product) | mean + z std of them | median | moments |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in (1_000, 10_000, 100_000):
        rows = rng.standard_normal((n, probe.size)).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        cosines = rows @ probe
        figures = (
            _timed(np.matmul, rows, probe),
            _timed(_by_cosines, cosines),
            _timed(np.median, cosines),
            _timed(_by_moments, probe, rows.mean(axis=0), (rows.T @ rows) / n),
        )
        lines.append(f"| {n:,} | " + " | ".join(f"{f:.0f} µs" for f in figures) + " |")
    return lines


def standout(embedder: Any, path: Path) -> list[str]:
    """How far right answers and the best memory for an unrelated question stand out
    (z-scores) among the question's cosines to the user's memories and to the background."""
    from memorysync_local._recall.vectors import pack

    from .meaning_holdout import load

    np = _np()

    def unit(texts: list[str]) -> Any:
        return np.stack([np.frombuffer(pack(v), dtype=np.float32) for v in embedder.embed(texts)])

    background = background_vectors(embedder)
    lines = []
    for name, pairs in ((path.name, load(path)), ("chatty dev", load(CHATTY, "dev"))):
        stored = unit([m for m, _ in pairs.paraphrase] + [m for m, _ in pairs.lookalike])
        right: dict[str, list[float]] = {"user": [], "bg": []}
        best: dict[str, list[float]] = {"user": [], "bg": []}
        for i, (_, question) in enumerate(pairs.paraphrase):
            probe = unit([question])[0]
            for key, cosines in (("user", stored @ probe), ("bg", background @ probe)):
                right[key].append(float((stored[i] @ probe - cosines.mean()) / cosines.std()))
        for question in pairs.unrelated:
            probe = unit([question])[0]
            top = float((stored @ probe).max())
            for key, cosines in (("user", stored @ probe), ("bg", background @ probe)):
                best[key].append(float((top - cosines.mean()) / cosines.std()))
        for key in ("user", "bg"):
            lines.append(
                f"{name} ({len(stored)} memories), against {key}: right answer z median "
                f"{np.median(right[key]):.2f} (lower quartile {np.percentile(right[key], 25):.2f});"
                f" best memory for an unrelated question z median {np.median(best[key]):.2f}"
            )
    return lines


def serve(spec: str, argv: Sequence[str]) -> int:
    """``memorysync-local`` with ``spec`` installed (the product path's child)."""
    from memorysync_local._cli import main
    from memorysync_local._recall.embedder_setting import load_embedder
    from memorysync_local._recall.embedding import DEFAULT_EMBEDDER

    install(Variant.parse(spec), load_embedder(DEFAULT_EMBEDDER))
    return main(list(argv))


def main(argv: list[str] | None = None) -> int:
    from memorysync_local._recall.embedder_setting import load_embedder
    from memorysync_local._recall.embedding import DEFAULT_EMBEDDER

    from .meaning_holdout import evaluate, load

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--serve"]:
        return serve(argv[1], argv[2:])
    parser = argparse.ArgumentParser(
        prog="python -m bench.relative_floor", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--variant", action="append", default=[], help="e.g. user=1.5")
    parser.add_argument(
        "--file", type=Path, default=DEV_FILE, help="the pairs file (holdouts: once, at the end)"
    )
    parser.add_argument("--product-path", action="store_true", help="the product path too")
    parser.add_argument("--misses", action="store_true", help="the product path's misses")
    parser.add_argument("--standout", action="store_true", help="z-scores of right answers")
    parser.add_argument("--cost", action="store_true", help="time the statistics")
    args = parser.parse_args(argv)
    embedder = load_embedder(DEFAULT_EMBEDDER)
    if args.standout:
        print("\n".join(standout(embedder, args.file)))
    if args.cost:
        print("\n".join(cost(embedder)))
    for spec in args.variant:
        variant = Variant.parse(spec)
        install(variant, embedder)
        dev = evaluate(load(args.file), embedder)
        chatty = evaluate(load(CHATTY, "dev"), embedder)
        print(
            f"{variant.name}: {args.file.name} {dev.hit1:.2f} / {dev.hit3:.2f}, look-alikes "
            f"{dev.lookalike_recalled}, unrelated {dev.unrelated_per_question:.2f}; chatty dev "
            f"{chatty.hit1:.2f} / {chatty.hit3:.2f}, unrelated {chatty.unrelated_per_question:.2f}"
        )
        print(f"  collision: {collision(embedder)}")
        if variant.costs:
            print(f"  statistic: median {1e6 * statistics.median(variant.costs):.0f} µs per recall")
        if args.product_path:
            print(product_path(spec, args.misses))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
