"""Privacy: what is held about a user, and how little of it reaches a model.

- :mod:`jobs.privacy.redaction`: PII replaced by typed placeholders (``[EMAIL]``, ``[CARD]``, ...)
  before a transcript is summarised.
- :mod:`jobs.privacy.forget`: erase a user in one transaction, with an audit row that names them
  by a salted hash only.
- :mod:`jobs.privacy.export`: everything held about a user, as one JSON document.
- :mod:`jobs.privacy.correct`: the user corrects one episode (audited; it survives re-summarisation
  through :mod:`jobs.privacy.standing`); :mod:`jobs.privacy.reindex` re-embeds what changed.
- :mod:`jobs.privacy.erase_episode`: the user forgets one episode.
"""

from jobs.privacy.correct import (
    CorrectionReport,
    EpisodeCorrection,
    EventChange,
    correct_episode,
    correction_from,
    corrections_of,
)
from jobs.privacy.erase_episode import (
    OUTCOMES,
    EpisodeErasure,
    ErasedEpisodes,
    RemovedSuper,
    erase_episodes,
    forget_episode,
    rebuild_supers,
)
from jobs.privacy.export import dumps, export_user, write_export
from jobs.privacy.forget import (
    ForgetReport,
    Period,
    erasures_of,
    forget_user,
    user_hash,
)
from jobs.privacy.redaction import (
    KINDS,
    PLACEHOLDER,
    Finding,
    Redacted,
    find,
    redact,
    redact_messages,
    redact_transcript,
)

__all__ = [
    "CorrectionReport", "EpisodeCorrection", "EpisodeErasure", "ErasedEpisodes", "EventChange", "correct_episode",
    "correction_from", "corrections_of", "erase_episodes", "forget_episode", "OUTCOMES", "RemovedSuper",
    "rebuild_supers",
    "KINDS", "PLACEHOLDER", "Finding", "ForgetReport", "Period", "Redacted", "dumps", "erasures_of", "export_user",
    "find", "forget_user", "redact", "redact_messages", "redact_transcript", "user_hash", "write_export",
]
