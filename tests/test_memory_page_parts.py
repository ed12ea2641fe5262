"""The user's memory page in parts, without a server: the signed token bound to its secret, user, tenant and time,
the secret setting, and the page template in every state (an offline super-summary without its internal label)."""

from __future__ import annotations

import datetime as dt

import pytest

from jobs import config
from jobs.db import Database
from jobs.errors import ConfigError
from jobs.service.page_link import (
    LIFETIME,
    LinkExpired,
    LinkRefused,
    MemoryLink,
    link_secret,
    sign,
    verify,
)
from jobs.service.page_view import Notice, Urls, render


def test_tokens_are_bound_to_their_secret_user_tenant_and_time() -> None:
    now = dt.datetime(2025, 1, 1, 12, tzinfo=dt.UTC)
    token, link = sign(b"k" * 32, "acme", "u-1", 7, now)
    assert verify(b"k" * 32, token, now + LIFETIME - dt.timedelta(seconds=1)) == link
    with pytest.raises(LinkExpired):
        verify(b"k" * 32, token, now + LIFETIME)
    with pytest.raises(LinkRefused):
        verify(b"x" * 32, token, now)
    for variant in (token + "!", token.replace(".", ".!", 1), token + "=", " " + token):
        with pytest.raises(LinkRefused):
            verify(b"k" * 32, variant, now)
    assert not issubclass(LinkRefused, LinkExpired)


def test_the_secret_setting_is_checked_and_the_stored_one_is_made_once(
    monkeypatch: pytest.MonkeyPatch, db: Database
) -> None:
    monkeypatch.setenv("EPISODES_LINK_SECRET", "too short")
    with pytest.raises(ConfigError, match="EPISODES_LINK_SECRET"):
        config.load()
    monkeypatch.setenv("EPISODES_LINK_SECRET", "s" * 40)
    assert config.load().link_secret == "s" * 40
    first = link_secret(db)
    assert len(first) == 64 and link_secret(db) == first
    other = Database(db.settings)  # another worker of the same service
    try:
        assert link_secret(other) == first
    finally:
        other.close()
    configured = Database(db.settings.with_(link_secret="s" * 40))
    try:
        assert link_secret(configured) == b"s" * 40
    finally:
        configured.close()


def test_the_page_template_renders_every_state() -> None:
    urls = Urls("/memory", "/memory/forget", "/memory/correct", "/memory/item")
    link = MemoryLink("acme", "u-1", dt.datetime(2025, 1, 1, 12, 15, tzinfo=dt.UTC), 7)
    empty = render(nonce="n0", link=link, token="t", urls=urls, notice=Notice("Nothing was changed.", ok=False))
    assert "Nothing is open." in empty and 'class="notice problem"' in empty and "12:15 UTC" in empty
    assert '<style nonce="n0">' in empty and "<script" not in empty
    assert "has expired" in render(nonce="n1", refused="expired")
    assert "has been changed" in render(nonce="n2", refused="invalid")
    assert "no longer works" in render(nonce="n3", refused="withdrawn")


def test_an_offline_super_summary_reads_without_its_internal_label() -> None:
    """The offline compressor's first line ("Offline merge of 5 sessions from ... to ...") tells an agent
    no model wrote the text; the page says it in words for people instead (issue 31)."""
    from jobs.compress.offline import without_head

    stored = "Offline merge of 2 sessions from 2024-01-03 to 2024-12-20. 2024-01-03: Chose the Team plan."
    assert without_head(stored) == "2024-01-03: Chose the Team plan."
    assert without_head("Offline merge is what we discussed.") == "Offline merge is what we discussed."
    urls = Urls("/memory", "/memory/forget", "/memory/correct", "/memory/item")
    link = MemoryLink("acme", "u-1", dt.datetime(2025, 1, 1, 12, 15, tzinfo=dt.UTC), 7)
    episode = {
        "id": 9,
        "kind": "super",
        "title": "The summary of 1 January 2024 to 31 December 2024",
        "summary": stored,
        "text": without_head(stored),
        "by_program": True,
    }
    html = render(
        nonce="n",
        link=link,
        token="t",
        urls=urls,
        content={
            "episodes": [episode],
            "more_episodes": False,
            "items": [],
            "older_items": [],
            "more_items": False,
            "grace_days": 30,
            "age_days": 180,
        },
    )
    assert "Offline merge" not in html and "2024-01-03: Chose the Team plan." in html
    assert "put together by a simple program, without a language model" in html
    assert 'id="older-heading"' not in html  # no older items: no section
