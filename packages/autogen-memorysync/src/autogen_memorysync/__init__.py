"""MemorySync for Microsoft AutoGen (``autogen-agentchat`` 0.4.9.3 to 0.7).

``MemorySyncMemory`` is an AutoGen ``Memory``: before every model call it recalls what
the user said in earlier sessions, under a hard latency budget, and shows it to the
model; ``add_turn_pair`` records each exchange. ``create_memory_tools`` gives an agent
``search_memory`` and ``save_memory`` tools.

Example:
    ```python
    from autogen_agentchat.agents import AssistantAgent
    from autogen_memorysync import MemorySyncMemory

    memory = MemorySyncMemory(user_id="customer-42", session_id="support-chat")
    agent = AssistantAgent("assistant", model_client=model_client, memory=[memory])
    ```
"""

from __future__ import annotations

from ._config import MemorySyncMemoryConfig
from ._memory import MemorySyncMemory
from ._tools import create_memory_tools
from ._version import __version__

__all__ = ["MemorySyncMemory", "MemorySyncMemoryConfig", "__version__", "create_memory_tools"]
