"""Deterministic fact extraction from one user turn, behind a small interface.

The rule-based extractor reads sentence structure, not a table of known phrases:

1. the turn is split into sentences; a turn made only of acknowledgements,
   greetings and interjections is *low value*;
2. a memory directive ("remember that X", "keep in mind X", "call me X")
   makes X a fact whatever its form;
3. questions (a ``?``, or a leading question word or inverted auxiliary) and
   requests (imperatives, "I need you to ...", "I'd like a ...") are not facts,
   and nor is a sentence about the conversation (it addresses "you");
4. a declarative with a first-person subject ("I", "my", "we") is a fact when
   its predicate says something durable: a preference, a constraint, a plan,
   identity, a relation or a habit (recognised by the predicate's verb or
   adjective class), and it carries no "right now"-style transient marker;
5. a fact is rewritten about the user: "I live in Lisbon" -> "Lives in Lisbon",
   "my daughter is Ana" -> "User's daughter is Ana".

Replace it with any object that has the ``Extractor`` shape (``_extraction/extractor.py``;
for example an LLM-backed one): ``create_app(..., extractor=MyExtractor())``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from memorysync_local._extraction.changes import changed
from memorysync_local._extraction.clauses import split_clauses
from memorysync_local._extraction.extractor import (
    Extraction,
    ExtractorFeatures,
    Fact,
    FactKind,
    RelatedMemory,
    Retraction,
)
from memorysync_local._extraction.sentences import split_sentences, words
from memorysync_local._extraction.vocab import (
    _ADVERBS,
    _AUXILIARIES,
    _CONSTRAINT,
    _CONVERSATIONAL_COGNITION,
    _DATE_WORDS,
    _FILLER,
    _FREQUENCY,
    _IDENTITY,
    _IMPERATIVE_HEADS,
    _IRREGULAR_PAST,
    _IS_MY,
    _MODALS,
    _NAMED_SUBJECT,
    _NEGATORS,
    _NOT_NAMES,
    _PASSING_REMARK,
    _PASSING_STATES,
    _PAST_EVENT,
    _PLAN,
    _PREFERENCE,
    _QUESTION_HEADS,
    _RELATION_NOUNS,
    _RELATION_STATE,
    _REQUEST_VERBS,
    _TRANSIENT,
    vocab,
)
from memorysync_local._text.attributes import LAST_FACT, classify, retraction_clause

_DIRECTIVE = re.compile(
    r"^(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?(?:i\s+(?:want|need|would like|'d like)"
    r"\s+you\s+to\s+)?(?:(?:remember|note|memorize|memorise|keep\s+in\s+mind|bear\s+in\s+mind|"
    r"don't\s+forget|do\s+not\s+forget|never\s+forget|make\s+a\s+note|take\s+note)"
    r"(?:\s+(?:of\s+this|this|for\s+later|for\s+next\s+time))?\s*(?:that|:|,)?\s+)(?P<rest>.+)$",
    re.I,
)
_CALL_ME = re.compile(
    r"^(?:please\s+)?(?:(?:you\s+can|you\s+may|just|please)\s+)?(?:call|address)\s+me\s+"
    r"(?P<name>(?-i:[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?))",
    re.I,
)
_LEADING_MARKER = re.compile(
    r"^(?:(?:by the way|just so you know|for the record|for context|for reference|fun fact|"
    r"to be honest|in case you need it|heads up|fyi|btw|also|oh|and|actually|well|so|anyway|"
    r"plus|but|honestly|ok|okay|alright|yeah|yes|no|hey|hi|hello|um|uh|hmm|thanks|now|update|"
    r"ugh|lol|haha|big news|news|guess what|funny story|quick one|quick update|oh well)"
    r"\s*[,:!-]?\s+)+",
    re.I,
)
_FIRST_PERSON_HEAD = re.compile(
    r"^(?:i|i'm|im|i've|ive|i'd|i'll|my|me and my|mine|we|we're|we've|our)\b", re.I
)
_SECOND_PERSON = re.compile(r"\b(?:you|your|you're|youre|yours|yourself|u|ur)\b", re.I)


class RuleBasedExtractor:
    """The default extractor: deterministic rules over sentence structure.

    >>> RuleBasedExtractor().extract("Thanks! I live in Lisbon. What's the weather?").facts
    (Fact(text='Lives in Lisbon', kind='identity'),)
    """

    # Rules read the turn alone: no related memories (``related`` is ignored).
    features = ExtractorFeatures()

    def extract(
        self, text: str, *, explicit: bool = False, related: Sequence[RelatedMemory] = ()
    ) -> Extraction:
        """Split ``text`` into sentences and keep the durable statements about the user."""
        facts: list[Fact] = []
        rejected: list[str] = []
        retractions: list[Retraction] = []
        substantive = False
        for sentence in split_sentences(text):
            if _is_filler(sentence):
                continue
            substantive = True
            for clause in split_clauses(sentence):
                lead, body = _subject_first(_strip_markers(clause.strip()))
                if _is_filler(body):
                    continue
                ended = changed(body)  # before the plain forms: "not X any more, Y now"
                denied = None if ended is not None else retraction_clause(body)
                if denied is not None:
                    retractions.append(_retraction(denied))
                    continue
                fact: Fact | None
                if ended is not None:
                    retractions.append(Retraction(ended))
                    fact = _change_fact(body)
                else:
                    fact = _with_attribute(body, _sentence_fact(body, explicit=explicit))
                if fact is not None and lead and _DATE_WORDS.search(lead):
                    fact = replace(fact, text=_clean(f"{lead} {body}"))  # "In May I ..."
                if fact is None:
                    rejected.append(clause)
                elif fact.text and fact not in facts:
                    facts.append(fact)
        return Extraction(
            facts=tuple(replace(fact, dated=True) for fact in facts),
            low_value=not substantive,
            rejected=tuple(rejected),
            retractions=tuple(retractions),
        )


def _with_attribute(clause: str, fact: Fact | None) -> Fact | None:
    """The fact with the attribute it states; a first-person sentence that states an
    attribute is a fact even when its verb alone would not make one ("I moved to X")."""
    if fact is None:
        body = _strip_markers(clause.strip())
        if not _is_first_person(body) or _is_question(body) or _SECOND_PERSON.search(body):
            return None
        text = _about_user(body)
        found = classify(text) or classify(body)
        return None if found is None else Fact(text, "identity", attribute=found[0])
    found = classify(fact.text) or classify(_strip_markers(clause.strip()))
    return fact if found is None else Fact(fact.text, fact.kind, attribute=found[0])


def _change_fact(body: str) -> Fact:
    """A change ("I left the bank and joined X"), kept in the user's words."""
    text = _about_user(body) if _is_first_person(body) else _clean(body)
    found = classify(text) or classify(body)
    return Fact(text, "other", attribute=None if found is None else found[0])


