"""Root conftest: every package's tests get the shared test kit's fixtures."""

pytest_plugins = ["shared.fake_server", "shared.local_server"]
