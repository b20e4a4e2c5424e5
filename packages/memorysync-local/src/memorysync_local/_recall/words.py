"""Word forms for lexical recall: one derivational stem per word, matched by prefix.

Porter (and Snowball) only undo inflection, so ``allergies`` / ``allergic``,
``violin`` / ``violinist`` or ``Japan`` / ``Japanese`` stay apart. Here each word
loses its derivational and inflectional endings (``allergic`` -> ``allerg``,
``violinist`` -> ``violin``, ``swimmer`` -> ``swim``), the same way when a memory
is indexed and when a prompt is read. A prompt's stem then matches an indexed
stem that starts with its first five letters (``asthmatic`` -> ``asthm*`` finds
``asthma``), or that is its first four letters (``texan`` finds ``texa`` of
``Texas``), which covers the forms the suffix list does not know.

Everything here is pure Python and deterministic, and storage-neutral: every
backend indexes :func:`memory_stems` and finds a prompt stem's matches by the rule
of :func:`matches` (as ranges of terms: :func:`vocabulary_ranges`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

from memorysync_local._extraction.attributes import attribute_words

_TOKEN = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS = 64


def _vocab(words: str) -> frozenset[str]:
    """A word class, written as one space-separated string."""
    return frozenset(words.split())


# Function words carry no topic: matching on them would make every memory "relevant".
STOPWORDS = _vocab(
    "a an the and or but if then else of to in on at by for with from about as into onto is "
    "am are was were be been being do does did doing have has had having i me my mine myself "
    "we us our ours you your yours he him his she her hers it its they them their theirs this "
    "that these those what which who whom whose when where why how can could would should "
    "will shall may might must not no nor so too very just also than there here any some all "
    "each every both few more most other such only own same s t don't im i'm please tell know "
    "let lets get got give want need like okay ok yes hi hello hey thanks thank up down out "
    "over again once"
)
# The prefix a prompt's stem must share with an indexed stem, and the shortest stem
# that is tried as a whole word (shorter ones are too ambiguous to widen).
PREFIX = 5
SHORT = 4
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


def memory_stems(text: str, attribute: str | None) -> str:
    """What the index holds for a memory: the stems of its text and of its attribute's
    words (``attribute_words``), so "Moved to Toronto" is found by "where do I live"."""
    return index_text(f"{text} {attribute_words(attribute)}")


def owner_token(tenant_id: object, user_id: object) -> str:
    """One index token for a (tenant, user): a search matches only that user's rows."""
    key = f"{tenant_id}\x00{user_id}".encode("utf-8", "surrogatepass")
    return "o" + hashlib.blake2b(key, digest_size=10).hexdigest()


def query_terms(prompt: str) -> list[str]:
    """The prompt's content words, lower-cased, in order, without repeats."""
    terms: list[str] = []
    for token in _TOKEN.findall(prompt.lower()):
        if token in STOPWORDS or token in terms:
            continue
        terms.append(token)
        if len(terms) == _MAX_TERMS:
            break
    return terms


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


def vocabulary_ranges(query: str) -> list[tuple[str, str]]:
    """The ``[low, high)`` ranges of indexed terms one prompt stem matches."""
    prefix = query[:PREFIX]
    ranges = [(prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1))]
    if len(query) > SHORT:
        short = query[:SHORT]
        ranges.append((short, short + "\x00"))
    return ranges


def matches(query: str, indexed: str) -> bool:
    """Whether a prompt's stem finds an indexed stem (the rule every word index applies)."""
    return indexed.startswith(query[:PREFIX]) or (len(query) > SHORT and indexed == query[:SHORT])


class Matcher:
    """:func:`matches` for a prompt's stems against many memories, by set lookups."""

    def __init__(self, stems: Sequence[str]) -> None:
        self._rules = [
            (query[:PREFIX], query[:SHORT] if len(query) > SHORT else None) for query in stems
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