def _retraction(denied: str) -> Retraction:
    if denied == LAST_FACT:
        return Retraction()
    text = _about_user(denied)
    found = classify(text)
    if found is None:
        return Retraction(text)
    return Retraction(text, found[0], found[1])


def _is_filler(sentence: str) -> bool:
    tokens = words(sentence)
    return not tokens or all(token in _FILLER for token in tokens)


_LEAD = re.compile(
    r"^(?P<lead>(?:[\w'-]+,?\s+){1,5}?)(?=(?:i|i'm|i've|i'd|we|we're|we've|my|our)\s)", re.I
)
_NOT_A_LEAD = vocab(
    "and with that what when if because where who which whom how whether than as like "
    "or nor but is are was were do does did can could would will should"
)


def _subject_first(body: str) -> tuple[str, str]:
    """``(lead, rest)``: "On a happier note I joined a choir" is read from its subject
    ("I joined a choir"); "Tom and I", "what I love" and questions are left whole."""
    if _is_first_person(body) or body.rstrip().endswith("?"):
        return "", body
    found = _LEAD.match(body)
    if found is None:
        return "", body
    tokens = words(found.group("lead"))
    if not tokens or set(tokens) & _NOT_A_LEAD or tokens[0] in _QUESTION_HEADS:
        return "", body
    return found.group("lead").strip(" ,"), body[found.end() :]


