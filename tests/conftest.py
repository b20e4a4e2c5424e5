"""Fixtures of the cross-package tests: a fault proxy in front of the served local server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from shared.faults import FaultProxy
from shared.secret_guard import TEST_API_KEY


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
