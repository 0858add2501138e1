"""Cases for scripts/reference_lib's standard-library parts (run by reference_lib_test.sh; CI has no torch)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from reference_lib import compare, fidelity_table, paired_losses, provenance, reference_code, side_by_side  # noqa: E402

LOG = """run_id: a seed: 1
step:0/10 val_loss:10.8250 train_time:0ms step_avg:0.00ms
step:1/10 train_time:300ms step_avg:300.00ms
step:5/10 val_loss:7.1000 train_time:1500ms step_avg:300.00ms
step:10/10 val_loss:6.5000 train_time:3000ms step_avg:300.00ms
peak memory allocated: 1 MiB reserved: 2 MiB
"""


class ValPoints(unittest.TestCase):
    def test_validation_lines_only(self):
        self.assertEqual(side_by_side.val_points_from_log(LOG), {0: 10.825, 5: 7.1, 10: 6.5})

    def test_no_lines(self):
        self.assertEqual(side_by_side.val_points_from_log("step:1/10 train_time:3ms step_avg:3.00ms\n"), {})


class Verdict(unittest.TestCase):
    ours = {1: {0: 10.80, 5: 7.10, 10: 6.50}, 2: {0: 10.85, 5: 7.16, 10: 6.46}, 3: {0: 10.82, 5: 7.05, 10: 6.55}}

    def test_within_the_band_passes(self):
        v = side_by_side.verdict({0: 10.81, 5: 7.13, 10: 6.52}, self.ours, 1)
        self.assertTrue(v["pass"])
        self.assertEqual([r["step"] for r in v["rows"]], [0, 5, 10])
        self.assertAlmostEqual(v["rows"][1]["band"], 0.11)
        self.assertAlmostEqual(v["rows"][1]["difference"], 0.03)

    def test_one_point_outside_the_band_fails(self):
        v = side_by_side.verdict({0: 10.81, 5: 7.30, 10: 6.52}, self.ours, 1)
        self.assertFalse(v["pass"])
        self.assertEqual([r["within"] for r in v["rows"]], [True, False, True])
        self.assertIn("FAIL (2 of 3", side_by_side.format_verdict(v))

    def test_only_shared_steps_are_judged(self):
        v = side_by_side.verdict({0: 10.81, 5: 7.13, 7: 1.0}, self.ours, 1)
        self.assertEqual([r["step"] for r in v["rows"]], [0, 5])

    def test_bad_inputs_are_named(self):
        with self.assertRaisesRegex(ValueError, "at least 2 seeds"):
            side_by_side.verdict({0: 1.0}, {1: {0: 1.0}}, 1)
        with self.assertRaisesRegex(ValueError, "seed 4"):
            side_by_side.verdict({0: 1.0}, self.ours, 4)
        with self.assertRaisesRegex(ValueError, "no validation step"):
            side_by_side.verdict({3: 1.0}, self.ours, 1)


def drift(steps, seed, size, offset=0.0):
    """Relative differences that wander like two implementations' losses do: a random walk (correlated from step
    to step) of step `size`, plus a constant `offset`; a fixed linear congruential sequence, no RNG module state."""
    state, level, out = seed, 0.0, []
    for _ in range(steps):
        state = (1103515245 * state + 12345) % 2 ** 31
        level = 0.9 * level + size * (state / 2 ** 31 - 0.5)
        out.append(offset + level)
    return out


def losses_from(relative, base):
    return [b * (1.0 + r) for r, b in zip(relative, base)]


class PairedLosses(unittest.TestCase):
    """The side-by-side verdict on training losses against a null (scripts/reference_lib/paired_losses.py)."""
    fixtures = json.load(open(os.path.join(ROOT, "tests", "fixtures", "paired_stats_expected.json")))
    ours = [10.8 - 4.0 * s / 160 for s in range(160)]

    def test_student_t_tails_equal_the_fixtures(self):
        # the paired-t fixtures are t, df and p from mpmath at 50 digits (tests/scripts/gen_paired_stats_fixtures.py)
        for case in self.fixtures["paired_t"]:
            upper = paired_losses.t_sf(case["t"], case["df"])
            p = {"two-sided": paired_losses.t_two_sided_p(case["t"], case["df"]), "greater": upper,
                 "less": 1.0 - upper}[case["alternative"]]
            self.assertAlmostEqual(p / case["p"], 1.0, delta=1e-9, msg=case)

    def test_welch_equals_the_fixtures(self):
        for case in self.fixtures["welch_alternative"]:
            if case["alternative"] != "two-sided":
                continue
            t, df, p, _ = paired_losses.welch(case["candidate"], case["baseline"])
            self.assertAlmostEqual(t, case["t"], delta=1e-12)
            self.assertAlmostEqual(df, case["df"], delta=1e-9)
            self.assertAlmostEqual(p / case["p"], 1.0, delta=1e-9)

    def test_critical_values_of_the_t_table(self):
        self.assertAlmostEqual(paired_losses.t_critical(0.05, 10), 2.228138851986274, delta=1e-9)
        self.assertAlmostEqual(paired_losses.t_critical(0.01, 5), 4.032142983557536, delta=1e-8)
        self.assertAlmostEqual(paired_losses.t_critical(0.05, 1e6), 1.959963984540054, delta=1e-5)  # the normal limit

    def test_sign_test_is_the_exact_binomial(self):
        self.assertAlmostEqual(paired_losses.sign_test_p(43, 49), 5.7277652842913e-08, delta=1e-18)
        self.assertEqual(paired_losses.sign_test_p(5, 10), 1.0)
        self.assertAlmostEqual(paired_losses.sign_test_p(0, 5), 2 / 32)
        self.assertAlmostEqual(paired_losses.sign_test_p(9, 10), 22 / 1024)

    def test_blocks_end_with_the_run(self):
        self.assertEqual(paired_losses.block_means([9, 1, 1, 3, 3, 5, 5], 3), [1, 3, 5])
        with self.assertRaisesRegex(ValueError, "fewer than 2 steps"):
            paired_losses.block_means([1, 2, 3, 4, 5], 3)

    def test_an_offset_like_the_nulls_passes(self):
        ref = losses_from(drift(160, 7, 4e-4), self.ours)
        null = losses_from(drift(160, 11, 4e-4), self.ours)
        v = paired_losses.verdict(ref, self.ours, null)
        self.assertTrue(v["pass"], v)
        self.assertIn("PASS", paired_losses.format_verdict(v))

    def test_a_steady_offset_the_null_does_not_have_fails(self):
        # The case the seed band cannot see: the reference lower at most steps by 0.15%, inside any val band.
        ref = losses_from(drift(160, 7, 4e-4, offset=-1.5e-3), self.ours)
        null = losses_from(drift(160, 11, 4e-4), self.ours)
        v = paired_losses.verdict(ref, self.ours, null)
        self.assertFalse(v["pass"], v)
        self.assertLess(v["p"], 0.01)
        self.assertGreater(v["reference_below"], 140)
        self.assertLess(v["detectable_offset"], 1.5e-3)
        self.assertIn("FAIL", paired_losses.format_verdict(v))

    def test_the_detectable_offset_is_where_the_verdict_turns(self):
        null = losses_from(drift(160, 11, 4e-4), self.ours)
        base = drift(160, 7, 4e-4)
        edge = paired_losses.verdict(losses_from(base, self.ours), self.ours, null)["detectable_offset"]
        # shifting the reference by the null's offset difference plus (minus) the detectable offset lands on
        # either side of alpha (the spreads do not move with a constant shift)
        v0 = paired_losses.verdict(losses_from(base, self.ours), self.ours, null)
        gap = v0["null_offset"] - v0["offset"]
        beyond = paired_losses.verdict(losses_from([r + gap + 1.05 * edge for r in base], self.ours), self.ours, null)
        inside = paired_losses.verdict(losses_from([r + gap + 0.95 * edge for r in base], self.ours), self.ours, null)
        self.assertFalse(beyond["pass"])
        self.assertTrue(inside["pass"])

    def test_bad_inputs_are_named(self):
        with self.assertRaisesRegex(ValueError, "reference: 3 steps against ours 160"):
            paired_losses.verdict([1.0, 1.0, 1.0], self.ours, self.ours)
        bad = list(self.ours)
        bad[17] = float("nan")
        with self.assertRaisesRegex(ValueError, "null: training loss at step 17 is nan"):
            paired_losses.verdict(self.ours, self.ours, bad)
        with self.assertRaisesRegex(ValueError, "both samples are constant"):
            paired_losses.verdict(self.ours, self.ours, self.ours)


class StepsIndex(unittest.TestCase):
    def write(self, text):
        f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_a_cut_last_line_is_dropped(self):
        path = self.write('{"step": 0, "train_loss": 1.0, "microbatches": []}\n{"step": 1, "tra')
        self.assertEqual([s["step"] for s in side_by_side.read_steps_index(path)], [0])

    def test_a_gap_names_the_line(self):
        path = self.write('{"step": 0, "microbatches": []}\n{"step": 2, "microbatches": []}\n')
        with self.assertRaisesRegex(ValueError, r":2: step 2, expected 1"):
            side_by_side.read_steps_index(path)


class EagerFixes(unittest.TestCase):
    statement = "k[:, 1:, :, self.head_dim // 2:] = k[:, :-1, :, self.head_dim // 2:]"

    def setUp(self):
        reference_code.APPLIED_FIXES.clear()

    def test_the_key_offset_copy_reads_a_clone(self):
        fixed = reference_code.apply_eager_fixes(f"x = 1\n            {self.statement}\n", "train_gpt.py")
        self.assertIn(self.statement + ".clone()", fixed)
        self.assertEqual(len(reference_code.APPLIED_FIXES), 1)

    def test_a_missing_or_repeated_statement_stops_the_load(self):
        for source in ("x = 1\n", f"{self.statement}\n{self.statement}\n"):
            with self.assertRaises(SystemExit) as e:
                reference_code.apply_eager_fixes(source, "train_gpt.py")
            self.assertIn("train_gpt.py", str(e.exception))

    def test_the_shipped_reference_has_the_statement_once(self):
        path = os.path.join(ROOT, "..", "shared", "reference", "modded-nanogpt-f411b3d", "train_gpt.py")
        if not os.path.isfile(path):
            self.skipTest(f"no reference beside the checkout ({path})")
        with open(path) as f:
            source = f.read()
        cut = source.find("\n# begin logging")
        self.assertIn(self.statement + ".clone()", reference_code.apply_eager_fixes(source[:cut], path))


class BrokenRows(unittest.TestCase):
    """A mutated export is detected only by a row that measured a difference, never by a row that errored."""

    def test_only_rows_without_a_measurement_are_broken(self):
        table = compare.Table(4.0, 1e-3, 1e-2)
        table.add("measured fail", 0.5, 0.01, False)
        table.add("passed", 0.001, 0.01, True)
        table.add("s0 (whole pair)", None, None, False, "error: 'after_even'")
        table.info("note", "skipped")
        self.assertEqual([r["tensor"] for r in table.broken()], ["s0 (whole pair)"])
        self.assertEqual(table.counts(), (1, 2, 0, 0))


def emitted(errors, selfs, fixed=None, zeros=None, k=4.0):
    """The row Table.emit writes for synthetic draws (no torch: the errors are given)."""
    table = compare.Table(k, 0.0, 2e-2)
    zeros = zeros or [False] * len(errors)
    table.emit("row", "l2", [{"err": e, "self": s, "zero": z, "worst": []} for e, s, z in zip(errors, selfs, zeros)],
               fixed)
    return table, table.rows[-1]


class Judging(unittest.TestCase):
    """Each draw against its own self-difference; a tolerance that all-zeros would pass is no pass."""

    def test_a_tolerance_that_passes_all_zeros_is_uninformative(self):
        # `step101 update scalars` on trained weights: self 0.60 gave a tolerance of 2.41, so our side all zeros
        # (error 1) would have passed.
        table, row = emitted([1.0, 1.0, 1.0], [0.0, 0.6, 0.43])
        self.assertEqual(row["verdict"], "uninformative")
        self.assertEqual(row["draw_verdicts"], ["uninformative"] * 3)  # draw 0 borrows the median, 4 · 0.43
        self.assertIsNone(row["pass"])
        self.assertEqual(table.counts(), (0, 0, 0, 1))

    def test_half_the_size_of_the_compared_result_is_already_uninformative(self):
        self.assertEqual(emitted([0.01], [0.125])[1]["verdict"], "uninformative")  # tolerance exactly 0.5
        self.assertEqual(emitted([0.01], [0.124])[1]["verdict"], "pass")

    def test_a_bad_draw_is_not_hidden_by_another_draws_self_difference(self):
        # err 0.118 against its own self-difference 1.35e-3, the row's largest self-difference 0.118
        table, row = emitted([0.118, 0.05, 2e-3], [1.35e-3, 0.118, 2e-3])
        self.assertEqual(row["verdict"], "fail")
        self.assertEqual(row["worst_draw"], 0)
        self.assertEqual(row["draw_verdicts"], ["fail", "pass", "pass"])
        self.assertAlmostEqual(row["tolerance"], 4 * 2e-3)

    def test_the_floor_is_the_rows_measured_spread_not_a_constant(self):
        # a 0.05% loss difference against a reference spread of 2e-5 (a fixed floor of 1e-3 passed it)
        self.assertEqual(emitted([5e-4] * 3, [2e-5, 1e-5, 3e-5])[1]["verdict"], "fail")
        self.assertEqual(emitted([5e-5] * 3, [2e-5, 1e-5, 3e-5])[1]["verdict"], "pass")

    def test_a_draw_whose_f32_run_agreed_exactly_borrows_the_rows_median(self):
        row = emitted([3e-3, 2e-3, 2e-3], [0.0, 1e-3, 1e-3])[1]
        self.assertEqual(row["verdict"], "pass")
        self.assertEqual(row["tolerances"], [4e-3, 4e-3, 4e-3])

    def test_fixed_tolerances_and_zero_rows(self):
        self.assertEqual(emitted([1e-2], [None], fixed=1e-3)[1]["verdict"], "fail")
        self.assertEqual(emitted([2e-7], [None], fixed=1e-3)[1]["verdict"], "pass")
        table, row = emitted([0.0, 0.0], [0.0, 0.0], zeros=[True, True])
        self.assertEqual((row["verdict"], table.counts()), ("zero", (0, 0, 1, 0)))
        # zero draws measure no spread: the live draw's own self-difference sets its tolerance
        self.assertAlmostEqual(emitted([0.0, 0.01], [0.0, 0.01], zeros=[True, False])[1]["tolerance"], 0.04)


class FamilySpread(unittest.TestCase):
    """A row whose reference runs agreed exactly in every draw is judged by its family's measured spread."""

    def pending_table(self, rows):
        table = compare.Table(4.0, 0.0, 2e-2)
        for name, errors, selfs in rows:
            table.pending[name] = {"metric": "l2", "tolerance": None,
                                   "draws": [{"err": e, "self": x, "zero": False, "worst": []}
                                             for e, x in zip(errors, selfs)]}
        table.flush()
        return {r["tensor"]: r for r in table.rows}

    def test_the_family_is_the_name_without_its_tensor(self):
        self.assertEqual(compare.family_of("s100 step101 update mudd_gate_b2"), "s100 step101 update")
        self.assertEqual(compare.family_of("loss"), "")
        spreads = compare.family_spreads([("s1 update a", [1e-3, 3e-3], None), ("s1 update b", [2e-3, 2e-3], None),
                                          ("s1 update c", [0.0, 0.0], None), ("s1 grad a", [5e-2], [False])])
        self.assertEqual(spreads, {"s1 update": 2e-3, "s1 grad": 5e-2})  # a: 2e-3, b: 2e-3; c's 0 measures nothing

    def test_a_zero_spread_row_takes_its_familys_spread_instead_of_a_zero_tolerance(self):
        # `s100 step101 update mudd_gate_b2` at 40ae748: draw 0 differed by 0.167 L2 where every self-difference
        # was exactly 0, so its tolerance was 0.
        rows = self.pending_table([("s100 step101 update mudd_gate_b2", [0.167, 1e-3, 1e-3], [0.0, 0.0, 0.0]),
                                   ("s100 step101 update mudd_w1", [2e-3] * 3, [1e-3, 2e-3, 1e-3]),
                                   ("s100 step101 update scalars", [2e-3] * 3, [3e-3, 2e-3, 4e-3])])
        b2 = rows["s100 step101 update mudd_gate_b2"]
        self.assertEqual(b2["tolerances"], [4 * 1e-3] * 3)  # 4 · the family's smallest spread (mudd_w1: 1e-3)
        self.assertEqual(b2["draw_verdicts"], ["fail", "pass", "pass"])
        self.assertIn("the family's spread", b2["note"])
        small = self.pending_table([("s100 step101 update mudd_gate_b2", [3e-3, 1e-3, 0.0], [0.0, 0.0, 0.0]),
                                    ("s100 step101 update mudd_w1", [2e-3] * 3, [2e-3] * 3)])
        self.assertEqual(small["s100 step101 update mudd_gate_b2"]["verdict"], "pass")

    def test_without_a_family_a_zero_spread_row_keeps_the_zero_tolerance(self):
        rows = self.pending_table([("loss", [1e-6], [0.0])])
        self.assertEqual((rows["loss"]["verdict"], rows["loss"]["tolerance"]), ("fail", 0.0))

    def test_rejudging_a_report_uses_the_family_spreads_of_its_rows(self):
        report = {"k": 4.0, "rows": [measured("s100 step101 update mudd_gate_b2", [5e-3, 1e-3], [0.0, 0.0]),
                                     measured("s100 step101 update mudd_w1", [1e-3, 1e-3], [2e-3, 2e-3])]}
        self.assertEqual(report["rows"][0]["verdict"], "fail")
        again = compare.rejudge_report(report)
        self.assertEqual(again["rows"][0]["verdict"], "pass")
        self.assertEqual(again["changed"], [("s100 step101 update mudd_gate_b2", "fail", "pass")])


