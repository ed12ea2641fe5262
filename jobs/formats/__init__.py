"""The transcript formats read on the way in, each turned into the one canonical message form.

- :mod:`~jobs.formats.shapes`: a message in our plain shape, the Anthropic Messages shape or the OpenAI Chat
  Completions shape -> the canonical message (tool calls and results as readable lines).
- :mod:`~jobs.formats.envelope`: the record around the messages (unknown fields rejected, ``metadata``).
- :mod:`~jobs.formats.claude_code`: a Claude Code session file -> one transcript.
- :mod:`~jobs.formats.locomo`: a LoCoMo conversation file -> its sessions.
- :mod:`~jobs.formats.detect`: which of these a file is, told from its first lines.
- :mod:`~jobs.formats.records`: the records of a file of any of these (or of an HTTP request's list), each
  located and either parsed or rejected saying why.

The lowest layer of the package: these modules read text and import nothing of ``jobs`` but each other.
"""
