"""The word analyzer: what a text's words are, as the word index stores and matches them.

Storage computes a memory's terms with :func:`index_text` when it writes it; recall
reads a prompt with :func:`query_stems`; both agree term for term, and a prompt's
term matches an indexed term only when they are equal (no prefixes: "cancel" is not
"cancer").

- Words in a script with spaces are stemmed by Snowball (PyStemmer) in the text's
  language, which a language identifier (py3langid, limited to the languages
  Snowball stems: :data:`LANGUAGES`) gives per text. A memory is stemmed in its most
  likely language; a prompt in English and in its language when that is clear,
  else (shorter texts are harder to place) in each language that is fairly likely,
  each word's forms becoming one term's alternatives (``"perr|perro"``). A memory
  whose language is unclear (a name, three words) is stemmed in English, which
  every prompt is also read in.
- Runs of scripts written without spaces (Chinese, Japanese, Korean's Hangul, Thai,
  Lao, Khmer, Myanmar) become overlapping character pairs: "我喜欢寿司" ->
  "我喜 喜欢 欢寿 寿司"; a lone character stays one term. A prompt "寿司" is then the
  term "寿司", found in any text that holds it.
- Words are compared case- and accent-free ("Café" = "cafe"): the stem is folded
  after Snowball has read the word with its accents.

:data:`ANALYZER_VERSION` names this scheme and the versions of the two libraries;
storage records the version its terms were made by and re-indexes when it changes.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterator, Sequence
from functools import lru_cache
from importlib.metadata import version
from typing import Any

import Stemmer  # type: ignore[import-not-found,unused-ignore]  # no stubs (a C extension)

# Bumped whenever the terms this module makes change for some text.
SCHEME = 1
ANALYZER_VERSION = (
    f"words-{SCHEME}/pystemmer-{version('PyStemmer')}/py3langid-{version('py3langid')}"
)
# A prompt term's alternative forms are joined by this (no term holds it).
ALTERNATIVE = "|"
# The language every prompt is also read in, and a memory whose language is unclear.
FALLBACK = "english"
MAX_TERMS = 64

# Language identifier code -> Snowball stemmer, for every Snowball language it knows.
LANGUAGES: dict[str, str] = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "cs": "czech",
    "da": "danish", "nl": "dutch", "en": "english", "eo": "esperanto", "et": "estonian",
    "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "hi": "hindi",
    "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian",
    "lt": "lithuanian", "ne": "nepali", "no": "norwegian", "fa": "persian", "pl": "polish",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "es": "spanish",
    "sv": "swedish", "ta": "tamil", "tr": "turkish",
}  # fmt: skip
# A memory is stemmed in its most likely language when it is at least CLEAR likely,
# else in English (a name alone, a few words). A prompt is stemmed in English and in
# its most likely language when that is clear, else in each of its (up to three)
# languages at least PROMPT_SHARE likely.
CLEAR = 0.5
PROMPT_SHARE = 0.2
_MAX_LANGUAGES = 3


def _vocab(words: str) -> frozenset[str]:
    return frozenset(words.split())


# English function words carry no topic: matching on them would make every memory
# "relevant". (Other languages' function words are common, so BM25 weighs them little.)
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


def _marks() -> str:
    """Every combining mark (Unicode category M*) as a regex class body: Devanagari's or
    Thai's vowel signs belong to their word, which ``\\w`` alone would cut."""
    ranges: list[str] = []
    start = previous = -2
    for point in range(0x300, 0x10000):
        if unicodedata.category(chr(point)).startswith("M"):
            if point != previous + 1:
                if start >= 0:
                    ranges.append(_span(start, previous))
                start = point
            previous = point
    ranges.append(_span(start, previous))
    return "".join(ranges)


def _span(low: int, high: int) -> str:
    return f"\\u{low:04x}" if low == high else f"\\u{low:04x}-\\u{high:04x}"


# Scripts written without spaces between words: each run is read as character pairs.
_UNSPACED = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3005-\u3007\u3040-\u30ff"
    "\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0002ffff"
)
_TOKEN = re.compile(f"(?P<run>[{_UNSPACED}]+)|(?P<word>(?:[^\\W_]|[{_marks()}])+)")
# "Ana's" -> "Ana": the possessive is no part of the word's topic.
_POSSESSIVE = re.compile(r"['\u2019]s\b")


def _fold(term: str) -> str:
    """Without accents ("café" -> "cafe"): the diacritics of Latin, Greek and Cyrillic
    letters (U+0300-U+036F) only, never another script's vowel signs or viramas."""
    if term.isascii():
        return term
    decomposed = unicodedata.normalize("NFKD", term)
    return unicodedata.normalize("NFC", _DIACRITICS.sub("", decomposed))


_DIACRITICS = re.compile("[\u0300-\u036f]")


