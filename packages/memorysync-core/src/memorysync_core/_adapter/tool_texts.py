"""What the memory tools say to a model, written once for every adapter.

Each adapter registers ``search_memory`` and ``save_memory`` in its framework's tool
convention; the descriptions and the answers are these, so a model reads the same words
whichever framework runs it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolTexts:
    """The descriptions and fixed answers of the two memory tools."""

    search_description: str = (
        "Search what is remembered about the current user (preferences, facts they "
        "shared in earlier conversations). Returns one remembered fact per line."
    )
    save_description: str = (
        "Remember a durable fact about the current user for future conversations. The "
        "memory service decides whether the fact is worth keeping; the result says what "
        "was kept."
    )
    nothing_found: str = "Nothing relevant is remembered about the user."
    empty_query: str = "Nothing was searched: the query was empty; pass what to look up."
    empty_fact: str = "Nothing was saved: the fact was empty; pass the sentence to remember."

    def found(self, texts: Iterable[str]) -> str:
        """One ``- fact`` line per remembered text, or :attr:`nothing_found`."""
        lines = [f"- {text}" for text in texts]
        return "\n".join(lines) if lines else self.nothing_found

    @staticmethod
    def search_failed(error: BaseException) -> str:
        """The answer to a search that failed (the error's type only, never its text)."""
        return f"Memory search is unavailable right now ({type(error).__name__})."

    @staticmethod
    def save_failed(error: BaseException) -> str:
        """The answer to a save that failed (the error's type only, never its text)."""
        return f"The fact could not be saved right now ({type(error).__name__})."


TOOL_TEXTS = ToolTexts()