def _strip_markers(sentence: str) -> str:
    stripped = _LEADING_MARKER.sub("", sentence).strip()
    return stripped or sentence


def _sentence_fact(sentence: str, *, explicit: bool) -> Fact | None:
    body = _strip_markers(sentence.strip())
    directive = _DIRECTIVE.match(body)
    if directive:
        rest = directive.group("rest").strip().rstrip("?.! ")
        if not rest or _is_filler(rest):
            return None
        return Fact(_about_user(rest), _kind(words(rest)) or "other")
    call_me = _CALL_ME.match(body)
    if call_me:
        return Fact(f"Wants to be called {call_me.group('name')}", "identity")
    if _is_question(body) or _is_imperative(body):
        return None
    if _SECOND_PERSON.search(body):
        return None
    tokens = words(body)
    if not _is_first_person(body):
        if explicit and len(tokens) >= 2:
            return Fact(_clean(body), _kind(tokens) or "other")
        return _about_someone(body, tokens)
    if _PASSING_REMARK.match(body) or _is_conversational(tokens) or _is_request(tokens):
        return None
    past = _PAST_EVENT.search(body) is not None
    if _TRANSIENT.search(body.lower()) and not past:
        return None
    kind = _kind(tokens)
    if kind is None:
        kind = "other" if explicit or _is_possessive_statement(tokens) else None
    if kind is None and (past or tokens[0] in ("we", "we're", "our")) and _has_content(body):
        kind = "other"  # something that happened to the user, or to them and theirs
    if kind is None:
        return None
    return Fact(_about_user(body), kind)


# Things a life is made of: joining, buying or finishing one is news about the user.
_LIFE_NOUNS = vocab(
    "class classes course club gym choir team band league lessons job school college "
    "university degree marathon race apartment flat house home condo car bike garden "
    "wedding baby doctor hospital surgery diet instrument guitar piano violin language "
    "business company startup practice promotion diagnosis"
)
_NAME_INSIDE = re.compile(r"(?<=\s)(?-i:[A-Z])[\w'-]+")
_POINTING = re.compile(r"\b(?:that|this|it|those|these|them)\b", re.IGNORECASE)


def _has_content(body: str) -> bool:
    """Whether a clause names something of the user's life (a name or place, a number,
    a date, a person or pet) rather than pointing at the conversation ("I tried that")."""
    named = any(word != "I" for word in _NAME_INSIDE.findall(body))
    tokens = set(words(body))
    if named or re.search(r"\d", body) or tokens & (_RELATION_NOUNS | _LIFE_NOUNS):
        return True
    return _DATE_WORDS.search(body) is not None and _POINTING.search(body) is None


def _about_someone(body: str, tokens: list[str]) -> Fact | None:
    """A clause about the user's people or pets by name ("Biscuit had surgery on his
    paw"), or naming one of them ("Ana is my sister"): kept as said."""
    if len(tokens) >= 3 and tokens[0] in ("he", "she") and _has_content(body):
        return Fact(_clean(_trim_asides(body)), _kind(tokens) or "other")  # one of theirs
    if len(tokens) < 3 or tokens[0] in _NOT_NAMES or tokens[0] in _FILLER:
        return None
    if _NAMED_SUBJECT.match(body) or _IS_MY.match(body):
        return Fact(_clean(_trim_asides(body)), _kind(tokens) or "other")
    return None


def _is_first_person(body: str) -> bool:
    return _FIRST_PERSON_HEAD.match(body) is not None


