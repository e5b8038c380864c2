# A package, so that this folder's conftest.py is integrations.conftest and
# never stands in for python/tests/conftest.py, which the main suite imports.
