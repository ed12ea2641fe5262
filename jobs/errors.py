"""One exception family. The CLI prints ``str(exc)`` on one line and exits 1.

Each class docstring is its default message, so ``raise SchemaTooNew()`` already says what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobs.models import ModelCall


class EpisodesError(Exception):
    """Something went wrong in episodes."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigError(EpisodesError):
    """A setting is invalid. Check the environment variables listed in docs/configuration.md."""


class ModelUnreachable(ConfigError):
    """The model server could not be connected to (stopped, or the address is wrong). The session was given back
    with no attempt counted: `episodes run` stops and says so; `episodes serve` waits and tries again."""


class DatabaseError(EpisodesError):
    """The database could not be reached. Check DATABASE_URL, or unset it to use the embedded server."""


# How to upgrade. The name `episodes` on PyPI belongs to another project: no message may advise installing it.
UPGRADE = (
    "Upgrade episodes from its repository: in your clone, git pull, then pip install -e . (a deployment: "
    "pip install --require-hashes -r requirements/runtime.txt && pip install --no-deps .); see "
    "docs/getting-started.md. The package named episodes on PyPI is another project's: do not install it by name."
)


class SchemaTooNew(EpisodesError):
    """The database schema is newer than this version of episodes."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(f"{message or (self.__doc__ or '').strip()} {UPGRADE}")


class SchemaNotInitialised(EpisodesError):
    """The database has no episodes schema yet. Run `episodes init` first."""


class EmbeddingDimensionMismatch(EpisodesError):
    """The configured embedder's dimension differs from the database's. Re-embed, or configure the original embedder."""


class EmbedderChanged(EmbeddingDimensionMismatch):
    """`episodes reembed` switched the database to another embedder than this process's. Restart it with
    EPISODES_EMBEDDER set to the database's embedder (`episodes status` shows it)."""


class ReembedInProgress(EpisodesError):
    """Another re-embed is in progress. Resume it with its --embedder, or drop it with `episodes reembed --abort`."""


class IngestError(EpisodesError):
    """Some records were rejected; the others were loaded."""


class CompressBusy(EpisodesError):
    """Another compress run is in progress (it holds the compress lock); nothing was done. Try again when it is done."""


class ModelError(EpisodesError):
    """A model call failed. ``calls`` holds every model call made before the failure, failed ones
    included, so the caller records them (tokens spent on a failure are still spent)."""

    def __init__(self, message: str | None = None, *, calls: Sequence[ModelCall] = ()) -> None:
        super().__init__(message)
        self.calls: list[ModelCall] = list(calls)


class ExtractionError(ModelError):
    """The model's output could not be turned into a valid episode."""


class PermanentExtractionError(ExtractionError):
    """The model refused; retrying the same transcript will not help."""


class TransientModelError(ModelError):
    """The model service failed in a way that may succeed later (rate limit, overload, 5xx, timeout)."""


class UserNotFound(EpisodesError):
    """Nothing is held about this user in this tenant. Check the tenant and the user id."""


class EpisodeNotFound(EpisodesError):
    """No such episode in this tenant. Check the id (`episodes export --tenant T --user U` lists a user's episodes)."""


class CorrectionInvalid(EpisodesError):
    """A correction is invalid; ``field`` names the part of the request at fault."""

    def __init__(self, message: str | None = None, *, field: str = "") -> None:
        super().__init__(f"{field}: {message}" if field and message else message)
        self.field = field
        self.detail = message or str(self)  # without the field: the CLI names its option instead


class EpisodeNotPinnable(EpisodesError):
    """Only a current session episode can be pinned: not a super-summary (pin its sources), not a
    superseded episode (pin the episode that replaced it)."""


class SuperSummaryNotErasable(EpisodesError):
    """A super-summary is not erased by itself (the next compress run would write it again from its sources).
    Forget the session episodes it was made from; it is rebuilt without them."""


class PolicyInvalid(EpisodesError):
    """The pruning policy does not parse. Write clauses like "keep 30d; keep importance>=0.7; delete
    importance<0.5 after 90d" (docs/lifecycle.md, Pruning policy)."""
