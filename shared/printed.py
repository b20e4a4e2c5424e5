"""What a documented code block promises to print, and whether a run printed it.

Two ways to write it, the first pydantic-ai's: ``#> text`` lines after the ``print``
(one per printed line), or, in docstring examples, a trailing ``# text`` comment on a
one-line ``print(...)``.
In the promised text, ``...`` and a ``<placeholder with spaces>`` each match any run of
characters (a port, an id, a time); ``<tag>`` without a space is literal.
"""

from __future__ import annotations

import io
import re
import tokenize

PRINT = re.compile(r"^\s*print\(")
# A trailing comment that is a tool's instruction, not promised output.
TOOL_COMMENT = re.compile(r"^#\s*(noqa|type:|fmt:|pragma)")


def prints(code: str) -> bool:
    """True when the block calls ``print``."""
    return any(PRINT.match(line) for line in code.splitlines())


def promised_output(code: str, *, trailing: bool = False) -> list[str] | None:
    """The lines the block promises to print, or None when it promises nothing.

    ``trailing``: a trailing ``# text`` on a ``print`` line is a promise too (docstring
    examples write them so); in Markdown, where such comments explain, only ``#>`` lines.
    """
    promised: list[str] = []
    found = False
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        comment = token.string
        if comment.startswith("#>"):
            found = True
            promised.append(comment[2:].removeprefix(" ").rstrip())
            continue
        code_part = token.line[: token.start[1]]
        if (
            trailing
            and PRINT.match(code_part)
            and code_part.rstrip().endswith(")")
            and not TOOL_COMMENT.match(comment)
        ):
            found = True
            promised.append(comment[1:].strip())
    return promised if found else None


def _pattern(line: str) -> re.Pattern[str]:
    parts = re.split(r"(\.\.\.|<[^<>]* [^<>]*>)", line)
    body = "".join(".*" if part == "..." or re.fullmatch(r"<[^<>]* [^<>]*>", part)
                   else re.escape(part) for part in parts)  # fmt: skip
    return re.compile(body)


def mismatch(promised: list[str], printed: str) -> str | None:
    """Why ``printed`` is not what was promised, or None when it is."""
    got = [line.rstrip() for line in printed.splitlines()]
    if len(got) != len(promised):
        return f"promised {len(promised)} lines, printed {len(got)}: {got!r}"
    for number, (want, line) in enumerate(zip(promised, got, strict=True), start=1):
        if not _pattern(want).fullmatch(line):
            return f"line {number}: promised {want!r}, printed {line!r}"
    return None