def _is_question(body: str) -> bool:
    if body.rstrip().endswith("?"):
        return True
    tokens = words(body)
    if not tokens:
        return False
    head = tokens[0]
    if head in ("i", "my", "we", "our"):
        return False
    return head in _QUESTION_HEADS and len(tokens) > 1 and tokens[1] not in ("i", "it's")


def _is_imperative(body: str) -> bool:
    tokens = words(body)
    return bool(tokens) and tokens[0] in _IMPERATIVE_HEADS


def _is_conversational(tokens: list[str]) -> bool:
    """First-person remarks about the exchange itself ("I think so", "I'm not sure")."""
    if tokens[0] in ("i", "we") and len(tokens) > 1:
        verb = tokens[2] if tokens[1] in _ADVERBS and len(tokens) > 2 else tokens[1]
        if verb in _CONVERSATIONAL_COGNITION and verb != "was":
            return True
        if verb in ("don't", "didn't") and len(tokens) > 2 and tokens[2] in ("know", "understand"):
            return True
        if verb == "have" and len(tokens) > 3 and tokens[2] in ("a", "another", "one"):
            return tokens[3] in ("question", "idea", "request", "doubt", "follow")
    if tokens[0] in ("i'm", "im") or tokens[:2] == ["i", "am"]:
        rest = tokens[1:] if tokens[0] != "i" else tokens[2:]
        if rest[:1] == ["not"]:
            rest = rest[1:]
        if rest and rest[0] in _PASSING_STATES:
            return not _mentions_durable(rest)
        if not rest:
            return True
    return False


def _mentions_durable(tokens: list[str]) -> bool:
    bag = set(tokens)
    return bool(bag & (_CONSTRAINT | _PREFERENCE | _RELATION_NOUNS)) or "interested" in bag


def _is_request(tokens: list[str]) -> bool:
    """First-person requests to the assistant: "I need a ...", "I'd like to know ..."."""
    joined = " ".join(tokens[:4])
    for head in ("i'd like", "i would like", "i want", "i need", "i'd love", "i would love"):
        if joined.startswith(head):
            rest = tokens[len(head.split()) :]
            if not rest:
                return True
            if rest[0] in ("a", "an", "the", "some", "help", "this", "that", "it", "more"):
                return True
            if rest[0] == "to" and len(rest) > 1 and rest[1] in _REQUEST_VERBS:
                return True
    return tokens[:2] in (["i'm", "looking"], ["im", "looking"]) and "for" in tokens[2:4]


def _is_possessive_statement(tokens: list[str]) -> bool:
    """ "My <noun phrase> is/are/has ..." states a detail about the user's life."""
    if tokens[0] not in ("my", "our") or len(tokens) < 3:
        return False
    return any(
        t in ("is", "are", "was", "were", "has", "have", "'s") or t.endswith("'s")
        for t in tokens[1:6]
    )


def _kind(tokens: list[str]) -> FactKind | None:
    bag = set(tokens)
    joined = " ".join(tokens)
    if bag & {"eat", "drink"} and bag & {"don't", "never", "can't", "cannot", "not"}:
        return "constraint"
    if bag & _CONSTRAINT or "can't stand" in joined:
        return "preference" if "can't stand" in joined else "constraint"
    if bag & _PREFERENCE or "would rather" in joined:
        return "preference"
    if tokens[0] in ("my", "our") and len(tokens) > 1 and tokens[1] in _RELATION_NOUNS:
        return "relation"
    if bag & _RELATION_STATE or (bag & _RELATION_NOUNS and bag & {"have", "has", "got"}):
        return "relation"
    if bag & {"have", "has"} and bag & {"named", "called"}:
        return "relation"
    if bag & _FREQUENCY:
        return "habit"
    if bag & _PLAN or "i'll" in bag or "we'll" in bag:
        return "plan"
    if bag & _IDENTITY or _is_profession(tokens) or "go by" in joined:
        return "identity"
    if _is_copular(tokens):
        return "identity"
    if _simple_present_verb(tokens) is not None:
        # English simple present with a first-person subject states a habit or a state.
        return "habit"
    return None