def measured(name, errors, selfs, verdict=None, fixed=None):
    """A JSON row as the check writes it for measured draws (judged by the current rule unless `verdict`)."""
    row = {"tensor": name, "metric": "l2", "errors": errors, "self_differences": selfs,
           "rel_err": max(errors), "note": "fixed tolerance" if fixed is not None else "", "tolerance": fixed}
    j = compare.judge_draws(errors, selfs, 4.0, fixed)
    row["verdict"] = verdict or j["verdict"]
    row["pass"] = {"pass": True, "fail": False}.get(row["verdict"])
    return row


class MutationEvidence(unittest.TestCase):
    """A mutation is shown only by a row measured on the same draws as its baseline whose error moved beyond the
    baseline's spread there; tied tensors count once."""

    def evidence(self, mutated, baseline):
        return compare.mutation_evidence(mutated, baseline, 4.0)

    def test_a_row_failing_without_the_mutation_is_no_evidence(self):
        baseline = [measured("bank update", [0.05], [1e-3]), measured("loss", [1e-5], [1e-5])]
        mutated = [measured("bank update", [0.09], [1e-3]), measured("loss", [2e-5], [1e-5])]
        e = self.evidence(mutated, baseline)
        self.assertEqual((e["rows"], e["failing_anyway"]), ([], ["bank update"]))

    def test_an_error_that_did_not_move_is_no_evidence(self):
        # the baseline row passed on a maximum over draws but its draw 0 is the same error, measured the same way
        baseline = [measured("s0 step1 update ve_gate_bank", [0.118, 0.05, 0.04], [1.35e-3, 0.118, 0.1],
                             verdict="pass")]
        mutated = [measured("s0 step1 update ve_gate_bank", [0.118], [1.35e-3])]
        self.assertEqual(mutated[0]["verdict"], "fail")
        self.assertEqual(self.evidence(mutated, baseline)["rows"], [])

    def test_a_move_within_the_baselines_spread_is_no_evidence(self):
        baseline = [measured("grad x", [0.010], [5e-3])]  # tolerance 0.02
        mutated = [measured("grad x", [0.025], [5e-3])]  # fails now, but moved by 0.015 < 0.02
        self.assertEqual(mutated[0]["verdict"], "fail")
        self.assertEqual(self.evidence(mutated, baseline)["rows"], [])
        mutated = [measured("grad x", [0.035], [5e-3])]  # moved by 0.025
        self.assertEqual(self.evidence(mutated, baseline)["rows"], ["grad x"])

    def test_a_row_missing_from_the_baseline_is_no_evidence(self):
        e = self.evidence([measured("grad y", [0.5], [1e-3])], [measured("grad x", [1e-3], [1e-3])])
        self.assertEqual((e["rows"], e["unmatched"]), ([], ["grad y"]))

    def test_an_uninformative_baseline_draw_is_no_evidence(self):
        baseline = [measured("update scalars", [3e-7, 3e-7], [0.6, 0.43])]
        self.assertEqual(baseline[0]["verdict"], "uninformative")
        self.assertEqual(self.evidence([measured("update scalars", [3.0, 3.0], [0.6, 0.43])], baseline)["rows"], [])

    def test_only_the_draws_both_checks_measured_are_compared(self):
        # a one-draw mutated export against a three-draw baseline: draw 0 is the same microbatch in both
        baseline = [measured("grad x", [1e-3, 0.03, 0.03], [1e-3, 1e-3, 1e-3], verdict="fail")]
        mutated = [measured("grad x", [0.02], [1e-3])]
        e = self.evidence(mutated, baseline)
        self.assertEqual(e["rows"], ["grad x"])
        self.assertEqual(e["draws"], {"grad x": [0]})
        # a failure of a draw only the baseline measured does not make the shared draw's failure "failing anyway"
        e = self.evidence([measured("grad x", [0.0015], [1e-4])], baseline)
        self.assertEqual((e["rows"], e["failing_anyway"], e["unmoved"]), ([], [], ["grad x"]))

    def test_tied_tensors_count_once(self):
        base = [measured(f"s0 step1 update {t}, our gradients", [2e-7], [None], fixed=1e-3)
                for t in ("embed.weight", "lm_head.weight")]
        mut = [measured(f"s0 step1 update {t}, our gradients", [1e-2], [None], fixed=1e-3)
               for t in ("embed.weight", "lm_head.weight")]
        e = self.evidence(mut, base)
        self.assertEqual(len(e["rows"]), 2)
        self.assertEqual(e["tensors"], ["s0 step1 update lm_head.weight/embed.weight, our gradients"])

    def test_rows_that_could_not_be_compared_are_neither(self):
        e = self.evidence([{"tensor": "s0 (whole pair)", "rel_err": None, "pass": False}], [])
        self.assertEqual((e["rows"], e["failing_anyway"], e["unmatched"]), ([], [], []))


