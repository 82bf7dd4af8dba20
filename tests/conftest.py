"""Fixtures shared by the whole suite. Fixtures for one package live in that package's conftest.py."""
