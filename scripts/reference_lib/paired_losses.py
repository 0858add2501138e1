"""The side-by-side verdict on training losses, with a null: standard library only.

The reference and our run train on the same batches from the same weights, so their training losses pair up step by
step. Their relative difference r_s = (L_ref,s - L_ours,s) / L_ours,s is not noise around zero even when both are
right: each program rounds its sums in its own order, the trajectories drift apart, and the drift is correlated
from one step to the next. So r is judged against a null measured the same way: a second run of ours on the same
batches whose math is the same and whose summation order is not (another kernel version, for example the scatter
of the embedding backward), giving r0_s = (L_null,s - L_ours,s) / L_ours,s.

Test: the steps are cut into `blocks` contiguous blocks; a block's mean of r (and of r0) is taken as one
observation, since steps further apart than a block are far less correlated than neighbours. Welch's t-test on the
block means of r against those of r0 asks whether the reference's mean offset differs from the null's. The verdict
fails at p < alpha. `detectable_offset` is the difference of mean offsets at which |t| reaches the critical value
with the measured spreads: an offset of that size is flagged about half the time, one of twice that nearly always;
a smaller one goes unseen. Exact sign tests (how many steps have the reference lower) are reported beside it, for
both pairs: they are descriptive, since neighbouring steps are not independent.
"""
import math


def _away_from_zero(v, tiny=1e-300):
    """v, or tiny where |v| is smaller (the modified Lentz method's guard against dividing by zero)."""
    return v if abs(v) > tiny else tiny


def _betacf(a, b, x):
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 / _away_from_zero(1.0 - qab * x / qap)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 / _away_from_zero(1.0 + aa * d)
            c = _away_from_zero(1.0 + aa / c)
            delta = d * c
            h *= delta
        if abs(delta - 1.0) < 1e-15:
            return h
    raise ArithmeticError(f"incomplete beta: no convergence for a={a}, b={b}, x={x}")


def regularized_beta(a, b, x):
    """I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if not (a > 0 and b > 0 and 0.0 <= x <= 1.0):
        raise ValueError(f"regularized_beta: needs a, b > 0 and 0 <= x <= 1, got a={a}, b={b}, x={x}")
    if x in (0.0, 1.0):
        return x
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_sf(t, df):
    """P(T > t) for Student's t with df > 0 degrees of freedom (df need not be an integer: Welch)."""
    if not df > 0:
        raise ValueError(f"t_sf: degrees of freedom must be > 0, got {df}")
    tail = 0.5 * regularized_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_two_sided_p(t, df):
    return min(1.0, 2.0 * t_sf(abs(t), df))


def t_critical(alpha, df):
    """The t with P(|T| > t) = alpha (bisection on t_two_sided_p, which falls as t grows)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"t_critical: alpha must lie in (0, 1), got {alpha}")
    low, high = 0.0, 1.0
    while t_two_sided_p(high, df) > alpha:
        high *= 2.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if t_two_sided_p(mid, df) > alpha:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


def sign_test_p(below, n):
    """Exact two-sided sign test: the probability, with each of n steps below or above at even odds, of a count at
    least as far from n/2 as `below`."""
    if not 0 <= below <= n:
        raise ValueError(f"sign_test_p: {below} of {n} steps")
    if n == 0:
        return 1.0
    k = min(below, n - below)
    tail = math.fsum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


def _mean(x):
    return math.fsum(x) / len(x)


def _variance(x):
    m = _mean(x)
    return math.fsum((v - m) ** 2 for v in x) / (len(x) - 1)


def welch(a, b):
    """Welch's two-sample t-test: (t, df, two-sided p, standard error of the difference of means)."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"welch: each sample needs at least 2 values, got {len(a)} and {len(b)}")
    va, vb = _variance(a) / len(a), _variance(b) / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:
        raise ValueError("welch: both samples are constant; the test needs a spread")
    t = (_mean(a) - _mean(b)) / se
    # Welch-Satterthwaite; a constant sample adds nothing to it (va or vb 0), which the formula gives as it stands
    df = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    return t, df, t_two_sided_p(t, df), se


def relative_differences(losses, base, what):
    """(losses[s] - base[s]) / base[s] per step; both lists cover the same steps, every value finite and > 0."""
    if len(losses) != len(base):
        raise ValueError(f"{what}: {len(losses)} steps against ours {len(base)}: the runs must cover the same steps")
    for name, values in ((what, losses), ("ours", base)):
        bad = [s for s, v in enumerate(values) if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0)]
        if bad:
            raise ValueError(f"{name}: training loss at step {bad[0]} is {values[bad[0]]!r} (a finite loss > 0 "
                             "is needed)")
    return [(x - y) / y for x, y in zip(losses, base)]


def block_means(values, blocks):
    """Means of `blocks` contiguous blocks of equal length; the first len % blocks values are left out, so that
    the blocks end with the run."""
    if blocks < 2:
        raise ValueError(f"blocks must be >= 2, got {blocks}")
    size = len(values) // blocks
    if size < 2:
        raise ValueError(f"{len(values)} steps make {blocks} blocks of fewer than 2 steps; use fewer blocks")
    start = len(values) - size * blocks
    return [_mean(values[start + b * size:start + (b + 1) * size]) for b in range(blocks)]


def verdict(reference, ours, null, blocks=8, alpha=0.01, skip=0):
    """reference, ours, null: training losses per step on the same batches (null: a second implementation of
    ours); skip: leading steps left out. Returns the test's figures and `pass`."""
    r = relative_differences(reference, ours, "reference")[skip:]
    r0 = relative_differences(null, ours, "null")[skip:]
    m, m0 = block_means(r, blocks), block_means(r0, blocks)
    t, df, p, se = welch(m, m0)
    below = sum(1 for v in r if v < 0)
    below0 = sum(1 for v in r0 if v < 0)
    return {"steps": len(r), "skip": skip, "blocks": blocks, "alpha": alpha,
            "offset": _mean(r), "null_offset": _mean(r0),
            "block_means": m, "null_block_means": m0,
            "t": t, "df": df, "p": p,
            "detectable_offset": t_critical(alpha, df) * se,
            "reference_below": below, "sign_p": sign_test_p(below, len(r)),
            "null_below": below0, "null_sign_p": sign_test_p(below0, len(r0)),
            "pass": p >= alpha}


def format_verdict(v):
    pct = 100.0
    return "\n".join([
        f"training losses, same batches, steps {v['skip']}..{v['skip'] + v['steps'] - 1} in {v['blocks']} blocks:",
        f"  reference against ours: mean offset {v['offset'] * pct:+.4f}%, lower at {v['reference_below']} of "
        f"{v['steps']} steps (sign test p = {v['sign_p']:.2g})",
        f"  null (ours, other summation order) against ours: mean offset {v['null_offset'] * pct:+.4f}%, lower at "
        f"{v['null_below']} of {v['steps']} steps (sign test p = {v['null_sign_p']:.2g})",
        f"  Welch on block means: t = {v['t']:.3f}, df = {v['df']:.1f}, p = {v['p']:.3g}; offsets beyond "
        f"±{v['detectable_offset'] * pct:.4f}% of the null's are seen at alpha = {v['alpha']}",
        f"paired training losses: {'PASS' if v['pass'] else 'FAIL'} (the reference's offset "
        f"{'is within' if v['pass'] else 'differs from'} what a change of summation order gives)"])
