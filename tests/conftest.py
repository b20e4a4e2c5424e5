"""Fixtures of the cross-package tests: a fault proxy in front of the served local server."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import settings

from shared.faults import FaultProxy
from shared.secret_guard import TEST_API_KEY

# Hypothesis: "ci" (the default) draws the same examples on every run, from a seed
# derived from each test, and keeps no example database, so a run's result depends on
# the code alone. "explore" draws new examples each run and more of them; the opt-in
# ``fuzz_explore`` nox session selects it (HYPOTHESIS_PROFILE=explore).
settings.register_profile("ci", derandomize=True, database=None, max_examples=20)
settings.register_profile("explore", derandomize=False, database=None, max_examples=200)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    # ag2 0.14.1 imports openai-era modules that warn on Python 3.11+; not ours to fix.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:autogen.*")
    # schemathesis 3.x uses jsonschema names that jsonschema >= 4.18 deprecates.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:schemathesis.*")
    # schemathesis 3.x's from_pytest_fixture warns about its own default arguments.
    config.addinivalue_line(
        "filterwarnings",
        "ignore:Argument `.*` is deprecated and will be removed in Schemathesis 4.0"
        ":DeprecationWarning",
    )


class ProxiedServer:
    """memorysync-local served on loopback, reached through a :class:`FaultProxy`."""

    def __init__(self, upstream: Any, proxy: FaultProxy) -> None:
        self.upstream = upstream
        self.proxy = proxy
        self.base_url = proxy.base_url
        self.api_key: str = upstream.api_key
        self.tenant_id: str = upstream.tenant_id
        self.db_path: str = upstream.db_path


@pytest.fixture
def proxied_local(make_local_server: Callable[..., Any]) -> Iterator[ProxiedServer]:
    """The real server (key ``TEST_API_KEY``) behind a scriptable fault proxy."""
    upstream = make_local_server(served=True, api_key=TEST_API_KEY)
    proxy = FaultProxy(upstream).start()
    try:
        yield ProxiedServer(upstream, proxy)
    finally:
        proxy.stop()
