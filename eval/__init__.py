"""Evaluation harness: dataset loaders, replays, routing and search evaluations, benchmarks.

Submodules are imported on demand (``from eval.loaders import load_multiwoz``) so that
importing the package stays cheap.
"""
