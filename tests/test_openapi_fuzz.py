"""Schemathesis over memorysync-local's own OpenAPI document, served by uvicorn on loopback.

Every operation gets a bounded number of generated requests (20), authenticated with a
configured key. The first test is the gate: no answer is a 5xx, every content type is
declared, and every 2xx body (what a client parses) matches its response schema. The
second collects every answer the document does not describe (undeclared status codes,
error bodies of another shape) and lists each violation. The gate also checks that a
4xx wrote no row. The hostile-input test sends what generation rarely reaches (issue 12):
JSON nested up to 1,000 levels, timestamps at both ends of the calendar, and ids with
``/``, ``%``, NUL, dots and non-ASCII characters in bodies, paths and headers; no answer
may be a 5xx, and a 4xx may write nothing.

Generation is derandomized (the ``ci`` Hypothesis profile, see ``tests/conftest.py``):
every run sends the same requests. ``python3 dev.py nox -s fuzz_explore`` draws new ones.
"""

from __future__ import annotations

import json
import re
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.exceptions import CheckFailed

from memorysync_local import serve_in_thread
from shared.secret_guard import TEST_API_KEY

TENANT = "fuzz"
HEADERS = {"X-API-Key": TEST_API_KEY}
# Derandomization, the example count and the database come from the loaded profile.
SETTINGS = settings(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)

# FastAPI writes OpenAPI 3.1, which schemathesis 3.x supports behind this switch.
schemathesis.experimental.OPEN_API_3_1.enable()


def success_schema_conformance(ctx: Any, response: Any, case: Any) -> bool | None:
    """The response schema check, on 2xx answers (what a client parses) only."""
    if 200 <= response.status_code < 300:
        return response_schema_conformance(ctx, response, case)
    return None


# A header value HTTP forbids (a control character, or blank at either end): uvicorn's
# HTTP parser refuses the request with its own plain-text 400 before the app sees it
# (docs/wire-protocol.md, "Requests refused by the transport").
_FIELD_VALUE = re.compile(r"(?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?")
TRANSPORT_REFUSAL = b"Invalid HTTP request received."


def forbidden_by_http(case: Any) -> bool:
    """True when a generated header value is one HTTP's field-value grammar forbids."""
    for value in (case.headers or {}).values():
        raw = value.encode("latin-1", "replace") if isinstance(value, str) else bytes(value)
        if _FIELD_VALUE.fullmatch(raw) is None:
            return True
    return False


def refused_by_transport(response: Any, case: Any) -> bool:
    """uvicorn's own answer to a request HTTP forbids: 400, text/plain, a fixed sentence."""
    return (
        response.status_code == 400
        and response.headers.get("content-type", "").startswith("text/plain")
        and response.content == TRANSPORT_REFUSAL
        and forbidden_by_http(case)
    )


def declared_content_type(ctx: Any, response: Any, case: Any) -> bool | None:
    """The content-type check, except for the transport's own refusal of what HTTP forbids."""
    if refused_by_transport(response, case):
        return None
    return content_type_conformance(ctx, response, case)


# The database behind the schema fixture, so a test can see what a request wrote.
SERVED: dict[str, str] = {}


@pytest.fixture
def local_api(tmp_path: Path) -> Iterator[Any]:
    """memorysync-local's schema, served over a fresh database, knowing ``TEST_API_KEY``."""
    server = serve_in_thread(str(tmp_path / "fuzz.db"), api_key=TEST_API_KEY, tenant_id=TENANT)
    SERVED["db"] = server.db_path
    try:
        yield schemathesis.from_uri(f"{server.base_url}/openapi.json", base_url=server.base_url)
    finally:
        server.stop()


schema = schemathesis.from_pytest_fixture("local_api")


@schema.parametrize()
@SETTINGS
def test_no_operation_answers_5xx_and_every_success_matches_its_schema(case: Any) -> None:
    before = db_state(SERVED["db"])
    response = case.call(headers=HEADERS)
    case.validate_response(
        response,
        checks=(not_a_server_error, declared_content_type, success_schema_conformance),
    )
    if 400 <= response.status_code < 500:
        assert db_state(SERVED["db"]) == before, f"a {response.status_code} wrote rows"


