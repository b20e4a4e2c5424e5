"""Moved to ``memorysync_local._text.attributes`` (storage reads it too, and storage must
not import extraction); this name stays for the importers not yet updated."""

from memorysync_local._text.attributes import (
    LAST_FACT,
    MULTI_VALUED,
    RULES,
    AttributeRule,
    attribute_words,
    classify,
    is_multi_valued,
    retraction_clause,
)

__all__ = [
    "LAST_FACT",
    "MULTI_VALUED",
    "RULES",
    "AttributeRule",
    "attribute_words",
    "classify",
    "is_multi_valued",
    "retraction_clause",
]
