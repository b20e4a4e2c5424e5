"""One user's data: list, export, erase and import, and the mixins adapters expose."""
