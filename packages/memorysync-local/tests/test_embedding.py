"""Embedders (the ``semantic`` extra), offline: a tiny model2vec model the tests build.

The model is a real ``StaticModel`` (a WordLevel tokenizer and a small vector
table), saved with ``save_pretrained`` and loaded back through the provider's
own loading code, by path and from a model-hub cache laid out on disk. The hub
is a closed loopback port: nothing leaves the machine. Its vectors mean
nothing: these tests check loading and shapes, never recall quality.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

# The semantic extra: installed by the `local` session; sessions without it (the
# compat ones) skip this file rather than fail to import it.
np = pytest.importorskip("numpy", reason="the semantic extra is not installed")
pytest.importorskip("model2vec", reason="the semantic extra is not installed")

from model2vec import StaticModel  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from tokenizers.models import WordLevel  # noqa: E402
from tokenizers.pre_tokenizers import Whitespace  # noqa: E402

from memorysync_local._recall import embedding as _embedding  # noqa: E402
from memorysync_local._recall.embedding import (  # noqa: E402
    Embedder,
    EmbedderUnavailable,
    Model2VecEmbedder,
    OpenAIEmbedder,
    parse_embedder_spec,
)

WORDS = ["[UNK]", "[PAD]", "cat", "dog", "pet", "dentist", "job", "berlin"]


def tiny_model(folder: Path) -> Path:
    tokenizer = Tokenizer(WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(len(WORDS), 8)).astype(np.float32)
    StaticModel(vectors, tokenizer).save_pretrained(str(folder))
    return folder


@pytest.fixture(autouse=True)
def fresh_process_cache() -> Any:
    """Each test starts as a new process would: no model loaded yet."""
    _embedding._models.clear()
    yield
    _embedding._models.clear()


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there once the socket is closed


def test_a_saved_model_loads_by_path_once_per_process(tmp_path: Path) -> None:
    folder = tiny_model(tmp_path / "tiny")
    first = Model2VecEmbedder(str(folder))
    again = Model2VecEmbedder(str(folder))
    assert isinstance(first, Embedder)
    assert first.model is again.model  # loaded once
    vectors = first.embed(["cat", "my dentist job in berlin"])
    assert len(vectors) == 2
    assert all(len(v) == first.dimensions == 8 for v in vectors)
    assert vectors[0] != vectors[1]
    assert first.name == f"model2vec:{folder}"


def _lay_out_cache(cache: Path, repo: str, model_folder: Path) -> None:
    """The model hub's cache layout: refs/main names a snapshot folder with the files."""
    root = cache / ("models--" + repo.replace("/", "--"))
    snapshot = root / "snapshots" / "0123456789abcdef"
    snapshot.mkdir(parents=True)
    for item in model_folder.iterdir():
        (snapshot / item.name).write_bytes(item.read_bytes())
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text("0123456789abcdef")


def test_a_cached_hub_model_loads_with_the_hub_unreachable(tmp_path: Path) -> None:
    cache = tmp_path / "hub-cache"
    _lay_out_cache(cache, "someone/tiny-static", tiny_model(tmp_path / "tiny"))
    started = time.perf_counter()
    embedder = Model2VecEmbedder(
        "someone/tiny-static", cache_dir=str(cache), endpoint=closed_port(), hub_timeout=30
    )
    # Served from the cache: no attempt to reach the hub, so no wait for it.
    assert time.perf_counter() - started < 10
    assert len(embedder.embed(["pet"])[0]) == 8


def test_an_uncached_model_with_the_hub_unreachable_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    with pytest.raises(EmbedderUnavailable) as caught:
        Model2VecEmbedder(
            "someone/not-cached",
            cache_dir=str(tmp_path / "empty-cache"),
            endpoint=closed_port(),
            hub_timeout=5,
        )
    message = str(caught.value)
    assert "\n" not in message
    assert "'someone/not-cached' is not cached" in message
    assert "could not be reached" in message
    assert _embedding._models == {}


def test_specs_are_parsed_and_bad_ones_named() -> None:
    assert parse_embedder_spec("none") == ("none", None)
    assert parse_embedder_spec("model2vec") == ("model2vec", None)
    assert parse_embedder_spec("model2vec:minishlab/potion-base-8M") == (
        "model2vec",
        "minishlab/potion-base-8M",
    )
    assert parse_embedder_spec("openai:text-embedding-3-small") == (
        "openai",
        "text-embedding-3-small",
    )
    assert parse_embedder_spec("sentence-transformers:/models/minilm") == (
        "sentence-transformers",
        "/models/minilm",
    )
    assert parse_embedder_spec("Sentence-Transformers") == ("sentence-transformers", None)
    for bad in ("bert", "none:x", ""):
        with pytest.raises(ValueError, match=repr(bad)):
            parse_embedder_spec(bad)


def _embeddings_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """A tiny OpenAI-compatible /embeddings endpoint (WSGI), answering out of order."""
    body = json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)))
    seen_key = environ.get("HTTP_AUTHORIZATION", "")
    data = [
        {"index": i, "embedding": [float(len(text)), float(i), float(len(seen_key))]}
        for i, text in enumerate(body["input"])
    ]
    status = "200 OK" if body["model"] == "tiny-embed" else "404 Not Found"
    start_response(status, [("Content-Type", "application/json")])
    return [json.dumps({"data": list(reversed(data)), "model": body["model"]}).encode()]


def test_the_openai_provider_posts_texts_and_keeps_their_order() -> None:
    embedder = OpenAIEmbedder(
        "tiny-embed",
        base_url="http://embeddings.test/v1",
        api_key="sk-test-secret",
        transport=httpx.WSGITransport(app=_embeddings_app),
    )
    vectors = embedder.embed(["a", "bbb"])
    assert [v[:2] for v in vectors] == [[1.0, 0.0], [3.0, 1.0]]
    assert vectors[0][2] == len("Bearer sk-test-secret")
    assert "sk-test-secret" not in repr(embedder)
    wrong = OpenAIEmbedder(
        "other",
        base_url="http://embeddings.test/v1",
        api_key="sk-test-secret",
        transport=httpx.WSGITransport(app=_embeddings_app),
    )
    with pytest.raises(EmbedderUnavailable, match="404") as caught:
        wrong.embed(["a"])
    assert "sk-test-secret" not in str(caught.value)


def test_sentence_transformers_never_downloads_and_names_what_is_missing(
    tmp_path: Path,
) -> None:
    from memorysync_local._recall.embedder_setting import load_embedder

    missing = str(tmp_path / "no-such-model")
    # Without the extra: names the extra; with it: says the model is neither a folder
    # nor cached. Either way an EmbedderUnavailable, and no download is tried.
    with pytest.raises(EmbedderUnavailable, match=r"transformers"):
        load_embedder(f"sentence-transformers:{missing}")
