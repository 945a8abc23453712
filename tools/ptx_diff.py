"""Compares the generated PTX of every kernel between two source trees (no GPU needed).

    python tools/ptx_diff.py OLD_SRC_TREE NEW_SRC_TREE [--old-units DIR] [--new-units DIR]
                             [--archs 80 90a] [--jobs 2]

--old-units / --new-units add the .cu files under DIR to that tree's units: the per-instance units
CMake generates (BUILD_DIR/instances). Compiles every .cu file under each tree's src/ to PTX for each architecture (without line
information, so moved or re-commented code does not count as a change), splits the PTX into its
kernels (`.entry` functions, keyed by mangled name; branch labels numbered per unit are
normalised) and reports, per kernel, whether its PTX is
byte-identical. The same PTX through the same ptxas gives the same SASS, so a restructuring that
reports every kernel identical changed no kernel code.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ENTRY = re.compile(r"^\.(?:visible|weak)?\s*\.entry\s+(\S+)\(", re.M)
# Branch labels carry the function's index in its unit ($L__BB<function>_<block>): not code.
LABEL = re.compile(r"\$L__BB\d+_")


def xla_include() -> str:
    import jaxlib
    return os.path.join(os.path.dirname(jaxlib.__file__), "include")


def compile_ptx(tree: pathlib.Path, unit: pathlib.Path, arch: str, out: pathlib.Path) -> str:
    cmd = ["nvcc", "-ptx", f"-gencode=arch=compute_{arch},code=sm_{arch}", "-std=c++17",
           "--expt-relaxed-constexpr", f"-I{tree / 'src'}", "-isystem", xla_include(),
           "-DJAXPAGED_WITH_GPU", '-DJAXPAGED_GPU_PLATFORM="CUDA"', str(unit), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out.read_text()


def kernels(ptx: str) -> dict[str, str]:
    """Mangled kernel name -> its PTX text (from its .entry line to the closing brace)."""
    out = {}
    starts = [m.start() for m in ENTRY.finditer(ptx)]
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(ptx)
        body = ptx[start:end]
        body = body[: body.rfind("}") + 1]
        out[ENTRY.match(body).group(1)] = LABEL.sub("$L__BB_", body)
    return out


def tree_kernels(tree: pathlib.Path, extra, archs, jobs: int) -> dict[tuple[str, str], str]:
    units = sorted((tree / "src").rglob("*.cu")) + (sorted(extra.rglob("*.cu")) if extra else [])
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="ptx_"))
    found: dict[tuple[str, str], str] = {}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(compile_ptx, tree, u, a, tmp / f"{i}_{a}.ptx"): a
                   for i, u in enumerate(units) for a in archs}
        for fut in concurrent.futures.as_completed(futures):
            for name, body in kernels(fut.result()).items():
                found[(futures[fut], name)] = body  # a template instance may appear in several units
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=pathlib.Path)
    ap.add_argument("new", type=pathlib.Path)
    ap.add_argument("--old-units", type=pathlib.Path)
    ap.add_argument("--new-units", type=pathlib.Path)
    ap.add_argument("--archs", nargs="+", default=["80", "90a"])
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    old = tree_kernels(args.old, args.old_units, args.archs, args.jobs)
    new = tree_kernels(args.new, args.new_units, args.archs, args.jobs)
    differ = 0
    for key in sorted(set(old) | set(new)):
        arch, name = key
        if key not in new or key not in old:
            state = "only in " + ("old" if key in old else "new")
            differ += 1
        elif old[key] == new[key]:
            state = "identical"
        else:
            state = "DIFFERS"
            differ += 1
        print(f"sm_{arch:4} {state:10} {name}")
    print(f"{len(set(old) | set(new)) - differ} identical, {differ} differ or unmatched")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
