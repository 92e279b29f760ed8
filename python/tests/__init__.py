"""Tests of kforge_torch (python3 -m unittest discover -s python/tests -t python)."""
