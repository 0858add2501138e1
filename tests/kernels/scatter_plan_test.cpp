// The work plan of scatter v2 (kernels/cuda/scatter_plan.h), checked on the CPU by walking it as the two CUDA
// kernels do: every valid row's tokens reach its row exactly once, as pieces that join up, in sorted order, to the
// row's whole run (so the sum has a fixed order and leaves nothing out); no piece spans two chunks; every partial
// slot is written once and read once; runs of ids outside the table write nothing.
#include "kernels/cuda/scatter_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/bench/zipf_ids.h"

namespace gpt::cuda::scatter_plan {
namespace {

using Piece = std::pair<int64_t, int64_t>;  // sorted positions [first, last)

// What reached each row: one entry per write into the row, each the pieces summed for it in order.
struct Walk {
  std::map<int32_t, std::vector<std::vector<Piece>>> writes;
};

// Walks the chunk kernel (steps at every position) and the combine kernel (crossing runs) over sorted ids, checking
// the per-piece invariants on the way.
Walk walk_plan(const std::vector<int32_t>& sorted, int64_t rows) {
  const auto n = static_cast<int64_t>(sorted.size());
  Walk walk;
  std::map<int64_t, Piece> slots;
  int64_t piece_first = 0;
  for (int64_t pos = 0; pos < n; ++pos) {
    if (pos % kScatterChunk == 0) {
      EXPECT_EQ(piece_first, pos) << "a piece runs into chunk " << pos / kScatterChunk;
    }
    const Step step = step_at(sorted.data(), n, rows, pos);
    if (step.action == Action::accumulate) continue;
    const Piece piece{piece_first, pos + 1};
    piece_first = pos + 1;
    const int32_t row = sorted[static_cast<size_t>(pos)];
    for (int64_t p = piece.first; p < piece.second; ++p) EXPECT_EQ(sorted[static_cast<size_t>(p)], row) << p;
    const bool valid = row >= 0 && row < rows;
    EXPECT_EQ(step.action == Action::drop, !valid) << "position " << pos << ", id " << row;
    if (step.action == Action::add_into_row) {
      EXPECT_EQ(step.target, row);
      walk.writes[row].push_back({piece});
    } else if (step.action == Action::store_partial) {
      const int64_t chunk = pos / kScatterChunk;
      const bool own_slot =
          step.target == partial_slot(chunk, kSlotContinued) || step.target == partial_slot(chunk, kSlotStarted);
      EXPECT_TRUE(own_slot) << "position " << pos << " stores into slot " << step.target << ", not one of chunk "
                            << chunk;
      EXPECT_TRUE(slots.emplace(step.target, piece).second) << "slot " << step.target << " written twice";
    }
  }
  EXPECT_EQ(piece_first, n) << "the last positions end no piece";
  for (int64_t chunk = 0; chunk < chunk_count(n); ++chunk) {
    if (!starts_crossing_run(sorted.data(), n, rows, chunk)) continue;
    const int32_t row = sorted[static_cast<size_t>((chunk + 1) * kScatterChunk - 1)];
    std::vector<Piece> pieces;
    const auto take = [&](int64_t slot) {
      const auto it = slots.find(slot);
      if (it == slots.end()) {
        ADD_FAILURE() << "the combine at chunk " << chunk << " reads slot " << slot << ", never written";
        return;
      }
      pieces.push_back(it->second);
      slots.erase(it);  // a second read fails as unwritten
    };
    take(partial_slot(chunk, kSlotStarted));
    for (int64_t j = chunk + 1; run_continues_into(sorted.data(), n, row, j); ++j) {
      take(partial_slot(j, kSlotContinued));
    }
    walk.writes[row].push_back(pieces);
  }
  for (const auto& [slot, piece] : slots) ADD_FAILURE() << "slot " << slot << " written, never combined";
  return walk;
}

void expect_plan_covers(std::vector<int32_t> ids, int64_t rows, const std::string& what) {
  SCOPED_TRACE(what + ", " + std::to_string(ids.size()) + " tokens");
  std::sort(ids.begin(), ids.end());
  const Walk walk = walk_plan(ids, rows);
  std::map<int32_t, Piece> runs;  // row → its sorted positions
  for (size_t p = 0; p < ids.size(); ++p) {
    auto [it, fresh] = runs.try_emplace(ids[p], Piece{static_cast<int64_t>(p), 0});
    it->second.second = static_cast<int64_t>(p) + 1;
  }
  for (const auto& [row, run] : runs) {
    const auto it = walk.writes.find(row);
    if (row < 0 || row >= rows) {
      EXPECT_TRUE(it == walk.writes.end()) << "id " << row << " lies outside the table but is written";
      continue;
    }
    ASSERT_TRUE(it != walk.writes.end()) << "row " << row << " is never written";
    ASSERT_EQ(it->second.size(), 1u) << "row " << row << " is written " << it->second.size() << " times";
    int64_t next = run.first;
    for (const Piece& piece : it->second.front()) {
      EXPECT_EQ(piece.first, next) << "row " << row << ": pieces out of order or with a gap";
      next = piece.second;
    }
    EXPECT_EQ(next, run.second) << "row " << row << ": its pieces stop short of its run";
  }
  for (const auto& [row, writes] : walk.writes) EXPECT_TRUE(runs.count(row)) << "row " << row << " has no token";
}

std::vector<int32_t> repeated(int64_t n, int32_t id) { return std::vector<int32_t>(static_cast<size_t>(n), id); }

TEST(ScatterPlan, OneIdForEveryToken) {
  for (int64_t n : {1, 31, 32, 33, 64, 65, 49152}) expect_plan_covers(repeated(n, 7), 50, "one id");
}

TEST(ScatterPlan, AllIdsDistinctWriteEachRowDirectly) {
  for (int64_t n : {1, 32, 33, 1000}) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % n);
    expect_plan_covers(ids, n, "distinct ids");
    std::sort(ids.begin(), ids.end());
    for (int64_t pos = 0; pos < n; ++pos) {
      EXPECT_EQ(step_at(ids.data(), n, n, pos).action, Action::add_into_row) << "no partials without repeats";
    }
  }
}

