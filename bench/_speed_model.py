"""A static embedding model for timing hybrid recall, built here, never for quality.

Hybrid recall's cost depends on the vectors' length and the number of memories,
not on what the vectors mean. This model has the default model's shape
(``minishlab/potion-base-8M``: 256 dimensions) and a 30,000-word vocabulary
holding every word of the synthetic facts and prompts, with random vectors: it
times the real ``model2vec`` code path offline. Its recall quality is meaningless
and is never reported.
"""

from __future__ import annotations

import re
from pathlib import Path

from .server_bench import _PROMPTS, _SUBJECTS, _WORDS

DIMENSIONS = 256
VOCABULARY = 30_000


def build(folder: Path, *, seed: int = 256) -> Path:
    """Save the model to ``folder`` (``StaticModel.save_pretrained``); returns it."""
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.normalizers import Lowercase
    from tokenizers.pre_tokenizers import Whitespace

    texts = [*_SUBJECTS, *_PROMPTS, *(w for words in _WORDS.values() for w in words)]
    words = sorted({w.lower() for text in texts for w in re.findall(r"\w+", text)})
    words = ["[UNK]", "[PAD]", *words]
    words += [f"w{i:05d}" for i in range(VOCABULARY - len(words))]
    tokenizer = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.normalizer = Lowercase()
    tokenizer.pre_tokenizer = Whitespace()
    vectors = np.random.default_rng(seed).normal(size=(len(words), DIMENSIONS))
    StaticModel(vectors.astype(np.float32), tokenizer).save_pretrained(str(folder))
    return folder
