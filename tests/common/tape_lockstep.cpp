#include "tests/common/tape_lockstep.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace gpt::testing {

double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    ref += b[i] * b[i];
  }
  if (diff == 0) return 0;
  return std::sqrt(diff / std::max(ref, 1e-300));
}

namespace {

double grad_error(Var test, Var reference) {
  if (!test.has_grad()) return INFINITY;
  return relative_error(test.grad().to_doubles(), reference.grad().to_doubles());
}

std::string describe(const LockstepStep& s) {
  char line[200];
  std::snprintf(line, sizeof line, "step %zu (%s): value %.3e, dout %.3e, input grad %.3e at var %zu", s.index,
                s.label.c_str(), s.value_error, s.dout_error, s.input_error, s.worst_input);
  return line;
}

}  // namespace

LockstepReport walk_tapes_in_lockstep(Tape& test, Tape& reference) {
  LockstepReport report;
  EXPECT_EQ(test.size(), reference.size()) << "the two tapes recorded different numbers of ops";
  if (test.size() != reference.size()) return report;
  std::printf("step  op               value     dout      worst input grad (var)\n");
  while (reference.size() > 0) {
    LockstepStep s;
    s.index = reference.size() - 1;
    const TapeStep r = reference.backward_last();
    const TapeStep t = test.backward_last();
    s.label = r.label;
    EXPECT_STREQ(t.label, r.label) << "tape step " << s.index;
    EXPECT_EQ(t.vars.size(), r.vars.size()) << "tape step " << s.index << " (" << r.label << ")";
    if (t.vars.size() != r.vars.size() || t.vars.empty()) continue;
    const Var& r_out = r.vars.front();
    if (r_out.value().defined()) {
      s.value_error = relative_error(t.vars.front().value().to_doubles(), r_out.value().to_doubles());
      if (r_out.has_grad()) s.dout_error = grad_error(t.vars.front(), r_out);
    }
    for (size_t i = 1; i < r.vars.size(); ++i) {
      if (!r.vars[i].requires_grad() || !r.vars[i].has_grad()) continue;
      const double err = grad_error(t.vars[i], r.vars[i]);
      if (err > s.input_error) {
        s.input_error = err;
        s.worst_input = i;
      }
    }
    std::printf("%4zu  %-15s  %.2e  %.2e  %.2e (%zu)\n", s.index, s.label.c_str(), s.value_error, s.dout_error,
                s.input_error, s.worst_input);
    report.push_back(std::move(s));
  }
  return report;
}

std::string first_step_over(const LockstepReport& report, double value_tol, double dout_tol, double input_tol) {
  for (const LockstepStep& s : report) {
    if (s.value_error > value_tol || s.dout_error > dout_tol || s.input_error > input_tol) return describe(s);
  }
  return {};
}

std::string first_step_worse_than(const LockstepReport& report, const LockstepReport& baseline, double factor,
                                  double floor) {
  if (report.size() != baseline.size()) return "the report and its baseline cover different tapes";
  for (size_t i = 0; i < report.size(); ++i) {
    const LockstepStep& s = report[i];
    const LockstepStep& b = baseline[i];
    if (s.value_error > factor * b.value_error + floor || s.dout_error > factor * b.dout_error + floor ||
        s.input_error > factor * b.input_error + floor) {
      return describe(s) + "; precision baseline: " + describe(b);
    }
  }
  return {};
}

}  // namespace gpt::testing
