"""The ops under jit over a device mesh (sharded heads and sequences) match the reference.

The cases live in sharded_cases.py and run in a child process on 4 CPU devices, since the device
count must be fixed before JAX starts (this process already has its backend).
"""

import os
import subprocess
import sys


def test_sharded_calls_match_reference_without_collectives():
    script = os.path.join(os.path.dirname(__file__), "sharded_cases.py")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    run = subprocess.run([sys.executable, "-P", script], env=env, capture_output=True, text=True,
                         timeout=600)
    print(run.stdout)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "all sharded cases match the reference" in run.stdout
