"""Unit tests of kforge_torch (run: /usr/bin/python3 -m unittest discover -s python/tests -t python)."""