def test_every_answer_is_described_by_the_openapi_document(local_api: Any) -> None:
    violations: dict[str, set[str]] = {}
    operations = [result.ok() for result in local_api.get_all_operations()]
    assert len(operations) >= 10

    for operation in operations:

        @given(case=operation.as_strategy())
        @SETTINGS
        def probe(case: Any) -> None:
            response = case.call(headers=HEADERS)
            if refused_by_transport(response, case):
                return
            try:
                case.validate_response(
                    response, checks=(status_code_conformance, response_schema_conformance)
                )
            except CheckFailed as exc:
                first = str(exc).strip().splitlines()[0:4]
                summary = " ".join(line.strip() for line in first if line.strip())
                violations.setdefault(case.operation.verbose_name, set()).add(
                    f"{response.status_code}: {summary[:160]}"
                )

        probe()

    report = [f"{op} -> {v}" for op, found in sorted(violations.items()) for v in sorted(found)]
    assert not report, "\n".join(report)


def test_a_superscript_digit_memory_id_is_a_client_error_not_a_500(tmp_path: Path) -> None:
    server = serve_in_thread(str(tmp_path / "digit.db"), api_key=TEST_API_KEY, tenant_id=TENANT)
    try:
        response = httpx.get(f"{server.base_url}/v1/memory/status/%C2%B9", headers=HEADERS)
    finally:
        server.stop()
    assert response.status_code < 500


# --- hostile inputs (issue 12): never a 5xx, and a 4xx writes nothing ------------------


