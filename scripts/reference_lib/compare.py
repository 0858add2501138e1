"""Comparison rows of the reference check: errors, tolerances from several draws, rows that carry no evidence.

For each tensor, the max relative error err = max|ours − ref| / max|ref| (normalised by the largest entry;
elementwise relative error is meaningless where values cross zero). Optimizer steps are judged by the L2 relative
error ‖ours − ref‖₂ / ‖ref‖₂ instead: Adam's first update is ±lr wherever the gradient is nonzero, so a sign flip of
one tiny gradient entry makes the max error 2 in any two implementations (the metric column says which one a row
uses). Every row is measured on several draws (microbatches); the reference's own bf16-vs-f32 difference of each
draw is its self-difference. Each draw is judged on its own (judge_draws): its tolerance is K times its own
self-difference, but at least K times the row's measured spread (the median self-difference of its draws), so that
a draw whose f32 run happened to agree exactly is not held to zero and one noisy draw does not widen the others.
A row whose every draw agreed exactly (spread 0: the reference's f32 run rounds this quantity as its bf16 run does,
so it measures no noise here) takes its family's spread instead: the smallest positive spread among the rows of
the same kind at the same step (the name without its tensor, e.g. `s100 step101 update`), the tightest noise the
reference measured on a comparable quantity (a measured figure, not a constant; the smallest, so that a family of
noisier rows does not turn an exact row into an uninformative one).
A draw whose tolerance reaches UNINFORMATIVE passes even when our side is all zeros (the relative error of zeros is
1): it is `uninformative`, counted apart and never a pass. A row whose two sides are exactly zero in every draw (a
feature that is off at initialisation, say) is listed apart as no evidence (`zero`): it neither passes nor fails.
"""
import math
import re

WORST_ENTRIES = 5

# Relative errors compare with the reference's own size: our side all zeros has error 1 in both metrics. A draw
# whose tolerance is half of that cannot tell a result from half a result, so it shows nothing (it is reported
# `uninformative`, never `pass`).
UNINFORMATIVE = 0.5
VERDICTS = ("pass", "fail", "zero", "uninformative")


def rel_err(ours, ref, metric="max"):
    """max: max|ours − ref| / max|ref|; l2: ‖ours − ref‖₂ / ‖ref‖₂; in f64 (0 when both are all zeros, inf when
    only ref is)."""
    import torch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.as_tensor(ours).to(device=device, dtype=torch.float64)
    b = torch.as_tensor(ref).to(device=device, dtype=torch.float64)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: ours {list(a.shape)} reference {list(b.shape)}")
    if metric == "l2":
        diff = (a - b).norm().item() if a.numel() else 0.0
        scale = b.norm().item() if b.numel() else 0.0
    else:
        diff = (a - b).abs().max().item() if a.numel() else 0.0
        scale = b.abs().max().item() if b.numel() else 0.0
    if not math.isfinite(diff):
        return math.inf
    if scale == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / scale


def all_zero(t):
    import torch
    t = torch.as_tensor(t)
    return t.numel() == 0 or not bool(t.ne(0).any())


def worst_entries(ours, ref, ref_f32=None, n=WORST_ENTRIES):
    """The n entries where ours and ref differ most: index, ours, reference (bf16), reference (f32)."""
    import torch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.as_tensor(ours).to(device=device, dtype=torch.float64).flatten()
    b = torch.as_tensor(ref).to(device=device, dtype=torch.float64).flatten()
    c = None if ref_f32 is None else torch.as_tensor(ref_f32).to(device=device, dtype=torch.float64).flatten()
    diff = (a - b).abs()
    k = min(n, diff.numel())
    if k == 0:
        return []
    shape = list(torch.as_tensor(ours).shape)
    out = []
    for flat in torch.topk(diff, k).indices.tolist():
        index, rest = [], flat
        for size in reversed(shape):
            index.append(rest % size)
            rest //= size
        entry = {"index": list(reversed(index)), "ours": a[flat].item(), "ref": b[flat].item()}
        if c is not None:
            entry["ref_f32"] = c[flat].item()
        out.append(entry)
    return out