def _pairs(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _pieces(text: str) -> Iterator[tuple[bool, str]]:
    """(unspaced, piece): character runs and content words, in order, lower case."""
    normal = _POSSESSIVE.sub("", unicodedata.normalize("NFKC", text).casefold())
    for match in _TOKEN.finditer(normal):
        run = match.group("run")
        if run is not None:
            yield True, run
            continue
        word = match.group("word")
        if word not in STOPWORDS and not word.isdigit():
            yield False, word


class _Identifier:
    """py3langid's model, loaded once per process (about half a second: :func:`load`,
    or else the first text read), limited to :data:`LANGUAGES`; its scores are
    read-only arrays, so threads share it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._model: Any = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def model(self) -> Any:
        model = self._model
        if model is None:
            with self._lock:
                if self._model is None:
                    self._model = _load_identifier()
                model = self._model
        return model

    def rank(self, text: str) -> list[tuple[str, float]]:
        return [(LANGUAGES[code], float(share)) for code, share in self.model().rank(text)]


def _load_identifier() -> Any:
    from py3langid.langid import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
        MODEL_FILE,
        LanguageIdentifier,
    )

    model = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    model.set_languages(sorted(set(LANGUAGES) & set(model.nb_classes)))
    return model


_IDENTIFIER = _Identifier()


def load() -> None:
    """Load the language identifier now (once per process), so that the first text
    read after a server starts, a recall or a write, does not wait for it."""
    _IDENTIFIER.model()


def loaded() -> bool:
    """Whether the language identifier is loaded in this process."""
    return _IDENTIFIER.loaded


def _languages(text: str, *, prompt: bool) -> tuple[str, ...]:
    """The Snowball languages to stem ``text``'s words in, most likely first."""
    ranked = _IDENTIFIER.rank(text)
    clear = ranked[0][1] >= CLEAR
    if not prompt:
        return (ranked[0][0] if clear else FALLBACK,)
    # A clear prompt is read in its language only: another language's stemmer may cut
    # a word into a different one (Indonesian reads "Melanie" as me- + "lanie").
    chosen = ranked[:1] if clear else ranked[:_MAX_LANGUAGES]
    return tuple(dict.fromkeys([n for n, share in chosen if share >= PROMPT_SHARE] + [FALLBACK]))


class _Stemmers(threading.local):
    """One PyStemmer object per language and thread (they are not thread-safe)."""

    def __init__(self) -> None:
        self.by_language: dict[str, Stemmer.Stemmer] = {}

    def get(self, language: str) -> Stemmer.Stemmer:
        found = self.by_language.get(language)
        if found is None:
            found = self.by_language[language] = Stemmer.Stemmer(language)
        return found


_STEMMERS = _Stemmers()


def _forms(word: str, languages: Sequence[str]) -> list[str]:
    """A word's distinct folded stems in each language."""
    return list(dict.fromkeys(_stem(word, language) for language in languages))


@lru_cache(maxsize=65536)
def _stem(word: str, language: str) -> str:
    return _fold(_STEMMERS.get(language).stemWord(word))


def _terms(text: str, *, prompt: bool) -> Iterator[list[str]]:
    """Each word's or character pair's forms, in order (one form for a pair)."""
    pieces = list(_pieces(text))
    languages: tuple[str, ...] = ()
    if any(not unspaced for unspaced, _ in pieces):
        languages = _languages(text, prompt=prompt)
    for unspaced, piece in pieces:
        if unspaced:
            for pair in _pairs(piece):
                yield [pair]
        else:
            forms = [form for form in _forms(piece, languages) if form]
            if forms:
                yield forms


def index_text(text: object) -> str:
    """The terms a memory's text is indexed by, space-separated (each word's stems in
    its languages, each unspaced run's character pairs)."""
    if not isinstance(text, str) or not text.strip():
        return ""
    return " ".join(form for forms in _terms(text, prompt=False) for form in forms)


def query_stems(prompt: str) -> list[str]:
    """The prompt's terms, in order, without repeats: each a word's forms joined by
    :data:`ALTERNATIVE` ("perr|perro"), or one character pair."""
    return list(_query_stems(prompt))


@lru_cache(maxsize=1024)
def _query_stems(prompt: str) -> tuple[str, ...]:
    """(Cached: one recall reads its prompt in several places; identifying its
    language is most of the cost, about 0.25 ms.)"""
    found: list[str] = []
    for forms in _terms(prompt, prompt=True):
        term = ALTERNATIVE.join(forms)
        if term not in found:
            found.append(term)
            if len(found) == MAX_TERMS:
                break
    return tuple(found)


def alternatives(term: str) -> list[str]:
    """The indexed forms a prompt term matches (any one of them)."""
    return term.split(ALTERNATIVE)


def vocabulary_ranges(term: str) -> list[tuple[str, str]]:
    """The ``[low, high)`` ranges of indexed terms a prompt term matches: each of its
    forms exactly (``high`` is the form plus a NUL)."""
    return [(form, form + "\x00") for form in alternatives(term)]


class Matcher:
    """Which of a prompt's terms a memory's indexed terms match, by set lookups."""

    def __init__(self, terms: Sequence[str]) -> None:
        self._forms = [alternatives(term) for term in terms]

    def hits(self, indexed: str) -> list[bool]:
        """For each prompt term, whether the memory holds one of its forms."""
        held = set(indexed.split())
        return [not held.isdisjoint(forms) for forms in self._forms]

    def counts(self, indexed: str) -> list[int]:
        """For each prompt term, how many of the memory's terms are one of its forms."""
        tokens = indexed.split()
        held = set(tokens)
        if len(held) == len(tokens):  # no term repeated (most memories): a hit is one
            # (``not isdisjoint``: ``any(form in held ...)`` in one C call.)
            return [0 if held.isdisjoint(forms) else 1 for forms in self._forms]
        counted: dict[str, int] = {}
        for token in tokens:
            counted[token] = counted.get(token, 0) + 1
        return [sum(counted.get(form, 0) for form in forms) for forms in self._forms]
