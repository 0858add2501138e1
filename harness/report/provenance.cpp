#include "harness/report/provenance.h"

#include <map>
#include <optional>
#include <iterator>
#include <sstream>
#include <tuple>

#include "harness/render/svg.h"

namespace gpt::harness {

namespace {

std::string run_label(const RunRecord& run) {
  std::string label = run.arm.empty() ? "" : run.arm + " ";
  return label + (run.seed ? "seed " + std::to_string(*run.seed) : run.run_id);
}

std::string join(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

std::string source_text(const ProvenanceGroup& group) {
  return group.from_trainer ? "reported by the trainer"
                            : "the harness's probe of the submitting machine (the trainer reported none)";
}

std::string heading_note(const Provenance& p) {
  if (p.groups.empty()) return "No environment was recorded for these runs.";
  if (!p.runs_differ()) return "Every run had the same environment.";
  return "The runs differ in: " + join(p.differing_fields) + ".";
}

// One column per environment group, one row per field; used by Markdown and HTML alike.
struct FieldTable {
  std::vector<std::string> labels;
  std::vector<std::vector<std::string>> values;  // [field][group]
  std::vector<bool> differs;                     // [field]
};

FieldTable field_table(const Provenance& p) {
  FieldTable t;
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const auto fields = group_fields(p.groups[g]);
    if (g == 0) {
      t.values.resize(fields.size());
      for (const auto& [label, value] : fields) t.labels.push_back(label);
    }
    for (size_t f = 0; f < fields.size(); ++f) t.values[f].push_back(fields[f].second);
  }
  for (const auto& row : t.values) {
    bool differs = false;
    for (const auto& v : row) differs = differs || v != row.front();
    t.differs.push_back(differs);
  }
  return t;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> environment_fields(const Environment& e) {
  auto shown = [](const std::string& v) { return v.empty() ? std::string("-") : v; };
  return {{"git commit", shown(e.git_commit) + (e.git_dirty ? " (with uncommitted changes)" : "")},
          {"build type / flags", shown(e.build_flags)},
          {"GPU", shown(e.gpu)},
          {"driver", shown(e.driver)},
          {"CUDA", shown(e.cuda)},
          {"NCCL", shown(e.nccl)},
          {"CPU", shown(e.cpu_model)},
          {"compiler", shown(e.compiler)},
          {"host", shown(e.hostname)}};
}

std::vector<std::pair<std::string, std::string>> group_fields(const ProvenanceGroup& group) {
  auto fields = environment_fields(group.environment);
  fields.insert(fields.end(), group.details.begin(), group.details.end());
  return fields;
}

Provenance collect_provenance(Store& store, const SweepInfo& sweep, const std::vector<const RunRecord*>& runs) {
  Provenance p;
  using Details = std::vector<std::pair<std::string, std::string>>;
  // (environment row, from trainer, run details) -> group
  std::map<std::tuple<std::int64_t, bool, Details>, size_t> group_of;
  for (const RunRecord* run : runs) {
    // A run stored without an environment ran where the sweep was started: the sweep's probe says what it can.
    const std::optional<std::int64_t> environment_id = run->environment_id ? run->environment_id : sweep.environment_id;
    if (!environment_id) {
      ++p.runs_without_environment;
      continue;
    }
    const auto params = store.params(OwnerKind::run, run->id);
    const bool from_trainer =
        run->environment_id && (run->environment_id != sweep.environment_id || params.count("trainer_commit") != 0);
    Details details;
    for (const auto& [param, label] : kRunDetails) {
      const auto it = params.find(param);
      details.emplace_back(label, it == params.end() || it->second.empty() ? "-" : it->second);
    }
    const auto key = std::make_tuple(*environment_id, from_trainer, details);
    auto it = group_of.find(key);
    if (it == group_of.end()) {
      std::optional<Environment> env = store.environment(*environment_id);
      if (!env) {
        ++p.runs_without_environment;
        continue;
      }
      it = group_of.emplace(key, p.groups.size()).first;
      p.groups.push_back(ProvenanceGroup{std::move(*env), from_trainer, details, {}});
    }
    p.groups[it->second].runs.push_back(run_label(*run));
  }
  const FieldTable table = field_table(p);
  for (size_t f = 0; f < table.labels.size(); ++f) {
    if (table.differs[f]) p.differing_fields.push_back(table.labels[f]);
  }
  bool mixed_sources = false;
  for (const auto& g : p.groups) mixed_sources = mixed_sources || g.from_trainer != p.groups.front().from_trainer;
  if (mixed_sources) p.differing_fields.push_back("source (trainer report or harness probe)");
  return p;
}

nlohmann::json provenance_json(const Provenance& p) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : p.groups) {
    const Environment& e = g.environment;
    groups.push_back({{"source", g.from_trainer ? "trainer" : "harness_probe"},
                      {"runs", g.runs},
                      {"git_commit", e.git_commit},
                      {"git_dirty", e.git_dirty},
                      {"build_flags", e.build_flags},
                      {"gpu", e.gpu},
                      {"driver", e.driver},
                      {"cuda", e.cuda},
                      {"nccl", e.nccl},
                      {"cpu", e.cpu_model},
                      {"compiler", e.compiler},
                      {"hostname", e.hostname},
                      {"fingerprint", e.fingerprint()}});
    nlohmann::json& details = groups.back()["details"];
    details = nlohmann::json::object();
    for (size_t d = 0; d < g.details.size() && d < std::size(kRunDetails); ++d) {
      details[kRunDetails[d].first] = g.details[d].second == "-" ? "" : g.details[d].second;
    }
  }
  return {{"runs_differ", p.runs_differ()},
          {"differing_fields", p.differing_fields},
          {"runs_without_environment", p.runs_without_environment},
          {"environments", groups}};
}

std::string provenance_text(const Provenance& p) {
  std::ostringstream o;
  o << "environment: " << heading_note(p) << "\n";
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const auto& group = p.groups[g];
    o << "  " << (p.runs_differ() ? "environment " + std::to_string(g + 1) + ", " : "") << source_text(group) << " ("
      << group.runs.size() << " run(s): " << join(group.runs) << ")\n   ";
    for (const auto& [label, value] : group_fields(group)) o << " " << label << " " << value << ";";
    o << "\n";
  }
  if (p.runs_without_environment > 0) o << "  " << p.runs_without_environment << " run(s) without an environment\n";
  return o.str();
}

