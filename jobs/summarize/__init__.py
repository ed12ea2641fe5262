"""The summarize job: closed transcripts become episodes, once each.

- :mod:`~jobs.summarize.claim`: claims and leases (``FOR UPDATE SKIP LOCKED``, a lease keeper).
- :mod:`~jobs.summarize.finish`: the one path from an extraction to a stored episode, shared by
  live runs and Message Batches: offered open items, grounding, embedding, the write, failures.
- :mod:`~jobs.summarize.summarizer`: one transcript claimed, extracted and finished (``Summarizer``).
- :mod:`~jobs.summarize.worker`: the threads that claim, process and count, for ``run`` (until the queue
  is empty) and ``serve`` (for ever); how they stop and give their claims back.
- :mod:`~jobs.summarize.run`: ``episodes run`` (``run_summarize``), recorded as a job run.
- :mod:`~jobs.summarize.batches`: backfills through the Message Batches API at half price.
"""

from jobs.summarize.batches import BatchReport, BatchRunner
from jobs.summarize.finish import Finisher
from jobs.summarize.report import RunReport, StageClock
from jobs.summarize.run import count_eligible, retry_dead, run_summarize
from jobs.summarize.summarizer import Summarizer

__all__ = [
    "BatchReport",
    "BatchRunner",
    "Finisher",
    "RunReport",
    "StageClock",
    "Summarizer",
    "count_eligible",
    "retry_dead",
    "run_summarize",
]
