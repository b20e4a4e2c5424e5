"""A scripted OpenAI-compatible chat endpoint, on the test kit's fake server.

The fake server (``shared.fake_server``) answers any route it is scripted for; this
module gives the answers of ``POST /v1/chat/completions`` that an LLM extractor reads::

    extractor = OpenAIExtractor(base_url=chat_base_url(fake_server), api_key="sk-test")
    fake_server.script(CHAT_ROUTE, [decisions({"event": "ADD", "id": None,
                                               "text": "Lives in Lisbon"})])

Every answer carries ``usage`` (``prompt_tokens``, ``completion_tokens``), so a
benchmark can count a turn's tokens as it would be billed.
"""

from __future__ import annotations

import json
from typing import Any

from shared.fake_server import FakeServer, Fault

CHAT_ROUTE = "/v1/chat/completions"


def chat_base_url(server: FakeServer) -> str:
    """The ``base_url`` an OpenAI client is given for this fake server."""
    return f"{server.base_url}/v1"


def chat_answer(content: str, *, prompt_tokens: int = 0, completion_tokens: int = 0) -> Fault:
    """A chat completion whose message is ``content`` (any text, also not JSON)."""
    return Fault.json(
        {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": content},
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


def decisions(*items: dict[str, Any], prompt_tokens: int = 0, completion_tokens: int = 0) -> Fault:
    """A chat completion answering the memory decisions ``items``."""
    return chat_answer(
        json.dumps({"decisions": list(items)}),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )
