// The deferred_dq backward's barrier protocol (kernels/cuda/attention/backward.cuh, consume_deferred) checked for
// deadlocks on the CPU: the waits and arrivals of the block's actors — two consumer warpgroups, the query-tile loader,
// the two dQ adder warps — are written out in the kernel's order with the kernel's ring arithmetic (BarrierRing of
// attention/schedule.h), and every interleaving of them is explored. An mbarrier wait passes when the current phase's
// parity differs from the one asked for, exactly as on the GPU, so a barrier that ran two phases ahead blocks: parity
// aliasing shows up as a deadlock too. The ordered adds across blocks are left out (each adder's turn comes eventually:
// blocks wait only on blocks that started before them).
#include "kernels/cuda/attention/schedule.h"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gpt::cuda::attn {
namespace {

enum Barrier {
  full0,
  full1,
  empty0,
  empty1,
  ds_ready0,
  ds_ready1,
  ds_free0,
  ds_free1,
  dq_full0,
  dq_full1,
  dq_empty0,
  dq_empty1,
  kBarriers
};
// Arrivals per phase in the model: one per warpgroup or warp role (the kernel counts warps: 8 = two warpgroups).
constexpr std::array<int, kBarriers> kArrivals = {1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1};

struct Op {
  bool wait;
  Barrier barrier;
  uint32_t parity = 0;
};
using Program = std::vector<Op>;

Barrier at(Barrier first, int slot) { return static_cast<Barrier>(first + slot); }

using StageRing = BarrierRing<2>;  // the kernel's kStages query-tile stages
using DqRing = BarrierRing<2>;     // its kDqStages staging tiles

// deferred_dq_tile(c): wait for both halves of dSᵀ(c) and a free staging tile, release dSᵀ(c), hand dQ(c) over.
template <int kDsTiles>
void deferred_dq(Program& ops, int c) {
  using DsRing = BarrierRing<kDsTiles>;
  ops.push_back({true, at(ds_ready0, DsRing::slot(c)), DsRing::filled_parity(c)});
  if (DqRing::refills(c)) ops.push_back({true, at(dq_empty0, DqRing::slot(c)), DqRing::released_parity(c)});
  ops.push_back({false, at(ds_free0, DsRing::slot(c))});
  ops.push_back({false, at(dq_full0, DqRing::slot(c))});
}

// consume_deferred: per tile, wait for its stage; when the block adds to the tile's dQ, publish dSᵀ(c) and issue
// dQ(c − 1); release the stage. The last contribution's dQ after the loop.
template <int kDsTiles>
Program consumer(const std::vector<bool>& adds_dq) {
  using DsRing = BarrierRing<kDsTiles>;
  Program ops;
  int c = 0;
  for (int n = 0; n < static_cast<int>(adds_dq.size()); ++n) {
    ops.push_back({true, at(full0, StageRing::slot(n)), StageRing::filled_parity(n)});
    if (adds_dq[static_cast<size_t>(n)]) {
      if (DsRing::refills(c)) ops.push_back({true, at(ds_free0, DsRing::slot(c)), DsRing::released_parity(c)});
      ops.push_back({false, at(ds_ready0, DsRing::slot(c))});
      if (c > 0) deferred_dq<kDsTiles>(ops, c - 1);
      ++c;
    }
    ops.push_back({false, at(empty0, StageRing::slot(n))});
  }
  if (c > 0) deferred_dq<kDsTiles>(ops, c - 1);
  return ops;
}

// load_query_tiles: each tile into its stage once both warpgroups released the stage's previous tile.
Program loader(int tiles) {
  Program ops;
  for (int n = 0; n < tiles; ++n) {
    if (StageRing::refills(n)) ops.push_back({true, at(empty0, StageRing::slot(n)), StageRing::released_parity(n)});
    ops.push_back({false, at(full0, StageRing::slot(n))});
  }
  return ops;
}

// add_dq_tiles(slot): the staged contributions of its staging tile, each released once added.
Program adder(int slot, int contributions) {
  Program ops;
  for (int c = 0; c < contributions; ++c) {
    if (DqRing::slot(c) != slot) continue;
    ops.push_back({true, at(dq_full0, slot), DqRing::filled_parity(c)});
    ops.push_back({false, at(dq_empty0, slot)});
  }
  return ops;
}

// Explores every interleaving; returns an empty string when each one runs to the end, else the stuck state.
template <int kDsTiles>
std::string find_deadlock(const std::vector<bool>& adds_dq) {
  int contributions = 0;
  for (bool a : adds_dq) contributions += a ? 1 : 0;
  const std::vector<Program> actors = {consumer<kDsTiles>(adds_dq), consumer<kDsTiles>(adds_dq),
                                       loader(static_cast<int>(adds_dq.size())), adder(0, contributions),
                                       adder(1, contributions)};
  struct State {
    std::vector<size_t> pc;
    std::array<std::pair<int, int>, kBarriers> barriers{};  // (completed phases, arrivals in the current one)
    bool operator<(const State& o) const { return std::tie(pc, barriers) < std::tie(o.pc, o.barriers); }
  };
  std::set<State> seen;
  std::vector<State> stack = {State{std::vector<size_t>(actors.size(), 0), {}}};
  while (!stack.empty()) {
    const State s = stack.back();
    stack.pop_back();
    if (!seen.insert(s).second) continue;
    bool finished = true, moved = false;
    for (size_t i = 0; i < actors.size(); ++i) {
      if (s.pc[i] == actors[i].size()) continue;
      finished = false;
      const Op& op = actors[i][s.pc[i]];
      State next = s;
      auto& [phases, arrivals] = next.barriers[op.barrier];
      if (op.wait) {
        if ((static_cast<uint32_t>(phases) & 1) == op.parity) continue;  // that phase has not completed
      } else if (++arrivals == kArrivals[op.barrier]) {
        ++phases;
        arrivals = 0;
      }
      ++next.pc[i];
      stack.push_back(std::move(next));
      moved = true;
    }
    if (!finished && !moved) {
      std::ostringstream os;
      os << "stuck with actors at";
      for (size_t i = 0; i < actors.size(); ++i) os << ' ' << s.pc[i] << '/' << actors[i].size();
      return os.str();
    }
  }
  return "";
}

std::string describe(const std::vector<bool>& adds_dq) {
  std::string out;
  for (bool a : adds_dq) out += a ? 'A' : '-';
  return out;
}

// Every pattern of tiles that add to dQ ('A') or are skipped by both warpgroups ('-'), up to 6 tiles.
TEST(DeferredDqProtocol, NoInterleavingDeadlocksWithTwoDsTiles) {
  for (int tiles = 1; tiles <= 6; ++tiles) {
    for (int mask = 0; mask < (1 << tiles); ++mask) {
      std::vector<bool> adds_dq;
      for (int n = 0; n < tiles; ++n) adds_dq.push_back(((mask >> n) & 1) != 0);
      EXPECT_EQ(find_deadlock<2>(adds_dq), "") << describe(adds_dq);
    }
  }
}

// The checker finds the deadlock the second tile exists to avoid: with one dSᵀ tile, publishing dSᵀ(c) waits for
// the release of dSᵀ(c − 1), which this warpgroup's own deferred dQ(c − 1) gives only after that publish.
TEST(DeferredDqProtocol, OneDsTileWithADeferredDqDeadlocks) {
  EXPECT_EQ(find_deadlock<1>({true}), "");  // a single contribution needs no reuse
  EXPECT_NE(find_deadlock<1>({true, true}), "");
  EXPECT_NE(find_deadlock<1>({true, false, true}), "");
}

TEST(BarrierRing, SlotsAndParitiesOfSuccessiveUses) {
  using Ring = BarrierRing<2>;
  const int slots[] = {0, 1, 0, 1, 0, 1};
  const uint32_t filled[] = {0, 0, 1, 1, 0, 0};
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(Ring::slot(k), slots[k]) << k;
    EXPECT_EQ(Ring::filled_parity(k), filled[k]) << k;
    EXPECT_EQ(Ring::refills(k), k >= 2) << k;
    if (k >= 2) {
      EXPECT_EQ(Ring::released_parity(k), filled[k - 2]) << k;  // the phase in which use k − 2 was filled
    }
  }
}

}  // namespace
}  // namespace gpt::cuda::attn
