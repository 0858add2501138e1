// Comparison verdicts and named baselines: see comparison.h.
#include "harness/compare/comparison.h"

#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <toml++/toml.h>

#include "base/check.h"
#include "base/file_read.h"

namespace gpt::harness::compare {

Baseline parse_baseline(std::string_view toml_text, std::string_view name, std::string_view source) {
  toml::table table;
  try {
    table = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    GPT_FAIL(source, ": invalid TOML: ", e.description());
  }
  Baseline b;
  b.name = std::string(name);
  b.revision = table["revision"].value_or(std::string());
  b.binary = table["binary"].value_or(std::string());
  b.recipe = table["recipe"].value_or(std::string());
  b.baseline_recipe = table["baseline_recipe"].value_or(std::string());
  GPT_CHECK(!table.contains("baseline_recipe") || !b.baseline_recipe.empty(), source,
            ": 'baseline_recipe' must be a non-empty string (the recipe's name in the baseline's trainer)");
  GPT_CHECK(b.revision.empty() != b.binary.empty(), source,
            ": expected exactly one of 'revision' (git revision) or 'binary' (trainer path)");
  GPT_CHECK(!b.recipe.empty(), source, ": 'recipe' (a string naming the recipe) is required");
  if (const toml::table* published = table["published"].as_table()) {
    const auto runs = (*published)["runs"].value<int64_t>();
    const auto loss = (*published)["mean_val_loss"].value<double>();
    const auto time = (*published)["mean_train_time_s"].value<double>();
    GPT_CHECK(runs && loss, source, ": [published] needs runs (integer) and mean_val_loss (number)");
    GPT_CHECK(!published->contains("mean_train_time_s") || time, source,
              ": [published] mean_train_time_s must be a number of seconds");
    GPT_CHECK(*runs >= 1, source, ": [published] runs must be >= 1, got ", *runs);
    GPT_CHECK(!time || *time > 0, source, ": [published] mean_train_time_s must be > 0, got ", time.value_or(0));
    b.published = PublishedFigures{static_cast<int>(*runs), *loss, time};
  }
  return b;
}

std::optional<Baseline> find_baseline(const std::filesystem::path& dir, std::string_view name) {
  const std::filesystem::path path = dir / (std::string(name) + ".toml");
  if (!std::filesystem::is_regular_file(path)) return std::nullopt;
  return parse_baseline(read_file(path, "baseline file"), name, path.string());
}

std::vector<InterleavedRun> interleaved_order(size_t arms, size_t runs_per_arm) {
  std::vector<InterleavedRun> order;
  for (size_t seed = 0; seed < runs_per_arm; ++seed)
    for (size_t arm = 0; arm < arms; ++arm) order.push_back({seed, arm});
  return order;
}

namespace {

struct Pairs {
  std::vector<double> candidate, baseline;
};

// The values of the seeds present in both arms, in seed order.
Pairs common_seeds(const std::vector<double>& c, const std::vector<std::int64_t>& c_seeds, const std::vector<double>& b,
                   const std::vector<std::int64_t>& b_seeds) {
  Pairs p;
  if (c_seeds.size() != c.size() || b_seeds.size() != b.size()) return p;  // seeds unknown: unpaired
  std::map<std::int64_t, double> by_seed;
  for (size_t i = 0; i < b.size(); ++i) {
    GPT_CHECK(by_seed.emplace(b_seeds[i], b[i]).second, "compare: seed ", b_seeds[i], " twice in the baseline arm");
  }
  std::map<std::int64_t, double> candidate_by_seed;
  for (size_t i = 0; i < c.size(); ++i) {
    GPT_CHECK(candidate_by_seed.emplace(c_seeds[i], c[i]).second, "compare: seed ", c_seeds[i],
              " twice in the candidate arm");
  }
  for (const auto& [seed, value] : candidate_by_seed) {
    if (const auto it = by_seed.find(seed); it != by_seed.end()) {
      p.candidate.push_back(value);
      p.baseline.push_back(it->second);
    }
  }
  return p;
}

ShiftTest shift_test(const std::vector<double>& c, const std::vector<std::int64_t>& c_seeds,
                     const std::vector<double>& b, const std::vector<std::int64_t>& b_seeds) {
  ShiftTest s;
  const Pairs p = common_seeds(c, c_seeds, b, b_seeds);
  if (p.candidate.size() >= 2) {
    s.paired = true;
    s.pairs = p.candidate.size();
    s.t = stats::paired_t_test(p.candidate, p.baseline);
    s.wilcoxon = stats::wilcoxon_signed_rank(p.candidate, p.baseline);
  } else {
    s.t = stats::welch_t_test(c, b);
    s.mann_whitney = stats::mann_whitney_u(c, b);
  }
  return s;
}

std::vector<double> scaled(std::vector<double> x, double factor) {
  for (double& v : x) v *= factor;
  return x;
}

}  // namespace

ComparisonReport analyze_comparison(const ArmResults& candidate, const ArmResults& baseline,
                                    const ComparisonSettings& settings) {
  GPT_CHECK(candidate.train_time_s.size() >= 2 && baseline.train_time_s.size() >= 2,
            "compare: need at least 2 finished runs per arm, got candidate ", candidate.train_time_s.size(),
            " and baseline ", baseline.train_time_s.size());
  ComparisonReport r{};
  r.candidate_time = stats::summarize(candidate.train_time_s);
  r.baseline_time = stats::summarize(baseline.train_time_s);
  r.time = shift_test(candidate.train_time_s, candidate.time_seeds, baseline.train_time_s, baseline.time_seeds);
  r.time_ratio = r.candidate_time.mean / r.baseline_time.mean;
  r.time_ratio_ci = stats::bootstrap_ratio_ci(candidate.train_time_s, baseline.train_time_s, settings.confidence,
                                              settings.resamples, settings.seed);
  const bool time_significant = r.time.t.p_value < settings.alpha;
  r.faster = time_significant && r.time.t.t < 0;
  r.slower = time_significant && r.time.t.t > 0;
  if (settings.fail_if_slower_pct) {
    GPT_CHECK(*settings.fail_if_slower_pct >= 0, "--fail-if-slower: the allowed slowdown must be >= 0 percent, got ",
              *settings.fail_if_slower_pct);
    const double allowed = 1.0 + *settings.fail_if_slower_pct / 100.0;
    if (r.time.paired) {
      const Pairs p =
          common_seeds(candidate.train_time_s, candidate.time_seeds, baseline.train_time_s, baseline.time_seeds);
      r.slowdown = stats::paired_t_test(p.candidate, scaled(p.baseline, allowed), stats::Alternative::greater);
    } else {
      r.slowdown = stats::welch_t_test(candidate.train_time_s, scaled(baseline.train_time_s, allowed),
                                       stats::Alternative::greater);
    }
    r.too_slow = r.slowdown->p_value < settings.alpha;
  }
  if (candidate.final_val_loss.size() >= 2) {
    r.candidate_loss = stats::summarize(candidate.final_val_loss);
    if (settings.target_loss) {
      r.candidate_record = stats::one_sample_t_less(candidate.final_val_loss, *settings.target_loss);
      r.candidate_passes_record = r.candidate_record->p_value < settings.alpha;
    }
  }
  if (baseline.final_val_loss.size() >= 2) {
    r.baseline_loss = stats::summarize(baseline.final_val_loss);
    if (settings.published) {
      r.published_drift = stats::one_sample_t_test(baseline.final_val_loss, settings.published->mean_val_loss,
                                                   stats::Alternative::two_sided);
      r.drifted = r.published_drift->p_value < settings.alpha;
    }
  }
  if (r.candidate_loss && r.baseline_loss) {
    r.loss = shift_test(candidate.final_val_loss, candidate.loss_seeds, baseline.final_val_loss, baseline.loss_seeds);
  }
  return r;
}

namespace {

std::string p_text(double p) {
  std::ostringstream os;
  os << std::scientific << std::setprecision(3) << p;
  return os.str();
}

void shift_lines(std::ostringstream& os, const ShiftTest& s) {
  os << "  " << s.t_name();
  if (s.paired) os << " (" << s.pairs << " seeds in both arms)";
  os << std::setprecision(3) << " t=" << s.t.t << " df=" << s.t.df << " p=" << p_text(s.t.p_value) << "   "
     << s.rank_name();
  if (s.paired) {
    os << std::setprecision(1) << " W=" << s.wilcoxon->statistic << " p=" << p_text(s.wilcoxon->p_value) << " ("
       << s.wilcoxon->method << ")\n";
  } else {
    os << std::setprecision(1) << " U=" << s.mann_whitney->u << " p=" << p_text(s.mann_whitney->p_value) << " ("
       << s.mann_whitney->method << ")\n";
  }
}

}  // namespace

std::string slowdown_verdict(const ComparisonReport& r, const ComparisonSettings& s) {
  if (!r.slowdown || !s.fail_if_slower_pct) return "";
  std::ostringstream limit, p;
  limit << 100 + *s.fail_if_slower_pct << "% of the baseline time";
  p << "one-sided " << r.time.t_name() << " p = " << std::setprecision(3) << r.slowdown->p_value
    << (r.too_slow ? " < alpha " : " >= alpha ") << s.alpha;
  if (r.too_slow) return "FAIL: the candidate is slower than " + limit.str() + " (" + p.str() + ")";
  return "PASS: the runs do not show the candidate slower than " + limit.str() + " (" + p.str() + ")";
}

std::string record_check_verdict(const ComparisonReport& r, const ComparisonSettings& s) {
  if (!r.candidate_record || !s.target_loss) return "";
  std::ostringstream mean, target, p;
  mean << std::fixed << std::setprecision(4);
  if (r.candidate_loss) mean << " " << r.candidate_loss->mean;
  target << std::fixed << std::setprecision(4) << *s.target_loss;
  p << "one-sided t p = " << std::setprecision(3) << r.candidate_record->p_value
    << (r.candidate_passes_record ? " < alpha " : " >= alpha ") << s.alpha;
  const std::string loss = "the candidate's mean final val loss" + mean.str();
  if (r.candidate_passes_record) return "PASS: " + loss + " is below the target " + target.str() + " (" + p.str() + ")";
  return "not established: " + loss + " is not shown below the target " + target.str() + " (" + p.str() + ")";
}

std::string format_comparison(const ComparisonReport& r, const ComparisonSettings& settings) {
  std::ostringstream os;
  os << std::fixed;
  const auto arm_line = [&](const char* label, const stats::Summary& s, int digits, const char* unit) {
    os << "  " << std::left << std::setw(10) << label << std::right << " n=" << s.n << "  mean "
       << std::setprecision(digits) << s.mean << unit << "  sd " << s.std << unit << "  median " << s.median << unit
       << "\n";
  };
  os << "train time\n";
  arm_line("baseline", r.baseline_time, 3, " s");
  arm_line("candidate", r.candidate_time, 3, " s");
  os << std::setprecision(4) << "  ratio candidate/baseline " << r.time_ratio << "  (" << std::setprecision(1)
     << 100 * settings.confidence << "% bootstrap CI " << std::setprecision(4) << r.time_ratio_ci.low << " .. "
     << r.time_ratio_ci.high << ")\n";
  shift_lines(os, r.time);
  os << "  verdict: "
     << (r.faster ? "candidate is faster" : (r.slower ? "candidate is slower" : "no significant difference"))
     << " at alpha " << std::setprecision(3) << settings.alpha << " (" << r.time.t_name() << ")\n";
  if (r.slowdown) os << "  slowdown check: " << slowdown_verdict(r, settings) << "\n";
  if (r.candidate_loss || r.baseline_loss) os << "final val loss\n";
  if (r.baseline_loss) arm_line("baseline", *r.baseline_loss, 4, "");
  if (r.candidate_loss) arm_line("candidate", *r.candidate_loss, 4, "");
  if (r.loss) shift_lines(os, *r.loss);
  if (r.candidate_record) os << "  record check: " << record_check_verdict(r, settings) << "\n";
  if (const auto& published = settings.published) {
    os << "published baseline: n=" << published->runs << "  mean loss " << std::setprecision(4)
       << published->mean_val_loss;
    if (published->mean_train_time_s)
      os << "  mean time " << std::setprecision(3) << *published->mean_train_time_s << " s";
    os << "\n";
    if (r.published_drift) {
      os << "  fresh baseline runs vs the published mean (one-sample t, two-sided): t=" << std::setprecision(3)
         << r.published_drift->t << " p=" << p_text(r.published_drift->p_value) << " -> "
         << (r.drifted ? "DRIFT: this machine does not reproduce the published loss" : "consistent") << "\n";
    }
  }
  return os.str();
}

}  // namespace gpt::harness::compare
