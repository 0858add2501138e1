#!/usr/bin/python3
"""Write tests/fixtures/stats_expected.json: reference values from scipy for the harness statistics.

Run with Debian's python3 + python3-scipy (scipy 1.10):  /usr/bin/python3 tests/scripts/gen_stats_fixtures.py
The C++ tests (tests/harness_stats/scipy_fixtures_test.cpp) read the JSON, so CI needs no scipy.
Samples are drawn once from a seeded generator and stored in the file; only the file matters.
"""
import json
import os
import sys

import numpy as np
import scipy
from scipy import stats

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "stats_expected.json")
rng = np.random.default_rng(20240520)


def floats(a):
    return [float(v) for v in a]


def losses(n, mean=3.2795, sd=0.0019):
    return rng.normal(mean, sd, n)


def times(n, mean=75.0, sd=0.2):
    return rng.normal(mean, sd, n)


def rounded(a, decimals):
    """Values rounded like log output (creates ties)."""
    return np.round(a, decimals)


def summary_cases():
    cases = []
    samples = [losses(2), losses(3), losses(10), rounded(losses(25), 3), times(80), rng.exponential(2.0, 501),
               np.array([5.0]), np.array([1.0, 1.0, 1.0, 1.0])]
    for x in samples:
        cases.append({"x": floats(x), "mean": float(np.mean(x)),
                      "std": float(np.std(x, ddof=1)) if len(x) > 1 else 0.0,
                      "sem": float(stats.sem(x)) if len(x) > 1 else 0.0,
                      "median": float(np.median(x)), "min": float(np.min(x)), "max": float(np.max(x))})
    return cases


def one_sample_cases():
    cases = []
    specs = [(2, 3.2795, 0.0019), (3, 3.2790, 0.0019), (5, 3.2800, 0.0020), (10, 3.2795, 0.0019),
             (10, 3.2805, 0.0019), (10, 3.2700, 0.0010), (30, 3.2798, 0.0025), (80, 3.2791, 0.0019),
             (500, 3.2799, 0.0019), (4, 3.2795, 0.0000001)]
    for n, mean, sd in specs:
        x = losses(n, mean, sd)
        r = stats.ttest_1samp(x, 3.28, alternative="less")
        cases.append({"x": floats(x), "target": 3.28, "t": float(r.statistic), "df": float(n - 1),
                      "p": float(r.pvalue)})
    x = rounded(losses(12), 4)  # log-rounded losses with ties
    r = stats.ttest_1samp(x, 3.28, alternative="less")
    cases.append({"x": floats(x), "target": 3.28, "t": float(r.statistic), "df": 11.0, "p": float(r.pvalue)})
    x = times(6)
    r = stats.ttest_1samp(x, 75.1, alternative="less")
    cases.append({"x": floats(x), "target": 75.1, "t": float(r.statistic), "df": 5.0, "p": float(r.pvalue)})
    return cases


def published_case():
    # The record write-up: 80 runs, mean 3.2791, std 0.0019, one-sided against 3.28.
    n, mean, sd = 80, 3.2791, 0.0019
    t = (mean - 3.28) / (sd / np.sqrt(n))
    return {"n": n, "mean": mean, "std": sd, "target": 3.28, "t": float(t), "df": float(n - 1),
            "p": float(stats.t.cdf(t, n - 1))}


def ucb_cases():
    cases = []
    for n, conf in [(2, 0.95), (5, 0.99), (10, 0.95), (10, 0.99), (40, 0.9), (200, 0.999)]:
        x = losses(n)
        ucb = np.mean(x) + stats.t.ppf(conf, n - 1) * stats.sem(x)
        cases.append({"x": floats(x), "confidence": conf, "ucb": float(ucb),
                      "t_ppf": float(stats.t.ppf(conf, n - 1))})
    return cases


def welch_cases():
    cases = []
    pairs = [(times(2), times(2)), (times(3), times(7, 75.5, 0.5)), (times(10, 74.25), times(10)),
             (times(5, 75.0, 1.0), times(40, 75.2, 0.1)), (times(200, 75.01), times(300)),
             (losses(10), losses(10, 3.2805)), (rounded(times(8), 1), rounded(times(9), 1)),
             (times(10, 70.0, 0.2), times(10, 75.0, 0.2))]
    x = times(6)
    pairs.append((x, x.copy()))  # equal means: t = 0, p = 1
    for c, b in pairs:
        r = stats.ttest_ind(c, b, equal_var=False)
        v1, v2 = np.var(c, ddof=1) / len(c), np.var(b, ddof=1) / len(b)
        df = (v1 + v2) ** 2 / (v1 ** 2 / (len(c) - 1) + v2 ** 2 / (len(b) - 1))
        cases.append({"candidate": floats(c), "baseline": floats(b), "t": float(r.statistic), "df": float(df),
                      "p": float(r.pvalue)})
    return cases


def mann_whitney_cases():
    cases = []
    pairs = [
        (times(1), times(1)),                        # smallest exact case
        (times(2), times(3)),
        (times(3), times(4, 75.3)),
        (times(5), times(5)),
        (times(8), times(8, 75.2)),                  # both at the exact limit
        (times(8), times(30)),                       # one small sample: still exact
        (times(40), times(7, 74.9)),                 # small second sample: exact
        (times(9), times(9)),                        # both > 8: asymptotic
        (times(10), times(10, 75.3)),
        (times(60), times(45, 75.05)),
        (rounded(times(5), 1), rounded(times(6), 1)),  # small with ties: asymptotic
        (rounded(times(20), 1), rounded(times(25), 1)),
        (np.array([1.0, 1.0, 1.0]), np.array([1.0, 1.0])),  # all tied
        (np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])),  # complete separation, exact
        (np.arange(12.0), np.arange(12.0) + 100.0),  # complete separation, asymptotic
    ]
    for x, y in pairs:
        r = stats.mannwhitneyu(x, y)  # defaults: two-sided, method='auto', continuity
        ties = len(np.unique(np.concatenate([x, y]))) != len(x) + len(y)
        method = "asymptotic" if (len(x) > 8 and len(y) > 8) or ties else "exact"
        exact_p = stats.mannwhitneyu(x, y, method="exact").pvalue
        asym_p = stats.mannwhitneyu(x, y, method="asymptotic").pvalue
        assert float(r.pvalue) == float(exact_p if method == "exact" else asym_p)
        cases.append({"x": floats(x), "y": floats(y), "u": float(r.statistic), "p": float(r.pvalue),
                      "method": method})
    return cases


def main():
    data = {
        "generator": "tests/scripts/gen_stats_fixtures.py",
        "scipy_version": scipy.__version__,
        "numpy_version": np.__version__,
        "summary": summary_cases(),
        "one_sample_t_less": one_sample_cases(),
        "published_record": published_case(),
        "upper_confidence_bound": ucb_cases(),
        "welch": welch_cases(),
        "mann_whitney": mann_whitney_cases(),
    }
    with open(OUT, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.normpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
