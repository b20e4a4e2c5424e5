"""Server edges from the third attack run (issue 33, items 6 and 9): ids in the path and
the query are refused as body fields are, on either backend, and a failure's log line
names the route, never the path.

Every test runs once embedded and once served over real HTTP; with
``MEMORYSYNC_TEST_BACKEND=postgres`` on PostgreSQL.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from shared.local_server import stored_memories

T = "local"


def messages(answer: httpx.Response) -> str:
    detail = answer.json()["detail"]
    return detail if isinstance(detail, str) else " | ".join(d["msg"] for d in detail)


# --- item 6: a NUL in a path, query or extension field is a 422 ----------------------

NUL_IN_PATH_OR_QUERY = [
    (f"/v1/memory/{T}/a%00b/list", "path"),
    ("/v1/memory/a%00b/ana/list", "path"),
    ("/memory/1%00/history", "path"),
    ("/x-local/v1/sessions?user_id=a%00b", "query.user_id"),
    ("/x-local/v1/memories?user_id=ana&q=a%00b", "query.q"),
    ("/x-local/v1/transcript?user_id=ana&session_id=a%00b", "query.session_id"),
    ("/x-local/v1/export?user_id=%00", "query.user_id"),
    (f"/v1/memory/{T}/ana/list?limit=1%00", "query.limit"),
]


@pytest.mark.parametrize(("path", "where"), NUL_IN_PATH_OR_QUERY)
async def test_a_nul_in_a_path_or_query_is_422_naming_where(
    client: httpx.AsyncClient, path: str, where: str
) -> None:
    answer = await client.get(path)
    assert answer.status_code == 422, answer.text
    assert f"{where}: contains a NUL character" in messages(answer)


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("/x-local/v1/users/forget", {"user_id": "a\x00b"}, "user_id"),
        ("/x-local/v1/jobs/cancel", {"user_id": "\x00"}, "user_id"),
        ("/x-local/v1/memories/forget", {"user_id": "a\x00", "memory_id": 1}, "user_id"),
        ("/x-local/v1/sessions/forget", {"user_id": "ana", "session_id": "s\x00"}, "session_id"),
    ],
)
async def test_a_nul_in_an_extension_body_is_422_and_erases_nothing(
    client: httpx.AsyncClient, server: Any, route: str, body: dict[str, Any], field: str
) -> None:
    kept = await client.post(
        "/v1/memory/add_turn",
        json={"tenant_id": T, "user_id": "ana", "text": "I live in Oslo.", "source": "s"},
    )
    assert kept.status_code == 200, kept.text
    answer = await client.post(route, json=body)
    assert answer.status_code == 422, answer.text
    assert f"{field}: Value error, contains a NUL character" in messages(answer)
    assert [m["text"] for m in stored_memories(server, T, "ana")] == ["Lives in Oslo"]


async def test_without_a_key_a_nul_path_is_still_401(client: httpx.AsyncClient) -> None:
    # The key first: a caller without one learns nothing from the ids it sends.
    answer = await client.get(f"/v1/memory/{T}/a%00b/list", headers={"X-API-Key": "wrong"})
    assert answer.status_code == 401


async def test_a_failure_logs_the_route_template_never_the_path(
    client: httpx.AsyncClient, server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    secret_user = "ms_live_k3y_in_the_path"
    server.store.db.close()  # every read now fails inside the route
    with caplog.at_level(logging.WARNING, logger="memorysync.local"):
        answer = await client.get(f"/v1/memory/{T}/{secret_user}/list")
    assert answer.status_code >= 500
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "/v1/memory/{tenant_id}/{user_id:path}/list" in logged
    assert secret_user not in logged
    assert secret_user not in caplog.text  # nor in a traceback's lines


# --- item 9: invalid UTF-8 in a path or query id is a 400 ----------------------------

BAD_UTF8 = ["%ff", "%ED%A0%80", "a%C3", "%C0%AF"]


@pytest.mark.parametrize("escape", BAD_UTF8)
async def test_a_path_id_that_is_not_utf8_is_400_not_another_user(
    client: httpx.AsyncClient, escape: str
) -> None:
    # Decoded with replacement, %ff would be the user "\ufffd": give that user a memory.
    stored = await client.post(
        "/v1/memory/add_turn",
        json={"tenant_id": T, "user_id": "\ufffd", "text": "I live in Oslo.", "source": "s"},
    )
    assert stored.status_code == 200, stored.text
    answer = await client.get(f"/v1/memory/{T}/{escape}/list")
    assert answer.status_code == 400, answer.text
    assert messages(answer) == "path: not valid UTF-8 once percent-decoded"
    tenant = await client.get(f"/v1/memory/{escape}/ana/list")
    assert tenant.status_code == 400, tenant.text


@pytest.mark.parametrize("escape", BAD_UTF8)
@pytest.mark.parametrize(
    "route",
    [
        "/x-local/v1/sessions?user_id={}",
        "/x-local/v1/memories?user_id={}",
        "/x-local/v1/memories?user_id=ana&q={}",
        "/x-local/v1/transcript?user_id=ana&session_id={}",
        "/x-local/v1/export?user_id={}",
        "/x-local/v1/sessions?{}=ana",
    ],
)
async def test_a_query_id_that_is_not_utf8_is_400(
    client: httpx.AsyncClient, route: str, escape: str
) -> None:
    answer = await client.get(route.format(escape))
    assert answer.status_code == 400, answer.text
    assert messages(answer) == "query: not valid UTF-8 once percent-decoded"


async def test_valid_percent_encoded_ids_still_work(client: httpx.AsyncClient) -> None:
    user = "josé/用户 +x"
    stored = await client.post(
        "/v1/memory/add_turn",
        json={"tenant_id": T, "user_id": user, "text": "I live in Oslo.", "source": "s"},
    )
    assert stored.status_code == 200, stored.text
    listed = await client.get(f"/v1/memory/{T}/jos%C3%A9%2F%E7%94%A8%E6%88%B7%20%2Bx/list")
    assert [m["text"] for m in listed.json()["memories"]] == ["Lives in Oslo"]
    found = await client.get("/x-local/v1/memories", params={"user_id": user})
    assert [m["text"] for m in found.json()["memories"]] == ["Lives in Oslo"]


# --- item 10: readiness checks the storage, liveness does not ------------------------


async def test_ready_answers_200_without_a_key_while_the_storage_answers(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.get("/ready", headers={"X-API-Key": ""})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"status": "ready"}


async def test_ready_is_503_once_the_storage_cannot_be_read_and_health_stays_200(
    client: httpx.AsyncClient, server: Any
) -> None:
    server.store.db.close()
    answer = await client.get("/ready")
    assert answer.status_code == 503, answer.text
    assert answer.json()["status"] == "unavailable"
    assert answer.headers["retry-after"] == "1"
    alive = await client.get("/health")
    assert alive.status_code == 200
    assert alive.json()["status"] == "ok"
