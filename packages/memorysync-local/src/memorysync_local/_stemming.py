"""Word forms for lexical recall: one derivational stem per word, matched by prefix.

Porter (and Snowball) only undo inflection, so ``allergies`` / ``allergic``,
``violin`` / ``violinist`` or ``Japan`` / ``Japanese`` stay apart. Here each word
loses its derivational and inflectional endings (``allergic`` -> ``allerg``,
``violinist`` -> ``violin``, ``swimmer`` -> ``swim``), the same way when a memory
is indexed and when a prompt is read. A prompt's stem then matches an indexed
stem that starts with its first five letters (``asthmatic`` -> ``asthm*`` finds
``asthma``), or that is its first four letters (``texan`` finds ``texa`` of
``Texas``), which covers the forms the suffix list does not know.

Everything here is pure Python and deterministic: the database indexes
``index_text(text)`` and a prompt becomes :func:`match_expression`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

from memorysync_local._search import _STOPWORDS as STOPWORDS

_TOKEN = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS = 64
# The prefix a prompt's stem must share with an indexed stem, and the shortest stem
# that is tried as a whole word (shorter ones are too ambiguous to widen).
PREFIX = 5
_SHORT = 4
_MIN_STEM = 3
# Endings, longest first within a family; one is removed per pass, up to three
# passes ("fishermen" -> "fisher" -> "fish"). A stem keeps at least three letters.
_SUFFIXES = tuple(
    [
        "ationally",
        "ational",
        "ations",
        "ation",
        "isations",
        "isation",
        "izations",
        "ization",
        "ically",
        "icals",
        "ical",
        "ologists",
        "ologist",
        "ology",
        "istries",
        "istry",
        "ists",
        "ist",
        "isms",
        "ism",
        "ians",
        "ian",
        "eses",
        "ese",
        "nesses",
        "ness",
        "ments",
        "ment",
        "ities",
        "ity",
        "ics",
        "ic",
        "ings",
        "ing",
        "ers",
        "er",
        "ies",
        "ied",
        "es",
        "ed",
        "ly",
        "ous",
        "ive",
        "able",
        "ible",
        "ful",
        "less",
        "eries",
        "ery",
        "ry",
        "men",
        "man",
        "al",
        "s",
        "y",
        "e",
    ]
)
_DOUBLED = re.compile(r"([bdfgkmnprt])\1$")


def stem(word: str) -> str:
    """The derivational stem of one lower-case word (``allergies`` -> ``allerg``)."""
    word = word.lower()
    if word.endswith("'s"):
        word = word[:-2]
    if not word.isalpha() or len(word) <= _MIN_STEM:
        return word
    for _ in range(3):
        for suffix in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_STEM:
                word = word[: -len(suffix)]
                break
        else:
            break
    # "swimm" (swimmer, swimming) -> "swim"; "drumm" -> "drum".
    if _DOUBLED.search(word) and len(word) > _MIN_STEM:
        word = word[:-1]
    return word


def _fold(text: str) -> str:
    """Lower case without accents ("Café" -> "cafe"), as FTS5's unicode61 folds.

    The index matches folded words; scoring compares the stems here, so they must
    fold alike or a memory found by the index would score as matching nothing.
    """
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _content_words(text: str) -> Iterable[str]:
    for token in _TOKEN.findall(_fold(text).replace("\u2019", "'").replace("'s", " ")):
        if token not in STOPWORDS and not token.isdigit():
            yield token


def index_text(text: object) -> str:
    """The stems of a memory's text, space-separated (what the stems index holds)."""
    if not isinstance(text, str):
        return ""
    return " ".join(stem(word) for word in _content_words(text))


def owner_token(tenant_id: object, user_id: object) -> str:
    """One index token for a (tenant, user): a search matches only that user's rows."""
    key = f"{tenant_id}\x00{user_id}".encode("utf-8", "surrogatepass")
    return "o" + hashlib.blake2b(key, digest_size=10).hexdigest()


def query_stems(prompt: str) -> list[str]:
    """The prompt's content-word stems, in order, without repeats."""
    stems: list[str] = []
    for word in _content_words(prompt):
        stemmed = stem(word)
        if stemmed and stemmed not in stems:
            stems.append(stemmed)
            if len(stems) == _MAX_TERMS:
                break
    return stems


def stem_query(query: str) -> str:
    """The FTS5 query for one prompt stem: its prefix, or also its short form (quoted)."""
    if len(query) > _SHORT:
        return f'("{query[:PREFIX]}"* OR "{query[:_SHORT]}")'
    return f'"{query[:PREFIX]}"*'


def vocabulary_ranges(query: str) -> list[tuple[str, str]]:
    """The ``[low, high)`` ranges of indexed terms one prompt stem matches."""
    prefix = query[:PREFIX]
    ranges = [(prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1))]
    if len(query) > _SHORT:
        short = query[:_SHORT]
        ranges.append((short, short + "\x00"))
    return ranges


def match_expression(stems: Sequence[str]) -> str | None:
    """An FTS5 OR-query: each stem by its prefix, and short stems whole (all quoted)."""
    parts: list[str] = []
    for query in stems:
        parts.append(f'"{query[:PREFIX]}"*')
        if len(query) > _SHORT:
            parts.append(f'"{query[:_SHORT]}"')
    return " OR ".join(dict.fromkeys(parts)) if parts else None


def matches(query: str, indexed: str) -> bool:
    """Whether a prompt's stem finds an indexed stem (the rule the FTS5 query applies)."""
    return indexed.startswith(query[:PREFIX]) or (len(query) > _SHORT and indexed == query[:_SHORT])


class Matcher:
    """:func:`matches` for a prompt's stems against many memories, by set lookups."""

    def __init__(self, stems: Sequence[str]) -> None:
        self._rules = [
            (query[:PREFIX], query[:_SHORT] if len(query) > _SHORT else None) for query in stems
        ]
        self._lengths = sorted({len(prefix) for prefix, _ in self._rules})

    def hits(self, indexed: str) -> list[bool]:
        """For each prompt stem, whether the memory's indexed stems match it."""
        return self._hits(set(indexed.split()))

    def _hits(self, tokens: set[str]) -> list[bool]:
        prefixes = {token[:length] for token in tokens for length in self._lengths}
        return [
            prefix in prefixes or (short is not None and short in tokens)
            for prefix, short in self._rules
        ]

    def counts(self, indexed: str) -> list[int]:
        """For each prompt stem, how many of the memory's indexed stems match it."""
        tokens = indexed.split()
        unique = set(tokens)
        if len(unique) == len(tokens):  # no stem repeated (most memories): a hit is one
            return [int(hit) for hit in self._hits(unique)]
        whole = Counter(tokens)
        prefixes: Counter[str] = Counter()
        for token, times in whole.items():
            for prefix in {token[:length] for length in self._lengths}:
                prefixes[prefix] += times
        return [
            prefixes[prefix] + (whole[short] if short is not None else 0)
            for prefix, short in self._rules
        ]


def matched(stems: Sequence[str], indexed: str) -> list[bool]:
    """For each prompt stem, whether a memory's indexed stems match it."""
    return Matcher(stems).hits(indexed)


def coverage(stems: Sequence[str], indexed: str) -> float:
    """The share of the prompt's stems that a memory's indexed stems match."""
    if not stems:
        return 0.0
    return sum(matched(stems, indexed)) / len(stems)
