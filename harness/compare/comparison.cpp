// Comparison verdicts and named baselines: see comparison.h.
#include "harness/compare/comparison.h"

#include <fstream>
#include <iomanip>
#include <sstream>
#include <toml++/toml.h>

#include "kernels/check.h"

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
  std::ifstream in(path);
  GPT_CHECK(in.good(), path.string(), ": cannot read baseline file");
  std::stringstream text;
  text << in.rdbuf();
  return parse_baseline(text.str(), name, path.string());
}

std::string_view to_string(Arm arm) { return arm == Arm::baseline ? "baseline" : "candidate"; }

std::vector<Arm> interleaved_order(size_t runs_per_arm) {
  std::vector<Arm> order;
  for (size_t i = 0; i < runs_per_arm; ++i) order.insert(order.end(), {Arm::baseline, Arm::candidate});
  return order;
}

ComparisonReport analyze_comparison(const ArmResults& candidate, const ArmResults& baseline,
                                    const ComparisonSettings& settings) {
  GPT_CHECK(candidate.train_time_s.size() >= 2 && baseline.train_time_s.size() >= 2,
            "compare: need at least 2 finished runs per arm, got candidate ", candidate.train_time_s.size(),
            " and baseline ", baseline.train_time_s.size());
  ComparisonReport r{};
  r.candidate_time = stats::summarize(candidate.train_time_s);
  r.baseline_time = stats::summarize(baseline.train_time_s);
  r.time_welch = stats::welch_t_test(candidate.train_time_s, baseline.train_time_s);
  r.time_mann_whitney = stats::mann_whitney_u(candidate.train_time_s, baseline.train_time_s);
  r.time_ratio = r.candidate_time.mean / r.baseline_time.mean;
  r.time_ratio_ci = stats::bootstrap_ratio_ci(candidate.train_time_s, baseline.train_time_s, settings.confidence,
                                              settings.resamples, settings.seed);
  r.faster = r.time_welch.p_value < settings.alpha && r.time_welch.t < 0;
  if (candidate.final_val_loss.size() >= 2) {
    r.candidate_loss = stats::summarize(candidate.final_val_loss);
    r.candidate_record = stats::one_sample_t_less(candidate.final_val_loss, settings.target_loss);
    r.candidate_passes_record = r.candidate_record->p_value < settings.alpha;
  }
  if (baseline.final_val_loss.size() >= 2) r.baseline_loss = stats::summarize(baseline.final_val_loss);
  if (r.candidate_loss && r.baseline_loss) {
    r.loss_welch = stats::welch_t_test(candidate.final_val_loss, baseline.final_val_loss);
  }
  return r;
}

std::string format_comparison(const ComparisonReport& r, const ComparisonSettings& settings,
                              const std::optional<PublishedFigures>& published) {
  std::ostringstream os;
  os << std::fixed;
  const auto arm_line = [&](const char* label, const stats::Summary& s, int digits, const char* unit) {
    os << "  " << std::left << std::setw(10) << label << std::right << " n=" << s.n << "  mean "
       << std::setprecision(digits) << s.mean << unit << "  sd " << s.std << unit << "  median " << s.median
       << unit << "\n";
  };
  os << "train time\n";
  arm_line("baseline", r.baseline_time, 3, " s");
  arm_line("candidate", r.candidate_time, 3, " s");
  os << std::setprecision(4) << "  ratio candidate/baseline " << r.time_ratio << "  ("
     << std::setprecision(1) << 100 * settings.confidence << "% bootstrap CI " << std::setprecision(4)
     << r.time_ratio_ci.low << " .. " << r.time_ratio_ci.high << ")\n";
  os << std::setprecision(3) << "  Welch t=" << r.time_welch.t << " df=" << r.time_welch.df
     << std::scientific << std::setprecision(3) << " p=" << r.time_welch.p_value << std::fixed
     << "   Mann-Whitney U=" << std::setprecision(1) << r.time_mann_whitney.u << std::scientific
     << std::setprecision(3) << " p=" << r.time_mann_whitney.p_value << std::fixed << " ("
     << r.time_mann_whitney.method << ")\n";
  os << "  verdict: "
     << (r.faster ? "candidate is faster"
                  : (r.time_welch.p_value < settings.alpha ? "candidate is slower" : "no significant difference"))
     << " at alpha " << std::setprecision(3) << settings.alpha << "\n";
  if (r.candidate_loss || r.baseline_loss) os << "final val loss\n";
  if (r.baseline_loss) arm_line("baseline", *r.baseline_loss, 4, "");
  if (r.candidate_loss) arm_line("candidate", *r.candidate_loss, 4, "");
  if (r.loss_welch) {
    os << std::setprecision(3) << "  Welch t=" << r.loss_welch->t << std::scientific << " p=" << r.loss_welch->p_value
       << std::fixed << "\n";
  }
  if (r.candidate_record) {
    os << "  record check (mean < " << std::setprecision(2) << settings.target_loss << ", one-sided): p="
       << std::scientific << std::setprecision(3) << r.candidate_record->p_value << std::fixed << " -> "
       << (r.candidate_passes_record ? "PASS" : "not established") << "\n";
  }
  if (published) {
    os << "published baseline: n=" << published->runs << "  mean loss " << std::setprecision(4)
       << published->mean_val_loss;
    if (published->mean_train_time_s) os << "  mean time " << std::setprecision(3) << *published->mean_train_time_s << " s";
    os << "\n";
  }
  return os.str();
}

}  // namespace gpt::harness::compare
