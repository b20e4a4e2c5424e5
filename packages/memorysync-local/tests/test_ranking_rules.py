"""Each ranking rule of word recall and fusion, on the tiny case it fixes (issue 24).

Every case stores its memories verbatim, the better answer first, so that the
old rule (equal scores, newest first) would have put the worse one on top.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from memorysync_local import embedded
from memorysync_local._plans import Caller
from memorysync_local._recall.answers import asks_when, says_when
from memorysync_local._recall.dates import named_period
from memorysync_local._recall.dialog import is_question, names_speaker
from memorysync_local._recall.ranking import _order
from memorysync_local._recall.vectors import MIN_COSINE, fuse

from .conftest import keep_verbatim

CALLER = Caller("k", "local", False, None)


def keep(server: Any, *texts: str, session: str | None = None) -> None:
    keep_verbatim(server, *texts, session_id=session)


def keep_turns(server: Any, *lines: str, session: str | None = None) -> None:
    """Store dialog turns: each ``"Name: text"`` written here is stored as the text with
    ``Name`` in the speaker field (the way a caller gives it), in order."""
    for line in lines:
        speaker, _, text = line.partition(": ")
        server.store.add_memory(
            CALLER,
            user_id="ana",
            text=text,
            source="t",
            tags=None,
            importance=None,
            session_id=session,
            metadata=None,
            client_ref=None,
            verbatim=True,
            speaker=speaker,
        )


def ranked(server: Any, prompt: str) -> list[str]:
    """The first five recalled, a turn with a speaker shown ``"Speaker: text"``."""
    found = server.store.search("local", "ana", prompt, 5)
    return [f"{m['speaker']}: {m['text']}" if "speaker" in m else m["text"] for m in found]


def test_term_frequency_ranks_the_memory_about_the_word_above_one_mentioning_it() -> None:
    with embedded(":memory:") as server:
        keep(server, "jazz records and jazz concerts", "vinyl records and jazz concerts")
        assert ranked(server, "jazz?") == [
            "jazz records and jazz concerts",
            "vinyl records and jazz concerts",
        ]


def test_length_normalisation_ranks_a_focused_memory_above_a_long_passing_mention() -> None:
    with embedded(":memory:") as server:
        keep(
            server,
            "Plays the violin",
            "Went to a concert where someone played violin, then ate noodles downtown with "
            "old friends from school and talked about holidays",
        )
        assert ranked(server, "violin")[0] == "Plays the violin"


def test_names_in_every_memory_weigh_less_than_a_topic_word_of_the_prompt() -> None:
    # Counted alike, three names matched (in every turn) outweighed "sunrise" 3 to 1.
    with embedded(":memory:", embedder="none") as server:
        keep(
            server,
            "Dan: the sunrise over the lake was lovely",
            "Ana: thanks Bob and Cleo!",
            *(f"Ana: see you {day}, Bob and Cleo" for day in ("Monday", "Tuesday", "Friday")),
            "Bob: hi Ana and Cleo",
        )
        assert ranked(server, "Ana, Bob and Cleo at sunrise?")[0] == (
            "Dan: the sunrise over the lake was lovely"
        )


def test_ties_go_to_the_shorter_memory_then_the_newest_not_to_recency_alone() -> None:
    # (rowid, score, stem count): equal scores, different lengths, then equal lengths.
    items = [(1, 0.5, 3), (2, 0.5, 5), (3, 0.5, 3), (4, 0.9, 9)]
    assert [rowid for rowid, _, _ in sorted(items, key=_order)] == [4, 3, 1, 2]


def test_a_question_that_echoes_the_prompt_ranks_below_the_statement_answering_it() -> None:
    with embedded(":memory:") as server:
        keep_turns(
            server,
            "Caroline: My library is full of books by Tolkien",
            "Melanie: What books are in your library?",
            session="s1",
        )
        assert ranked(server, "Which books are in the library?") == [
            "Caroline: My library is full of books by Tolkien",
            "Melanie: What books are in your library?",
        ]


# Dialog context: the turns of one session, stored in order (_recall/dialog.py).
LIBRARY = (
    "Melanie: What kind of books do you keep in your library?",
    "Caroline: Mostly Tolkien, and a shelf of poetry",
    "Caroline: We went camping at the lake last weekend",
)


def test_the_answer_after_an_echoing_question_is_recalled_though_it_shares_no_word() -> None:
    with embedded(":memory:") as server:
        keep_turns(server, *LIBRARY, session="s1")
        # The unrelated turn after the answer is not pulled in.
        assert ranked(server, "What books are in the library?") == [LIBRARY[0], LIBRARY[1]]


def test_without_a_session_memories_borrow_nothing_from_their_neighbours() -> None:
    with embedded(":memory:", embedder="none") as server:
        keep_turns(server, *LIBRARY)
        assert ranked(server, "What books are in the library?") == [LIBRARY[0]]


def test_a_memory_matching_nothing_beside_a_statement_that_matches_is_not_recalled() -> None:
    with embedded(":memory:") as server:
        keep(server, "Allergic to peanuts", "Runs a marathon every autumn", session="s1")
        assert ranked(server, "Am I allergic?") == ["Allergic to peanuts"]


def test_of_two_turns_matching_alike_the_one_beside_a_strong_match_ranks_first() -> None:
    with embedded(":memory:") as server:
        keep_turns(
            server,
            "Ana: I adopted a puppy from the shelter",
            "Ana: Yes, she loves it when we go hiking",
            "Ana: The weather was nice so we went hiking",
            session="s1",
        )
        found = ranked(server, "Where did Ana take the puppy she adopted hiking?")
        assert found[0] == "Ana: I adopted a puppy from the shelter"
        assert found.index("Ana: Yes, she loves it when we go hiking") < found.index(
            "Ana: The weather was nice so we went hiking"
        )


def test_a_borrowing_memory_never_passes_the_statement_it_borrows_from() -> None:
    # The gap rule: a memory takes a share of how far its neighbour scores above it.
    with embedded(":memory:") as server:
        keep_turns(server, "Ana: jazz records and jazz concerts", "Bob: jazz", session="s1")
        assert ranked(server, "jazz records")[0] == "Ana: jazz records and jazz concerts"


@pytest.mark.parametrize(
    ("text", "asks"),
    [("What books?", True), ('He said "why?"', True), ("Books. Why not", False), ("Ok", False)],
)
def test_a_question_is_a_text_ending_with_a_question_mark(text: str, asks: bool) -> None:
    assert is_question(text) is asks


def test_a_when_question_ranks_the_memory_that_says_when_above_an_equal_match() -> None:
    # Both match "support group" alike; the one stored last (newest) used to win the tie.
    with embedded(":memory:", embedder="none") as server:
        keep(
            server,
            "Caroline: I went to a support group yesterday",
            "Caroline: The support group was so powerful",
        )
        assert ranked(server, "When did Caroline go to the support group?")[0] == (
            "Caroline: I went to a support group yesterday"
        )
        # A question that does not ask when keeps the plain order.
        assert ranked(server, "What support group did Caroline go to?")[0] == (
            "Caroline: The support group was so powerful"
        )


@pytest.mark.parametrize(
    ("prompt", "asks"),
    [
        ("When did Ana move?", True),
        ("What year did Bob start?", True),
        ("Since when has Cleo been here?", True),
        ("What did Ana say when she moved?", False),
        ("Where does Bob live?", False),
    ],
)
def test_asks_when_is_a_question_about_a_time(prompt: str, asks: bool) -> None:
    assert asks_when(prompt) is asks


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("Went camping last weekend", True),
        ("Moved to Paris in May", True),
        ("Started in 2019", True),
        ("The gig is on Friday", True),
        ("I may go camping", False),
        ("Loves the Paris weekends", False),
    ],
)
def test_says_when_finds_a_time_expression(text: str, says: bool) -> None:
    assert says_when(text) is says


def test_a_question_about_a_person_ranks_what_they_said_above_what_was_said_to_them() -> None:
    # Both turns match "friends"; the shorter one, John's reply to her, used to win.
    with embedded(":memory:") as server:
        keep_turns(
            server,
            "Maria: I made friends with a fellow volunteer at the shelter",
            "John: Thanks! Friends matter",
        )
        assert ranked(server, "Who are Maria's friends?")[0] == (
            "Maria: I made friends with a fellow volunteer at the shelter"
        )


def test_a_speaker_s_next_turn_is_recalled_with_their_turn_that_matched() -> None:
    # Turn 3 carries on Melanie's story and matches no word of the question; the other
    # speaker's reaction sits between. Turn 4 (another session) matches "Melanie" only.
    with embedded(":memory:") as server:
        keep_turns(
            server,
            "Melanie: We watched the meteor shower at the lake",
            "Caroline: Wow, sounds amazing",
            "Melanie: Tiny and in awe of the universe, that is how it left me",
            session="night",
        )
        keep_turns(server, "Melanie: Off to work now", session="monday")
        assert ranked(server, "What did Melanie think of the meteor shower?")[:2] == [
            "Melanie: We watched the meteor shower at the lake",
            "Melanie: Tiny and in awe of the universe, that is how it left me",
        ]
        # Another speaker's turn two on does not borrow: it is not the teller's.
        keep_turns(
            server, "Ana: The shower sounds lovely", "Bob: It was", "Cleo: Sure", session="x"
        )
        assert "Cleo: Sure" not in ranked(server, "What about the shower, Ana?")


def test_a_turn_of_the_named_speaker_carries_on_their_turn_before_it() -> None:
    # The second turn matches no word of the question and follows no question: it is
    # recalled because the question names who said it, and not when it names another.
    with embedded(":memory:") as server:
        keep_turns(
            server,
            "Caroline: We finally adopted a dog",
            "Caroline: A labrador, two years old, called Oscar",
            session="s1",
        )
        keep_turns(server, "Melanie: I adopted nothing yet", session="s2")
        assert ranked(server, "What did Caroline adopt?")[:2] == [
            "Caroline: We finally adopted a dog",
            "Caroline: A labrador, two years old, called Oscar",
        ]
        assert "Caroline: A labrador, two years old, called Oscar" not in ranked(
            server, "What did Melanie adopt?"
        )


@pytest.mark.parametrize(
    ("prompt", "speaker", "named"),
    [
        ("What did Maria say?", "Maria", True),
        ("Who are Maria's friends?", "Maria", True),
        ("What does Lee like?", "Ana Lee", True),
        ("What did I do last summer?", "Summer", False),  # a word, not the name
        ("Summer is over: what now?", "Summer", False),  # capitalised for the sentence
        ("Will I need a visa?", "Will", False),
        ("Will's car, where is it?", "Will", True),  # possessive: a name
        ("What did you tell Will?", "Will", True),
        ("What does émile cook?", "Émile", False),  # case counts
        ("What does Émile cook?", "Émile", True),
        ("What does Émile cook?", "E\u0301mile", True),  # the same name, decomposed
        ("王芳喜欢什么?", "王芳", True),  # no case, no spaces: contained
        ("What did the bot say?", "bot", False),  # a lower-case name is no name to find
        ("What did M say?", "M", False),  # an initial alone
    ],
)
def test_a_prompt_names_a_speaker_by_the_name_as_written(
    prompt: str, speaker: str, named: bool
) -> None:
    assert names_speaker(prompt, speaker) is named


def keep_said(server: Any, text: str, said_at: str) -> None:
    keep_verbatim(server, text, said_at=said_at)


def test_a_question_naming_a_month_ranks_what_was_said_then_above_an_equal_match() -> None:
    # Both match "Joanna" and "screenplay" alike; the newest used to win the tie.
    with embedded(":memory:") as server:
        keep_said(server, "Joanna: I printed my screenplay", "2022-01-21T10:00:00Z")
        keep_said(server, "Joanna: My screenplay got a reply", "2022-06-02T10:00:00Z")
        assert ranked(server, "What did Joanna do with her screenplay in January 2022?")[0] == (
            "Joanna: I printed my screenplay"
        )
        assert ranked(server, "What did Joanna do with her screenplay?")[0] == (
            "Joanna: My screenplay got a reply"
        )


def test_a_memory_said_on_the_named_day_is_recalled_however_many_newer_ones_match() -> None:
    # "Joanna" is in every memory: the word index offers only its newest matches.
    with embedded(":memory:", embedder="none") as server:
        keep_said(server, "Joanna: I printed my first screenplay", "2022-01-21T10:00:00Z")
        for number in range(80):
            keep_said(server, f"Joanna: Hello again {number}", "2022-03-01T10:00:00Z")
        assert "Joanna: I printed my first screenplay" not in ranked(server, "What did Joanna do?")
        assert ranked(server, "What did Joanna do on 21 January, 2022?")[0] == (
            "Joanna: I printed my first screenplay"
        )


@pytest.mark.parametrize(
    ("prompt", "period"),
    [
        ("What did Ana cook on 3 June, 2023?", ("2023-06-03", "2023-06-04")),
        ("What did Ana cook on June 3rd 2023?", ("2023-06-03", "2023-06-04")),
        ("Where did Ana go in July 2022?", ("2022-07-01", "2022-08-01")),
        ("Where did Ana go in December 2022?", ("2022-12-01", "2023-01-01")),
        ("Where was Ana on 31 June 2023?", ("2023-06-01", "2023-07-01")),  # no such day
        ("Where did Ana go in May?", None),  # which May?
        ("What did Ana do in 2022?", None),  # a year narrows little
        ("May I ask what Ana likes?", None),
    ],
)
def test_a_named_period_is_a_full_date_or_month(
    prompt: str, period: tuple[str, str] | None
) -> None:
    found = named_period(prompt)
    if period is None:
        assert found is None
    else:
        assert found is not None
        assert (found.since[:10], found.until[:10]) == period


def test_a_named_day_raises_what_was_said_that_day_not_the_days_after() -> None:
    # Both match "cooked" alike; the newest used to win the tie. Said a day after the
    # named day, the paella is no longer raised by the date (the period is the day).
    with embedded(":memory:") as server:
        for paella_said in ("2023-06-03T20:00:00Z", "2023-06-04T10:00:00Z"):
            user = f"u{paella_said[9]}"
            keep_verbatim(server, "I cooked a paella, so good", user_id=user, said_at=paella_said)
            keep_verbatim(
                server, "I cooked rice today", user_id=user, said_at="2023-07-01T10:00:00Z"
            )
        asked = "What did I cook on 3 June, 2023?"
        assert (
            server.store.search("local", "u3", asked, 5)[0]["text"] == "I cooked a paella, so good"
        )
        assert server.store.search("local", "u4", asked, 5)[0]["text"] == "I cooked rice today"


async def test_add_keeps_when_a_text_was_said_and_names_a_bad_time(
    client: httpx.AsyncClient,
) -> None:
    headers = {"X-End-User-ID": "ana"}
    said = {"text": "Ana: I moved to Lyon", "verbatim": True, "occurred_at": "2023-05-08T13:56:00Z"}
    answer = await client.post("/memory/add", json=said, headers=headers)
    assert answer.status_code == 200, answer.text
    asked = {"tenant_id": "local", "user_id": "ana", "prompt": "Where did Ana move in May 2023?"}
    recalled = (await client.post("/v1/memory/recall", json=asked)).json()["memories"]
    assert [m["said_at"] for m in recalled] == ["2023-05-08T13:56:00.000000Z"]
    bad = await client.post("/memory/add", json={**said, "occurred_at": "May 8"}, headers=headers)
    assert bad.status_code == 422
    assert "occurred_at" in bad.text
    assert "May 8" in bad.text


def test_fusion_lets_a_weak_vector_match_pass_no_strong_word_match() -> None:
    # Reciprocal rank fusion put 2 first (it is in both lists) above 1, the clearly
    # better word match; calibrated fusion moves 2 up only by its cosine's margin.
    lexical = [(1, 0.9), (2, 0.5)]
    vector = [(2, MIN_COSINE + 0.1), (3, MIN_COSINE + 0.2)]
    fused = fuse(lexical, vector)
    assert [i for i, _ in fused] == [1, 2, 3]
    assert dict(fused) == {1: 0.9, 2: 0.5, 3: round(MIN_COSINE + 0.2, 4)}


def test_fusion_lets_a_close_meaning_lift_one_of_two_equal_word_matches() -> None:
    fused = fuse([(1, 0.6), (2, 0.6)], [(2, 0.9)])
    assert [i for i, _ in fused] == [2, 1]


async def test_verbatim_add_stores_the_text_as_given_even_what_extraction_drops(
    client: httpx.AsyncClient,
) -> None:
    said = "Melanie: Hey Caroline! Good to see you! How have you been?"
    headers = {"X-End-User-ID": "ana"}
    extracted = await client.post("/memory/add", json={"text": said}, headers=headers)
    assert extracted.json().get("text") != said  # extraction skips or rewrites it
    answer = await client.post(
        "/memory/add", json={"text": said, "verbatim": True}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["text"] == said
    assert len(answer.json()["memory_ids"]) == 1


async def test_verbatim_must_be_a_boolean(client: httpx.AsyncClient) -> None:
    answer = await client.post(
        "/memory/add",
        json={"text": "I like tea", "verbatim": "yes"},
        headers={"X-End-User-ID": "a"},
    )
    assert answer.status_code == 422
    assert "verbatim" in answer.text
