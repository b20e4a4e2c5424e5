"""Dialog context: a turn of a conversation ranks with the turns beside it.

Every rule here reads fields a memory carries as data, never its text's shape. A
memory has a **speaker** when the caller said who said it (``speaker`` on
``POST /memory/add``, or the ``name`` a transcript turn's payload carries); it is a
**dialog turn** when it also has a session and its position there
(``MemoryLine.position``: the order the session's memories were written in, per
user, so concurrent writers that interleave ids do not reorder it). A memory
without a speaker (a fact, a note, a "Reminder: ..." the user saved) is ranked by
its own score alone: none of these rules touches it, and it lends nothing to a
turn beside it.

For dialog turns:

- **Neighbours.** A turn is understood with the turns beside it: the answer
  follows the question that shares the prompt's words ("What books do you have?"
  then "Tolkien, mostly"), and the turn after an answer often carries on with it.
  So a turn ranks by its own score plus ``PREVIOUS_SHARE`` of the gap to the turn
  just before it in its session and ``NEXT_SHARE`` of the gap to the turn just
  after it. A turn that matched nothing borrows only as the answer to a question
  that matched (the turn before it asks), and is then recalled below it; a turn
  whose speaker the prompt names (below) borrows as one that matched (it is about
  the prompt's person).
- **Questions.** A turn that asks (ends with ``?``) ranks as if it matched
  ``QUESTION_WEIGHT`` of its score: it repeats the words it asks about but states
  nothing (the answer usually follows). The lender's score is its own, before this
  demotion: a question that echoes the prompt is the turn whose answer should come up.
- **A speaker's next turn.** A speaker tells a story over several turns, the other
  reacting in between ("We saw the Perseids!" / "Wow!" / "I felt so tiny"): a turn
  also borrows ``OWN_TURN_SHARE`` of the gap to the same speaker's turns two
  before and two after it.
- **A named speaker** (any memory with a speaker, in a session or not). A
  question about a person is mostly about what that person
  said, not what others said to them ("Thanks, Ana!"), so a prompt that names a
  turn's speaker (:func:`names_speaker`) ranks it ``SPEAKER_BONUS`` above its value
  (a share of it: a turn that matched nothing gains nothing).

All of them were tuned on LoCoMo's dev conversations (two people chatting over
weeks, every turn stored with its speaker); ``docs/local-server.md`` says where
each must do nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from memorysync_local._recall import answers
from memorysync_local._storage.interface import Session
from memorysync_local._storage.records import MemoryLine

# A turn that asks a question is ranked as if it matched this share of its score.
QUESTION_WEIGHT = 0.8
# How much of its neighbours' scores a turn borrows: more from the turn before
# it (the question it answers) than from the turn after it.
PREVIOUS_SHARE = 0.75
NEXT_SHARE = 0.5
# A prompt naming a turn's speaker ranks the turns they said this share above their
# score (others may only address them).
SPEAKER_BONUS = 0.75
# How much a turn borrows from the same speaker's turn two before and two after it.
OWN_TURN_SHARE = 0.5

# What may come before a word that starts a sentence (then any capitalised word is
# capitalised for the sentence, not because it is a name: "Will I ...", "Summer is ...").
_SENTENCE_END = frozenset(".!?¿¡:;\"'“”«»(…。！？")
_POSSESSIVE = re.compile(r"['’]s\b")


def is_question(text: str) -> bool:
    """Whether a memory's text asks rather than states (it ends with a question mark)."""
    return text.rstrip().rstrip("\"')»”").endswith("?")


def names_speaker(prompt: str, speaker: str) -> bool:
    """Whether ``prompt`` names ``speaker`` (a name given as data, e.g. ``"Ana Lee"``).

    A word of the name counts when it is written in the prompt exactly as in the name,
    case included, as a whole word: "Summer" is not named by "last summer", nor a
    lower-case name ever. A capitalised word that starts a sentence names nobody
    ("Will I need a visa?"), unless it is possessive ("Will's car"). A name in a
    script without case (Chinese, Japanese, Korean) counts when the prompt contains
    it (such scripts write no spaces between words).
    """
    prompt = unicodedata.normalize("NFC", prompt)
    for word in _name_words(unicodedata.normalize("NFC", speaker)):
        first = word[0]
        if not first.isupper():
            # A letter without case (CJK) is found inside the prompt; a lower-case
            # word (or a digit) is no name to find.
            if first.isalpha() and not first.islower() and word in prompt:
                return True
            continue
        for found in _word_pattern(word).finditer(prompt):
            before = prompt[: found.start()].rstrip()
            if before and before[-1] not in _SENTENCE_END:
                return True
            if _POSSESSIVE.match(prompt, found.end()):
                return True
    return False


