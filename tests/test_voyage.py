"""The Voyage embedder, through the real `voyageai` client against a local stand-in of Voyage's
/v1/embeddings (tests/support/fake_voyage.py): each model at its own dimension (or the one named, where
the model offers several), documents embedded as documents and recall's opening message as a query, and
names that the registry turns back into the same embedder (the database records them)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import psycopg
import pytest
from support.fake_voyage import FakeVoyage

from jobs import migrate
from jobs.db import Database
from jobs.embeddings import HashingEmbedder, get_embedder
from jobs.embeddings.protocol import embed_queries
from jobs.embeddings.recorded import Recorded
from jobs.embeddings.voyage import VoyageEmbedder
from jobs.errors import ConfigError
from jobs.recall.recaller import Recaller

pytest.importorskip("voyageai", reason="the voyage extra (pip install -e '.[voyage]') is not installed")


@pytest.fixture
def fake() -> Iterator[FakeVoyage]:
    with FakeVoyage() as server:
        yield server


def voyage(fake: FakeVoyage, model: str) -> VoyageEmbedder:
    return VoyageEmbedder(model, base_url=fake.base_url, api_key="pa-test-key", max_retries=0)


@pytest.mark.parametrize(
    ("model", "dim", "asked"),
    [
        ("voyage-3-lite", 512, None),  # one dimension only: Voyage refuses output_dimension for it
        ("voyage-code-2", 1536, None),
        ("voyage-3.5-lite", 1024, 1024),  # the default of a model that offers several
        ("voyage-3.5:256", 256, 256),
        ("voyage-3.5:2048", 2048, 2048),
    ],
)
def test_each_model_embeds_at_its_own_dimension(fake: FakeVoyage, model: str, dim: int, asked: int | None) -> None:
    embedder = voyage(fake, model)
    vectors = embedder.embed(["the invoice is due on Friday", "pricing moves to annual plans"])
    assert embedder.dim == dim and vectors.shape == (2, dim) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    (request,) = fake.requests
    assert request.body["output_dimension"] == asked and request.authorization == "Bearer pa-test-key"


def test_documents_go_in_as_documents_and_queries_as_queries(fake: FakeVoyage) -> None:
    embedder = voyage(fake, "voyage-3.5-lite")
    document = embedder.embed(["which plan did we pick?"])
    query = embed_queries(embedder, ["which plan did we pick?"])
    assert [r.body["input_type"] for r in fake.requests] == ["document", "query"]
    assert not np.allclose(document, query)  # the same text, embedded for its two roles


def test_recall_embeds_the_opening_message_as_a_query(fake: FakeVoyage, db: Database) -> None:
    recaller = Recaller(db, voyage(fake, "voyage-3.5-lite:512"))
    vector = recaller.embed("what did we decide about pricing?")
    assert vector.shape == (512,)
    assert [(r.body["input"], r.body["input_type"]) for r in fake.requests] == [
        (["what did we decide about pricing?"], "query")
    ]


def test_an_embedder_without_query_embedding_embeds_queries_as_documents() -> None:
    hashing = HashingEmbedder(64)
    assert np.array_equal(embed_queries(hashing, ["a query"]), hashing.embed(["a query"]))


@pytest.mark.parametrize(
    ("configured", "name", "dim"),
    [
        ("voyage", "voyage:voyage-3-lite", 512),
        ("voyage:voyage-3.5", "voyage:voyage-3.5", 1024),
        ("voyage:Voyage-3.5:512", "voyage:voyage-3.5:512", 512),
        ("voyage:voyage-code-2", "voyage:voyage-code-2", 1536),
        ("voyage:a-model-of-next-year:768", "voyage:a-model-of-next-year:768", 768),
    ],
)
def test_the_name_recorded_gives_the_same_embedder_back(configured: str, name: str, dim: int) -> None:
    embedder = get_embedder(configured)
    assert (embedder.name, embedder.dim) == (name, dim)
    again = get_embedder(embedder.name)  # what recall does with the name the database records
    assert (again.name, again.dim) == (name, dim)


@pytest.mark.parametrize(
    ("configured", "message"),
    [
        ("voyage:voyage-3-lite:1024", r"voyage-3-lite gives 512 dimensions, not 1024"),
        ("voyage:voyage-3.5:300", r"voyage-3\.5 gives 256 or 512 or 1024 or 2048 dimensions, not 300"),
        ("voyage:a-model-of-next-year", r"does not know the dimension of 'a-model-of-next-year'; name it, e\.g\."),
        ("voyage:voyage-3.5:big", r"the dimension after the model is a whole number"),
    ],
)
def test_a_dimension_the_model_cannot_give_is_refused_when_configured(configured: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        get_embedder(configured)


def test_a_database_recorded_under_the_old_name_finds_its_embedder_again(
    blank_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before 0034 the embedder called itself by its model alone, and `episodes init` recorded that: a name no
    embedder answers to. The migration gives it the "voyage:" prefix; recall and the writers then see the
    configured `voyage` as the database's own."""
    shipped = migrate.available()
    with psycopg.connect(blank_db_url) as conn:
        monkeypatch.setattr(migrate, "available", lambda: [m for m in shipped if m.version < 34])
        migrate.migrate(conn, embedding_dim=512, embedder="voyage-3-lite")
        monkeypatch.setattr(migrate, "available", lambda: shipped)
        applied = migrate.migrate(conn, embedding_dim=512, embedder="voyage:voyage-3-lite")
        assert 34 in [m.version for m in applied]
        recorded = conn.execute("SELECT value FROM episodes_settings WHERE key = 'embedder'").fetchone()
    assert recorded == ("voyage:voyage-3-lite",)
    assert Recorded(recorded[0], 512).matches(get_embedder("voyage"), "voyage")
    assert get_embedder(recorded[0]).dim == 512
