"""The public surface: exactly what __all__ says, importable with httpx alone."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import memorysync_core
from memorysync_core import errors

EXPECTED = {
    "AdapterOptions",
    "AdapterSettings",
    "SETTING_DEFAULTS",
    "TOOL_TEXTS",
    "ToolTexts",
    "ClearScope",
    "check_clear_scope",
    "configure_telemetry",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthError",
    "CapturedTurn",
    "ClearResult",
    "ContextRenderer",
    "DEFAULT_CONTEXT_TEMPLATE",
    "DeliveryQueue",
    "DeliveryReport",
    "MAX_TEXT_CHARS",
    "MemorySyncAPI",
    "MemorySyncError",
    "NotFoundError",
    "RateLimitError",
    "RecallResult",
    "RecalledMemory",
    "ResponseFormatError",
    "RetryPolicy",
    "Moment",
    "SAID_TEMPLATE",
    "SaveOutcome",
    "ServerError",
    "SyncUserMemory",
    "SyncUsersDataMethods",
    "UnsupportedError",
    "UnsupportedUserIdError",
    "UserMemory",
    "UsersDataMethods",
    "EXPORT_SCHEMA",
    "ForgetReport",
    "ImportReport",
    "MemoryPage",
    "ValidationError",
    "__version__",
    "assistant_turn_seed",
    "call_with_retries",
    "errors",
    "fnv1a64",
    "new_capture_id",
    "recall_within_budget",
    "sendable_text",
    "truncate_text",
    "user_turn_seed",
}


def test_all_is_exactly_the_public_surface() -> None:
    assert set(memorysync_core.__all__) == EXPECTED
    assert len(memorysync_core.__all__) == len(EXPECTED)
    public = {name for name in vars(memorysync_core) if not name.startswith("_")}
    modules = {"errors"}  # the only public submodule
    assert public - {"annotations"} == (EXPECTED - {"__version__"}) | modules
    for name in memorysync_core.__all__:
        assert getattr(memorysync_core, name) is not None


def test_errors_module_exposes_the_same_classes_as_the_package() -> None:
    for name in errors.__all__:
        assert getattr(errors, name) is getattr(memorysync_core, name)
    assert "MemorySyncError" in (errors.__doc__ or "")


def test_version_is_the_installed_distributions() -> None:
    assert memorysync_core.__version__ == version("memorysync-core")


def test_import_loads_no_framework_or_server_module() -> None:
    code = (
        "import json, sys; import memorysync_core; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    top_level = set(json.loads(out.stdout))
    forbidden = {
        "fastapi",
        "starlette",
        "pydantic",
        "uvicorn",
        "autogen",
        "autogen_core",
        "autogen_agentchat",
        "ag2",
        "memorysync_local",
        "autogen_memorysync",
        "ag2_memorysync",
        "pytest",
        "respx",
    }
    assert not top_level & forbidden
    assert "httpx" in top_level