std::string provenance_markdown(const Provenance& p) {
  std::ostringstream o;
  o << "\n## Environment\n\n" << heading_note(p) << "\n";
  if (!p.groups.empty()) {
    const FieldTable t = field_table(p);
    o << "\n| |";
    for (size_t g = 0; g < p.groups.size(); ++g) o << " environment " << g + 1 << " |";
    o << "\n|---|";
    for (size_t g = 0; g < p.groups.size(); ++g) o << "---|";
    o << "\n| runs |";
    for (const auto& g : p.groups) o << " " << join(g.runs) << " |";
    o << "\n| source |";
    for (const auto& g : p.groups) o << " " << source_text(g) << " |";
    for (size_t f = 0; f < t.labels.size(); ++f) {
      o << "\n| " << (t.differs[f] ? "**" + t.labels[f] + "** (differs)" : t.labels[f]) << " |";
      for (const auto& v : t.values[f]) o << " " << v << " |";
    }
    o << "\n";
  }
  if (p.runs_without_environment > 0) o << "\n" << p.runs_without_environment << " run(s) without an environment.\n";
  return o.str();
}

std::string provenance_html(const Provenance& p) {
  std::ostringstream o;
  o << "<h2>Environment</h2>\n<p>" << svg::escape(heading_note(p)) << "</p>\n";
  if (!p.groups.empty()) {
    const FieldTable t = field_table(p);
    o << "<table class=\"environment\">\n<tr><th></th>";
    for (size_t g = 0; g < p.groups.size(); ++g) o << "<th>environment " << g + 1 << "</th>";
    o << "</tr>\n<tr><th>runs</th>";
    for (const auto& g : p.groups) o << "<td>" << svg::escape(join(g.runs)) << "</td>";
    o << "</tr>\n<tr><th>source</th>";
    for (const auto& g : p.groups) o << "<td>" << svg::escape(source_text(g)) << "</td>";
    o << "</tr>\n";
    for (size_t f = 0; f < t.labels.size(); ++f) {
      o << "<tr" << (t.differs[f] ? " class=\"differs\"" : "") << "><th>" << svg::escape(t.labels[f]) << "</th>";
      for (const auto& v : t.values[f]) o << "<td>" << svg::escape(v) << "</td>";
      o << "</tr>\n";
    }
    o << "</table>\n";
  }
  if (p.runs_without_environment > 0) {
    o << "<p>" << p.runs_without_environment << " run(s) without an environment.</p>\n";
  }
  return o.str();
}

}  // namespace gpt::harness
