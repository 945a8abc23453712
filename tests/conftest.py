import os
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # tests/cases.py

# On a GPU, XLA autotunes each new float32 matmul of the references (and of the tests' own jnp), in
# every pytest worker, by compiling and timing many variants; the GPU suite's cases took 50-140 s
# each there against 2-7 s on a CPU (NOTES item 83 h). The tests take XLA's default algorithms
# instead (correct, only not tuned). A caller's own XLA_FLAGS setting of the level wins.
if "--xla_gpu_autotune_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_autotune_level=0").strip()

try:
    import jaxpaged  # noqa: F401
except ImportError as e:  # the source tree shadows the installed package: it has no compiled module
    raise ImportError("jaxpaged's compiled module was not found. Install the package (pip install '.[test]') "
                      "and run the tests with `python -P -m pytest tests` so that the source tree does not "
                      f"shadow the installed package. ({e})") from e


_TESTS = Path(__file__).resolve().parent


def _seed_key(nodeid: str, path) -> str:
    """The name a test's seed comes from: "tests/<file under tests/>::<name[params]>", the node id
    of a run started in the repository root, whatever directory pytest runs from (its node ids are
    relative to its rootdir, which --rootdir, an ini file or the arguments can move)."""
    name = nodeid.split("::", 1)[1]  # [Class::]function[params]: no path in it
    try:
        file = Path(path).resolve().relative_to(_TESTS).as_posix()
    except ValueError:  # a test file outside this directory (a symlink, say): its name alone
        file = Path(path).name
    return f"tests/{file}::{name}"


@pytest.fixture
def rng(request):
    # A fresh, reproducible stream per test, seeded from its file and name by crc32 (Python's
    # hash() is salted per process): the same data from any directory, and the data a run from the
    # repository root always had.
    return np.random.default_rng(zlib.crc32(_seed_key(request.node.nodeid, request.node.path).encode()))