class Table:
    """The printed table and the JSON rows."""

    def __init__(self, k, floor, fallback):
        self.k, self.floor, self.fallback = k, floor, fallback
        self.rows = []
        self.pending = {}  # name -> {"metric", "draws": [...]}, emitted by flush()

    def add(self, name, err, tol, ok, note="", metric="max", **extra):
        """ok: True pass, False fail, None no evidence (both sides zero, or `verdict` uninformative in extra)."""
        row = {"tensor": name, "metric": metric, "rel_err": err, "tolerance": tol,
               "pass": None if ok is None else bool(ok), "note": note}
        row.update(extra)
        row.setdefault("verdict", {True: "pass", False: "fail"}.get(row["pass"], "zero"))
        self.rows.append(row)
        status = {"fail": "FAIL", "uninformative": "uninf"}.get(row["verdict"], row["verdict"])
        err_s = "-" if err is None else f"{err:.3e}"
        tol_s = "-" if tol is None else f"{tol:.3e}"
        print(f"{name:<48} {metric:>3} {err_s:>11} {tol_s:>11}  {status:<4}  {note}", flush=True)

    def info(self, name, note, **extra):
        self.rows.append({"tensor": name, "metric": None, "rel_err": None, "tolerance": None, "pass": None,
                          "info": True, "note": note, **extra})
        print(f"{name:<48} {'':>3} {'':>11} {'':>11}  info  {note}", flush=True)

    def exact(self, name, ours, ref, note=""):
        ok = ours == ref
        self.add(name, 0.0 if ok else None, 0.0, ok, note if ok else f"ours {short(ours)} reference {short(ref)}")

    def fixed(self, name, ours, ref, tol):
        """A comparison with a fixed tolerance (schedule values)."""
        try:
            err = rel_err(ours, ref)
        except Exception as e:
            self.add(name, None, None, False, f"cannot compare: {e}")
            return
        self.add(name, err, tol, err <= tol, "fixed tolerance")

    def draw(self, name, ours, ref, ref_f32=None, metric="max", self_diff=None, tolerance=None):
        """One draw of row `name`: ours and the reference's bf16 result, and its f32 result (or a self-difference
        given directly), or a fixed `tolerance` instead. Rows are emitted by flush() once every draw is in."""
        row = self.pending.setdefault(name, {"metric": metric, "draws": [], "tolerance": tolerance})
        d = {}
        try:
            d["err"] = rel_err(ours, ref, metric)
        except Exception as e:
            d["error"] = str(e)
            row["draws"].append(d)
            return
        if self_diff is None and ref_f32 is not None:
            try:
                self_diff = rel_err(ref, ref_f32, metric)
            except Exception:
                self_diff = None
        d["self"] = self_diff
        d["zero"] = all_zero(ours) and all_zero(ref)
        # Only a draw beyond K times its own self-difference can fail (its tolerance is at least that): the costly
        # search for its worst entries is skipped for the others.
        draw_tol = row["tolerance"] or (self.fallback if self_diff is None else self.k * self_diff)
        d["worst"] = worst_entries(ours, ref, ref_f32) if d["err"] > draw_tol else None
        row["draws"].append(d)

    def flush(self):
        spreads = family_spreads((name, [d.get("self") for d in row["draws"]], [d.get("zero") for d in row["draws"]])
                                 for name, row in self.pending.items()
                                 if not row["tolerance"] and all("error" not in d for d in row["draws"]))
        for name, row in self.pending.items():
            self.emit(name, row["metric"], row["draws"], row["tolerance"], spreads.get(family_of(name)))
        self.pending = {}

    def emit(self, name, metric, draws, fixed_tolerance=None, family_spread=None):
        broken = [d["error"] for d in draws if "error" in d]
        if broken:
            self.add(name, None, None, False, f"cannot compare: {broken[0]}", metric)
            return
        n = len(draws)
        errs = [d["err"] for d in draws]
        selfs = [d["self"] for d in draws]
        zeros = [d["zero"] for d in draws]
        j = judge_draws(errs, selfs, self.k, fixed_tolerance, zeros, self.fallback, self.floor, family_spread)
        if j["verdict"] == "zero":
            self.add(name, 0.0, None, None, f"both sides exactly zero in {n} draw(s): no evidence", metric,
                     draws=n, verdict="zero")
            return
        note = f"{n} draws: err {fmt(errs)}; " + j["basis"]
        if j["verdict"] == "uninformative":
            note += f"; UNINFORMATIVE: tolerance ≥ {UNINFORMATIVE} in draw(s) {j['uninformative_draws']}"
        extra = {"draws": n, "errors": errs, "self_differences": selfs, "zero_draws": zeros,
                 "tolerances": j["tolerances"], "draw_verdicts": j["draw_verdicts"], "verdict": j["verdict"]}
        ok = {"pass": True, "fail": False}.get(j["verdict"])
        worst = j["deciding_draw"]
        if ok is False:
            extra["worst_draw"] = worst
            extra["worst_entries"] = draws[worst]["worst"]
        self.add(name, max(errs), j["tolerance"], ok, note, metric, **extra)
        if ok is False:
            for e in draws[worst]["worst"] or []:
                f32 = f" ref f32 {e['ref_f32']:.6g}" if "ref_f32" in e else ""
                print(f"{'':<8}draw {worst} at {e['index']}: ours {e['ours']:.6g} ref {e['ref']:.6g}{f32}", flush=True)

    def broken(self):
        """Rows that could not be compared (an error, a missing tensor): failures that measure nothing."""
        return [r for r in self.rows if r["pass"] is False and r["rel_err"] is None]

    def counts(self):
        """(passed, failed, zero, uninformative): rows that are not info lines, by verdict."""
        return verdict_counts(self.rows)


