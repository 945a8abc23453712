# Sourced by the run scripts here (after their `set -uo pipefail`): $OUT made, $start set, $E the
# experiments folder; use_peers installs the carried wheels (.whl: sgl-flash-mla, flash-attn3-jax,
# pytest-xdist) into /tmp/site, puts them on PYTHONPATH and tells JAX not to take the whole GPU
# (torch shares it).
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
start=$(date +%s)
E=bench/experiments
use_peers() {
  python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
  export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
}
