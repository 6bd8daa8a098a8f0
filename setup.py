# The cffi extension (taskgraph._cnative) is declared here because cffi_modules is a
# setup() keyword; everything else is in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["taskgraph/_build_native.py:ffibuilder"])
