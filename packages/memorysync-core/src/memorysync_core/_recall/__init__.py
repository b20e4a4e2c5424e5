"""Recall: the budgeted call, its time window, and the rendering of what comes back."""
