"""Imported first by the benches that recall in their own process: numpy's OpenBLAS on one thread, as `episodes`
runs it (jobs.config.one_blas_thread: read when numpy loads, and jobs.config loads no numpy), unless the environment
says otherwise. To measure the other setting side by side: ``OPENBLAS_NUM_THREADS=2 python bench/recall.py ...``
(the service `api_load.py` starts inherits it too)."""

from jobs.config import one_blas_thread

one_blas_thread()
