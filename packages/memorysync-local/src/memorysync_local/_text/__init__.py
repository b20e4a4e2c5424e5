"""Text analysis shared by storage, recall and extraction (imports nothing of theirs)."""
