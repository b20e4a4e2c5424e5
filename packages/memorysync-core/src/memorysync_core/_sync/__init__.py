"""The synchronous face: one background event loop per process, and the held turns."""
