"""One BLAS thread in every process that runs a pipeline, and a way to see what the loaded BLAS uses.

Stdlib only: ``bench/`` and ``tests/conftest.py`` import this before numpy loads (OpenBLAS reads its thread count
once, when it is loaded), and so does the zygote's environment (``shared.runtime.runner.child_env``).

Why one thread (measured 2026-12-03 on the 2-core Xeon, ``bench/blas_threads.py``):

- A job's result must not depend on the instance it lands on. OpenBLAS defaults to one thread per core, and its
  1- and 2-thread products round differently: the same 2,000 answers gave a different silhouette curve (and so a
  different result document) at 1 and 2 threads, so a retry or a fan-out chunk on a 1-vCPU instance could see
  another count than on a 2-vCPU one.
- Up to five attempts share an instance (host.json: batchSize 4 + newBatchThreshold 1), and OpenBLAS's threads
  spin while they wait. With the other core busy, the 2,000-answer job after embedding took a median 5.8 s at 2
  BLAS threads against 2.7 s at 1; idle, 2.8 s both (and 4.8 against 2.6 CPU-s).

The embedding's threads are onnxruntime's, set per session (``pipelines.thematic.embed.DEFAULT_THREADS``), not by
these variables.
"""

from __future__ import annotations

import ctypes
import re

#: Forced in an attempt's environment (not defaulted: an app setting must not make results instance-dependent).
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def loaded_openblas_threads() -> int | None:
    """The thread count of the OpenBLAS this process has loaded (numpy's wheel bundles one), or None if none is
    loaded. Read from the library itself, so it shows what took effect, not what the environment asked for."""
    with open("/proc/self/maps", encoding="utf-8") as f:
        found = re.search(r"(/\S*openblas\S*\.so\S*)", f.read())
    if found is None:
        return None
    lib = ctypes.CDLL(found.group(1))
    for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads"):
        getter = getattr(lib, name, None)
        if getter is not None:
            return int(getter())
    return None
