"""Whose words a message is: the person's or the assistant's."""

from __future__ import annotations


def has_model(agent: object) -> bool:
    """True when the agent has a model client (it was given an ``llm_config``)."""
    return getattr(agent, "client", None) is not None or bool(getattr(agent, "llm_config", None))


def speaks_for_a_person(agent: object) -> bool:
    """Whether ``agent``'s messages are a person's words (stored with role ``user``).

    True for a ``UserProxyAgent`` (or subclass), for an agent with
    ``human_input_mode="ALWAYS"``, and for a ``"TERMINATE"``-mode agent without a model
    (``ConversableAgent``'s default mode: with no model, its replies are typed by a
    human). Every other agent speaks as the assistant. The check is duck-typed: AG2 is
    never imported.

    Example:
        ```python
        from autogen import ConversableAgent, UserProxyAgent

        assert speaks_for_a_person(UserProxyAgent("user", code_execution_config=False))
        assert not speaks_for_a_person(ConversableAgent("bot", human_input_mode="NEVER"))
        ```
    """
    if any(cls.__name__ == "UserProxyAgent" for cls in type(agent).__mro__):
        return True
    mode = getattr(agent, "human_input_mode", None)
    if mode == "ALWAYS":
        return True
    return mode == "TERMINATE" and not has_model(agent)
