"""The one settings surface: declared once, defaults filled, bad values named, key unshown."""

from __future__ import annotations

import pytest

from memorysync_core import (
    DEFAULT_CONTEXT_TEMPLATE,
    SETTING_DEFAULTS,
    AdapterOptions,
    AdapterSettings,
)
from memorysync_core.adapters import TOOL_TEXTS

KEY = "ms_settings_test_key_0123456789"


def build(**options: object) -> AdapterSettings:
    return AdapterSettings.build(surface="test", user_id="alice", **options)  # type: ignore[arg-type]


def test_every_declared_option_has_a_default_and_nothing_else_does() -> None:
    assert set(AdapterOptions.__optional_keys__) == set(SETTING_DEFAULTS)
    assert not AdapterOptions.__required_keys__


def test_defaults_fill_what_was_not_given() -> None:
    settings = build(top_k=3)
    assert settings.top_k == 3
    assert settings.session_id == "default"
    assert settings.recall_timeout == 1.2
    assert settings.transcript is True
    assert settings.renderer.template == DEFAULT_CONTEXT_TEMPLATE
    assert settings.context_template is None


def test_an_unknown_setting_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match="unknown settings: topk"):
        build(topk=3)


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("topk", "top_k"),
        ("Top_K", "top_k"),
        ("recall_timout", "recall_timeout"),
        ("outbx", "outbox"),
    ],
)
def test_a_misspelled_setting_names_the_one_it_resembles(typed: str, meant: str) -> None:
    with pytest.raises(TypeError, match=f"{typed} \\(did you mean `{meant}`\\?\\)"):
        build(**{typed: 3})


def test_a_setting_like_no_other_gets_no_guess() -> None:
    with pytest.raises(TypeError) as caught:
        build(zzzzzz=3)
    assert str(caught.value) == "unknown settings: zzzzzz"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"clear_scope": "all"}, "clear_scope"),
        ({"min_prompt_chars": -1}, "min_prompt_chars"),
        ({"request_timeout": 0}, "request_timeout"),
        ({"transcript": "yes"}, "transcript"),
        ({"tenant_id": " "}, "tenant_id"),
        ({"context_template": 3}, "context_template"),
    ],
)
def test_a_bad_value_is_a_value_error_naming_the_setting(
    options: dict[str, object], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        build(**options)


def test_settings_start_from_other_settings_and_keywords_override_them() -> None:
    base = build(top_k=3, session_id="monday", api_key=KEY, min_score=0.2)
    derived = AdapterSettings.build(surface="test", settings=base, session_id="friday")
    assert derived.user_id == "alice"
    assert (derived.top_k, derived.session_id, derived.min_score) == (3, "friday", 0.2)
    assert derived.api_key == KEY


def test_user_id_is_required_when_no_settings_carry_one() -> None:
    with pytest.raises(ValueError, match="user_id"):
        AdapterSettings.build(surface="test")


def test_serializable_settings_carry_neither_the_key_nor_the_transport() -> None:
    settings = build(api_key=KEY, top_k=4)
    carried = settings.serializable()
    assert "api_key" not in carried
    assert "transport" not in carried
    assert carried["top_k"] == 4
    assert KEY not in repr(settings)
    assert set(carried) == set(SETTING_DEFAULTS) - {"api_key", "transport"}


@pytest.mark.parametrize(
    ("prompt", "floor", "expected"),
    [
        ("Where do I live?", 8, True),
        ("   hi      ", 8, False),
        ("", 0, False),  # an empty prompt is never recalled for, whatever the floor
        ("ok", 0, True),
        (None, 0, False),
    ],
)
def test_the_prompt_gate(prompt: str | None, floor: int, expected: bool) -> None:
    assert build(min_prompt_chars=floor).wants_recall(prompt) is expected


def test_tool_texts_list_memories_or_say_nothing_was_found() -> None:
    assert TOOL_TEXTS.found(["Lives in Lisbon", "Has a dog"]) == "- Lives in Lisbon\n- Has a dog"
    assert TOOL_TEXTS.found([]) == TOOL_TEXTS.nothing_found
    assert TOOL_TEXTS.search_failed(TimeoutError("secret detail")) == (
        "Memory search is unavailable right now (TimeoutError)."
    )