FIDELITY = os.path.join(ROOT, "results", "fidelity")


def recorded(name):
    with open(os.path.join(FIDELITY, name)) as f:
        return json.load(f)


class RecordedChecks(unittest.TestCase):
    """The recorded checks of results/fidelity/ under today's rules."""
    trained = "2026-12-07-h100-7ff81d6-reference-check-trained.json"

    def test_the_trained_pair_rows_that_passed_all_zeros_are_uninformative(self):
        r = compare.rejudge_report(recorded(self.trained))
        self.assertEqual(r["recorded"], (114, 1, 17))
        self.assertEqual(r["counts"], (101, 3, 17, 11))  # pass, fail, zero, uninformative
        uninformative = {row["tensor"] for row in r["rows"] if row.get("verdict") == "uninformative"}
        for name in ("step101 update scalars", "step101 update post_lambdas", "step101 update mudd_gate_b2",
                     "step101 update mudd_w1", "grad _mudd_gate_scale"):
            self.assertIn(f"s100 {name}", uninformative)
        self.assertTrue(all(max(row["tolerances"]) >= compare.UNINFORMATIVE
                            for row in r["rows"] if row.get("verdict") == "uninformative"))

    def test_the_loss_rows_are_held_to_the_references_spread(self):
        rows = {row["tensor"]: row for row in compare.rejudge_report(recorded(self.trained))["rows"]}
        loss = rows["s100 train loss"]
        self.assertEqual(loss["draw_verdicts"], ["pass", "fail", "pass"])  # 1.2e-4 against 4 · 2.1e-5
        self.assertLess(max(loss["tolerances"]), 4e-4)  # was 1e-3
        self.assertEqual(rows["s100 train loss, FP8 lm_head (reference kernel)"]["verdict"], "fail")

    def test_the_adam_lr_mutation_is_detected_by_one_tensor(self):
        mutated = recorded("2026-12-06-h100-6a818ab-mutation-adam-lr.json")
        baseline = recorded("2026-12-06-h100-6a818ab-reference-check.json")
        e = compare.mutation_evidence(mutated["rows"], baseline["rows"], 4.0)
        self.assertEqual(e["tensors"], ["s0 step1 update lm_head.weight/embed.weight, our gradients"])
        self.assertNotIn("s0 step1 update ve_gate_bank", e["rows"])

    def test_a_mutated_check_finds_its_baseline(self):
        names = [n for n in os.listdir(FIDELITY) if n.endswith(".json") and "side-by-side" not in n]
        candidates = {n: recorded(n) for n in names}
        self.assertEqual(compare.find_baseline(candidates["2026-12-07-h100-7ff81d6-mutation-attention-x1.05.json"],
                                               candidates), self.trained)
        self.assertEqual(compare.find_baseline(candidates["2026-12-06-h100-6a818ab-mutation-adam-lr.json"],
                                               candidates), "2026-12-06-h100-6a818ab-reference-check.json")
        other_code = dict(candidates[self.trained], git_commit="0000000")
        self.assertIsNone(compare.find_baseline(other_code | {"mutation": {"kind": "x"}}, {self.trained:
                                                                                           candidates[self.trained]}))

    def test_the_rejudge_command(self):
        script = os.path.join(ROOT, "scripts", "reference-check")
        for name, expected in ((self.trained, 1), ("2026-12-06-h100-6a818ab-mutation-adam-lr.json", 0),
                               ("2026-12-07-h100-7ff81d6-mutation-attention-x1.05.json", 0)):
            r = subprocess.run([sys.executable, script, "--rejudge", os.path.join(FIDELITY, name)],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, expected, name + r.stdout + r.stderr)
        r = subprocess.run([sys.executable, script, "--rejudge", os.path.join(FIDELITY, self.trained)],
                           capture_output=True, text=True)
        self.assertIn("re-judged 101 pass, 3 fail, 11 uninformative, 17 zero", r.stdout)
        r = subprocess.run([sys.executable, script, "--rejudge", os.path.join(ROOT, "README.md")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)


def git(root, *args):
    return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)


