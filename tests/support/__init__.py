"""What the tests share and are not tests themselves: the stand-ins for model services (fake_anthropic,
fake_openai, stream_anthropic, episode_responder), servers and clusters (api_server, citus_cluster,
browser), corpora (hostile_corpus, redaction_corpus), helpers (lifecycle_helpers, waiting) and the
crash worker. Tests import them as ``from support import fake_anthropic`` (pytest puts tests/ on
sys.path; bench/_common.py does the same)."""
