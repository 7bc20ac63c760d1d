"""Benchmarks of attnlib: scripts that measure speed and memory side by side.

Run them as scripts (``python benchmarks/run_all.py``); shared code is in
:mod:`benchmarks._harness`.
"""
