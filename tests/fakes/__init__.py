"""Local stand-ins for external services (model providers), for tests."""
