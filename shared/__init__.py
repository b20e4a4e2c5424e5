"""The test kit every package's tests use: server fixtures and fault injection."""
