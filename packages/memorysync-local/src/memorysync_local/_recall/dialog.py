"""Dialog context: a memory borrows part of the scores of the memories stored beside it.

Stored one after another in one session, memories are often the turns of a
conversation, and a turn is understood with its neighbours: the answer follows
the question that shares the prompt's words ("What books do you have?" then
"Tolkien, mostly"), and the turn after an answer often carries on with it.
So each memory ranks by its own score plus ``PREVIOUS_SHARE`` of the score of
the memory stored just before it and ``NEXT_SHARE`` of the one stored just after
it, when those belong to the same user and the same session (the same
``session_id``, or none for both). A memory that matched nothing can then be
recalled for its neighbour, below it.

Neighbours are found by id (one ``MemoryTable.lines`` lookup for the best
candidates and the ids beside them), so the rule needs no storage support: a
memory whose adjacent id belongs to another user (two conversations written at
the same time) simply has no neighbour on that side.

A speaker tells a story over several turns, the other speaker reacting in between
("We saw the Perseids!" / "Wow!" / "I felt so tiny"): the turn that answers a
question is often the teller's next one, matching none of the question's words. So
a turn that names its speaker (below) also borrows ``OWN_TURN_SHARE`` of the gap
to the same speaker's turns two before and two after it, in the same session,
whether it matched anything or not.

The lender's score is its own, before its question demotion: a question that
echoes the prompt is exactly the turn whose answer should come up.

A turn stored as ``"Ana: ..."`` names its speaker first. A question about a person
is mostly about what that person said, not what others said to them ("Thanks,
Ana!"), so a prompt naming a turn's speaker ranks it ``SPEAKER_BONUS`` above its
value (a share of it: a turn that matched nothing gains nothing).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from memorysync_local._recall import answers
from memorysync_local._recall.words import index_text, query_stems
from memorysync_local._storage.interface import Session
from memorysync_local._storage.records import MemoryLine

# A memory that asks a question is ranked as if it matched this share of its score:
# it repeats the words it asks about but states nothing (the answer usually follows).
QUESTION_WEIGHT = 0.8
# How much of its neighbours' scores a memory borrows: more from the turn before
# it (the question it answers) than from the turn after it.
PREVIOUS_SHARE = 0.75
NEXT_SHARE = 0.5
# A stored turn "Ana: ..." names its speaker first; a prompt naming that person ranks
# the turns they said this share above their score (others may only address them).
SPEAKER_BONUS = 0.75
# How much a turn borrows from the same speaker's turn two before and two after it.
OWN_TURN_SHARE = 0.5
_SPEAKER = re.compile(r"^\s*([A-Z][\w'\u2019.-]*(?:\s[A-Z][\w'\u2019.-]*)?)\s*:\s")


def speaker_stems(text: str) -> list[str]:
    """The stems of a turn's speaker label ("Ana Lee: hi" -> its stems), or none."""
    label = _SPEAKER.match(text)
    return list(_label_stems(label.group(1))) if label else []


@lru_cache(maxsize=4096)
def _label_stems(label: str) -> tuple[str, ...]:
    return tuple(index_text(label).split())


def is_question(text: str) -> bool:
    """Whether a memory's text asks rather than states (it ends with a question mark)."""
    return text.rstrip().rstrip("\"')»”").endswith("?")


def in_dialog(
    session: Session,
    tenant: str,
    user_id: str,
    found: Sequence[tuple[int, float]],
    limit: int,
    prompt: str = "",
) -> list[tuple[int, float]]:
    """Up to ``limit`` memory ids ranked by their score plus their neighbours' shares.

    ``found`` is (memory id, score) best first, every scored candidate (the first
    ``limit`` and the memories up to two ids beside them are looked at). A
    speaker's turn borrows from their turns two before and after it
    (``OWN_TURN_SHARE``). A question's own score is
    demoted (``QUESTION_WEIGHT``); the ranking value is returned unclamped. Ties
    keep ``found``'s order (a memory not in it comes after, newest first). When the
    ``prompt`` asks when (:func:`.answers.asks_when`), a memory that says when ranks
    ``answers.WHEN_BONUS`` above its value; one whose speaker the prompt names (by
    stems) ranks ``SPEAKER_BONUS`` above it.
    """
    when = answers.asks_when(prompt)
    named = set(query_stems(prompt))
    own = dict(found)
    place = {memory_id: rank for rank, (memory_id, _) in enumerate(found)}
    top = [memory_id for memory_id, _ in found[:limit]]
    wanted = set(top)
    if PREVIOUS_SHARE or NEXT_SHARE:
        wanted.update(memory_id + step for memory_id in top for step in (-1, 1))
    memories = {
        memory.id: memory for memory in session.memories.lines(sorted(wanted), tenant, user_id)
    }
    speakers = {memory_id: speaker_stems(memory.text) for memory_id, memory in memories.items()}
    if OWN_TURN_SHARE:
        # Only a turn naming its speaker has own turns two away: facts need no second read.
        further = {i + step for i in top if speakers.get(i) for step in (-2, 2)} - set(memories)
        for memory in session.memories.lines(sorted(further), tenant, user_id):
            memories[memory.id] = memory
            speakers[memory.id] = speaker_stems(memory.text)
    ranked: list[tuple[float, int, int]] = []
    for memory_id, memory in memories.items():
        value = own.get(memory_id, 0.0)
        matched = value > 0
        if matched and is_question(memory.text):
            value *= QUESTION_WEIGHT
        for step, share in ((-1, PREVIOUS_SHARE), (1, NEXT_SHARE)):
            beside = memories.get(memory_id + step)
            if beside is None or not _same_session(memory, beside):
                continue
            # Matching nothing itself, a memory borrows from the turn beside it only as
            # the answer to a question that matched (not as any neighbour of any match).
            if not matched and not (step == -1 and is_question(beside.text)):
                continue
            value += share * max(0.0, own.get(beside.id, 0.0) - value)
        # Matched or not, a speaker's turn carries on their own turn two before or after
        # it (the other speaker's turn between them is a reaction).
        speaker = speakers[memory_id]
        for step in (-2, 2) if speaker and OWN_TURN_SHARE else ():
            beside = memories.get(memory_id + step)
            if beside and _same_session(memory, beside) and speakers[beside.id] == speaker:
                value += OWN_TURN_SHARE * max(0.0, own.get(beside.id, 0.0) - value)
        if when and value > 0 and answers.says_when(memory.text):
            value *= 1.0 + answers.WHEN_BONUS
        if SPEAKER_BONUS and value > 0 and named and set(speaker) & named:
            value *= 1.0 + SPEAKER_BONUS
        if value > 0:
            ranked.append((-round(value, 6), place.get(memory_id, len(place)), -memory_id))
    ranked.sort()
    return [(-item[2], -item[0]) for item in ranked[:limit]]


def _same_session(memory: MemoryLine, beside: MemoryLine) -> bool:
    """Whether ``beside`` is of the same (non-empty) session as ``memory``."""
    return memory.session_id is not None and beside.session_id == memory.session_id
