"""The one settings surface every framework adapter accepts, declared once here.

Each adapter takes ``user_id``, an optional ``settings=`` (an :class:`AdapterSettings`
to start from) and keyword arguments typed by :class:`AdapterOptions`; this module fills
the defaults, checks the values (``ValueError`` naming the parameter, ``TypeError`` for
an unknown name) and builds the client and the per-user façade, so the adapters cannot
drift apart. It also holds the prompt gate every adapter applies before a recall.
Public so that another adapter can reuse it; applications pass keyword arguments.
"""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeGuard

from .._recall.render import DEFAULT_CONTEXT_TEMPLATE, ContextRenderer
from .._user_memory import UserMemory
from .._wire.client import MemorySyncAPI

if TYPE_CHECKING:
    import httpx
    from typing_extensions import Unpack

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


class AdapterOptions(TypedDict, total=False):
    """Every adapter setting besides ``user_id``; the defaults are in ``SETTING_DEFAULTS``.

    ``session_id``: the conversation (transcript scope ``<surface>::<session_id>``).
    ``top_k``: memories per recall. ``recall_timeout``: the hard recall budget in
    seconds, tenant lookup included. ``min_prompt_chars``: prompts shorter than this
    (stripped) are not recalled for. ``context_template``: the block's template with a
    ``{context}`` placeholder (None: the built-in one). ``clear_scope``: what ``clear()``
    deletes, ``"session"`` or ``"user"``. ``request_timeout``: each attempt of an
    explicit call or a delivery, in seconds. ``api_key`` (else ``MEMORYSYNC_API_KEY``;
    never shown or serialized), ``base_url`` (else ``MEMORYSYNC_BASE_URL``),
    ``project_id`` (else ``MEMORYSYNC_PROJECT_ID``), ``tenant_id`` (skips tenant
    resolution), ``transport`` (an ``httpx`` transport: tests, the embedded server).
    ``min_score`` and ``max_context_chars``: client-side filters on the block.
    ``transcript``: an exchange goes to the session transcript (True) or only the
    user's turn to fact extraction (False). ``outbox`` (else ``MEMORYSYNC_OUTBOX``):
    the path of a local SQLite file that keeps every captured turn until the server
    has it, so turns survive an exit, a crash or a kill (see ``docs/faults.md``).
    ``said_template``: appended to each line of
    the block with ``{date}`` = the day the fact was said (e.g. ``" (said {date})"``);
    None (the default) shows no dates.
    """

    session_id: str
    top_k: int
    recall_timeout: float
    min_prompt_chars: int
    context_template: str | None
    clear_scope: ClearScope
    request_timeout: float
    api_key: str | None
    base_url: str | None
    project_id: str | None
    tenant_id: str | None
    transport: httpx.AsyncBaseTransport | None
    min_score: float | None
    max_context_chars: int | None
    transcript: bool
    outbox: str | None
    said_template: str | None


SETTING_DEFAULTS: dict[str, Any] = {
    "session_id": "default",
    "top_k": 5,
    "recall_timeout": 1.2,
    "min_prompt_chars": 8,
    "context_template": None,
    "clear_scope": "session",
    "request_timeout": 10.0,
    "api_key": None,
    "base_url": None,
    "project_id": None,
    "tenant_id": None,
    "transport": None,
    "min_score": None,
    "max_context_chars": None,
    "transcript": True,
    "outbox": None,
    "said_template": None,
}


def _with_guess(name: str) -> str:
    """``name``, and the setting it is closest to: ``topk (did you mean `top_k`?)``."""
    known = [*SETTING_DEFAULTS, "user_id", "settings"]
    # Case and underscores are the usual slips: compare without them first.
    folded = {k.replace("_", "").lower(): k for k in known}
    guess = folded.get(name.replace("_", "").replace("-", "").lower())
    if guess is None:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        guess = close[0] if close else None
    return name if guess is None else f"{name} (did you mean `{guess}`?)"


# Live or secret: never written into a serialized configuration.
NOT_SERIALIZED = frozenset({"api_key", "transport"})


