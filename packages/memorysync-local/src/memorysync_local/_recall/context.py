"""The prompt-ready context block a recall answers with: memories grouped by kind."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_KIND_HEADINGS = {
    "identity": "About the user",
    "relation": "People and pets",
    "preference": "Preferences",
    "constraint": "Constraints",
    "plan": "Plans",
    "habit": "Habits",
    "other": "Other facts",
}


def render_context(memories: Sequence[dict[str, Any]]) -> str:
    """Group recalled memories by kind, best group first, as a prompt-ready block.

    Groups are ordered by their best memory's rank and memories keep their rank
    order inside a group; each group is a heading line then ``- text`` lines.
    """
    groups: dict[str, list[str]] = {}
    for memory in memories:
        kind = str(memory.get("kind") or "other")
        groups.setdefault(kind, []).append(str(memory["value"]))
    blocks = []
    for kind, texts in groups.items():
        heading = _KIND_HEADINGS.get(kind, _KIND_HEADINGS["other"])
        blocks.append(heading + ":\n" + "\n".join(f"- {text}" for text in texts))
    return "\n\n".join(blocks)
