# Sourced by the run scripts that time against peers: $OUT made, $start set, the carried wheels
# (.whl: sgl-flash-mla, flash-attn3-jax, pytest-xdist) installed into /tmp/site and put on
# PYTHONPATH, and JAX told not to take the whole GPU (torch shares it).
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
start=$(date +%s)
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