def verdict_of(row):
    """pass / fail / zero / uninformative of a JSON row (rows written before `verdict` existed: from `pass`)."""
    if row.get("verdict") in VERDICTS:
        return row["verdict"]
    return {True: "pass", False: "fail"}.get(row.get("pass"), "zero")


def verdict_counts(rows):
    compared = [verdict_of(r) for r in rows if not r.get("info")]
    return tuple(compared.count(v) for v in VERDICTS)


def median(values):
    v = sorted(values)
    n = len(v)
    if n == 0:
        return None
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def family_of(name):
    """The kind and step of a row: its name without the last word (the tensor), e.g. `s100 step101 update`."""
    return name.rsplit(" ", 1)[0] if " " in name else ""


def family_spreads(rows):
    """{family: the smallest positive spread of its rows}, from (name, self-differences, zero flags) triples; a
    row's spread is the median self-difference of its live draws."""
    by_family = {}
    for name, selfs, zeros in rows:
        zeros = zeros or [False] * len(selfs)
        spread = median([x for x, z in zip(selfs, zeros) if not z and x is not None])
        if spread:
            by_family.setdefault(family_of(name), []).append(spread)
    return {f: min(v) for f, v in by_family.items()}


def judge_draws(errors, selfs, k, fixed_tolerance=None, zeros=None, fallback=2e-2, minimum=0.0, family_spread=None):
    """The verdict of one row from its draws. Each draw is judged against its own tolerance:
      - a fixed tolerance where the row has one (Adam alone: elementwise fp32 on both sides);
      - else K · max(its self-difference, the row's spread), the spread being the median self-difference of the
        row's non-zero draws (a measured floor: a draw whose f32 run agreed exactly borrows what the row's other
        draws measured; one outlier draw does not raise the others' tolerance, as a maximum over draws did); a
        row whose measured spread is exactly 0 takes `family_spread` (family_spreads) when given;
        `minimum` is an absolute lower bound (default none);
      - `fallback` where the draw has no self-difference (the f32 run failed).
    A draw fails when its error exceeds its tolerance, is uninformative when its tolerance is ≥ UNINFORMATIVE, and
    shows nothing when both sides are zero. The row fails when any draw fails, else is uninformative when any draw
    is, else passes; all-zero draws make a `zero` row.
    Returns {verdict, tolerance (of the deciding draw), tolerances, draw_verdicts, deciding_draw, basis,
    uninformative_draws, spread}."""
    n = len(errors)
    zeros = list(zeros) if zeros is not None else [False] * n
    live = [i for i in range(n) if not zeros[i]]
    measured = [selfs[i] for i in live if selfs[i] is not None]
    spread = median(measured)
    borrowed = bool(measured) and spread == 0 and bool(family_spread)
    if borrowed:
        spread = family_spread
    tolerances, verdicts = [], []
    for i in range(n):
        s = selfs[i]
        if fixed_tolerance is not None:
            tol = fixed_tolerance
        elif s is None:
            tol = fallback
        else:
            tol = max(k * max(s, spread or 0.0), minimum)
        tolerances.append(tol)
        if zeros[i]:
            verdicts.append("zero")
        elif not errors[i] <= tol:  # NaN fails
            verdicts.append("fail")
        elif tol >= UNINFORMATIVE:
            verdicts.append("uninformative")
        else:
            verdicts.append("pass")
    if fixed_tolerance is not None:
        basis = "fixed tolerance"
    elif any(s is None for i, s in enumerate(selfs) if not zeros[i]):
        basis = f"self {fmt(selfs)}; self n/a: fallback tolerance"
    else:
        basis = f"self {fmt(selfs)}; tolerance per draw {fmt(tolerances)}"
    if borrowed:
        basis += f"; every self-difference 0: the family's spread {family_spread:.3g}"
    if not live:
        verdict = "zero"
    elif "fail" in verdicts:
        verdict = "fail"
    elif "uninformative" in verdicts:
        verdict = "uninformative"
    else:
        verdict = "pass"

    def ratio(i):  # error over tolerance: among the draws with the row's verdict, the largest decides
        e, t = errors[i], tolerances[i]
        if not e <= t:
            return math.inf if t == 0 or e != e else e / t
        return e / t if t > 0 else 0.0

    deciding = max(range(n), key=lambda i: (verdicts[i] == verdict, ratio(i))) if n else 0
    return {"verdict": verdict, "tolerance": tolerances[deciding] if n else None, "tolerances": tolerances,
            "draw_verdicts": verdicts, "deciding_draw": deciding, "basis": basis, "spread": spread,
            "uninformative_draws": [i for i in range(n) if verdicts[i] == "uninformative"]}


