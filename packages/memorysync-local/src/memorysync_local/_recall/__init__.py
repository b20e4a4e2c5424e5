"""Recall: ranking a user's memories for a prompt, the same for every storage backend.

- :mod:`.words`: word forms (stems), the index text, prompt stems;
- :mod:`.ranking`: word recall's score (BM25-like), question demotion, tie-break;
- :mod:`.dialog`: a turn ranked with its neighbours, its speaker;
- :mod:`.answers`: the kind of answer a question asks for (a time for "when");
- :mod:`.vectors`, :mod:`.vector_index`: recall by meaning and its fusion with words;
- :mod:`.embedding`, :mod:`.embedder_setting`: the embedders and choosing one;
- :mod:`.context`: the prompt-ready context block.

A backend supplies candidates and statistics (``_storage.interface.WordIndex``,
``VectorStore``); every score and order is computed here.
"""
