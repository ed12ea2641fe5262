"""The user's rights over what is held about them.

- :mod:`~jobs.rights.forget`: erase a user in one transaction, audited under a salted hash only.
- :mod:`~jobs.rights.erase_episode`: forget one episode (and rebuild the super-summaries it fed).
- :mod:`~jobs.rights.export`: everything held about a user, as one JSON document.
- :mod:`~jobs.rights.correct`: the user corrects an episode (audited; :mod:`~jobs.rights.standing` keeps it
  through re-summarisation; :mod:`~jobs.rights.reindex` re-embeds what changed).
- :mod:`~jobs.rights.erased`: this process's in-memory copies follow an erasure at once.
- :mod:`~jobs.rights.vacuum`: the freed pages reclaimed after an erasure.

Submodules are imported where they are used: this file imports nothing, so a caller of one right does not
pay for the others (recall imports :mod:`~jobs.rights.erased` on every start).
"""
