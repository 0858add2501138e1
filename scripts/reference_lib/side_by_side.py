"""The verdict of a side-by-side run (scripts/side-by-side), with the standard library alone.

Our trainer runs a shortened `head` schedule with several seeds; seed 1's batches and initial weights are given to
the PyTorch record code, which trains the same schedule on them. At each validation step the difference between
the reference's val loss and ours (seed 1) must lie within our own seed band there: the spread max − min of our
seeds' val losses at that step. A difference beyond it means the two programs train differently by more than a
change of initialisation does.
"""
import json
import re

VAL_LINE = re.compile(r"^step:(\d+)/(\d+) val_loss:([-+0-9.eEnaif]+) ")


def val_points_from_log(text):
    """{step: val_loss} from the speedrun-format lines of a run log (`step:S/N val_loss:L train_time:...`)."""
    points = {}
    for line in text.splitlines():
        m = VAL_LINE.match(line.strip())
        if m:
            points[int(m.group(1))] = float(m.group(3))
    return points


def verdict(reference, ours_by_seed, compared_seed):
    """reference: {step: val}; ours_by_seed: {seed: {step: val}} (≥ 2 seeds); returns a dict with one row per
    validation step the reference and every seed share, and `pass` (every row within the band)."""
    if len(ours_by_seed) < 2:
        raise ValueError(f"a seed band needs at least 2 seeds of ours, got {sorted(ours_by_seed)}")
    if compared_seed not in ours_by_seed:
        raise ValueError(f"seed {compared_seed} (the one whose batches the reference trained on) has no run")
    steps = sorted(set(reference).intersection(*(set(v) for v in ours_by_seed.values())))
    if not steps:
        raise ValueError("the reference and our runs share no validation step")
    rows = []
    for step in steps:
        values = [ours_by_seed[s][step] for s in sorted(ours_by_seed)]
        band = max(values) - min(values)
        difference = abs(reference[step] - ours_by_seed[compared_seed][step])
        rows.append({"step": step, "reference": reference[step], "ours": ours_by_seed[compared_seed][step],
                     "difference": difference, "seed_min": min(values), "seed_max": max(values), "band": band,
                     "within": difference <= band})
    return {"compared_seed": compared_seed, "seeds": sorted(ours_by_seed), "rows": rows,
            "pass": all(r["within"] for r in rows)}


def format_verdict(v):
    lines = [f"{'step':>6} {'reference':>10} {'ours':>10} {'|diff|':>9} {'seed band':>9}  within"]
    for r in v["rows"]:
        lines.append(f"{r['step']:>6} {r['reference']:>10.4f} {r['ours']:>10.4f} {r['difference']:>9.4f} "
                     f"{r['band']:>9.4f}  {'yes' if r['within'] else 'NO'}")
    lines.append(f"side by side: {'PASS' if v['pass'] else 'FAIL'} ({sum(r['within'] for r in v['rows'])} of "
                 f"{len(v['rows'])} validation points within our {len(v['seeds'])}-seed band)")
    return "\n".join(lines)


def read_steps_index(path):
    """The batch dump's steps.jsonl (trainer/export/batch_dump.h): a list of {step, train_loss, microbatches}, in
    step order; a cut last line (a killed run) is dropped, a gap or a bad line is an error naming the line."""
    steps = []
    with open(path) as f:
        lines = f.read().split("\n")
    complete = lines[:-1]  # after the last newline: nothing, or a line cut by a killed run
    for number, line in enumerate(complete, 1):
        try:
            entry = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{path}:{number}: not a JSON line ({e})")
        if entry.get("step") != len(steps):
            raise ValueError(f"{path}:{number}: step {entry.get('step')!r}, expected {len(steps)}")
        steps.append(entry)
    return steps
