"""The integer e4m3 decode of bench/experiments/2026-11-28_ds_int_decode.patch (NOTES item 67), on the
host: for every non-NaN e4m3 byte and a spread of float32 group scales (|scale| < 2^119, subnormal
ones included), bf16((f16 of the byte's bits / 2^8) x (scale x 2^8)) has the bits of the reference's
bf16(float32(value) x scale) (jaxpaged/_fp8.py's rule). Prints the count of mismatching bf16 values.

    python3 tools/ds_int_decode_check.py
"""
import ml_dtypes
import numpy as np


def main():
    rng = np.random.default_rng(0)
    b = np.arange(256, dtype=np.uint16)
    b = b[(b & 0x7F) != 0x7F]  # (NaN bytes take the kernel's cvt path)
    value = b.astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    down = (((b & 0x80) << 8) | ((b & 0x7F) << 7)).astype(np.uint16).view(np.float16).astype(np.float32)
    scales = np.concatenate([
        (rng.standard_normal(2000) * 10.0 ** rng.integers(-30, 30, 2000)).astype(np.float32),
        np.array([2**-149, 2**-126, 1e-40, 3e-39, 2**118, 2**118 * 1.99, 1.0, -1.0, 0.0, -0.0], np.float32),
    ])
    scales = scales[np.isfinite(scales) & (np.abs(scales) < np.float32(2.0**119))]
    bad = 0
    for s in scales:
        ref = (value * s).astype(ml_dtypes.bfloat16).view(np.uint16)
        got = (down * (s * np.float32(256))).astype(ml_dtypes.bfloat16).view(np.uint16)
        bad += int((ref != got).sum())
    print(f"{len(b)} bytes x {len(scales)} scales: {bad} mismatching bf16 values")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
