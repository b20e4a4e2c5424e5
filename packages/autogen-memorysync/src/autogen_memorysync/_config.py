"""The declarative configuration of a ``MemorySyncMemory``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from memorysync_core import ClearScope


class MemorySyncMemoryConfig(BaseModel):
    """What ``MemorySyncMemory.dump_component()`` writes and ``load_component()`` reads.

    Every constructor setting except ``api_key`` and ``transport``: the key is never
    serialized (on load it comes from ``MEMORYSYNC_API_KEY``) and a transport is a live
    object. ``base_url`` and ``project_id`` are written only when they were passed
    explicitly; taken from the environment, they are taken from it again on load.

    Example:
        ```python
        from autogen_memorysync import MemorySyncMemory, MemorySyncMemoryConfig

        config = MemorySyncMemoryConfig(user_id="customer-42", session_id="support")
        memory = MemorySyncMemory.load_component(
            {"provider": "autogen_memorysync.MemorySyncMemory", "config": config.model_dump()}
        )
        ```
    """

    # Unknown fields are refused, so a key cannot be smuggled into a config file; and a
    # refusal never quotes the input, which may be that very key.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    user_id: str = Field(description="End user the memories belong to (required).")
    session_id: str = Field(default="default", description="Transcript scope: autogen::<session>.")
    top_k: int = Field(default=5, description="Memories considered per turn.")
    recall_timeout: float = Field(default=1.2, description="Hard recall budget in seconds.")
    min_prompt_chars: int = Field(default=8, description="Skip recall for shorter prompts.")
    context_template: str | None = Field(
        default=None, description="Template with a {context} placeholder; None = built-in."
    )
    clear_scope: ClearScope = Field(default="session", description="What clear() deletes.")
    request_timeout: float = Field(
        default=10.0, description="Per-request timeout of explicit calls, in seconds."
    )
    base_url: str | None = Field(default=None, description="Server URL (else the environment).")
    project_id: str | None = Field(default=None, description="Project pinned with X-Project-ID.")
    tenant_id: str | None = Field(default=None, description="Explicit tenant (skips resolution).")
    min_score: float | None = Field(default=None, description="Drop memories scoring below.")
    max_context_chars: int | None = Field(default=None, description="Cap on the block's body.")
    transcript: bool = Field(
        default=True, description="add_turn_pair stores both turns in the session transcript."
    )
    outbox: str | None = Field(
        default=None, description="SQLite file keeping captured turns until delivered."
    )
    said_template: str | None = Field(
        default=None, description="Per-line suffix with {date}, e.g. ' (said {date})'."
    )
