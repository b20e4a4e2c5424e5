"""The HTTP client: the contract's routes, the shared connection, retries, configuration."""
