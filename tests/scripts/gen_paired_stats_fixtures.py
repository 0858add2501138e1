#!/usr/bin/python3
"""Write tests/fixtures/paired_stats_expected.json: reference values for the paired and one-sample tests
(paired t, Wilcoxon signed-rank, two-sided one-sample t, one-sided Welch) of harness/stats.

The values are computed by exact routes that need only python3-mpmath: Student t and normal tails from
mpmath at 50 digits, the Wilcoxon null distribution by exact enumeration of the 2^n sign patterns
(integer counts). Where scipy is importable, every case is also checked against scipy
(ttest_rel, wilcoxon, ttest_1samp, ttest_ind) and the script stops on a disagreement:
    /usr/bin/python3 tests/scripts/gen_paired_stats_fixtures.py
Samples are fixed in this file (no generator), so the output depends on nothing else.
"""
import json
import math
import os
import sys

import mpmath

mpmath.mp.dps = 50
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "paired_stats_expected.json")

# Train times (s) of two arms run with the same seeds, final losses, and small hand-made samples.
TIME_BASE = [75.12, 74.98, 75.31, 75.05, 74.87, 75.22, 75.40, 74.95, 75.18, 75.09]
TIME_CAND = [74.61, 74.73, 74.84, 74.49, 74.70, 74.62, 75.02, 74.38, 75.30, 74.55]
LOSS_BASE = [3.2791, 3.2803, 3.2779, 3.2788, 3.2810, 3.2796, 3.2784, 3.2799]
LOSS_CAND = [3.2786, 3.2802, 3.2783, 3.2781, 3.2799, 3.2797, 3.2777, 3.2793]


def mean(x):
    return math.fsum(x) / len(x)


def sd(x):
    m = mean(x)
    return math.sqrt(math.fsum((v - m) ** 2 for v in x) / (len(x) - 1))


def t_cdf(t, df):
    t, df = mpmath.mpf(t), mpmath.mpf(df)
    tail = mpmath.betainc(df / 2, mpmath.mpf(1) / 2, 0, df / (df + t * t), regularized=True) / 2
    return tail if t < 0 else 1 - tail


def p_from_t(t, df, alternative):
    if alternative == "less":
        return float(t_cdf(t, df))
    if alternative == "greater":
        return float(t_cdf(-t, df))
    return float(2 * t_cdf(-abs(t), df))


def one_sample(x, mu, alternative):
    n = len(x)
    t = (mean(x) - mu) / (sd(x) / math.sqrt(n))
    return {"x": x, "mu": mu, "alternative": alternative, "t": t, "df": float(n - 1),
            "p": p_from_t(t, n - 1, alternative)}


def paired(c, b, alternative):
    d = [ci - bi for ci, bi in zip(c, b)]
    r = one_sample(d, 0.0, alternative)
    return {"candidate": c, "baseline": b, "alternative": alternative, "t": r["t"], "df": r["df"], "p": r["p"]}


def welch(c, b, alternative):
    vc, vb = sd(c) ** 2 / len(c), sd(b) ** 2 / len(b)
    t = (mean(c) - mean(b)) / math.sqrt(vc + vb)
    df = (vc + vb) ** 2 / (vc ** 2 / (len(c) - 1) + vb ** 2 / (len(b) - 1))
    return {"candidate": c, "baseline": b, "alternative": alternative, "t": t, "df": df,
            "p": p_from_t(t, df, alternative)}


def average_ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i + 1
        while j < len(order) and values[order[j]] == values[order[i]]:
            j += 1
        for k in range(i, j):
            ranks[order[k]] = (i + 1 + j) / 2
        ties.append(j - i)
        i = j
    return ranks, ties