def in_git_checkout():
    return git(ROOT, "rev-parse", "--git-dir").returncode == 0


class Provenance(unittest.TestCase):
    """Every fidelity JSON is produced by the code at the commit it names."""

    def scratch_checkout(self):
        d = tempfile.mkdtemp()
        os.makedirs(os.path.join(d, provenance.CHECK_LIBRARY))
        for p in provenance.CHECK_SCRIPTS + (f"{provenance.CHECK_LIBRARY}/compare.py",):
            with open(os.path.join(d, p), "w") as f:
                f.write(f"# {p}\n")
        return d

    def test_the_check_names_its_commit_and_the_exports(self):
        d = self.scratch_checkout()
        with self.assertRaisesRegex(provenance.ProvenanceError, "SPEEDRUN_REVISION"):
            provenance.check_provenance(d, {}, "7ff81d6")
        with self.assertRaisesRegex(provenance.ProvenanceError, "built at 6a818ab, this check's code is 7ff81d6"):
            provenance.check_provenance(d, {"SPEEDRUN_REVISION": "7ff81d62dd34"}, "6a818ab")
        origin = provenance.check_provenance(d, {"SPEEDRUN_REVISION": "7ff81d6"}, "7ff81d62dd3487a8b5ca18")
        self.assertEqual(origin["check_revision"], "7ff81d6")
        self.assertEqual(origin["check_code"], provenance.digest(provenance.check_files(d)))
        self.assertFalse(provenance.same_commit("7ff81d6", "7ff81d7"))
        self.assertFalse(provenance.same_commit("7ff", "7ff81d6"))  # too short to name a commit

    def test_the_digest_at_a_commit_is_the_trees_until_a_script_changes(self):
        d = self.scratch_checkout()
        for args in (("init", "-q"), ("add", "-A"),
                     ("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")):
            if git(d, *args).returncode != 0:
                self.skipTest("git cannot commit here")
        self.assertEqual(provenance.revision(d, {}), git(d, "rev-parse", "HEAD").stdout.strip())
        at_head = provenance.digest(provenance.check_files_at(d, "HEAD"))
        self.assertEqual(at_head, provenance.digest(provenance.check_files(d)))
        with open(os.path.join(d, provenance.CHECK_LIBRARY, "compare.py"), "a") as f:
            f.write("UNINFORMATIVE = 2.0\n")
        self.assertNotEqual(at_head, provenance.digest(provenance.check_files(d)))
        self.assertIsNone(provenance.revision(d, {}))  # an uncommitted change: no commit names this code

    def test_every_recorded_json_names_a_commit_of_this_repository(self):
        if not in_git_checkout():
            self.skipTest("no .git: a copied tree")
        for name in sorted(os.listdir(FIDELITY)):
            if not name.endswith(".json"):
                continue
            report = recorded(name)
            commit = report.get("git_commit")
            self.assertTrue(commit, f"{name}: names no commit")
            self.assertEqual(git(ROOT, "cat-file", "-e", f"{commit}^{{commit}}").returncode, 0,
                             f"{name}: {commit} is no commit of this repository")
            self.assertIn(commit[:7], name, f"{name}: the file name carries its commit")
            if report.get("check_code"):
                at = provenance.digest(provenance.check_files_at(ROOT, report["check_revision"]))
                self.assertEqual(report["check_code"], at, f"{name}: the check's scripts differ from {commit}'s")


