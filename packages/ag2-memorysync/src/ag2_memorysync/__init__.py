"""MemorySync long-term memory for AG2's classic ``ConversableAgent`` framework.

Attach :class:`MemorySyncCapability` to the agents of a chat: every utterance is
stored once in the session transcript with the speaker's role, and each attached
agent's model sees the user's recalled memories in front of the incoming message
(and only the model: the stored chat never contains them).

Example:
    ```python
    from ag2_memorysync import MemorySyncCapability

    memory = MemorySyncCapability(user_id="alice", session_id="support")
    memory.add_to_agent(assistant)
    user_proxy.initiate_chat(assistant, message="I live in Lisbon.")
    memory.close()
    ```
"""

from ._capability import MemorySyncCapability
from ._roles import speaks_for_a_person
from ._tools import register_memory_tools
from ._version import __version__

__all__ = [
    "MemorySyncCapability",
    "__version__",
    "register_memory_tools",
    "speaks_for_a_person",
]
