#include "harness/store/change_points.h"

#include "base/check.h"

namespace gpt::harness {

std::vector<ChangePointRecord> load_change_points(Store& store, std::string_view suite, std::string_view name,
                                                  std::string_view gpu) {
  std::string sql =
      "SELECT id, suite, name, gpu, start_night, start_commit, found_night, found_commit, before_mean, relative, "
      "min_effect, status, resolved_night FROM change_points";
  if (!suite.empty()) sql += " WHERE suite = ? AND name = ? AND gpu = ?";
  sql += " ORDER BY start_night, id";
  auto s = store.db().prepare(sql);
  if (!suite.empty()) s.bind(1, suite).bind(2, name).bind(3, gpu);
  std::vector<ChangePointRecord> out;
  while (s.step()) {
    ChangePointRecord r;
    r.id = s.column_int(0);
    r.suite = s.column_text(1);
    r.name = s.column_text(2);
    r.gpu = s.column_text(3);
    r.start_night = s.column_text(4);
    r.start_commit = s.column_text(5);
    r.found_night = s.column_text(6);
    r.found_commit = s.column_text(7);
    r.before_mean = s.column_double(8);
    r.relative = s.column_double(9);
    r.min_effect = s.column_double(10);
    r.status = s.column_text(11);
    r.resolved_night = s.column_text(12);
    out.push_back(std::move(r));
  }
  return out;
}

std::int64_t save_change_point(Store& store, const ChangePointRecord& r) {
  GPT_CHECK(!r.suite.empty() && !r.name.empty() && !r.start_night.empty(),
            "a change point needs a suite, a benchmark name and its first night");
  if (r.id == 0) {
    auto s = store.db().prepare(
        "INSERT INTO change_points (suite, name, gpu, start_night, start_commit, found_night, found_commit, "
        "before_mean, relative, min_effect, status, resolved_night) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) "
        // A night decided again (its file ingested anew) finds the same change point: one row, brought up to date.
        "ON CONFLICT (suite, name, gpu, start_night) DO UPDATE SET relative = excluded.relative, "
        "status = excluded.status, resolved_night = excluded.resolved_night RETURNING id");
    s.bind(1, r.suite).bind(2, r.name).bind(3, r.gpu).bind(4, r.start_night).bind(5, r.start_commit);
    s.bind(6, r.found_night).bind(7, r.found_commit).bind(8, r.before_mean).bind(9, r.relative);
    s.bind(10, r.min_effect).bind(11, r.status).bind(12, r.resolved_night);
    GPT_CHECK(s.step(), "change point of ", r.suite, "/", r.name, ": the database returned no id");
    const std::int64_t id = s.column_int(0);
    s.step();  // to completion
    return id;
  }
  auto s = store.db().prepare("UPDATE change_points SET relative = ?, status = ?, resolved_night = ? WHERE id = ?");
  s.bind(1, r.relative).bind(2, r.status).bind(3, r.resolved_night).bind(4, r.id);
  s.run();
  return r.id;
}

}  // namespace gpt::harness