def signed_rank_counts(n):
    counts = [1] + [0] * (n * (n + 1) // 2)
    for rank in range(1, n + 1):
        for k in range(len(counts) - 1, rank - 1, -1):
            counts[k] += counts[k - rank]
    return counts


def wilcoxon(c, b, alternative):
    all_d = [ci - bi for ci, bi in zip(c, b)]
    d = [v for v in all_d if v != 0]
    n = len(d)
    ranks, ties = average_ranks([abs(v) for v in d])
    r_plus = math.fsum(r for r, v in zip(ranks, d) if v > 0)
    r_minus = math.fsum(r for r, v in zip(ranks, d) if v < 0)
    stat = min(r_plus, r_minus) if alternative == "two-sided" else r_plus
    if n <= 50 and len(d) == len(all_d) and max(ties) == 1:
        counts = signed_rank_counts(n)
        k = int(round(r_plus))
        total = 2 ** n
        p_less = mpmath.mpf(sum(counts[:k + 1])) / total
        p_greater = mpmath.mpf(sum(counts[k:])) / total
        if alternative == "less":
            p = p_less
        elif alternative == "greater":
            p = p_greater
        else:
            p = 1 if k == (len(counts) - 1) // 2 else min(1, 2 * min(p_less, p_greater))
        method = "exact"
    else:
        m = n * (n + 1) / 4
        se = mpmath.sqrt((mpmath.mpf(n) * (n + 1) * (2 * n + 1) - mpmath.mpf(sum(t ** 3 - t for t in ties)) / 2) / 24)
        z = (stat - m) / se
        if alternative == "less":
            p = mpmath.ncdf(z)
        elif alternative == "greater":
            p = 1 - mpmath.ncdf(z)
        else:
            p = 2 * (1 - mpmath.ncdf(abs(z)))
        method = "asymptotic"
    return {"candidate": c, "baseline": b, "alternative": alternative, "statistic": stat, "p": float(p),
            "n_nonzero": n, "method": method}


def cases():
    sixty_b = [100.0 + 0.37 * i for i in range(60)]
    sixty_c = [v + (((i * 7919) % 13) - 5.5) * 0.1 for i, v in enumerate(sixty_b)]
    tied_b = [10.0, 10.5, 11.0, 11.5, 12.0, 12.5, 13.0, 13.5]
    tied_c = [10.25, 10.25, 11.25, 11.75, 11.75, 12.75, 13.25, 13.0]  # |d| repeats 0.25 and 0.5; no zero
    zero_c = [10.0, 10.75, 11.5, 11.0, 12.0, 12.25, 13.75, 13.5]       # two zero differences
    out = {"paired_t": [], "wilcoxon": [], "one_sample_t": [], "welch_alternative": []}
    for alt in ("two-sided", "less", "greater"):
        out["paired_t"] += [paired(TIME_CAND, TIME_BASE, alt), paired(LOSS_CAND, LOSS_BASE, alt),
                            paired(TIME_CAND[:4], TIME_BASE[:4], alt), paired(TIME_BASE[:3], TIME_CAND[3:6], alt)]
        out["wilcoxon"] += [wilcoxon(TIME_CAND, TIME_BASE, alt), wilcoxon(LOSS_CAND, LOSS_BASE, alt),
                            wilcoxon(TIME_CAND[:4], TIME_BASE[:4], alt), wilcoxon(sixty_c, sixty_b, alt),
                            wilcoxon(tied_c, tied_b, alt), wilcoxon(zero_c, tied_b, alt)]
        out["one_sample_t"] += [one_sample(LOSS_BASE, 3.2791, alt), one_sample(LOSS_CAND, 3.2800, alt),
                                one_sample(TIME_BASE[:5], 75.4, alt)]
        out["welch_alternative"] += [welch(TIME_CAND, TIME_BASE, alt), welch(LOSS_CAND[:5], LOSS_BASE, alt)]
    return out


def check_with_scipy(data):
    try:
        from scipy import stats
    except ImportError:
        print("scipy not importable: values come from the exact routes only", file=sys.stderr)
        return False
    for c in data["paired_t"]:
        r = stats.ttest_rel(c["candidate"], c["baseline"], alternative=c["alternative"])
        assert math.isclose(r.pvalue, c["p"], rel_tol=1e-9), c
    for c in data["wilcoxon"]:
        r = stats.wilcoxon(c["candidate"], c["baseline"], alternative=c["alternative"],
                           mode="exact" if c["method"] == "exact" else "approx")
        assert math.isclose(r.pvalue, c["p"], rel_tol=1e-9) and r.statistic == c["statistic"], c
    for c in data["one_sample_t"]:
        r = stats.ttest_1samp(c["x"], c["mu"], alternative=c["alternative"])
        assert math.isclose(r.pvalue, c["p"], rel_tol=1e-9), c
    for c in data["welch_alternative"]:
        r = stats.ttest_ind(c["candidate"], c["baseline"], equal_var=False, alternative=c["alternative"])
        assert math.isclose(r.pvalue, c["p"], rel_tol=1e-9), c
    return True


def main():
    data = {"generator": "tests/scripts/gen_paired_stats_fixtures.py", "mpmath_version": mpmath.__version__}
    data.update(cases())
    data["checked_with_scipy"] = check_with_scipy(data)
    with open(OUT, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.normpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
