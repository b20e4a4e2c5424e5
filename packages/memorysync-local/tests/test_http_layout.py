"""The HTTP layer's shape: short functions, one key check with one 401 answer, and
handlers that read the app's own state (issue 32 item 3)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import memorysync_local
from memorysync_local._http.dependencies import UNAUTHORIZED
from memorysync_local._http.guard import route_template

PACKAGE = Path(memorysync_local.__file__).parent
HTTP = PACKAGE / "_http"
MAX_FUNCTION_LINES = 60


def _functions(path: Path) -> list[tuple[str, int]]:
    """(name, lines from its first decorator to its last line) of every function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            assert node.end_lineno is not None
            found.append((f"{path.name}:{node.name}", node.end_lineno - first + 1))
    return found


def test_no_function_of_the_http_layer_is_longer_than_60_lines() -> None:
    functions = [f for path in sorted(HTTP.glob("*.py")) for f in _functions(path)]
    assert len(functions) > 50  # the layer was read, routes included
    too_long = [(name, lines) for name, lines in functions if lines > MAX_FUNCTION_LINES]
    assert too_long == []


def test_routes_are_module_level_not_closures() -> None:
    # A route closure is a decorated function inside another function.
    nested = []
    for path in sorted(HTTP.glob("*.py")):
        for outer in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
                nested += [
                    f"{path.name}:{outer.name}.{inner.name}"
                    for inner in ast.walk(outer)
                    if inner is not outer
                    and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and inner.decorator_list
                ]
    assert nested == []


def _sends_401(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Constant) and a.value == 401 for a in call.args)


def test_one_401_message_in_the_package() -> None:
    """Every 401 the package answers carries UNAUTHORIZED, written once."""
    literal_uses = []
    answers_401 = []
    strings = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.add(node.value)
                if node.value == UNAUTHORIZED:
                    literal_uses.append(path.relative_to(PACKAGE).as_posix())
            if isinstance(node, ast.Call) and _sends_401(node):
                answers_401.append((path.name, ast.unparse(node)))
    assert literal_uses == ["_http/dependencies.py"]
    # The three messages there were before.
    old = {"missing X-API-Key header", "unknown API key", "missing or unknown X-API-Key header"}
    assert strings & old == set()
    # The routes' dependency raises it; the guard sends it (its refusal is UNAUTHORIZED)
    # to a keyless request with a body before reading the body.
    assert sorted(answers_401) == [
        ("dependencies.py", "HTTPException(401, UNAUTHORIZED)"),
        ("guard.py", "_send_json(send_with_id, 401, {'detail': refusal})"),
    ]


# One route of each family with a body (the guard answers before reading it) and one
# without (the route's Auth dependency answers).
ROUTES = [
    ("GET", "/org/projects", None),
    ("POST", "/v1/memory/add_turn", {"tenant_id": "local", "user_id": "ana", "text": "x"}),
    ("GET", "/v1/memory/local/ana/list", None),
    ("DELETE", "/memory/forget", {"memory_ids": [1]}),
    ("POST", "/v1/history/list", {"tenant_id": "local", "user_id": "ana", "session_id": "s"}),
    ("POST", "/memory/query", {"query": "where"}),
    ("GET", "/memory/7", None),
    ("PATCH", "/memory/7", {"tags": ["a"]}),
    ("GET", "/memory/graph", None),
    ("POST", "/memory/summarize", {}),
    ("GET", "/api/v2/integrations/connections", None),
    ("GET", "/x-local/v1/users", None),
    ("GET", "/x-local/v1/memories?user_id=ana", None),
    ("POST", "/x-local/v1/users/forget", {"user_id": "ana"}),
]


@pytest.mark.parametrize("api_key", [None, "", "ms_not_a_key_of_this_server"])
async def test_missing_and_unknown_keys_get_the_same_401_on_every_route_family(
    make_local_server: Callable[..., Any], api_key: str | None
) -> None:
    srv = make_local_server(served=True)
    headers = {} if api_key is None else {"X-API-Key": api_key}
    answers = {}
    async with httpx.AsyncClient(base_url=srv.base_url, headers=headers, timeout=30) as http:
        for method, path, body in ROUTES:
            answer = await http.request(method, path, json=body)
            answers[method, path] = (answer.status_code, answer.json())
    assert answers == {(m, p): (401, {"detail": UNAUTHORIZED}) for m, p, _ in ROUTES}


async def test_each_app_answers_from_its_own_store_and_keys(
    make_local_server: Callable[..., Any],
) -> None:
    # The routers are module-level: the state must come from the request's app.
    first = make_local_server(api_key="ms_first_key", tenant_id="first")
    second = make_local_server(api_key="ms_second_key", tenant_id="second")
    turn = {"user_id": "ana", "text": "I live in Oslo.", "source": "s"}
    async with (
        httpx.AsyncClient(transport=first.transport, base_url=first.base_url) as a,
        httpx.AsyncClient(transport=second.transport, base_url=second.base_url) as b,
    ):
        stored = await a.post(
            "/v1/memory/add_turn",
            json={"tenant_id": "first", **turn},
            headers={"X-API-Key": "ms_first_key"},
        )
        assert stored.status_code == 200, stored.text
        crossed = await b.get("/org/projects", headers={"X-API-Key": "ms_first_key"})
        assert crossed.status_code == 401
        own = await b.get("/org/projects", headers={"X-API-Key": "ms_second_key"})
        mine = await a.get("/org/projects", headers={"X-API-Key": "ms_first_key"})
    assert [p["memory_count"] for p in own.json()] == [0]
    assert [p["memory_count"] for p in mine.json()] == [1]


@pytest.mark.parametrize(
    ("method", "path", "template"),
    [
        ("GET", "/v1/memory/local/ms_secret/list", "/v1/memory/{tenant_id}/{user_id:path}/list"),
        ("GET", "/memory/12/history", "/memory/{memory_id}/history"),
        ("GET", "/memory/ontology", "/memory/ontology"),
        ("POST", "/x-local/v1/users/forget", "/x-local/v1/users/forget"),
        ("GET", "/nowhere", "<no route>"),
    ],
)
def test_a_route_template_is_found_before_routing_too(
    local_server: Any, method: str, path: str, template: str
) -> None:
    # Before routing the scope names no route: the template is matched among the
    # routers' routes (which FastAPI may keep nested under the app's).
    scope = {"type": "http", "method": method, "path": path, "app": local_server.app}
    scope |= {"headers": [], "query_string": b"", "root_path": ""}
    assert route_template(scope) == template
