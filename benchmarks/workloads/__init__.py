"""One module per workload of ``bench.py``: each runs its measurement and renders its
section of RESULTS.md."""
