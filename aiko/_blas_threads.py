"""One BLAS thread for the ``aiko`` application (imported by the CLI before anything loads numpy).

The stack's linear systems are small; OpenBLAS's thread pool only adds contention on the 2-core lab PCs this runs
on (measured: a 201x201 solve takes 0.3 ms single-threaded and 160 ms with the other core busy). A user who wants
threads sets the variables themselves; ``setdefault`` leaves theirs alone.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
