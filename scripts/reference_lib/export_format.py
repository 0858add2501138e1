"""The reference export's manifest (trainer/tools/reference_export.h), read with the standard library alone: CI checks
an export's files and keys without torch or numpy (`scripts/reference-check --parse-only`)."""
import json
import math
import os
import struct

DTYPE_BYTES = {"f32": 4, "bf16": 2, "i32": 4, "i64": 8, "u16": 2}
MANIFEST_VERSION = 2
STEP_KEYS = ("step", "weights", "schedule", "schedule_next", "validation", "microbatches")
DRAW_KEYS = ("batch", "train", "gradients", "after_even", "after_odd")


class ExportError(Exception):
    pass


def tensor_entries(node, where="manifest"):
    """Every tensor entry (an object with a "file" key) with a readable location."""
    if isinstance(node, dict):
        if "file" in node:
            yield where, node
        for key, value in node.items():
            if key not in ("file", "weights"):  # a pair's "weights" names where they came from, not a tensor
                yield from tensor_entries(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            label = value.get("name", i) if isinstance(value, dict) else i
            yield from tensor_entries(value, f"{where}[{label}]")


def check_files(export_dir, manifest, problems):
    """Each tensor entry names a file whose size its shape and dtype give; returns the number of entries."""
    count = 0
    for where, e in tensor_entries(manifest):
        count += 1
        missing = [k for k in ("file", "dtype", "shape", "bytes") if k not in e]
        if missing:
            problems.append(f"{where}: missing {missing}")
            continue
        if e["dtype"] not in DTYPE_BYTES:
            problems.append(f"{where}: dtype '{e['dtype']}' is not one of {sorted(DTYPE_BYTES)}")
            continue
        expected = math.prod(e["shape"]) * DTYPE_BYTES[e["dtype"]]
        file = os.path.join(export_dir, e["file"])
        if not os.path.isfile(file):
            problems.append(f"{where}: file {e['file']} is missing")
            continue
        size = os.path.getsize(file)
        if size != expected or e["bytes"] != expected:
            problems.append(f"{where}: file {e['file']} has {size} bytes (manifest {e['bytes']}), shape "
                            f"{e['shape']} {e['dtype']} needs {expected}")
    return count


def check_parameter_lists(where, tensors, initial, problems):
    """`tensors` names the parameters of `initial` in the same order, with the same shapes."""
    names = [e.get("name") for e in initial]
    got = [e.get("name") for e in tensors]
    if got != names:
        problems.append(f"{where}: parameters {got} differ from the initial ones {names}")
    shapes = {e.get("name"): e.get("shape") for e in tensors}
    for e in initial:
        if shapes.get(e["name"]) != e["shape"]:
            problems.append(f"{where}[{e['name']}]: shape {shapes.get(e['name'])}, initial {e['shape']}")


def check_step(step, initial, problems):
    s = step.get("step")
    missing = [k for k in STEP_KEYS if k not in step]
    if missing:
        problems.append(f"steps[{s}]: missing {missing}")
        return
    if "initial" in step:
        check_parameter_lists(f"steps[{s}].initial", step["initial"], initial, problems)
    value = step["validation"].get("mean_loss")
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        problems.append(f"steps[{s}].validation.mean_loss: {value!r} is not a finite number")
    if not step["microbatches"]:
        problems.append(f"steps[{s}].microbatches: empty (at least one draw is needed)")
    for m, draw in enumerate(step["microbatches"]):
        where = f"steps[{s}].microbatches[{m}]"
        missing = [k for k in DRAW_KEYS if k not in draw]
        if missing:
            problems.append(f"{where}: missing {missing}")
            continue
        for label, tensors in (("gradients", draw["gradients"]), ("gradients_odd", draw.get("gradients_odd")),
                               ("after_odd", draw["after_odd"]["tensors"])):
            if tensors is not None:  # gradients_odd: exports before it lack it (the optimizer rows are skipped)
                check_parameter_lists(f"{where}.{label}", tensors, initial, problems)
        # The even step writes the banks and names the parameters it left unchanged (§4.1): together, all of them.
        even = [e.get("reference_name") for e in draw["after_even"]["tensors"]] + draw["after_even"].get(
            "unchanged", [])
        if sorted(even) != sorted(e["reference_name"] for e in initial):
            problems.append(f"{where}.after_even: written {[e.get('name') for e in draw['after_even']['tensors']]} "
                            f"and unchanged {draw['after_even'].get('unchanged')} do not cover the parameters")
        for key in ("objective", "objective_fp8_lm_head"):
            value = draw["train"].get(key)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                problems.append(f"{where}.train.{key}: {value!r} is not a finite number")
        batch = draw["batch"]
        if "inputs" in batch and batch["inputs"].get("shape") != [batch.get("tokens")]:
            problems.append(f"{where}.batch.inputs: shape {batch['inputs'].get('shape')}, tokens "
                            f"{batch.get('tokens')}")


def parse_export(export_dir):
    """Loads manifest.json and checks it; returns (manifest, problems)."""
    path = os.path.join(export_dir, "manifest.json")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise ExportError(f"{path}: {e}")
    problems = []
    if manifest.get("version") != MANIFEST_VERSION:
        problems.append(f"{path}: version {manifest.get('version')!r}, this check reads version {MANIFEST_VERSION} "
                        "(re-export with this checkout's reference_export)")
        return manifest, problems
    for key in ("recipe", "seed", "accumulation", "initial", "buffers", "steps", "model"):
        if key not in manifest:
            problems.append(f"{path}: missing key '{key}'")
    if problems:
        return manifest, problems
    count = check_files(export_dir, manifest, problems)
    for e in manifest["initial"]:
        if "reference_name" not in e:
            problems.append(f"initial[{e.get('name')}]: no reference_name")
    for step in manifest["steps"]:
        check_step(step, manifest["initial"], problems)
    manifest["_tensor_count"] = count
    return manifest, problems


def first_values(export_dir, entry, n=4):
    """The first values of a file (stdlib), for the parse-only summary."""
    size = DTYPE_BYTES[entry["dtype"]]
    with open(os.path.join(export_dir, entry["file"]), "rb") as f:
        raw = f.read(size * n)
    if entry["dtype"] == "bf16":
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    fmt = {"f32": "f", "i32": "i", "i64": "q"}[entry["dtype"]]
    return list(struct.unpack(f"<{len(raw) // size}{fmt}", raw))


def parse_only(export_dir, out=print, err=None):
    """Checks an export and prints a summary; returns the exit status (0 sound, 1 not)."""
    import sys
    err = err or (lambda text: print(text, file=sys.stderr))
    try:
        manifest, problems = parse_export(export_dir)
    except ExportError as e:
        err(f"reference-check: {e}")
        return 1
    if problems:
        for p in problems:
            err(f"reference-check: {p}")
        err(f"reference-check: {len(problems)} problem(s) in {export_dir}")
        return 1
    mutation = manifest.get("mutation")
    out(f"export {export_dir}: recipe {manifest['recipe']} seed {manifest['seed']} backend "
        f"{manifest.get('backend')} A={manifest['accumulation']} fp8={manifest.get('fp8')}"
        + (f" MUTATION {mutation}" if mutation else ""))
    out(f"  {manifest['_tensor_count']} tensor files, sizes as their shapes say; "
        f"{len(manifest['initial'])} parameters")
    for step in manifest["steps"]:
        sch = step["schedule"]
        weights = step["weights"]
        origin = (f"checkpoint after {weights.get('trained_steps')} steps" if weights.get("source") == "checkpoint"
                  else "initial weights")
        out(f"  step {step['step']} ({origin}): stage {sch['stage']} windows {sch['ws_short_tokens']}/"
            f"{sch['ws_long_tokens']} max_seq_len {sch['train_max_seq_len']} mtp {sch['mtp_weights']} prefix "
            f"{sch['prefix_weight']}; val mean {step['validation']['mean_loss']:.6g}")
        for m, draw in enumerate(step["microbatches"]):
            out(f"    microbatch {m}: T={draw['batch']['tokens']} objective {draw['train']['objective']:.6g} "
                f"(FP8 lm_head {draw['train']['objective_fp8_lm_head']:.6g}); first inputs "
                f"{first_values(export_dir, draw['batch']['inputs'])}")
    return 0