class FidelityTable(unittest.TestCase):
    """results/fidelity/README.md's table is the one scripts/fidelity-table generates from the JSONs."""
    script = os.path.join(ROOT, "scripts", "fidelity-table")

    def run_table(self, *args):
        return subprocess.run([sys.executable, self.script, *args], capture_output=True, text=True)

    def test_the_readme_table_is_the_generated_one(self):
        r = self.run_table("--check")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_changed_measurement_changes_the_table(self):
        d = tempfile.mkdtemp()
        name = "2026-12-07-h100-7ff81d6-reference-check-trained.json"
        report = recorded(name)
        loss = next(r for r in report["rows"] if r["tensor"] == "s100 train loss")
        loss["errors"] = [1e-6, 1e-6, 1e-6]
        with open(os.path.join(d, name), "w") as f:
            json.dump(report, f)
        readme = os.path.join(d, "README.md")
        with open(readme, "w") as f:
            f.write(f"# x\n{fidelity_table.BEGIN}\n| stale |\n{fidelity_table.END}\nprose\n")
        self.assertEqual(self.run_table("--check", readme).returncode, 1)
        self.assertEqual(self.run_table("--write", readme).returncode, 0)
        self.assertEqual(self.run_table("--check", readme).returncode, 0)
        with open(readme) as f:
            text = f.read()
        self.assertIn("| 114 / 1 / 17 | 102 / 2 / 11 / 17 |", text)  # the loss row passes with its errors changed
        self.assertTrue(text.endswith(f"{fidelity_table.END}\nprose\n"))
        with open(readme, "w") as f:
            f.write("# no markers\n")
        self.assertEqual(self.run_table("--check", readme).returncode, 2)


