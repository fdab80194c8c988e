"""gpu-cluster's Pulumi CrossGuard policy pack (entry point: policy/__main__.py).

A package so that `policy.gpu_cluster_policies` is importable from the project root (tests, mypy)
and `policy/__main__.py` is not a second top-level `__main__` module next to the program's.
"""
