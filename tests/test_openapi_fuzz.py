"""Schemathesis over memorysync-local's own OpenAPI document, served by uvicorn on loopback.

Every operation gets a bounded number of generated requests (20), authenticated with a
configured key. The first test is the gate: no answer is a 5xx, every content type is
declared, and every 2xx body (what a client parses) matches its response schema. The
second collects every answer the document does not describe (undeclared status codes,
error bodies of another shape) and lists each violation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
SETTINGS = settings(
    max_examples=20,
    deadline=None,
    database=None,
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


@pytest.fixture
def local_api(tmp_path: Path) -> Iterator[Any]:
    """memorysync-local's schema, served over a fresh database, knowing ``TEST_API_KEY``."""
    server = serve_in_thread(str(tmp_path / "fuzz.db"), api_key=TEST_API_KEY, tenant_id=TENANT)
    try:
        yield schemathesis.from_uri(f"{server.base_url}/openapi.json", base_url=server.base_url)
    finally:
        server.stop()


schema = schemathesis.from_pytest_fixture("local_api")


@schema.parametrize()
@SETTINGS
def test_no_operation_answers_5xx_and_every_success_matches_its_schema(case: Any) -> None:
    case.call_and_validate(
        headers=HEADERS,
        checks=(not_a_server_error, content_type_conformance, success_schema_conformance),
    )


def test_every_answer_is_described_by_the_openapi_document(local_api: Any) -> None:
    violations: dict[str, set[str]] = {}
    operations = [result.ok() for result in local_api.get_all_operations()]
    assert len(operations) >= 10

    for operation in operations:

        @given(case=operation.as_strategy())
        @SETTINGS
        def probe(case: Any) -> None:
            response = case.call(headers=HEADERS)
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
