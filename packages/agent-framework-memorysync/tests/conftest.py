"""Fixtures for agent-framework-memorysync's tests: a scripted chat client, providers."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

with warnings.catch_warnings():
    # Some releases announce experimental features on import.
    warnings.simplefilter("ignore")
    from agent_framework import (
        Agent,
        BaseChatClient,
        ChatMiddlewareLayer,
        ChatResponse,
        ChatResponseUpdate,
        Content,
        FunctionInvocationLayer,
        Message,
    )

from agent_framework_memorysync import MemorySyncContextProvider

INSTRUCTIONS = "You are a helpful travel assistant."

Reply = str | Content | Sequence[Content]


class ScriptedChatClient(BaseChatClient[Any]):
    """A chat client that records every request and answers from a script.

    Each entry of ``script`` answers one model call: a string is an assistant text, a
    ``Content`` (or a list of them) is sent as is, e.g. a function call. Once the
    script is used up, the last entry repeats.
    """

    def __init__(self, script: Sequence[Reply] = ("OK.",), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.script = list(script)
        self.requests: list[tuple[list[Message], dict[str, Any]]] = []

    def _next(self) -> list[Content]:
        entry = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(entry, str):
            return [Content.from_text(entry)]
        return [entry] if isinstance(entry, Content) else list(entry)

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> Any:
        self.requests.append((list(messages), dict(options)))
        contents = self._next()
        if stream:

            async def updates() -> AsyncIterator[ChatResponseUpdate]:
                for content in contents:
                    yield ChatResponseUpdate(role="assistant", contents=[content])

            return self._build_response_stream(updates())

        async def respond() -> ChatResponse:
            return ChatResponse(messages=[Message("assistant", contents)])

        return respond()


class ToolCallingClient(FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], ScriptedChatClient):
    """The scripted client with the framework's function invocation, as real clients have."""


class Kit:
    """Helpers for the tests (test modules cannot import each other under importlib mode)."""

    INSTRUCTIONS = INSTRUCTIONS
    ScriptedChatClient = ScriptedChatClient
    ToolCallingClient = ToolCallingClient

    @staticmethod
    def text(text: str) -> Content:
        return Content.from_text(text)

    @staticmethod
    def function_call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> Content:
        return Content.from_function_call(call_id, name, arguments=arguments)

    @staticmethod
    def agent(client: BaseChatClient[Any], *providers: Any, **kwargs: Any) -> Agent[Any]:
        return Agent(client, instructions=INSTRUCTIONS, context_providers=list(providers), **kwargs)

    @staticmethod
    def instructions(client: ScriptedChatClient) -> list[str]:
        """The instructions of every request, in call order."""
        return [str(options.get("instructions", "")) for _, options in client.requests]

    @staticmethod
    def texts(messages: Sequence[Message]) -> list[tuple[str, str]]:
        return [(str(m.role), m.text) for m in messages]


@pytest.fixture
def kit() -> type[Kit]:
    """The helpers above."""
    return Kit


@pytest.fixture
async def provider_on() -> AsyncIterator[Callable[..., MemorySyncContextProvider]]:
    """Build providers against a local server (embedded or served); closed after the test."""
    made: list[MemorySyncContextProvider] = []

    def make(server: Any, **settings: Any) -> MemorySyncContextProvider:
        settings.setdefault("user_id", "alice")
        settings.setdefault("api_key", server.api_key)
        provider = MemorySyncContextProvider(
            base_url=server.base_url, transport=getattr(server, "transport", None), **settings
        )
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.close()
