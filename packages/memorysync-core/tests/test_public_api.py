"""The public surface: exactly what __all__ says, importable with httpx alone."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import memorysync_core
from memorysync_core import adapters, errors

# The application's surface (issue 23, item 6: 50 names before, 34 after the move; issues 25
# and 26 added SAID_TEMPLATE, InsufficientStorageError, ImportSkip and Moment).
EXPECTED = {
    "DEFAULT_CONTEXT_TEMPLATE",
    "EXPORT_SCHEMA",
    "SETTING_DEFAULTS",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AdapterOptions",
    "AdapterSettings",
    "AuthError",
    "InsufficientStorageError",
    "ClearResult",
    "ClearScope",
    "ContextRenderer",
    "DeliveryReport",
    "ForgetReport",
    "ImportReport",
    "MemoryPage",
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
    "UnsupportedError",
    "UnsupportedUserIdError",
    "UserMemory",
    "ImportSkip",
    "ValidationError",
    "__version__",
    "configure_telemetry",
    "errors",
}

# What only adapter authors need: ``memorysync_core.adapters``. Issue 32 (item 4) trimmed
# its 20 names to the 8 the four adapters import (each name is a semver promise).
EXPECTED_ADAPTERS = {
    "TOOL_TEXTS",
    "AdapterAttributes",
    "AdapterKit",
    "CapturedTurn",
    "SyncUsersDataMethods",
    "UsersDataMethods",
    "check_clear_scope",
    "fnv1a64",
}


def test_all_is_exactly_the_public_surface() -> None:
    assert set(memorysync_core.__all__) == EXPECTED
    assert len(memorysync_core.__all__) == len(EXPECTED) == 38
    public = {name for name in vars(memorysync_core) if not name.startswith("_")}
    modules = {"errors", "adapters"}  # the public submodules (adapters once imported)
    assert public - {"annotations"} - modules == EXPECTED - {"__version__", "errors"}
    for name in memorysync_core.__all__:
        assert getattr(memorysync_core, name) is not None


def test_the_adapters_module_is_exactly_the_adapter_authors_surface() -> None:
    """The pin moves deliberately: ``AdapterAttributes`` joined it when the ``settings``
    and ``user_id`` properties that AutoGen, both AG2 seams and Agent Framework each
    declared moved into the core (what two adapters need lives once, here)."""
    assert set(adapters.__all__) == EXPECTED_ADAPTERS
    assert len(adapters.__all__) == len(EXPECTED_ADAPTERS)
    public = {name for name in vars(adapters) if not name.startswith("_")}
    assert public - {"annotations"} == EXPECTED_ADAPTERS
    assert not EXPECTED_ADAPTERS & EXPECTED  # one home for each name
    assert "adapter" in (adapters.__doc__ or "")


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