def _is_copular(tokens: list[str]) -> bool:
    """ "I'm X" / "I am X" / "I've been X" with a complement (passing states were ruled out)."""
    for start in (["i'm"], ["im"], ["i", "am"], ["i've", "been"], ["i", "have", "been"]):
        if tokens[: len(start)] == start and len(tokens) > len(start):
            return True
    return False


def _simple_present_verb(tokens: list[str]) -> str | None:
    """The verb of "I [adverbs] <verb> ..." when it is a plain present-tense verb."""
    if tokens[0] not in ("i", "we") or len(tokens) < 3:
        return None
    index = 1
    while index < len(tokens) and (tokens[index] in _ADVERBS or tokens[index] in _NEGATORS):
        index += 1
    if index >= len(tokens) - 1:
        return None
    verb = tokens[index]
    if tokens[index + 1] in ("it", "that", "this", "them", "those", "these"):
        return None  # "I understood it wrong": about the conversation
    if (
        verb.endswith("ly")
        or verb in ("already", "woke", "understood", "forgot", "misread", "overslept")
        or "'" in verb
        or verb in _MODALS
        or verb in _AUXILIARIES
        or verb in _IRREGULAR_PAST
        or _looks_past(verb)
        or verb in _CONVERSATIONAL_COGNITION
    ):
        return None
    return verb


def _is_profession(tokens: list[str]) -> bool:
    """ "I'm a/an <noun>" or "I am a/an <noun>"."""
    for start in (["i'm"], ["im"], ["i", "am"]):
        n = len(start)
        if tokens[:n] == start and len(tokens) > n + 1 and tokens[n] in ("a", "an"):
            return True
    return False


# --- rewriting a first-person sentence about the user --------------------------

_SUBJECT_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.I), replacement)
    for pattern, replacement in (
        (r"^i'm not\b", "Is not"),
        (r"^(?:i'm|im|i am)\b", "Is"),
        (r"^i was\b", "Was"),
        (r"^(?:i've|ive|i have)\b", "Has"),
        (r"^i haven't\b", "Has not"),
        (r"^i had\b", "Had"),
        (r"^(?:i'll|i will)\b", "Will"),
        (r"^i won't\b", "Will not"),
        (r"^(?:i'd|i would)\b", "Would"),
        (r"^(?:i don't|i do not|i dont)\b", "Does not"),
        (r"^(?:i didn't|i did not)\b", "Did not"),
        (r"^(?:i can't|i cannot|i can not|i cant)\b", "Cannot"),
        (r"^i do\b", "Does"),
        (r"^i wasn't\b", "Was not"),
        (r"^my\b", "User's"),
        (r"^mine\b", "User's"),
        (r"^me and my\b", "User and their"),
    )
)
_KEEP_IS_BEFORE = vocab("a an the from in at on of not no one my their")
_INNER_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.I), replacement)
    for pattern, replacement in (
        (r"\b(and|or) (?:i|me)\b(?!')", r"\1 the user"),
        (r"\bi'm\b", "they're"),
        (r"\bi am\b", "they are"),
        (r"\bi was\b", "they were"),
        (r"\bi've\b", "they've"),
        (r"\bi'd\b", "they'd"),
        (r"\bi'll\b", "they'll"),
        (r"\bi\b", "they"),
        (r"\bmyself\b", "themselves"),
        (r"\bmine\b", "theirs"),
        (r"\bmy\b", "their"),
        (r"\bour\b", "their"),
        (r"\bus\b", "them"),
        (r"\bme\b", "them"),
    )
)