def rejudge_row(row, k, spreads=None):
    """A recorded JSON row judged again by judge_draws. Rows without per-draw errors (exact, fixed-tolerance
    schedule values, info lines, rows that could not be compared) keep their verdict. The JSON of a row written
    before `zero_draws` existed holds no per-draw zero flags: a row is then zero only when it was zero as a
    whole."""
    out = dict(row)
    if row.get("info") or not isinstance(row.get("errors"), list):
        if not row.get("info"):
            out["verdict"] = verdict_of(row)
        return out
    errs, selfs = row["errors"], row.get("self_differences") or [None] * len(row["errors"])
    fixed = row.get("tolerance") if "fixed tolerance" in (row.get("note") or "") else None
    zeros = row.get("zero_draws")
    if zeros is None:
        zeros = [verdict_of(row) == "zero"] * len(errs)
    j = judge_draws(errs, selfs, k, fixed, zeros, family_spread=(spreads or {}).get(family_of(row["tensor"])))
    out.update({"verdict": j["verdict"], "tolerance": j["tolerance"], "tolerances": j["tolerances"],
                "draw_verdicts": j["draw_verdicts"], "pass": {"pass": True, "fail": False}.get(j["verdict"]),
                "recorded": {"verdict": verdict_of(row), "tolerance": row.get("tolerance")}})
    return out