class BankBlocks(unittest.TestCase):
    def test_qk_bank_holds_a_head_pair_q_and_k_per_head_pair(self):
        blocks = compare.bank_blocks("qk_bank", [64, 256, 768], 6)
        self.assertEqual(blocks[0], (0, 6))
        self.assertEqual(blocks[-1], (54, 60))
        self.assertEqual(len(blocks), 10)

    def test_vo_and_mlp_banks(self):
        self.assertEqual(compare.bank_blocks("vo_bank", [24, 768, 768], 6)[:2], [(0, 2), (2, 4)])
        self.assertEqual(len(compare.bank_blocks("vo_bank", [24, 768, 768], 6)), 12)
        self.assertEqual(compare.bank_blocks("mlp_bank", [12, 2, 3072, 768], 6)[-1], (11, 12))

    def test_other_tensors_have_no_blocks(self):
        self.assertEqual(compare.bank_blocks("lm_head.weight", [768, 50304], 6), [])


def load_reference_check():
    from importlib.machinery import SourceFileLoader
    return SourceFileLoader("reference_check", os.path.join(ROOT, "scripts", "reference-check")).load_module()


class Baseline(unittest.TestCase):
    """--baseline: the unmutated check a mutated export is judged against."""
    manifest = {"recipe": "head", "steps": [{"step": 0}]}

    def write(self, content):
        path = os.path.join(tempfile.mkdtemp(), "reference-check.json")
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path

    def error(self, path):
        with self.assertRaises(ValueError) as e:
            load_reference_check().read_baseline(path, self.manifest)
        return str(e.exception)

    def test_required_for_a_mutation(self):
        self.assertIn("needs --baseline", self.error(None))

    def test_errors_name_the_file_and_what_was_expected(self):
        self.assertIn("expected a reference-check.json", self.error(self.write("[1, 2]")))
        path = self.write("{not json")
        self.assertIn(path, self.error(path))
        self.assertIn("itself a mutated check", self.error(self.write(
            {"rows": [], "mutation": {"kind": "adam_lr"}, "recipe": "head", "steps": [{"step": 0}]})))
        self.assertIn("recipe 'tiny'", self.error(self.write({"rows": [], "recipe": "tiny", "steps": [{"step": 0}]})))
        self.assertIn("no pair at step(s) [0]", self.error(self.write(
            {"rows": [], "recipe": "head", "steps": [{"step": 424}]})))

    def test_the_baseline_measured_the_same_draws(self):
        # a one-microbatch mutation judged against a three-microbatch check compares rows of other tolerances
        manifest = {"recipe": "head", "steps": [{"step": 0, "weights": {"source": "initial"},
                                                 "microbatches": [{}]}]}
        path = self.write({"rows": [], "recipe": "head", "mutation": None,
                           "steps": [{"step": 0, "weights": {"source": "initial"}, "microbatches": 3}]})
        with self.assertRaises(ValueError) as e:
            load_reference_check().read_baseline(path, manifest)
        self.assertIn("pair 0: 3 microbatch(es), the export 1", str(e.exception))
        trained = {"source": "checkpoint", "file": "a.ckpt", "trained_steps": 100}
        path = self.write({"rows": [], "recipe": "head", "mutation": None,
                           "steps": [{"step": 0, "weights": trained, "microbatches": 1}]})
        with self.assertRaises(ValueError) as e:
            load_reference_check().read_baseline(path, manifest)
        self.assertIn("pair 0: other starting weights", str(e.exception))

    def test_a_matching_baseline_is_read(self):
        path = self.write({"rows": [{"tensor": "x", "pass": True}], "recipe": "head", "mutation": None,
                           "steps": [{"step": 0}, {"step": 424}]})
        self.assertEqual(load_reference_check().read_baseline(path, self.manifest)["rows"][0]["tensor"], "x")


