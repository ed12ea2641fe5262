"""The unit tier: tests that need no database, no subprocess and no network, run in seconds with
``python -m pytest tests/unit`` (docs/development.md). tests/unit/conftest.py refuses the database."""
