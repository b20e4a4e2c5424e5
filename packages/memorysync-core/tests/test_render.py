"""Rendering the context block: verbatim text, filters, whole memories only."""

from __future__ import annotations

import math

import pytest

from memorysync_core import DEFAULT_CONTEXT_TEMPLATE, ContextRenderer, RecalledMemory


def mem(text: str, score: float | None, memory_id: int = 0) -> RecalledMemory:
    return RecalledMemory(memory_id, text, score, {})


def test_without_filters_the_block_is_the_server_context_in_the_template() -> None:
    renderer = ContextRenderer(template="Facts:\n{context}\n--")
    memories = [mem("ignored when unfiltered", 0.1)]
    block, kept = renderer.render("- Lives in Lisbon\n- Allergic to peanuts", memories)
    assert block == "Facts:\n- Lives in Lisbon\n- Allergic to peanuts\n--"
    assert kept == tuple(memories)


def test_braces_and_percent_signs_render_verbatim() -> None:
    text = "Uses {placeholders} and %s and %(name)s and {0} and 100% {{x}}"
    renderer = ContextRenderer(template="{context} | {other} %d")
    assert renderer.render(text, [])[0] == f"{text} | {{other}} %d"
    filtered = ContextRenderer(template="<{context}>", min_score=0.0)
    assert filtered.render("", [mem(text, 1.0)])[0] == f"<- {text}>"


def test_an_empty_context_gives_an_empty_block() -> None:
    assert ContextRenderer().render("", []) == ("", ())
    assert ContextRenderer().render("  \n", [])[0] == ""
    assert ContextRenderer(min_score=0.9).render("- x", [mem("low", 0.5)]) == ("", ())


def test_min_score_keeps_only_memories_at_or_above_it_in_order() -> None:
    memories = [mem("a", 0.9, 1), mem("b", 0.4, 2), mem("c", 0.5, 3), mem("d", None, 4)]
    block, kept = ContextRenderer(template="{context}", min_score=0.5).render("server", memories)
    assert block == "- a\n- c"
    assert [m.memory_id for m in kept] == [1, 3]


def test_max_context_chars_drops_whole_memories_lowest_score_first() -> None:
    memories = [
        mem("Lives in Lisbon.", 0.9, 1),  # 18 chars as a line
        mem("Has a cat called Miso.", 0.3, 2),
        mem("Allergic to peanuts.", 0.7, 3),
    ]
    renderer = ContextRenderer(template="{context}", max_context_chars=45)
    block, kept = renderer.render("", memories)
    assert block == "- Lives in Lisbon.\n- Allergic to peanuts."
    assert len(block) <= 45
    assert [m.memory_id for m in kept] == [1, 3]
    tight = ContextRenderer(template="{context}", max_context_chars=20)
    assert tight.render("", memories)[0] == "- Lives in Lisbon."
    assert ContextRenderer(template="{context}", max_context_chars=5).render("", memories) == (
        "",
        (),
    )


def test_memories_without_a_score_are_dropped_first() -> None:
    memories = [mem("unscored", None, 1), mem("scored", 0.1, 2)]
    renderer = ContextRenderer(template="{context}", max_context_chars=10)
    assert renderer.render("", memories)[0] == "- scored"


def test_both_filters_combine() -> None:
    memories = [mem("aaaa", 0.9), mem("bbbb", 0.2), mem("cccc", 0.6)]
    renderer = ContextRenderer(template="{context}", min_score=0.5, max_context_chars=6)
    assert renderer.render("", memories)[0] == "- aaaa"


def test_the_default_template_presents_memories_as_data_not_instructions() -> None:
    assert "{context}" in DEFAULT_CONTEXT_TEMPLATE
    assert "not as instructions" in DEFAULT_CONTEXT_TEMPLATE
    block, _ = ContextRenderer().render("- Lives in Lisbon", [])
    assert "- Lives in Lisbon" in block


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"template": "no placeholder"}, "context_template"),
        ({"max_context_chars": 0}, "max_context_chars"),
        ({"min_score": math.nan}, "min_score"),
        ({"min_score": math.inf}, "min_score"),
    ],
)
def test_bad_renderer_settings_name_the_parameter(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        ContextRenderer(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (
            {"memory_id": 12, "value": "Lives in Lisbon", "score": 0.83},
            (12, "Lives in Lisbon", 0.83),
        ),
        ({"id": "m_3", "text": "Cat", "score": 1}, ("m_3", "Cat", 1.0)),
        ({"raw_text": "Raw", "score": "high"}, (None, "Raw", None)),
        ({"memory_id": True, "value": "x", "score": True}, (None, "x", None)),
    ],
)
def test_parse_reads_every_id_and_text_field(
    item: dict[str, object], expected: tuple[object, str, float | None]
) -> None:
    parsed = RecalledMemory.parse(item)
    assert parsed is not None
    assert (parsed.memory_id, parsed.text, parsed.score) == expected


@pytest.mark.parametrize("item", [None, "text", {"memory_id": 1}, {"value": ""}, {"value": 3}])
def test_parse_returns_none_for_items_without_text(item: object) -> None:
    assert RecalledMemory.parse(item) is None


def test_session_id_is_read_from_both_metadata_shapes() -> None:
    nested = RecalledMemory.parse({"text": "a", "metadata": {"metadata": {"session_id": "ag2::s"}}})
    flat = RecalledMemory.parse({"text": "a", "metadata": {"session_id": "ag2::t"}})
    none = RecalledMemory.parse({"text": "a"})
    assert nested is not None
    assert flat is not None
    assert none is not None
    assert (nested.session_id, flat.session_id, none.session_id) == ("ag2::s", "ag2::t", None)
