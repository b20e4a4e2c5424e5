"""AG2 + MemorySync in two sessions, offline on the embedded memorysync-local server.

Session one: the user mentions facts about themselves; every utterance is stored in
the ``ag2::monday`` transcript and the user's facts are extracted. Session two (a new
chat, a new transcript): the assistant's model sees those facts in front of the
user's message. The stored chat never contains them.

Run it with ``python examples/ag2_quickstart.py``. Without ``OPENAI_API_KEY`` the
assistant's model is a scripted stand-in (AG2's custom model client mechanism) that
prints what it receives; with the key set, ``gpt-4o-mini`` answers for real.

Needs: ``pip install ag2-memorysync memorysync-local autogen``.
"""

from __future__ import annotations

import os
import tempfile
from types import SimpleNamespace
from typing import Any

from autogen import ConversableAgent, UserProxyAgent

from ag2_memorysync import MemorySyncCapability
from memorysync_local import embedded

SESSIONS = (
    ("monday", "I am vegetarian and I live in Lisbon."),
    ("tuesday", "Can you recommend a vegetarian dinner place in Lisbon?"),
)

# What the scripted model received on each call (its last message), for printing.
MODEL_SAW: list[str] = []


class ScriptedModel:
    """A stand-in model client (AG2's ``register_model_client`` protocol), no network."""

    def __init__(self, config: dict[str, Any], **kwargs: Any) -> None:
        self.model = config.get("model", "scripted")

    def create(self, params: dict[str, Any]) -> Any:
        last = params["messages"][-1]["content"]
        MODEL_SAW.append(last)
        reply = "Noted!" if len(MODEL_SAW) == 1 else "Try a vegetarian tasca in Alfama."
        message = SimpleNamespace(content=reply, tool_calls=None, function_call=None)
        return SimpleNamespace(
            choices=[SimpleNamespace(message=message)], model=self.model, cost=0.0, usage={}
        )

    def message_retrieval(self, response: Any) -> list[str]:
        return [choice.message.content for choice in response.choices]

    def cost(self, response: Any) -> float:
        return 0.0

    @staticmethod
    def get_usage(response: Any) -> dict[str, Any]:
        return {}


def make_assistant() -> ConversableAgent:
    """The assistant: gpt-4o-mini with OPENAI_API_KEY, otherwise the scripted model."""
    if os.environ.get("OPENAI_API_KEY"):  # hosted model; the memory stays local
        llm_config: dict[str, Any] = {
            "config_list": [{"model": "gpt-4o-mini", "api_key": os.environ["OPENAI_API_KEY"]}]
        }
        return ConversableAgent("assistant", llm_config=llm_config, human_input_mode="NEVER")
    llm_config = {"config_list": [{"model": "scripted", "model_client_cls": "ScriptedModel"}]}
    assistant = ConversableAgent("assistant", llm_config=llm_config, human_input_mode="NEVER")
    assistant.register_model_client(model_client_cls=ScriptedModel)
    return assistant


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, embedded(os.path.join(tmp, "ms.db")) as server:
        for session_id, message in SESSIONS:
            memory = MemorySyncCapability(
                user_id="ana",
                session_id=session_id,
                api_key=server.api_key,
                base_url=server.base_url,
                transport=server.transport,
            )
            assistant = make_assistant()
            user = UserProxyAgent("ana", human_input_mode="NEVER", code_execution_config=False)
            memory.add_to_agent(assistant)
            memory.add_to_agent(user)  # both sides attached: still one row per utterance

            result = user.initiate_chat(assistant, message=message, max_turns=1, silent=True)
            report = memory.flush()  # what became of the captured turns
            assert report.all_delivered, report.reasons
            print(f"[{session_id}] ana: {message}")
            print(f"[{session_id}] assistant: {result.chat_history[-1]['content']}")
            print(f"[{session_id}] remembered now: {[m.text for m in memory.search(message)]}")
            memory.close()

        if MODEL_SAW:
            print("\nWhat the model received in session two:\n")
            print(MODEL_SAW[-1])


if __name__ == "__main__":
    main()
