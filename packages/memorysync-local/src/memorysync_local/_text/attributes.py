"""Which attribute of the user a fact states, and retractions: the rule extractor's
update decisions, written as data.

A rule reads a fact as it is stored, rewritten about the user ("Lives in Lisbon",
"User's sister's name is Ana"), so the same rules classify a new turn's facts, a
text saved with ``/memory/add`` and, at the schema upgrade, the memories a
database already holds.

A *single-valued* attribute (where the user lives, their job) holds one value at a
time: a new fact on it supersedes the current one. A *multi-valued* attribute
(languages, pets, allergies) collects values: a new fact adds to it. The key of a
rule with a slot names the slot: ``name:sister``, ``favourite:colour``.

A retraction ("I don't live in Lisbon any more", "I no longer eat meat", "forget
that I ...", "that's not true any more") closes the matching current fact and adds
none; :func:`retraction_clause` recognises its form and gives the positive clause
it denies ("I live in Lisbon"), or ``LAST_FACT`` for "that's not true any more".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words that may precede the verb of a stored fact ("Also has a dog", "Now lives in").
_ADVERBS = r"(?:(?:also|now|currently|still|just|recently|finally|actually|since|then)\s+)*"
_RELATIVES = (
    r"(?:(?:older|younger|little|big|baby|eldest|oldest|youngest|twin)\s+)?"
    r"(?:mother|mom|mum|father|dad|sister|brother|son|daughter|grandmother|grandma|granny|"
    r"grandfather|grandpa|aunt|uncle|cousin|niece|nephew|stepmother|stepfather|stepson|"
    r"stepdaughter|boss|best friend)"
)
_PETS = (
    r"(?:dog|cat|puppy|kitten|parrot|hamster|rabbit|bunny|horse|goldfish|fish|turtle|tortoise|"
    r"snake|lizard|guinea pig|bird|ferret|budgie|gecko)"
)
_PARTNERS = r"(?:partner|boyfriend|girlfriend|husband|wife|fianc[eé]e?|spouse)"
_PROFESSIONS = (
    r"(?:teacher|nurse|doctor|physician|engineer|developer|programmer|designer|lawyer|"
    r"accountant|chef|cook|student|manager|architect|scientist|researcher|writer|journalist|"
    r"artist|musician|pilot|consultant|dentist|pharmacist|electrician|plumber|firefighter|"
    r"officer|analyst|librarian|professor|lecturer|photographer|waiter|waitress|barista|"
    r"carpenter|farmer|mechanic|therapist|psychologist|veterinarian|vet|surgeon|paramedic|"
    r"translator|editor|entrepreneur|founder|freelancer|salesperson|cashier|driver|"
    r"administrator|director|intern|tutor|coach|economist|banker|baker|butcher|soldier|"
    r"physio|[a-z]+(?:ologist|ician|therapist))"
)
_DIETS = r"(?:vegetarian|vegan|pescatarian|pescetarian|carnivore|flexitarian|omnivore)"
_VEHICLES = r"(?:car|motorbike|motorcycle|scooter|van|truck|suv|bike|bicycle|camper)"


@dataclass(frozen=True)
class AttributeRule:
    """One way a fact states an attribute: a pattern over the stored fact text.

    ``key`` may contain ``{slot}``, filled from the pattern's ``slot`` group; the
    ``value`` group is what a retraction must name to close the fact.
    """

    key: str
    pattern: str
    multi: bool = False

    def match(self, text: str) -> tuple[str, str] | None:
        """``(attribute key, value)`` when ``text`` states this attribute."""
        found = re.match(self.pattern, text, re.IGNORECASE)
        if found is None:
            return None
        groups = found.groupdict()
        slot = _slot(groups.get("slot") or "")
        return self.key.replace("{slot}", slot), _value(groups.get("value") or "")


# First match wins: the more specific rules come before the general ones.
RULES: tuple[AttributeRule, ...] = (
    AttributeRule(
        "residence",
        rf"^{_ADVERBS}(?:lives|resides|(?:is\s+)?living|(?:is\s+)?based|is staying|stays)"
        rf"\s+in\s+(?P<value>.+)",
    ),
    AttributeRule(
        "residence",
        rf"^(?:has\s+)?{_ADVERBS}(?:moved|relocated)(?:\s+(?:back|again|house|here))*,?\s+"
        r"(?:now\s+)?(?:to|in)\s+(?P<value>.+)",
    ),
    # "I'm in Vancouver now": a place name (capitalised) after "is in".
    AttributeRule(
        "residence",
        rf"^(?:is\s+)?{_ADVERBS}in\s+(?P<value>(?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*)*)"
        r"(?:\s+(?:now|these days|at the moment))?\s*(?:,.*)?$",
    ),
    AttributeRule("residence", r"^user's\s+home\s+is\s+(?:in\s+)?(?P<value>.+)"),
    AttributeRule("diet", rf"^(?:is\s+)?{_ADVERBS}(?:an?\s+)?(?P<value>{_DIETS})\b"),
    AttributeRule(
        "diet",
        rf"^{_ADVERBS}eats\s+(?P<value>meat|fish|everything|anything|dairy|eggs)"
        r"(?:\s+(?:again|now|too|as well))?$",
    ),
    AttributeRule(
        "diet", rf"^(?:is\s+)?{_ADVERBS}(?:on|following|follows)\s+an?\s+(?P<value>[\w-]+)\s+diet"
    ),
    AttributeRule("age", r"^is\s+(?P<value>\d{1,3})(?:\s+(?:years?\s+old|now|yo))?$"),
    AttributeRule("age", rf"^{_ADVERBS}turned\s+(?P<value>\d{{1,3}})\b"),
    AttributeRule("age", r"^user's\s+age\s+is\s+(?P<value>\d{1,3})"),
    AttributeRule(
        "partner",
        rf"^user's\s+{_PARTNERS}(?:'s\s+name)?\s+is\s+(?:called\s+|named\s+)?(?P<value>.+)",
    ),
    AttributeRule(
        "partner",
        rf"^(?:is\s+)?{_ADVERBS}(?:dating|seeing|married\s+to|engaged\s+to|"
        r"got\s+married\s+to|got\s+engaged\s+to|started\s+dating)\s+(?P<value>.+)",
    ),
    AttributeRule("partner", rf"^(?:is\s+)?{_ADVERBS}(?P<value>single|divorced|widowed)\b"),
    AttributeRule(
        "name:{slot}",
        rf"^user's\s+(?P<slot>{_RELATIVES}|{_PETS})(?:'s\s+name\s+is|\s+is\s+(?:called|named))"
        r"\s+(?P<value>.+)",
    ),
    AttributeRule(
        "favourite:{slot}",
        r"^user's\s+(?:all[- ]time\s+)?favou?rite\s+(?P<slot>[a-z][a-z ]*?)\s+(?:is|are)"
        r"(?:\s+now)?\s+(?P<value>.+)",
    ),
    AttributeRule(
        "favourite:{slot}",
        r"^(?P<value>.+?)\s+(?:is|are)\s+(?:now\s+)?(?:my|user's)\s+(?:new\s+)?"
        r"favou?rite\s+(?P<slot>[a-z][a-z ]*?)$",
    ),
    AttributeRule(
        "job",
        rf"^(?:has\s+)?{_ADVERBS}(?:works|retrained|trained|qualified|started\s+working)\s+as\s+"
        r"(?:an?\s+)?(?P<value>.+)",
    ),
    AttributeRule(
        "job",
        rf"^(?:has\s+)?{_ADVERBS}(?:started|got|took|has|begun|began)\s+a\s+(?:new\s+)?"
        r"(?:job|role|position)\s+as\s+(?:an?\s+)?(?P<value>.+)",
    ),
    AttributeRule(
        "job",
        rf"^is\s+{_ADVERBS}(?:working\s+as\s+)?an?\s+(?P<value>(?:[\w-]+\s+){{0,2}}{_PROFESSIONS})\b",
    ),
    AttributeRule(
        "job", rf"^(?:is\s+)?{_ADVERBS}(?P<value>retired|unemployed|self-employed|between jobs)\b"
    ),
    AttributeRule("job", r"^user's\s+job(?:\s+title)?\s+is\s+(?:an?\s+)?(?P<value>.+)"),
    AttributeRule("employer", rf"^{_ADVERBS}works\s+(?:at|for)\s+(?P<value>.+)"),
    AttributeRule(
        "employer",
        rf"^{_ADVERBS}(?:left|quit)\s+.+?\s+(?:and|to)\s+(?:joined|join|started\s+at)\s+"
        r"(?P<value>.+)",
    ),
    AttributeRule(
        "employer",
        rf"^(?:has\s+)?{_ADVERBS}(?:joined|started\s+(?:working\s+)?at|"
        r"(?:started|got)\s+a\s+(?:new\s+)?job\s+at)\s+"
        # a club, a choir or a class joined is a pastime, not an employer
        r"(?!(?:an?|the|my|our)\s+(?:[\w-]+\s+){0,2}(?:choir|club|gym|team|band|class|course|"
        r"league|group|society|orchestra|community|waitlist|program|programme)\b)(?P<value>.+)",
    ),
    AttributeRule(
        "employer", rf"^(?:is\s+)?{_ADVERBS}(?:employed|working)\s+(?:at|by|for)\s+(?P<value>.+)"
    ),
    AttributeRule("vehicle", rf"^{_ADVERBS}(?:drives|rides)\s+(?P<value>.+)"),
    AttributeRule("vehicle", rf"^user's\s+{_VEHICLES}\s+is\s+(?:an?\s+)?(?P<value>.+)"),
    AttributeRule(
        "vehicle",
        rf"^{_ADVERBS}(?:has|owns|got|bought)\s+(?:an?\s+)?(?:new\s+)?(?P<value>{_VEHICLES})\b",
    ),
    AttributeRule("languages", rf"^{_ADVERBS}(?:can\s+)?speaks?\s+(?P<value>.+)", multi=True),
    AttributeRule(
        "languages", rf"^(?:is\s+)?{_ADVERBS}(?:fluent|native)\s+in\s+(?P<value>.+)", multi=True
    ),
    AttributeRule(
        "pets",
        rf"^{_ADVERBS}(?:has|owns|got|adopted)\s+(?:an?|two|three|four|\d+|another)\s+"
        rf"(?:new\s+)?(?P<value>{_PETS})s?\b",
        multi=True,
    ),
    AttributeRule("allergies", rf"^(?:is\s+)?{_ADVERBS}allergic\s+to\s+(?P<value>.+)", multi=True),
    AttributeRule(
        "allergies", rf"^{_ADVERBS}has\s+an?\s+(?P<value>[\w -]+?)\s+allergy", multi=True
    ),
)
MULTI_VALUED = frozenset(rule.key for rule in RULES if rule.multi)

# The value ends before a trailing qualifier: "Lisbon with their two cats" -> "Lisbon".
_VALUE_END = re.compile(
    r"\s*(?:,|\bwith\b|\bsince\b|\bfor\b|\blast\b|\bthis\b|\bnext\b|\bnow\b|\bagain\b|"
    r"\bthese days\b|\bat the moment\b|\bin \d{4}\b|\ba (?:few|couple)\b|\band\b|\bbut\b).*$",
    re.IGNORECASE,
)


def classify(text: str) -> tuple[str, str] | None:
    """The ``(attribute key, value)`` a stored fact states, or None.

    >>> classify("Moved to Toronto last year")
    ('residence', 'toronto')
    >>> classify("User's favourite colour is blue")
    ('favourite:colour', 'blue')
    """
    clean = _about_user(" ".join(text.strip().rstrip(".!").split()))
    for rule in RULES:
        found = rule.match(clean)
        if found is not None and found[1]:
            return found
    return None


_FIRST_PERSON: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), replacement)
    for pattern, replacement in (
        (r"^(?:(?:now|actually|so|also|update:?|and)\s*,?\s+)+", ""),
        (r"^(?:i'm|im|i\s+am|we're|we\s+are)\s+", "is "),
        (r"^(?:i've|ive|i\s+have|we've|we\s+have)\s+(?=been|got|moved|relocated|joined)", ""),
        (r"^(?:i've|ive|i\s+have|we've|we\s+have)\s+", "has "),
        (r"^(?:my|our)\s+", "user's "),
        (r"^(?:i|we)\s+(live|work|speak|drive|ride|stay|own|eat)\b", r"\1s"),
        (r"^(?:i|we)\s+(?:have|has)\b", "has"),
        (r"^(?:i|we)\s+", ""),
    )
)


def _about_user(clause: str) -> str:
    """A clause kept in the user's words, read as the stored forms are ("I live in X"
    as "lives in X", "we moved to X" as "moved to X"): for classifying only."""
    for pattern, replacement in _FIRST_PERSON:
        clause = pattern.sub(replacement, clause, count=1)
    return clause


# Words a question about each attribute uses, indexed with the fact's own (schema 7),
# so "Where do I live?" finds "Moved to Toronto" and "Where do I work?" finds
# "Got a new job at Shopify". A slot adds its own word ("name:sister": "sister").
_ATTRIBUTE_WORDS = {
    "residence": "live home",
    "diet": "diet eat",
    "age": "age old",
    "partner": "partner",
    "name": "name",
    "favourite": "favourite",
    "job": "job work",
    "employer": "work job employer",
    "vehicle": "car drive",
    "languages": "language speak",
    "pets": "pet animal",
    "allergies": "allergy allergic",
}


def attribute_words(key: object) -> str:
    """The words indexed with a fact on attribute ``key`` ("" for none).

    >>> attribute_words("name:sister")
    'name sister'
    """
    if not isinstance(key, str):
        return ""
    base, _, slot = key.partition(":")
    return " ".join(w for w in (_ATTRIBUTE_WORDS.get(base, ""), slot) if w)


def is_multi_valued(key: str) -> bool:
    """Whether facts on ``key`` add to each other (languages, pets, allergies)."""
    return key in MULTI_VALUED


def _value(raw: str) -> str:
    value = _VALUE_END.sub("", raw.strip().rstrip(".!")).strip().casefold()
    return value.removeprefix("the ").removeprefix("a ").removeprefix("an ")


_SLOT_SPELLINGS = {"color": "colour", "mom": "mother", "mum": "mother", "dad": "father"}


def _slot(raw: str) -> str:
    slot = " ".join(raw.casefold().split())
    return _SLOT_SPELLINGS.get(slot, slot)


# --- retractions --------------------------------------------------------------

LAST_FACT = "<the last fact>"

_NO_MORE = r"(?:any\s?more|any\s+longer|now)"
_RETRACTIONS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), replacement)
    for pattern, replacement in (
        # "I don't live in Lisbon any more" -> "I live in Lisbon"
        (rf"^i\s+(?:don't|do\s+not|dont)\s+(?P<rest>.+?)\s+{_NO_MORE}$", "I {rest}"),
        # "I'm not vegetarian any more" -> "I'm vegetarian"
        (rf"^(?:i'm|im|i\s+am)\s+not\s+(?P<rest>.+?)\s+{_NO_MORE}$", "I'm {rest}"),
        # "I no longer eat meat" / "I'm no longer a teacher"
        (r"^i\s+no\s+longer\s+(?P<rest>.+)$", "I {rest}"),
        (r"^(?:i'm|im|i\s+am)\s+no\s+longer\s+(?P<rest>.+)$", "I'm {rest}"),
        # "forget that I like jazz", "please forget that my sister is called Ana"
        (
            r"^(?:please\s+)?(?:can\s+you\s+)?forget\s+(?:that|about\s+the\s+fact\s+that)\s+"
            r"(?P<rest>(?:i|i'm|i've|my)\b.+)$",
            "{rest}",
        ),
        # "that's not true any more", "that is no longer the case", "scratch that"
        (
            r"^(?:that's|thats|that\s+is|this\s+is|it's|it\s+is)\s+(?:not|no\s+longer)\s+"
            r"(?:true|the\s+case|right|correct)(?:\s+(?:any\s?more|any\s+longer))?$",
            LAST_FACT,
        ),
        (r"^(?:not\s+any\s?more|no\s+longer|scratch\s+that)$", LAST_FACT),
    )
)


def retraction_clause(sentence: str) -> str | None:
    """The positive clause a retraction denies, ``LAST_FACT``, or None (no retraction).

    >>> retraction_clause("I don't live in Lisbon any more")
    'I live in Lisbon'
    >>> retraction_clause("That's not true any more") == LAST_FACT
    True
    """
    clean = " ".join(sentence.strip().rstrip(".!").split())
    for pattern, replacement in _RETRACTIONS:
        found = pattern.match(clean)
        if found is not None:
            if replacement == LAST_FACT:
                return LAST_FACT
            return replacement.replace("{rest}", found.group("rest"))
    return None
