"""Per kernel of an ncu report's raw page (CSV: `ncu -i R.ncu-rep --page raw --csv > raw.csv`): its
time, registers, grid, issue activity, tensor-pipe activity (hmma, gmma), DRAM throughput and the
warp-stall ratios, those >= 0.05 (time always).

    python3 tools/ncu_stalls.py raw.csv
"""

import csv
import sys

NAMED = ("Kernel Name", "gpu__time_duration.sum", "launch__registers_per_thread",
         "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
         "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active",
         "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
         "dram__throughput.avg.pct_of_peak_sustained_elapsed", "launch__grid_size",
         "smsp__issue_active.avg.pct_of_peak_sustained_active")


def main(path):
    rows = list(csv.reader(open(path)))
    head, data = rows[0], rows[2:]
    keep = [i for i, h in enumerate(head) if h in NAMED
            or ("average_warp_latency_issue_stalled" in h and h.endswith(".ratio"))
            or ("warps_issue_stalled" in h and h.endswith("per_issue_active.ratio"))]
    for r in data:
        print("==", r[head.index("Kernel Name")][:90])
        for i in keep:
            try:
                v = float(r[i].replace(",", ""))
            except ValueError:
                continue
            if v >= 0.05 or "time" in head[i]:
                print(f"  {head[i]:90s} {v:12.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
