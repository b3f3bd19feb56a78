"""Prints the package index pip uses when none is configured, as the interpreter running it knows it
(rvport.sources.pypi.pip_default_index runs it with each candidate Python). No arguments."""

from pip._internal.models.index import PyPI

print(PyPI.simple_url)
