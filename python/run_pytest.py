"""Runs the test suite for ctest: exits 77 (ctest SKIP_RETURN_CODE) when numpy
or pytest cannot be imported, and pytest's own exit status otherwise."""

import os
import sys

SKIP = 77

try:
    import numpy  # noqa: F401
    import pytest
except ImportError as exc:
    print(f"skipping the Python tests: {exc}", file=sys.stderr)
    sys.exit(SKIP)

tests = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests")
# No cache folder in the source tree. The framework suites (tests/integrations)
# run from their own pinned environment (tests/integrations/run.sh), with a
# conftest of their own that would shadow this folder's.
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "--ignore", os.path.join(tests, "integrations"), tests] +
                     sys.argv[1:]))