@lru_cache(maxsize=4096)
def _name_words(speaker: str) -> tuple[str, ...]:
    """The words of a name worth matching: two characters or more (not an initial)."""
    return tuple(w for w in re.findall(r"\w[\w'’.-]*\w|\w", speaker) if len(w) >= 2)


@lru_cache(maxsize=4096)
def _word_pattern(word: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(word)}(?!\w)")


def _speaker_key(speaker: str) -> str:
    """Two speaker fields are the same speaker when they match case-folded."""
    return unicodedata.normalize("NFC", speaker).casefold()


def _place(memory: MemoryLine) -> tuple[str, int] | None:
    """A dialog turn's (session, position); None for a memory that is no turn (no
    speaker, no session or no position)."""
    if not memory.speaker or memory.session_id is None or memory.position is None:
        return None
    return (memory.session_id, memory.position)


def in_dialog(
    session: Session,
    tenant: str,
    user_id: str,
    found: Sequence[tuple[int, float]],
    limit: int,
    prompt: str = "",
) -> list[tuple[int, float]]:
    """Up to ``limit`` memory ids ranked by their score and, for dialog turns, the
    rules above.

    ``found`` is (memory id, score) best first, every scored candidate (the first
    ``limit`` and the turns up to two positions beside them are looked at). The
    ranking value is returned unclamped. Ties keep ``found``'s order (a memory not
    in it comes after, newest first). When the ``prompt`` asks when
    (:func:`.answers.asks_when`), a memory that says when ranks
    ``answers.WHEN_BONUS`` above its value, dialog turn or not.
    """
    when = answers.asks_when(prompt)
    own = dict(found)
    place = {memory_id: rank for rank, (memory_id, _) in enumerate(found)}
    top = [memory_id for memory_id, _ in found[:limit]]
    memories = {memory.id: memory for memory in session.memories.lines(top, tenant, user_id)}
    turns: dict[tuple[str, int], MemoryLine] = {}
    for memory in memories.values():
        if (at := _place(memory)) is not None:
            turns[at] = memory
    wanted = {(s, p + step) for (s, p) in turns for step in (-2, -1, 1, 2)} - set(turns)
    if wanted:  # facts alone (no speaker) need no second read
        for memory in session.memories.at_positions(tenant, user_id, sorted(wanted)):
            memories[memory.id] = memory
            if (at := _place(memory)) is not None:
                turns[at] = memory
    speakers = {_speaker_key(m.speaker): m.speaker for m in memories.values() if m.speaker}
    named = {key for key, speaker in speakers.items() if names_speaker(prompt, speaker)}
    ranked: list[tuple[float, int, int]] = []
    for memory_id, memory in memories.items():
        value = own.get(memory_id, 0.0)
        at = _place(memory)
        if at is not None:
            said_by_named = _speaker_key(memory.speaker or "") in named
            value = _in_dialog(memory, at, value, own, turns, said_by_named)
        if SPEAKER_BONUS and value > 0 and memory.speaker and _speaker_key(memory.speaker) in named:
            value *= 1.0 + SPEAKER_BONUS
        if when and value > 0 and answers.says_when(memory.text):
            value *= 1.0 + answers.WHEN_BONUS
        if value > 0:
            ranked.append((-round(value, 6), place.get(memory_id, len(place)), -memory_id))
    ranked.sort()
    return [(-item[2], -item[0]) for item in ranked[:limit]]


def _in_dialog(
    memory: MemoryLine,
    at: tuple[str, int],
    value: float,
    own: dict[int, float],
    turns: dict[tuple[str, int], MemoryLine],
    named: bool,
) -> float:
    """A dialog turn's value: its question demotion, then what it borrows beside it.

    ``named``: the prompt names the turn's speaker, so the turn is about the prompt's
    person and borrows as a turn that matched a word of the prompt does."""
    session_id, position = at
    matched = value > 0 or named
    if matched and is_question(memory.text):
        value *= QUESTION_WEIGHT
    for step, share in ((-1, PREVIOUS_SHARE), (1, NEXT_SHARE)):
        beside = turns.get((session_id, position + step))
        if beside is None:
            continue
        # Matching nothing itself, a turn borrows from the turn beside it only as the
        # answer to a question that matched (not as any neighbour of any match).
        if not matched and not (step == -1 and is_question(beside.text)):
            continue
        value += share * max(0.0, own.get(beside.id, 0.0) - value)
    # Matched or not, a speaker's turn carries on their own turn two before or after
    # it (the other speaker's turn between them is a reaction).
    key = _speaker_key(memory.speaker or "")
    for step in (-2, 2) if OWN_TURN_SHARE else ():
        beside = turns.get((session_id, position + step))
        if beside is not None and _speaker_key(beside.speaker or "") == key:
            value += OWN_TURN_SHARE * max(0.0, own.get(beside.id, 0.0) - value)
    return value