def db_state(path: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table a request can write (read-only connection)."""
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        return {
            t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
            for t in TABLES
            if t in present
        }


DEEP = "__deep__"


def with_depth(body: dict[str, Any], depth: int) -> bytes:
    """``body`` as JSON with ``DEEP`` replaced by objects nested ``depth`` deep (built as
    text: the stdlib encoder itself stops near 1,000 levels)."""
    return json.dumps(body).replace(f'"{DEEP}"', '{"a":' * depth + "1" + "}" * depth).encode()


TABLES = ("memories", "history", "turn_receipts", "client_refs", "usage", "extraction_jobs")
DEPTHS = [1, 63, 64, 65, 100, 252, 253, 254, 255, 256, 300, 500, 900, 990, 999, 1000]
MOMENTS = [
    "9999-12-31T23:59:59-05:00",
    "0001-01-01T00:00:00+05:00",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:59.999999+00:00",
    "0001-01-01T00:00:00-23:59",
    "9999-12-31T00:00:00+23:59",
    "10000-01-01T00:00:00Z",
    "0000-01-01T00:00:00Z",
]
IDS = ["a/b", "/", "50%", "%2F", "%", "nul\x00", "\x00", "josé", "用户", ".", "..", " ", "a b"]
Request = tuple[str, str, dict[str, str], bytes]


def dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def hostile_requests() -> list[Request]:
    """(method, path, extra headers, raw body) for every hostile input of the issue."""
    user = {"X-End-User-ID": "ana"}
    turn = {"tenant_id": TENANT, "user_id": "ana", "text": "I live in Oslo.", "source": "f"}
    history = {"tenant_id": TENANT, "user_id": "ana", "session_id": "s", "source": "f"}
    hi = {"role": "user", "content": "hi"}
    cases: list[Request] = []
    for depth in DEPTHS:
        cases += [
            ("POST", "/v1/memory/add_turn", {}, with_depth({**turn, "metadata": DEEP}, depth)),
            (
                "POST",
                "/memory/add",
                user,
                with_depth({"text": "I like tea.", "metadata": DEEP}, depth),
            ),
            (
                "POST",
                "/v1/history/append",
                {},
                with_depth({**history, "turns": [{**hi, "payload": DEEP}]}, depth),
            ),
            (
                "POST",
                "/v1/history/append",
                {},
                with_depth({**history, "metadata": DEEP, "turns": [hi]}, depth),
            ),
        ]
    for moment in MOMENTS:
        cases += [
            (
                "POST",
                "/v1/memory/add_turn",
                {},
                json.dumps({**turn, "occurred_at": moment}).encode(),
            ),
            (
                "POST",
                "/v1/history/append",
                {},
                json.dumps({**history, "turns": [{**hi, "occurred_at": moment}]}).encode(),
            ),
        ]
        for field in ("before", "after"):
            body = json.dumps({"filters": {field: moment}}).encode()
            cases.append(("DELETE", "/memory/forget", user, body))
    for value in IDS:
        bodies: list[tuple[str, dict[str, Any]]] = []
        for field in ("tenant_id", "user_id"):
            ids = {"tenant_id": TENANT, "user_id": "ana", field: value}
            bodies += [
                ("/v1/memory/add_turn", {**ids, "text": "I live in Oslo."}),
                ("/v1/memory/recall", {**ids, "prompt": "Oslo"}),
                ("/v1/memory/query", {**ids, "prompt": "Oslo"}),
                ("/v1/history/append", {**ids, "session_id": "s", "turns": [hi]}),
                ("/v1/history/list", {**ids, "session_id": "s"}),
                ("/v1/history/delete", {**ids, "session_id": "s"}),
            ]
        bodies += [
            ("/v1/history/append", {**history, "session_id": value, "turns": [hi]}),
            ("/v1/history/append", {**history, "turns": [{**hi, "idempotency_key": value}]}),
        ]
        cases += [("POST", path, {}, json.dumps(body).encode()) for path, body in bodies]
        segment = quote(value, safe="")
        for tenant, end_user in ((segment, "ana"), (TENANT, segment), (segment, segment)):
            cases.append(("GET", f"/v1/memory/{tenant}/{end_user}/list", {}, b""))
        cases.append(("GET", f"/v1/memory/status/{segment}", {}, b""))
    return cases


def raw_header_request(base_url: str, path: str, user: bytes, body: bytes) -> int:
    """A request whose X-End-User-ID is raw bytes (UTF-8, NUL): what httpx refuses to send."""
    head, _ = raw_header_answer(base_url, path, user, body)
    return int(head.split(b" ", 2)[1])


def raw_header_answer(base_url: str, path: str, user: bytes, body: bytes) -> tuple[bytes, bytes]:
    """:func:`raw_header_request`'s whole answer: (status line and headers, body)."""
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    head = (
        (
            f"POST {path} HTTP/1.1\r\nHost: x\r\nX-API-Key: {TEST_API_KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        ).encode()
        + b"X-End-User-ID: "
        + user
        + b"\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, content = answer.partition(b"\r\n\r\n")
    return head, content


def test_a_header_http_forbids_gets_the_transports_plain_400_and_writes_nothing(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "forbidden.db")
    server = serve_in_thread(db, api_key=TEST_API_KEY, tenant_id=TENANT)
    try:
        before = db_state(db)
        head, body = raw_header_answer(server.base_url, "/memory/add", b"\x00", b'{"text": "x"}')
    finally:
        server.stop()
    assert head.split(b" ", 2)[1] == b"400"
    assert b"content-type: text/plain" in head.lower()
    assert body == TRANSPORT_REFUSAL
    assert db_state(db) == before


def test_hostile_inputs_never_answer_5xx_and_a_4xx_writes_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "hostile.db")
    server = serve_in_thread(db, api_key=TEST_API_KEY, tenant_id=TENANT)
    statuses: dict[int, int] = {}
    failures: list[str] = []
    try:
        with httpx.Client(base_url=server.base_url, headers=HEADERS, timeout=60) as client:
            for method, path, headers, body in hostile_requests():
                before = db_state(db)
                answer = client.request(
                    method,
                    path,
                    content=body or None,
                    headers={**headers, "content-type": "application/json"} if body else headers,
                )
                statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
                where = f"{method} {path[:60]} {body[:60]!r}"
                if answer.status_code >= 500:
                    failures.append(f"{answer.status_code} {where}")
                elif 400 <= answer.status_code < 500 and db_state(db) != before:
                    failures.append(f"{answer.status_code} wrote rows: {where}")
            for user in ("josé".encode(), "用户".encode(), b"a\x00b", b"\xff\xfe"):
                for path, body in (
                    ("/memory/add", b'{"text": "I like tea."}'),
                    ("/memory/forget", b'{"filters": {"source": "f"}}'),
                ):
                    before = db_state(db)
                    status = raw_header_request(server.base_url, path, user, body)
                    statuses[status] = statuses.get(status, 0) + 1
                    if status >= 500:
                        failures.append(f"{status} {path} X-End-User-ID={user!r}")
                    elif 400 <= status < 500 and db_state(db) != before:
                        failures.append(f"{status} wrote rows: {path} X-End-User-ID={user!r}")
    finally:
        server.stop()
    assert not failures, "\n".join(failures)
    # The suite exercised both outcomes: refusals and stored writes.
    assert any(400 <= s < 500 for s in statuses), statuses
    assert statuses.get(200, 0) > 0, statuses
