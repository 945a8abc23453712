import os
import sys
import zlib

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # tests/cases.py

try:
    import jaxpaged  # noqa: F401
except ImportError as e:  # the source tree shadows the installed package: it has no compiled module
    raise ImportError("jaxpaged's compiled module was not found. Install the package (pip install '.[test]') "
                      "and run the tests with `python -P -m pytest tests` so that the source tree does not "
                      f"shadow the installed package. ({e})") from e


@pytest.fixture
def rng(request):
    # A fresh, reproducible stream per test: the seed comes from the test's id.
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