class VerdictOnlyCommand(unittest.TestCase):
    def test_exit_status_follows_the_verdict(self):
        d = tempfile.mkdtemp()
        logs = []
        for seed, shift in ((1, 0.0), (2, 0.05), (3, -0.04)):
            path = os.path.join(d, f"seed{seed}.txt")
            with open(path, "w") as f:
                f.write(LOG.replace("7.1000", f"{7.1 + shift:.4f}"))
            logs.append(f"{seed}={path}")
        script = os.path.join(ROOT, "scripts", "side-by-side")
        for ref_val, expected in ((7.12, 0), (7.3, 1)):
            stored = os.path.join(d, "stored.json")
            with open(stored, "w") as f:
                json.dump({"reference": {"val": {"0": 10.825, "5": ref_val, "10": 6.5}, "train_losses": []}}, f)
            r = subprocess.run([sys.executable, script, "--verdict-only", stored, "--ours", *logs, "--out", d],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, expected, r.stdout + r.stderr)
            with open(os.path.join(d, "side-by-side.json")) as f:
                self.assertEqual(json.load(f)["verdict"]["pass"], expected == 0)

    def test_with_a_null_the_paired_test_decides(self):
        d = tempfile.mkdtemp()
        logs = []
        for seed in range(1, 6):
            path = os.path.join(d, f"seed{seed}.txt")
            with open(path, "w") as f:
                f.write(LOG.replace("7.1000", f"{7.1 + 0.01 * seed:.4f}"))
            logs.append(f"{seed}={path}")
        ours = PairedLosses.ours
        null_dir = os.path.join(d, "null")
        os.makedirs(null_dir)
        with open(os.path.join(null_dir, "steps.jsonl"), "w") as f:
            for step, loss in enumerate(losses_from(drift(160, 11, 4e-4), ours)):
                f.write(json.dumps({"step": step, "train_loss": loss, "microbatches": []}) + "\n")
        script = os.path.join(ROOT, "scripts", "side-by-side")
        # the reference's val points sit inside the band both times; only the training losses' offset differs
        for offset, expected in ((0.0, 0), (-1.5e-3, 1)):
            stored = os.path.join(d, "stored.json")
            with open(stored, "w") as f:
                json.dump({"reference": {"val": {"0": 10.825, "5": 7.12, "10": 6.5},
                                         "train_losses": losses_from(drift(160, 7, 4e-4, offset), ours)},
                           "ours_train_losses": ours}, f)
            r = subprocess.run([sys.executable, script, "--verdict-only", stored, "--ours", *logs, "--out", d,
                                "--null-batches", null_dir, "--null-label", "SPEEDRUN_SCATTER_ROWS=v1"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, expected, r.stdout + r.stderr)
            self.assertIn("paired training losses: " + ("PASS" if expected == 0 else "FAIL"), r.stdout)
            with open(os.path.join(d, "side-by-side.json")) as f:
                report = json.load(f)
            self.assertTrue(report["verdict"]["pass"])
            self.assertEqual(report["paired_verdict"]["pass"], expected == 0)
            self.assertEqual(report["null"]["label"], "SPEEDRUN_SCATTER_ROWS=v1")

    def test_a_null_of_other_length_is_bad_input(self):
        d = tempfile.mkdtemp()
        log = os.path.join(d, "seed1.txt")
        with open(log, "w") as f:
            f.write(LOG)
        null_dir = os.path.join(d, "null")
        os.makedirs(null_dir)
        with open(os.path.join(null_dir, "steps.jsonl"), "w") as f:
            f.write(json.dumps({"step": 0, "train_loss": 10.0, "microbatches": []}) + "\n")
        stored = os.path.join(d, "stored.json")
        with open(stored, "w") as f:
            json.dump({"reference": {"val": {"0": 10.825}, "train_losses": [10.0, 9.0]},
                       "ours_train_losses": [10.0, 9.0]}, f)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "side-by-side"), "--verdict-only", stored,
                            "--ours", f"1={log}", f"2={log}", "--out", d, "--null-batches", null_dir],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("null: 1 steps against ours 2", r.stderr)


if __name__ == "__main__":
    unittest.main()
