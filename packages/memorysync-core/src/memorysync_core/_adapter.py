"""Settings both framework adapters accept, validated and turned into a UserMemory once.

The AutoGen memory and the AG2 capability take the same recall, rendering and
connection parameters; this module checks them (``ValueError`` naming the parameter)
and builds the client and the per-user façade, so the two adapters cannot drift apart.
Public so that a third adapter can reuse it; applications never need it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ._client import MemorySyncAPI
from ._render import DEFAULT_CONTEXT_TEMPLATE, ContextRenderer
from ._user_memory import UserMemory

if TYPE_CHECKING:
    import httpx

ClearScope = Literal["session", "user"]
CLEAR_SCOPES: tuple[ClearScope, ...] = ("session", "user")


def check_clear_scope(value: object, *, name: str = "clear_scope") -> ClearScope:
    """``value`` as a clear scope; ValueError naming ``name`` otherwise."""
    if value == "session" or value == "user":
        return value  # type: ignore[return-value]  # narrowed by the comparison above
    raise ValueError(f"{name} must be 'session' or 'user', got {value!r}")


def check_min_prompt_chars(value: object) -> int:
    """``value`` as a prompt-length floor (an integer >= 0); ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"min_prompt_chars must be an integer >= 0, got {value!r}")
    return value


def check_request_timeout(value: object) -> float:
    """``value`` as a per-request timeout (finite seconds > 0); ValueError otherwise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"request_timeout must be a finite number of seconds > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class AdapterSettings:
    """One adapter instance's connection and recall settings (the key kept out of repr).

    :meth:`open` builds a fresh client and :class:`UserMemory` from them; the AG2
    adapter calls it again after a ``fork``.
    """

    surface: str
    user_id: str
    session_id: str
    top_k: int
    recall_timeout: float
    min_prompt_chars: int
    clear_scope: ClearScope
    request_timeout: float
    renderer: ContextRenderer
    api_key: str | None
    base_url: str | None
    project_id: str | None
    tenant_id: str | None
    transport: httpx.AsyncBaseTransport | None

    @classmethod
    def build(
        cls,
        *,
        surface: str,
        user_id: str,
        session_id: str,
        top_k: int,
        recall_timeout: float,
        min_prompt_chars: int,
        clear_scope: ClearScope,
        request_timeout: float,
        context_template: str | None,
        min_score: float | None,
        max_context_chars: int | None,
        api_key: str | None,
        base_url: str | None,
        project_id: str | None,
        tenant_id: str | None,
        transport: httpx.AsyncBaseTransport | None,
    ) -> AdapterSettings:
        """Validate the settings (``context_template=None``: the built-in template).

        Raises ValueError naming the parameter; ``user_id``, ``session_id``, ``top_k``
        and ``recall_timeout`` are checked by :meth:`open` (through ``UserMemory``).
        """
        if context_template is not None and not isinstance(context_template, str):
            raise ValueError(
                f"context_template must be a string containing '{{context}}', "
                f"got {type(context_template).__name__}"
            )
        if tenant_id is not None and (not isinstance(tenant_id, str) or not tenant_id.strip()):
            raise ValueError(f"tenant_id must be a non-empty string or None, got {tenant_id!r}")
        renderer = ContextRenderer(
            template=DEFAULT_CONTEXT_TEMPLATE if context_template is None else context_template,
            min_score=min_score,
            max_context_chars=max_context_chars,
        )
        return cls(
            surface=surface,
            user_id=user_id,
            session_id=session_id,
            top_k=top_k,
            recall_timeout=recall_timeout,
            min_prompt_chars=check_min_prompt_chars(min_prompt_chars),
            clear_scope=check_clear_scope(clear_scope),
            request_timeout=check_request_timeout(request_timeout),
            renderer=renderer,
            api_key=api_key,
            base_url=base_url,
            project_id=project_id,
            tenant_id=tenant_id,
            transport=transport,
        )

    def __repr__(self) -> str:
        return (
            f"AdapterSettings(surface={self.surface!r}, user_id={self.user_id!r}, "
            f"session_id={self.session_id!r})"
        )

    def open(self) -> UserMemory:
        """A new client (``source`` = the surface) and the user's memory over it.

        Raises ValueError for a missing key or an invalid user, session, ``top_k`` or
        ``recall_timeout``.
        """
        api = MemorySyncAPI(
            self.api_key,
            base_url=self.base_url,
            project_id=self.project_id,
            tenant_id=self.tenant_id,
            transport=self.transport,
            timeout=self.request_timeout,
            source=self.surface,
        )
        return UserMemory(
            api,
            user_id=self.user_id,
            session_id=self.session_id,
            surface=self.surface,
            top_k=self.top_k,
            recall_timeout=self.recall_timeout,
            renderer=self.renderer,
        )
