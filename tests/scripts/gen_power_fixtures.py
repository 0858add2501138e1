#!/usr/bin/env python3
"""Reference values for harness/stats/power.h, written to tests/fixtures/power_expected.json.

Computed independently of Boost.Math, with the Python standard library only: the power of the one-sided
one-sample t-test is an integral over the sample standard deviation,

    power(n, d, alpha) = E[ Phi(d*sqrt(n) - t_crit * S) ],   S = sqrt(V/df), V ~ chi2(df), df = n - 1,

because (target - mean)/(s/sqrt(n)) = (Z + d*sqrt(n)) / S with Z standard normal independent of S. The
density of S is 2*df*s * f_chi2(df*s^2); the integral is taken with composite Simpson's rule over the range
holding all but ~1e-40 of S's mass. The critical value t_crit solves the same integral at d = 0
(P(T > t_crit) = alpha for the central t) by bisection. Run counts and detectable effects are then found by
scanning / bisecting that power function.

Usage: python3 tests/scripts/gen_power_fixtures.py > tests/fixtures/power_expected.json
"""
import json
import math

INTERVALS = 6000  # Simpson intervals (even)


def s_density(s, df):
    if s <= 0.0:
        # The limit at 0: sqrt(2/pi) for one degree of freedom (a half-normal), 0 for more.
        return math.sqrt(2 / math.pi) if df == 1 else 0.0
    v = df * s * s
    log_chi2 = (df / 2 - 1) * math.log(v) - v / 2 - (df / 2) * math.log(2) - math.lgamma(df / 2)
    return 2 * df * s * math.exp(log_chi2)


def phi(x):
    return 0.5 * math.erfc(-x / math.sqrt(2))


def expect_over_s(func, df):
    half_width = 14.0 / math.sqrt(df) + 0.5 / df
    lo, hi = max(0.0, 1.0 - half_width), 1.0 + 2.0 * half_width + (8.0 if df < 4 else 0.0)
    h = (hi - lo) / INTERVALS
    total = 0.0
    for i in range(INTERVALS + 1):
        s = lo + i * h
        weight = 1 if i in (0, INTERVALS) else (4 if i % 2 else 2)
        total += weight * func(s) * s_density(s, df)
    return total * h / 3


def upper_tail_t(t, df, ncp=0.0):
    return expect_over_s(lambda s: phi(ncp - t * s), df)


def critical_t(n, alpha, cache={}):
    key = (n, alpha)
    if key not in cache:
        df = n - 1
        lo, hi = 0.0, 1.0
        while upper_tail_t(hi, df) > alpha:
            lo, hi = hi, hi * 2
        for _ in range(80):
            mid = (lo + hi) / 2
            if upper_tail_t(mid, df) > alpha:
                lo = mid
            else:
                hi = mid
        cache[key] = (lo + hi) / 2
    return cache[key]


def power(n, effect, alpha):
    return upper_tail_t(critical_t(n, alpha), n - 1, effect * math.sqrt(n))


def runs_for_power(effect, alpha, target_power):
    n = 2
    while power(n, effect, alpha) < target_power:
        n += 1 if n < 64 else max(1, n // 16)
    # Step back to the first n that reaches the target (coarse steps above 64 overshoot).
    while n > 2 and power(n - 1, effect, alpha) >= target_power:
        n -= 1
    return n


def detectable_effect(n, alpha, target_power):
    lo, hi = 0.0, 1.0
    while power(n, hi, alpha) < target_power:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        if power(n, mid, alpha) < target_power:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def main():
    power_cases = []
    for n, effect, alpha in [(2, 0.0, 0.05), (5, 0.0, 0.01), (30, 0.0, 0.01), (2, 1.0, 0.05), (3, 0.5, 0.05),
                             (5, 1.0, 0.01), (8, 0.8, 0.01), (10, 0.5, 0.05), (20, 0.3, 0.01), (27, 0.5, 0.05),
                             (40, 0.25, 0.01), (100, 0.2, 0.05), (12, -0.3, 0.05), (16, 1.5, 0.001),
                             (64, 0.1, 0.01), (6, 2.5, 0.01)]:
        power_cases.append({"n": n, "effect": effect, "alpha": alpha, "power": power(n, effect, alpha)})
    runs_cases = []
    for effect, alpha, target in [(0.5, 0.05, 0.8), (1.0, 0.01, 0.8), (0.8, 0.01, 0.9), (0.3, 0.05, 0.8),
                                  (2.0, 0.01, 0.8), (1.5, 0.05, 0.95), (0.25, 0.01, 0.8), (3.0, 0.01, 0.5)]:
        n = runs_for_power(effect, alpha, target)
        below = power(n - 1, effect, alpha) if n > 2 else None
        at = power(n, effect, alpha)
        # Keep only cases that are not a coin toss at the boundary (the two integrations must agree on n).
        assert at - target > 1e-6 and (below is None or target - below > 1e-6), (effect, alpha, target)
        runs_cases.append({"effect": effect, "alpha": alpha, "power": target, "runs": n,
                           "power_at_runs": at, "power_at_runs_minus_1": below})
    effect_cases = []
    for n, alpha, target in [(2, 0.05, 0.8), (5, 0.01, 0.8), (10, 0.01, 0.8), (20, 0.05, 0.9), (50, 0.01, 0.8),
                             (8, 0.01, 0.5), (100, 0.05, 0.8)]:
        effect_cases.append({"n": n, "alpha": alpha, "power": target, "effect": detectable_effect(n, alpha, target)})
    print(json.dumps({
        "source": "tests/scripts/gen_power_fixtures.py: Simpson integration of the non-central t power over "
                  "the chi distribution of the sample sd (Python standard library, independent of Boost.Math)",
        "power": power_cases, "runs_for_power": runs_cases, "detectable_effect": effect_cases}, indent=1))


if __name__ == "__main__":
    main()