def bank_blocks(name, shape, num_heads):
    """Leading-dimension blocks of a bank, one per layer's matrices, for gradient rows per layer: a fault in one
    layer (say its attention scale) moves that layer's block by far more than it moves the whole bank's error,
    which the other layers' rounding dominates. qk_bank holds 2·(H/2) matrices per attention layer (a head pair's
    Q and K each), vo_bank 2 (V, O), mlp_bank one [2, 4d, d] entry per layer; padding blocks compare zeros.
    Returns [(begin, end)], or [] for a tensor that is not a bank."""
    per_layer = {"qk_bank": 2 * (num_heads // 2), "vo_bank": 2, "mlp_bank": 1}.get(name)
    if not per_layer or not shape:
        return []
    return [(b, b + per_layer) for b in range(0, shape[0] - per_layer + 1, per_layer)]


def rejudge_report(report, k=None):
    """A recorded reference-check.json judged by today's rules (rejudge_row on every row; K from the report).
    Returns {rows, counts: (passed, failed, zero, uninformative), recorded: the report's (passed, failed, zero),
    changed: [(row, recorded verdict, verdict)]}."""
    k = report.get("k", 4.0) if k is None else k
    measured = [r for r in report["rows"] if not r.get("info") and isinstance(r.get("errors"), list)]
    spreads = family_spreads((r["tensor"], r.get("self_differences") or [None] * len(r["errors"]), r.get("zero_draws"))
                             for r in measured)
    rows = [rejudge_row(r, k, spreads) for r in report["rows"]]
    changed = [(r["tensor"], r["recorded"]["verdict"], r["verdict"]) for r in rows
               if "recorded" in r and r["recorded"]["verdict"] != r["verdict"]]
    return {"rows": rows, "counts": verdict_counts(rows), "changed": changed,
            "recorded": (report.get("passed"), report.get("failed"), report.get("zero"))}


def find_baseline(report, candidates):
    """The unmutated check a mutated `report` is judged against, among `candidates` ({name: report}): same code
    (git_commit), recipe, and for every pair of the report the same starting weights and at least its microbatches
    (draw i is the i-th microbatch of the pair's call in both). An equal microbatch count is preferred. Returns the
    name, or None."""
    def fits(c):
        if c.get("mutation") or not isinstance(c.get("rows"), list):
            return False
        if (c.get("git_commit"), c.get("recipe")) != (report.get("git_commit"), report.get("recipe")):
            return False
        steps = {s.get("step"): s for s in c.get("steps", [])}
        return all(s.get("step") in steps and steps[s["step"]].get("weights") == s.get("weights")
                   and (steps[s["step"]].get("microbatches") or 0) >= (s.get("microbatches") or 0)
                   for s in report.get("steps", []))

    def same_draws(c):
        steps = {s.get("step"): s.get("microbatches") for s in c.get("steps", [])}
        return all(steps[s["step"]] == s.get("microbatches") for s in report.get("steps", []))

    fitting = sorted((not same_draws(c), name) for name, c in candidates.items() if fits(c))
    return fitting[0][1] if fitting else None


# RECIPE §4.6: embed is lm_head's transpose while the two are tied (before the split), so their rows measure one
# tensor. A mutation's evidence counts them once; after the split they are two tensors, and counting them once
# then only understates the evidence.
TIED = {"embed.weight": "lm_head.weight"}


def evidence_unit(name):
    """The tensor a row measures, tied tensors under one name (RECIPE §4.6)."""
    names = "|".join(re.escape(n) for pair in TIED.items() for n in pair)
    return re.sub(rf"(?<![\w.])({names})(?![\w.])", lambda m: next(
        f"{owner}/{alias}" for alias, owner in TIED.items() if m.group(1) in (alias, owner)), name, count=1)


def mutation_evidence(rows, baseline_rows, k):
    """Which rows of a mutated export's check show the mutation, against the unmutated check of the same pair
    (`baseline_rows`). The draws are the first microbatches of the pair's call, so draw i of both checks is the
    same microbatch; only the draws both measured are compared. A row shows the mutation when, in some such draw,
    the baseline's draw passed with an informative tolerance (judged by judge_draws) and the error moved up by more
    than that tolerance (the reference's own spread there): a row failing both times, a row absent from the
    baseline, an error that moved less than the spread, or a baseline draw that could not tell a result from zeros
    shows nothing. Returns {rows: evidence row names, tensors: the same with tied tensors once, draws: {row: draw
    indices}, failing_anyway: failing rows whose baseline failed too, unmoved: failing rows whose error did not move
    beyond the baseline's spread, unmatched: failing rows without a measured baseline row (absent there, or zero
    on both sides in every draw: no spread to move beyond)}."""
    base = {r["tensor"]: r for r in baseline_rows if isinstance(r.get("errors"), list)}
    out = {"rows": [], "tensors": [], "draws": {}, "failing_anyway": [], "unmoved": [], "unmatched": []}
    for r in rows:
        name, errs = r["tensor"], r.get("errors")
        if not isinstance(errs, list) or r.get("rel_err") is None:
            continue
        b = base.get(name)
        if b is None:
            if verdict_of(r) == "fail":
                out["unmatched"].append(name)
            continue
        fixed = b.get("tolerance") if "fixed tolerance" in (b.get("note") or "") else None
        bselfs = b.get("self_differences") or [None] * len(b["errors"])
        jb = judge_draws(b["errors"], bselfs, k, fixed, b.get("zero_draws"))
        shared = range(min(len(errs), len(b["errors"])))
        moved = [i for i in shared
                 if jb["draw_verdicts"][i] == "pass" and errs[i] - b["errors"][i] > jb["tolerances"][i]]
        if moved:
            out["rows"].append(name)
            out["draws"][name] = moved
            unit = evidence_unit(name)
            if unit not in out["tensors"]:
                out["tensors"].append(unit)
        elif verdict_of(r) == "fail":
            failed_before = any(jb["draw_verdicts"][i] == "fail" for i in shared)
            out["failing_anyway" if failed_before else "unmoved"].append(name)
    return out


def fmt(values):
    return "/".join("-" if v is None else f"{v:.2e}" for v in values)


def short(value):
    text = repr(value)
    return text if len(text) < 120 else text[:117] + "..."