@dataclass(frozen=True)
class AdapterSettings:
    """One adapter instance's validated settings (the key kept out of repr).

    Read any setting as an attribute (``settings.top_k``); ``renderer`` is the block
    renderer made from ``context_template``, ``min_score``, ``max_context_chars`` and
    ``said_template``.
    :meth:`open` builds a fresh client and :class:`UserMemory` from them (the sync face
    calls it again after a ``fork``).

    Example:
        ```python
        settings = AdapterSettings.build(surface="myframework", user_id="alice", top_k=3)
        memory = settings.open()
        ```
    """

    surface: str
    user_id: str
    session_id: str
    top_k: int
    recall_timeout: float
    min_prompt_chars: int
    context_template: str | None
    clear_scope: ClearScope
    request_timeout: float
    api_key: str | None
    base_url: str | None
    project_id: str | None
    tenant_id: str | None
    transport: httpx.AsyncBaseTransport | None
    min_score: float | None
    max_context_chars: int | None
    transcript: bool
    outbox: str | None
    said_template: str | None
    renderer: ContextRenderer

    @classmethod
    def build(
        cls,
        *,
        surface: str,
        user_id: str | None = None,
        settings: AdapterSettings | None = None,
        **options: Unpack[AdapterOptions],
    ) -> AdapterSettings:
        """Validate the settings: the defaults, then ``settings``, then ``options``.

        ``user_id`` may come from ``settings``. Raises ``TypeError`` for an unknown
        option name and ``ValueError`` naming the parameter for a bad value;
        ``user_id``, ``session_id``, ``top_k`` and ``recall_timeout`` are checked by
        :meth:`open` (through ``UserMemory``).
        """
        unknown = sorted(set(options) - set(SETTING_DEFAULTS))
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(_with_guess(n) for n in unknown)}")
        if settings is not None and not isinstance(settings, AdapterSettings):
            raise TypeError(f"settings must be an AdapterSettings, got {type(settings).__name__}")
        values: dict[str, Any] = dict(SETTING_DEFAULTS)
        if settings is not None:
            values.update(settings.options())
            user_id = settings.user_id if user_id is None else user_id
        values.update(options)
        if user_id is None:
            raise ValueError("user_id is required: the end user the memories belong to")
        template = values["context_template"]
        if template is not None and not isinstance(template, str):
            raise ValueError(
                f"context_template must be a string containing '{{context}}', "
                f"got {type(template).__name__}"
            )
        tenant_id = values["tenant_id"]
        if tenant_id is not None and (not isinstance(tenant_id, str) or not tenant_id.strip()):
            raise ValueError(f"tenant_id must be a non-empty string or None, got {tenant_id!r}")
        outbox = values["outbox"]
        if outbox is not None and (not isinstance(outbox, (str, os.PathLike)) or not str(outbox)):
            raise ValueError(f"outbox must be a file path or None, got {outbox!r}")
        values["outbox"] = None if outbox is None else os.fspath(outbox)
        if not isinstance(values["transcript"], bool):
            raise ValueError(f"transcript must be True or False, got {values['transcript']!r}")
        renderer = ContextRenderer(
            template=DEFAULT_CONTEXT_TEMPLATE if template is None else template,
            min_score=values["min_score"],
            max_context_chars=values["max_context_chars"],
            said_template=values["said_template"],
        )
        values["context_template"] = None if template == DEFAULT_CONTEXT_TEMPLATE else template
        values["min_prompt_chars"] = check_min_prompt_chars(values["min_prompt_chars"])
        values["clear_scope"] = check_clear_scope(values["clear_scope"])
        values["request_timeout"] = check_request_timeout(values["request_timeout"])
        return cls(surface=surface, user_id=user_id, renderer=renderer, **values)

    def options(self) -> dict[str, Any]:
        """Every setting but ``user_id``, as ``AdapterOptions`` keyword arguments."""
        return {name: getattr(self, name) for name in SETTING_DEFAULTS}

    def serializable(self) -> dict[str, Any]:
        """The settings a configuration file may carry: all but the key and the transport."""
        return {k: v for k, v in self.options().items() if k not in NOT_SERIALIZED}

    def wants_recall(self, prompt: object) -> TypeGuard[str]:
        """The prompt gate: recall only for a prompt of ``min_prompt_chars`` or more."""
        return isinstance(prompt, str) and len(prompt.strip()) >= max(self.min_prompt_chars, 1)

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
