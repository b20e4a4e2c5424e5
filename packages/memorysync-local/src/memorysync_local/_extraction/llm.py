"""The LLM extractor (opt-in): a chat model decides ADD / UPDATE / DELETE / NONE.

For each user turn it is shown the user's related current memories (found by
recall) and answers, through an OpenAI-compatible ``POST {base_url}/chat/completions``
with a JSON-schema response format, one decision per fact: ``ADD`` a new fact,
``UPDATE`` memory ``id`` with a new text (the old one is superseded by it),
``DELETE`` memory ``id`` (closed, as a retraction), or ``NONE``. The server applies
the decisions in the turn's one transaction.

Any failure (a timeout, a non-200 status such as 429, malformed JSON, an answer
outside the schema) logs one WARNING and the rule extractor decides that turn
instead: memory keeps working when the model does not. The prompt is
:data:`PROMPT`, documented in docs/local-server.md.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from typing import Any

import httpx

from memorysync_local._extraction.extractor import (
    Extraction,
    Extractor,
    ExtractorFeatures,
    ExtractorSetting,
    Fact,
    RelatedMemory,
    Retraction,
    declared,
)
from memorysync_local._extraction.rules import RuleBasedExtractor
from memorysync_local._text.attributes import classify

logger = logging.getLogger("memorysync.local")

DEFAULT_MODEL = "gpt-4o-mini"
# How long one decision may take before the rule extractor decides instead.
TIMEOUT_SECONDS = 10.0

PROMPT = """You maintain a memory of durable facts about one user of an assistant.
You are given the user's latest message and the user's current memories that may be
related (each with an id). Decide what the memory should become:
- ADD: a new durable fact about the user (text: the fact in the third person,
  without the subject, e.g. "Lives in Toronto", "Allergic to peanuts");
- UPDATE: the message changes a current memory (a new value of something that holds
  one value: where they live, their job, partner, age, diet...); id: that memory,
  text: the new fact;
- DELETE: the message says a current memory no longer holds; id: that memory;
- NONE: nothing durable (greetings, questions, requests, passing states).
Additions to things that hold several values (languages, pets, allergies) are ADD,
never UPDATE. Use only ids from the list. Answer with the JSON object only."""

RESPONSE_SCHEMA: dict[str, Any] = {
    "name": "memory_decisions",
    "strict": True,
    "schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["decisions"],
        "properties": {
            "decisions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["event", "id", "text"],
                    "properties": {
                        "event": {"enum": ["ADD", "UPDATE", "DELETE", "NONE"]},
                        "id": {"type": ["integer", "null"]},
                        "text": {"type": ["string", "null"]},
                    },
                },
            }
        },
    },
}


class MalformedDecision(ValueError):
    """The model's answer is not the decisions the schema asks for."""


class OpenAIExtractor:
    """Decisions from an OpenAI-compatible chat endpoint; the rule extractor on failure.

    >>> OpenAIExtractor(api_key="sk-secret")  # the key is never shown
    OpenAIExtractor('openai:gpt-4o-mini')
    """

    # Shown the user's related memories, to decide UPDATE and DELETE.
    features = ExtractorFeatures(related_memories=True)

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        timeout: float = TIMEOUT_SECONDS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.name = f"openai:{model}"
        self._model = model
        self._fallback = RuleBasedExtractor()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )

    def extract(
        self, text: str, *, explicit: bool = False, related: Sequence[RelatedMemory] = ()
    ) -> Extraction:
        """The model's decisions for ``text`` as an Extraction (see the module docstring)."""
        try:
            decisions = self._decide(text, related)
        except (httpx.HTTPError, MalformedDecision) as exc:
            logger.warning("the LLM extractor failed (%s); the rule extractor decides", exc)
            return self._fallback.extract(text, explicit=explicit)
        return _extraction(decisions, {m.memory_id for m in related})

    def _decide(self, text: str, related: Sequence[RelatedMemory]) -> list[dict[str, Any]]:
        memories = "\n".join(f"- id {m.memory_id}: {m.text}" for m in related) or "(none)"
        answer = self._client.post(
            "/chat/completions",
            json={
                "model": self._model,
                "messages": [
                    {"role": "system", "content": PROMPT},
                    {
                        "role": "user",
                        "content": f"Current memories:\n{memories}\n\nLatest message:\n{text}",
                    },
                ],
                "response_format": {"type": "json_schema", "json_schema": RESPONSE_SCHEMA},
                "temperature": 0,
            },
        )
        if answer.status_code != 200:
            raise MalformedDecision(f"the chat endpoint answered {answer.status_code}")
        try:
            content = answer.json()["choices"][0]["message"]["content"]
            decisions = json.loads(content)["decisions"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise MalformedDecision(f"the answer is not the decisions JSON ({exc!r:.80})") from None
        if not isinstance(decisions, list) or not all(isinstance(d, dict) for d in decisions):
            raise MalformedDecision("'decisions' is not a list of objects")
        return decisions

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def __repr__(self) -> str:
        return f"OpenAIExtractor({self.name!r})"


def _extraction(decisions: Sequence[dict[str, Any]], known: set[int]) -> Extraction:
    """Decisions as facts and retractions; one naming an id not shown is dropped."""
    facts: list[Fact] = []
    retractions: list[Retraction] = []
    for decision in decisions:
        event, memory_id, text = decision.get("event"), decision.get("id"), decision.get("text")
        fact_text = text.strip() if isinstance(text, str) else ""
        if event in ("UPDATE", "DELETE") and memory_id not in known:
            logger.warning("the LLM extractor named memory %r, not one it was shown", memory_id)
            continue
        if event == "DELETE":
            retractions.append(Retraction(memory_id=memory_id))
        elif event in ("ADD", "UPDATE") and fact_text:
            found = classify(fact_text)
            replaces = memory_id if event == "UPDATE" else None
            facts.append(Fact(fact_text, attribute=found[0] if found else None, replaces=replaces))
    return Extraction(facts=tuple(facts), low_value=not decisions, retractions=tuple(retractions))


def load_extractor(setting: ExtractorSetting) -> Extractor:
    """An extractor as given (checked by ``declared``), or the one a spec names: ``rules``
    (the default) or ``openai[:MODEL]``, which reads ``OPENAI_BASE_URL`` (default
    ``https://api.openai.com/v1``) and ``OPENAI_API_KEY`` from the environment."""
    if setting is None:
        return RuleBasedExtractor()
    if not isinstance(setting, str):
        return declared(setting)
    kind, model = parse_extractor_spec(setting)
    if kind == "rules":
        return RuleBasedExtractor()
    return OpenAIExtractor(
        model or DEFAULT_MODEL,
        base_url=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        api_key=os.environ.get("OPENAI_API_KEY"),
    )


def parse_extractor_spec(spec: str) -> tuple[str, str | None]:
    """``rules`` / ``openai[:MODEL]`` -> (kind, model or None); ValueError otherwise."""
    kind, _, model = spec.strip().partition(":")
    kind = kind.lower()
    if kind not in {"rules", "openai"} or (kind == "rules" and model):
        raise ValueError(f"extractor {spec!r} is not one of rules, openai[:MODEL]")
    return kind, (model or None)
