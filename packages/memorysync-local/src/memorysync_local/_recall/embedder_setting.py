"""Choosing the embedder at start-up: ``none``, ``model2vec[:MODEL]`` (the default,
with the model the package ships),
``sentence-transformers[:MODEL_OR_PATH]`` or ``openai[:MODEL]``.

A server asked for an embedder it cannot have (the extra not installed, the
model not cached and the hub unreachable) says so in one line and serves
lexical recall: memory must keep working offline.
"""

from __future__ import annotations

import logging
import os

from memorysync_local._recall.embedding import (
    DEFAULT_OPENAI_MODEL,
    DEFAULT_SENTENCE_TRANSFORMERS_MODEL,
    HUB_TIMEOUT_SECONDS,
    Embedder,
    EmbedderUnavailable,
    Model2VecEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    parse_embedder_spec,
)

logger = logging.getLogger("memorysync.local")

EmbedderSetting = Embedder | str | None


def load_embedder(spec: str, *, hub_timeout: float = HUB_TIMEOUT_SECONDS) -> Embedder | None:
    """The embedder ``spec`` names (``None`` for ``none``).

    Raises ``ValueError`` for a malformed spec and ``EmbedderUnavailable`` when the
    embedder cannot be loaded here. ``openai`` reads ``OPENAI_BASE_URL`` (default
    ``https://api.openai.com/v1``) and ``OPENAI_API_KEY`` from the environment.
    """
    kind, model = parse_embedder_spec(spec)
    if kind == "none":
        return None
    if kind == "model2vec":
        return Model2VecEmbedder(model, hub_timeout=hub_timeout)
    if kind == "sentence-transformers":
        return SentenceTransformerEmbedder(model or DEFAULT_SENTENCE_TRANSFORMERS_MODEL)
    return OpenAIEmbedder(
        model or DEFAULT_OPENAI_MODEL,
        base_url=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        api_key=os.environ.get("OPENAI_API_KEY"),
    )


def embedder_or_lexical(setting: EmbedderSetting) -> Embedder | None:
    """An embedder instance as given, a spec loaded, or ``None`` with one WARNING line."""
    if setting is None or not isinstance(setting, str):
        return setting
    try:
        return load_embedder(setting)
    except EmbedderUnavailable as exc:
        logger.warning("semantic recall is off, serving lexical recall: %s", exc)
        return None
