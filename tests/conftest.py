import os
import sys
import zlib

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # tests/cases.py


@pytest.fixture
def rng(request):
    # A fresh, reproducible stream per test: the seed comes from the test's id.
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
