#include "harness/report/table_format.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/check.h"

namespace gpt::harness {

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

nlohmann::json json_value(const sql::Value& v) {
  if (std::holds_alternative<std::monostate>(v)) return nullptr;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::get<std::string>(v);
}

}  // namespace

std::string format_table(const sql::Table& table, const std::string& format) {
  std::ostringstream o;
  if (format == "csv") {
    for (size_t c = 0; c < table.columns.size(); ++c) o << (c ? "," : "") << csv_field(table.columns[c]);
    o << "\n";
    for (const auto& row : table.rows) {
      for (size_t c = 0; c < row.size(); ++c) o << (c ? "," : "") << csv_field(sql::to_string(row[c]));
      o << "\n";
    }
  } else if (format == "json") {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : table.rows) {
      nlohmann::json obj = nlohmann::json::object();
      for (size_t c = 0; c < row.size(); ++c) obj[table.columns[c]] = json_value(row[c]);
      rows.push_back(std::move(obj));
    }
    // Replace, not throw: a stored text that is not UTF-8 (a log file name) must not make every query fail.
    o << rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else if (format == "table") {
    std::vector<size_t> width(table.columns.size());
    for (size_t c = 0; c < table.columns.size(); ++c) width[c] = table.columns[c].size();
    for (const auto& row : table.rows) {
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], sql::to_string(row[c]).size());
    }
    auto line = [&](const std::vector<std::string>& cells) {
      std::string text;
      for (size_t c = 0; c < cells.size(); ++c) {
        text += cells[c];
        if (c + 1 < cells.size()) text += std::string(width[c] - cells[c].size() + 2, ' ');
      }
      o << text << "\n";
    };
    line(table.columns);
    std::vector<std::string> rule;
    for (size_t w : width) rule.push_back(std::string(w, '-'));
    line(rule);
    for (const auto& row : table.rows) {
      std::vector<std::string> cells;
      for (const auto& v : row) cells.push_back(sql::to_string(v));
      line(cells);
    }
    o << "(" << table.rows.size() << " row" << (table.rows.size() == 1 ? "" : "s") << ")\n";
  } else {
    GPT_FAIL("--format: expected table, csv or json, got '", format, "'");
  }
  return o.str();
}

}  // namespace gpt::harness
