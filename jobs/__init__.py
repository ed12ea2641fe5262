"""episodes: long-term episodic memory for AI agents, built as a batch system on PostgreSQL."""

__version__ = "0.1.0"
