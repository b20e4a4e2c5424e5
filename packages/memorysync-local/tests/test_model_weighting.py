"""``tools/distill_model.py --reweight``: token weights and the common component.

A static model's text vector is the mean of its tokens' vectors, so a token's weight
is its share of every cosine. model2vec takes token frequency from the vocabulary's
order, where about 1,000 single characters come before "the": "is", "my" and "who"
keep half their weight in the shipped model. ``--reweight`` ranks the words first and
removes what every text shares (tried, not shipped: ``bench/results.md`` item 18b).
These tests run the build script's functions on a vocabulary written here.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

SCRIPT = Path(__file__).resolve().parents[3] / "tools" / "distill_model.py"


def _distill_script() -> ModuleType:
    # The script switches the model hub off for its process at import: not for this one.
    saved = {name: os.environ.get(name) for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    try:
        return _load_script()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("distill_model", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("distill_model", module)
    spec.loader.exec_module(module)
    return module


def test_frequency_ranks_put_words_before_rare_characters() -> None:
    ranks = _distill_script().frequency_ranks(
        ["[PAD]", "[UNK]", "!", "a", "é", "龍", "the", "of", "##s", "zygote"]
    )
    order = [token for _, token in sorted(zip(ranks, range(10), strict=True))]
    # ASCII characters keep their places, words follow in vocabulary order, then the rest.
    assert order == [0, 1, 2, 3, 6, 7, 8, 9, 4, 5]
    assert sorted(ranks) == list(range(2, 12))


def test_reweight_removes_the_common_component() -> None:
    script = _distill_script()
    tokens = ["[PAD]", "[UNK]", "!", "a", "the", "of", "cat", "dog", "zygote", "龍"]
    rng = np.random.default_rng(7)
    shared = np.full(8, 3.0)
    embeddings = rng.normal(size=(len(tokens), 8)) + shared
    vectors = script.reweight(embeddings, tokens, 1e-1).astype(np.float64)
    ranks = script.frequency_ranks(tokens)
    proba = (1.0 / ranks) / np.sum(1.0 / ranks)
    # The expected token vector is gone (float16 rounding aside).
    assert np.linalg.norm(proba @ vectors) < 1e-2 * np.linalg.norm(vectors, axis=1).mean()
    # The most frequent tokens weigh least.
    norms = np.linalg.norm(vectors, axis=1)
    assert norms[tokens.index("the")] < norms[tokens.index("zygote")]
