"""Imported first by the benches that recall in their own process: numpy's OpenBLAS on one thread, as `episodes`
runs it (jobs.config: BLAS_THREADS, read when numpy loads), unless the environment says otherwise. To measure the
other setting side by side: ``OPENBLAS_NUM_THREADS=2 python bench/recall.py ...`` (the service `api_load.py`
starts inherits it too)."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
