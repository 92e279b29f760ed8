"""Tests of python/kforge_torch (unittest; run from the repository root: python3 -m unittest discover -s python/tests -t python)."""