def _about_user(sentence: str) -> str:
    """Rewrite a first-person sentence about the user where a rule is certain (its
    subject and a verb of a fixed table); otherwise keep it as said, lightly cleaned."""
    text = _clean(_trim_asides(sentence))
    if not _is_first_person(text) or re.match(r"^(?:we|we're|we've|our)\b", text, re.I):
        return text
    rewritten = _rewrite_subject(text)
    if rewritten is None:
        return text
    head, rest = rewritten
    if head == "Is":
        # "I'm allergic to X" -> "Allergic to X"; keep "Is" before articles and prepositions.
        nxt = words(rest)[:1]
        if nxt and nxt[0] not in _KEEP_IS_BEFORE and not nxt[0][:1].isdigit():
            head, rest = "", rest.lstrip()
    for pattern, replacement in _INNER_REWRITES:
        rest = pattern.sub(replacement, rest)
    return _capitalise(f"{head}{rest}".strip())


def _rewrite_subject(text: str) -> tuple[str, str] | None:
    """``(new head, rest)``, or None when no rule is certain of the verb."""
    for pattern, replacement in _SUBJECT_REWRITES:
        match = pattern.match(text)
        if match:
            return replacement, text[match.end() :]
    match = re.match(r"^i\s+", text, re.I)
    if not match:
        return "", text
    position = match.end()
    adverbs: list[str] = []
    while True:
        word = re.match(r"([A-Za-z'-]+)\s*", text[position:])
        if not word:
            return None
        lower = word.group(1).lower()
        if lower in _ADVERBS or (lower.endswith("ly") and lower not in _KNOWN_VERBS):
            adverbs.append(word.group(1))
            position += word.end()
            continue
        if lower in _KNOWN_VERBS:
            verb = _KNOWN_VERBS[lower]
        elif lower in _IRREGULAR_PAST or _looks_past(lower):
            verb = word.group(1)  # "I moved" -> "Moved": the word itself, as said
        else:
            return None
        verb_end = position + len(word.group(1))
        return " ".join([*adverbs, verb]), text[verb_end:]


def _looks_past(verb: str) -> bool:
    """Regular past tense ("moved"), but not present verbs ending in -eed ("need")."""
    return verb.lower().endswith("ed") and not verb.lower().endswith("eed")


# The verbs whose third person a rule may write ("I live" -> "Lives"): a fixed table, so
# no word is ever conjugated by guess ("I finally" never becomes "Finallies").
_KNOWN_VERBS = {
    verb: third
    for verb, third in (
        pair.split(":") if ":" in pair else (pair, pair + "s")
        for pair in vocab(
            "live work love like hate enjoy prefer speak drive ride eat drink play have:has "
            "own run cook teach:teaches study:studies travel read write use take go:goes walk "
            "swim bike cycle dislike adore wear keep practise:practises practice volunteer "
            "visit watch:watches listen commute sleep wake get do:does make bake paint draw "
            "sing dance collect grow hike climb train support follow belong attend "
            "miss:misses know plan hope intend care fear avoid believe rent share spend earn "
            "pay manage lead need want mind surf knit sew fish:fishes ski skate jog row box:boxes "
            "shop blog vote pray meditate smoke vape garden camp sail golf"
        )
    )
}


_ASIDE = re.compile(r",?\s+(?:so|when|if|and|but|because)\s+(?P<tail>.+)$", re.I)
_TRAILING_PLEASE = re.compile(r"[,\s]+(?:please|thanks|thank you|ok|okay)[.!]*$", re.I)


def _trim_asides(sentence: str) -> str:
    """Drop a trailing "please", and a trailing clause addressed to the assistant."""
    text = _TRAILING_PLEASE.sub("", sentence.strip())
    aside = _ASIDE.search(text)
    if aside:
        tail = aside.group("tail")
        if _SECOND_PERSON.search(tail) or _is_imperative(tail):
            text = text[: aside.start()]
    return text


_TRAILING_NOISE = re.compile(
    r"(?:[,\s]+(?:lol|lmao|haha|hahaha|ugh|tbh|honestly|though|haha+|x+d|:\)|:d)[.!]*)+$", re.I
)


def _clean(sentence: str) -> str:
    text = _TRAILING_NOISE.sub("", sentence.strip().rstrip(".!? ")).strip()
    return _capitalise(text.rstrip(".!?, ").strip())


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text
