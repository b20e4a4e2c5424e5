"""Recall by meaning by default: the static model the package ships, offline, without torch.

The real shipped model (``memorysync_local/_model/``) is used throughout, never a
stand-in: these tests check that a server with no option finds a paraphrase, that
``none`` turns it off, and that nothing reaches for the network (the model hub
switched off by ``HF_HUB_OFFLINE`` and every socket to a non-loopback address refused).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memorysync_local import embedded
from memorysync_local._recall import embedding as _embedding
from memorysync_local._recall.embedder_setting import load_embedder
from memorysync_local._recall.embedding import (
    DEFAULT_EMBEDDER,
    SHIPPED_MODEL,
    Model2VecEmbedder,
    parse_embedder_spec,
)

FACTS = (
    "ugh, I'm lactose intolerant so dairy wrecks my stomach",
    "I work as a dentist in Berlin.",
    "My brother plays the drums in a jazz band.",
    "We adopted a rescue greyhound last spring.",
    "I'm flying to Tokyo for a conference in May.",
)
# Each question shares no word with the fact that answers it.
PARAPHRASES = {
    "Can I have a milkshake?": FACTS[0],
    "Do I have a pet?": FACTS[3],
    "Is anyone in my family a musician?": FACTS[2],
    "Am I travelling soon?": FACTS[4],
}


class NetworkUsed(AssertionError):
    """A connection to something other than this machine was attempted."""


def _is_loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = str(address[0])
        return host in ("localhost", "::1") or host.startswith("127.")
    return isinstance(address, (str, bytes))  # a Unix socket


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The model hub switched off, and any connection beyond loopback refused."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> None:
        if not _is_loopback(address):
            raise NetworkUsed(f"connection to {address!r}")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not _is_loopback(address):
            raise NetworkUsed(f"connection to {address!r}")
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    # Load the model inside the guard, as a new process would.
    _embedding._models.clear()
    yield
    _embedding._models.clear()


async def _tell_and_ask(server: Any, questions: list[str]) -> dict[str, list[str]]:
    async with httpx.AsyncClient(
        transport=server.transport, base_url=server.base_url, headers={"X-API-Key": server.api_key}
    ) as client:
        for fact in FACTS:
            answer = await client.post(
                "/memory/add", headers={"X-End-User-Id": "u"}, json={"text": fact, "verbatim": True}
            )
            answer.raise_for_status()
        found = {}
        for question in questions:
            answer = await client.post(
                "/v1/memory/recall",
                json={"tenant_id": server.tenant_id, "user_id": "u", "prompt": question, "k": 3},
            )
            answer.raise_for_status()
            found[question] = [str(m["value"]) for m in answer.json()["memories"]]
    return found


def test_the_default_is_the_shipped_static_model() -> None:
    assert DEFAULT_EMBEDDER == "model2vec"
    assert parse_embedder_spec(DEFAULT_EMBEDDER) == ("model2vec", None)
    provenance = json.loads((SHIPPED_MODEL / "PROVENANCE.json").read_text(encoding="utf-8"))
    for name, digest in provenance["files_sha256"].items():
        assert hashlib.sha256((SHIPPED_MODEL / name).read_bytes()).hexdigest() == digest, name
    assert provenance["teacher"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert "Apache License" in (SHIPPED_MODEL / "LICENSE").read_text(encoding="utf-8")


def test_the_shipped_model_loads_offline_and_places_a_paraphrase_nearest(no_network: None) -> None:
    embedder = load_embedder(DEFAULT_EMBEDDER)
    assert isinstance(embedder, Model2VecEmbedder)
    assert embedder.dimensions == 128
    assert embedder.name.startswith("model2vec:memorysync/static-minilm-l6-v2-128d-")
    import numpy as np

    facts = np.asarray(embedder.embed(list(FACTS)), dtype=np.float32)
    facts /= np.linalg.norm(facts, axis=1, keepdims=True)
    for question, fact in PARAPHRASES.items():
        probe = np.asarray(embedder.embed([question])[0], dtype=np.float32)
        cosines = facts @ (probe / np.linalg.norm(probe))
        assert FACTS[int(cosines.argmax())] == fact, question


def test_the_shipped_models_name_changes_with_its_weights() -> None:
    # Stored vectors carry the embedder's name: a re-built model must re-embed them.
    provenance = json.loads((SHIPPED_MODEL / "PROVENANCE.json").read_text(encoding="utf-8"))
    digest = provenance["files_sha256"]["model.safetensors"][:12]
    assert load_embedder(DEFAULT_EMBEDDER).name.endswith(f"-128d-{digest}")


def test_embedded_with_no_option_recalls_paraphrases_by_meaning_offline(
    tmp_path: Path, no_network: None
) -> None:
    with embedded(str(tmp_path / "m.db")) as server:
        assert server.store.embedder is not None
        assert server.store.embedder.name.startswith("model2vec:memorysync/static-minilm")
        found = asyncio.run(_tell_and_ask(server, list(PARAPHRASES)))
    for question, fact in PARAPHRASES.items():
        assert fact in found[question], (question, found[question])


def test_embedder_none_recalls_by_words_only(tmp_path: Path, no_network: None) -> None:
    with embedded(str(tmp_path / "m.db"), embedder="none") as server:
        assert server.store.embedder is None
        found = asyncio.run(_tell_and_ask(server, [*PARAPHRASES, "Where is my dentist job?"]))
    for question, fact in PARAPHRASES.items():
        assert fact not in found[question], question
    assert found["Where is my dentist job?"][0] == FACTS[1]


def test_recall_by_meaning_does_not_import_torch(tmp_path: Path) -> None:
    """In a process of its own: the test process may have imported anything."""
    code = textwrap.dedent(
        f"""
        import sys
        from memorysync_local import embedded
        with embedded({str(tmp_path / "t.db")!r}) as server:
            assert server.store.embedder is not None
            server.store.embedder.embed(["Can I have a milkshake?"])
        print("torch" in sys.modules)
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# Run inside a network namespace of its own: no route anywhere, loopback only.
_SERVE_AND_ASK = """
import json, subprocess, sys, urllib.request
proc = subprocess.Popen(
    [sys.executable, "-m", "memorysync_local._cli", "serve", "--db", sys.argv[1], "--port", "0",
     "--api-key", "ms_offline_proof_key", "--log-level", "warning"],
    stdout=subprocess.PIPE, text=True,
)
try:
    banner = proc.stdout.readline()
    meaning = proc.stdout.readline()
    base = banner.rsplit(" at ", 1)[1].strip()
    def post(path, body, user=None):
        headers = {"X-API-Key": "ms_offline_proof_key", "Content-Type": "application/json"}
        if user:
            headers["X-End-User-Id"] = user
        request = urllib.request.Request(base + path, json.dumps(body).encode(), headers)
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.load(answer)
    for fact in json.loads(sys.argv[2]):
        post("/memory/add", {"text": fact, "verbatim": True}, user="u")
    found = post("/v1/memory/recall",
                 {"tenant_id": "local", "user_id": "u", "prompt": sys.argv[3], "k": 3})
    print(json.dumps({"meaning": meaning.strip(),
                      "found": [m["value"] for m in found["memories"]]}))
finally:
    proc.terminate()
    proc.wait(30)
"""


def _serve_and_ask(tmp_path: Path, *, isolated: bool) -> dict[str, Any]:
    args = [str(tmp_path / "serve.db"), json.dumps(FACTS), "Can I have a milkshake?"]
    command = [sys.executable, "-c", _SERVE_AND_ASK, *args]
    if isolated:
        # A new network namespace has only a loopback device, and it starts down.
        script = 'ip link set lo up && exec "$@"'
        command = ["unshare", "-n", "sh", "-c", script, "sh", *command]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_serve_with_no_option_answers_a_paraphrase_by_meaning(tmp_path: Path) -> None:
    result = _serve_and_ask(tmp_path, isolated=False)
    assert result["meaning"].startswith("recall by meaning: model2vec:memorysync/static-minilm")
    assert result["found"][0] == FACTS[0]


def _can_cut_the_network() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _can_cut_the_network(), reason="needs unshare -n (root or user namespaces)")
def test_serve_with_the_network_cut_answers_a_paraphrase_by_meaning(tmp_path: Path) -> None:
    result = _serve_and_ask(tmp_path, isolated=True)
    assert result["found"][0] == FACTS[0]
