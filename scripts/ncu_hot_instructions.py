#!/usr/bin/env python3
"""Hottest SASS instructions of an Nsight Compute source-page CSV (ncu -i R --page source --csv --print-source sass).

Usage: ncu_hot_instructions.py SASS_CSV [N]. Prints the N instructions with the most warp-stall samples, with their
share of all samples and the stall reasons that make up most of each, so that a kernel's waits can be attributed to
the barrier, wgmma wait or load that causes them.
"""
import csv
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return 0.0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    with open(sys.argv[1], newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"') and "Source" in line), None)
    if start is None:
        sys.exit(f"{sys.argv[1]}: no CSV header with a 'Source' column (ncu output follows)\n" + "\n".join(lines[:20]))
    rows = list(csv.DictReader(lines[start:]))
    header = rows[0].keys() if rows else []
    sample_col = next((h for h in header if "Warp Stall Sampling (All" in h), None)
    if sample_col is None:
        sys.exit(f"{sys.argv[1]}: no 'Warp Stall Sampling (All Samples)' column; columns: {list(header)}")
    stall_cols = [h for h in header if h.startswith("stall_") or "Stall" in h and h != sample_col and "Not" not in h]
    total = sum(number(r[sample_col]) for r in rows) or 1.0
    hottest = sorted(rows, key=lambda r: number(r[sample_col]), reverse=True)[:limit]
    print(f"{len(rows)} instructions, {total:.0f} samples; column '{sample_col}'")
    for r in hottest:
        share = number(r[sample_col]) / total
        reasons = sorted(((number(r[h]), h) for h in stall_cols), reverse=True)[:3]
        why = ", ".join(f"{h}={v:.0f}" for v, h in reasons if v > 0)
        print(f"{share:6.1%}  {r.get('Address', ''):>8}  {r.get('Source', '')[:60]:<60}  {why}")


if __name__ == "__main__":
    main()