// Runs that start or end exactly on a chunk boundary, cross one boundary by one token, or cover whole chunks.
TEST(ScatterPlan, RunsAtChunkBoundaries) {
  const auto runs_of = [](const std::vector<int64_t>& lengths) {
    std::vector<int32_t> ids;
    for (size_t r = 0; r < lengths.size(); ++r) ids.insert(ids.end(), static_cast<size_t>(lengths[r]), int32_t(r));
    return ids;
  };
  const int64_t c = kScatterChunk;
  for (const auto& lengths : std::vector<std::vector<int64_t>>{
           {c, c}, {c - 1, 2, c - 1}, {1, 2 * c, 1}, {c + 1, 3 * c - 1, 5}, {2 * c}, {c - 1, 1, 3 * c}}) {
    expect_plan_covers(runs_of(lengths), static_cast<int64_t>(lengths.size()), "runs");
  }
}

TEST(ScatterPlan, IdsOutsideTheTableWriteNothing) {
  const int64_t rows = 40;
  std::vector<int32_t> ids = repeated(100, -1);  // a run of bad ids across chunks
  for (int32_t id : {0, 39, 40, 1 << 30, -7, 5}) ids.insert(ids.end(), 37, id);
  ids.push_back(rows);
  expect_plan_covers(ids, rows, "bad ids");
}

TEST(ScatterPlan, ZipfAndUniformIdsAtTheMicrobatchShape) {
  for (int64_t rows : {50304, 251520, 377280}) {
    expect_plan_covers(zipf_ids(49152, rows, 11), rows, "Zipf over " + std::to_string(rows) + " rows");
  }
  std::mt19937_64 rng(12);
  std::uniform_int_distribution<int32_t> dist(0, 50303);
  std::vector<int32_t> ids(49152);
  for (int32_t& id : ids) id = dist(rng);
  expect_plan_covers(ids, 50304, "uniform ids");
}

TEST(ScatterPlan, ZipfIdsHaveLongRunsAndStayInTheTable) {
  const std::vector<int32_t> ids = zipf_ids(49152, 50304, 13);
  std::map<int32_t, int64_t> counts;
  for (int32_t id : ids) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 50304);
    ++counts[id];
  }
  int64_t most = 0;
  for (const auto& [id, count] : counts) most = std::max(most, count);
  // Rank 1 has probability 1 / H(50304) ≈ 8.8 %: ≈ 4,300 of 49,152 tokens, over a hundred chunks.
  EXPECT_GT(most, 3000);
  EXPECT_LT(most, 6000);
  EXPECT_EQ(zipf_ids(49152, 50304, 13), ids) << "deterministic for a seed";
}

}  // namespace
}  // namespace gpt::cuda::scatter_plan
