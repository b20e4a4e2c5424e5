"""The recall route's fast path (``_http/fast_recall.py``) answers the bytes FastAPI's
route answers, and hands every request out of the ordinary to FastAPI."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from memorysync_local._http import fast_recall

T = "local"


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each request the fast path saw: whether it answered it (else FastAPI did)."""
    seen: list[bool] = []
    real = fast_recall.answer

    async def counted(*args: Any) -> Any:
        found = await real(*args)
        seen.append(found is not None)
        return found

    monkeypatch.setattr(fast_recall, "answer", counted)
    return seen


def _same_but_latency(answer: httpx.Response) -> tuple[int, dict[str, Any], list[str]]:
    body = answer.json()
    body.pop("latency_ms", None)
    headers = sorted(f"{k}: {v}" for k, v in answer.headers.items() if k != "x-request-id")
    return answer.status_code, body, headers


async def _recall(client: httpx.AsyncClient, body: Any, content_type: str) -> httpx.Response:
    data = json.dumps(body).encode()
    return await client.post(
        "/v1/memory/recall", content=data, headers={"content-type": content_type}
    )


async def test_a_recall_answers_the_routes_bytes(
    client: httpx.AsyncClient, answered: list[bool]
) -> None:
    for text in ("I live in Lisbon.", "I am allergic to peanuts.", "Mi perro se llama Rex."):
        added = await client.post(
            "/memory/add",
            json={"text": text, "verbatim": True, "metadata": {}},
            headers={"X-End-User-ID": "ana"},
        )
        assert added.status_code == 200, added.text
    body = {"tenant_id": T, "user_id": "ana", "prompt": "where do I live? my dog?", "k": 3}
    fast = await _recall(client, body, "application/json")
    # A charset in the content type is out of the ordinary: FastAPI answers it.
    routed = await _recall(client, body, "application/json; charset=utf-8")
    assert answered == [True]  # the second never reached the fast path
    assert fast.status_code == 200
    assert fast.json()["memories"], "the recall found nothing: the comparison says little"
    assert fast.headers["x-request-id"].startswith("req_")
    assert _same_but_latency(fast)[:2] == _same_but_latency(routed)[:2]
    # The headers differ only in the content type sent... which is the answer's own.
    assert fast.headers["content-type"] == routed.headers["content-type"]
    assert fast.headers["content-length"] == str(len(fast.content))


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"tenant_id": "other", "user_id": "ana", "prompt": "x"}, 403),
        ({"tenant_id": T, "user_id": "ana", "prompt": "x", "k": 0}, 422),
        ({"tenant_id": T, "user_id": "ana", "prompt": "x", "k": 2.0}, 422),
        ({"tenant_id": T, "user_id": "ana"}, 422),
        (["not", "an", "object"], 422),
    ],
)
async def test_requests_out_of_the_ordinary_go_to_fastapi(
    client: httpx.AsyncClient, answered: list[bool], body: Any, status: int
) -> None:
    fast = await _recall(client, body, "application/json")
    routed = await _recall(client, body, "application/json; charset=utf-8")
    assert answered == [False]
    assert fast.status_code == status
    assert (fast.status_code, fast.content) == (routed.status_code, routed.content)


async def test_a_body_that_is_not_json_is_the_routes_422(
    client: httpx.AsyncClient, answered: list[bool]
) -> None:
    answer = await client.post(
        "/v1/memory/recall", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert answered == [False]
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["type"] == "json_invalid"
