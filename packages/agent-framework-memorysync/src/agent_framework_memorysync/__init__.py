"""MemorySync for Microsoft Agent Framework (``agent-framework-core`` 1.8 to 1.x).

``MemorySyncContextProvider`` is an Agent Framework ``ContextProvider``: before every
run it recalls what the user said in earlier sessions, under a hard latency budget,
and adds it to the run's instructions; after every run it captures the exchange into
the session's transcript and the user's facts. ``create_memory_tools`` gives an agent
``search_memory`` and ``save_memory`` tools.

Example:
    ```python
    from agent_framework import Agent
    from agent_framework_memorysync import MemorySyncContextProvider

    memory = MemorySyncContextProvider(user_id="customer-42")
    agent = Agent(client, instructions="You are helpful.", context_providers=[memory])
    ```
"""

from __future__ import annotations

from ._provider import MemorySyncContextProvider
from ._tools import create_memory_tools
from ._version import __version__

__all__ = ["MemorySyncContextProvider", "__version__", "create_memory_tools"]
