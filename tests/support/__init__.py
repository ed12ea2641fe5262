"""What the tests share and are not tests themselves, imported as ``from support import fake_anthropic``
(pytest puts tests/ on sys.path; bench/_common.py does the same):

- stand-ins for the model services: fake_anthropic, fake_openai, stream_anthropic, and the answers they give
  (episode_responder);
- servers, databases and clusters: api_server, databases, citus_cluster, browser, mcp_http, and the real
  Claude Code CLI (claude_code_cli);
- data the tests write or read: analyst_examples (a plugin of fixtures, loaded by tests/conftest.py),
  claude_code_sessions, compress_data, recall_rows, summarize_steps, hostile_corpus, redaction_corpus;
- checks and waits: recall_block, erasure_scan, waiting (wait_until);
- crash_worker, run as a script by the crash tests.
"""
