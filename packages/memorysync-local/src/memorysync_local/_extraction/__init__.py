"""Fact extraction: the :mod:`.extractor` interface, the :mod:`.rules` extractor
(default), the opt-in :mod:`.llm` extractor, the :mod:`.attributes` a fact states,
sentence splitting (:mod:`.sentences`) and the background :mod:`.runner` thread."""
