"""Claude Code integration: hooks that inject a user's memory at session start and hand each session over.

Importing this package imports nothing else: the hook (:mod:`jobs.claude_code.hook`) runs on the
critical path of every Claude Code session start, so each module imports what it needs itself.

* :mod:`~jobs.claude_code.launch`: the command Claude Code runs (``<python> -I .../launch.py``), which
  imports nothing from the project's folder and fails open even when our own import fails;
* :mod:`~jobs.claude_code.hook`: what each event does;
* :mod:`~jobs.claude_code.choices`: what install was told, for sync and ``serve --claude-code-sync``;
* :mod:`~jobs.claude_code.places`: where the hooks keep their log and per-session state, and a
  project's purpose;
* :mod:`~jobs.claude_code.hook_settings`: merging our hooks into Claude Code's settings.json and
  taking exactly them out again;
* :mod:`~jobs.claude_code.injection`: what a hook prints (the recall block, without repeats);
* :mod:`~jobs.claude_code.local` and :mod:`~jobs.claude_code.remote`: the two modes, the database
  directly or `episodes api`;
* :mod:`~jobs.claude_code.sync`: storing every finished session file of this machine not yet stored.
"""
