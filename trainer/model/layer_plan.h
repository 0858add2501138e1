#pragma once
// The topology table of RECIPE §2.1, hard-wired (every recipe keeps the 11 layers, §R).
#include <array>
#include <cstdint>

namespace gpt::model_detail {

enum class GateMlp : uint8_t { none, pre, post };

// A lane range of one of the two gate MLP outputs (§2.6).
struct GateLane {
  GateMlp gate = GateMlp::none;
  int64_t lane = 0;
  bool present() const { return gate != GateMlp::none; }
};

struct LayerPlan {
  bool attention = true;
  bool paired = false;       // paired heads (§2.9 step 7)
  bool long_window = false;  // Lg instead of S
  bool key_offset = false;   // §2.9 step 5
  bool from_cache7 = false;  // attention input norm(cache7)
  int64_t value_plane = -1;  // value injection with ve_gate_bank[value_gate] (layers 1, 2, 8, 9)
  int64_t value_gate = -1;
  GateLane xsa{};       // first of 6 per-head α lanes
  GateLane out_gate{};  // first of 6 per-head output gate lanes
  GateLane x0{};        // x0 gate lane
  GateLane bigram{};    // bigram gate lane (layer 0's is applied before the loop)
};

constexpr GateLane pre(int64_t lane) { return {GateMlp::pre, lane}; }
constexpr GateLane post(int64_t lane) { return {GateMlp::post, lane}; }

// Layer 10 is special (§2.12): its gates come from the MUDD coefficients; its plan covers only the attention shape.
inline constexpr std::array<LayerPlan, 11> kLayerPlans = {{
    {.paired = true, .x0 = pre(18), .bigram = pre(19)},
    {.value_plane = 0, .value_gate = 0, .xsa = pre(0), .x0 = pre(20), .bigram = pre(21)},
    {.paired = true, .value_plane = 1, .value_gate = 1, .x0 = pre(22), .bigram = pre(23)},
    {.long_window = true, .key_offset = true, .xsa = pre(6), .out_gate = pre(12), .x0 = pre(24), .bigram = pre(25)},
    {.xsa = post(0), .x0 = post(18), .bigram = post(19)},
    {.paired = true, .x0 = post(20), .bigram = post(21)},
    {.attention = false},
    {.xsa = post(6), .x0 = post(22), .bigram = post(23)},
    {.from_cache7 = true, .value_plane = 2, .value_gate = 2, .x0 = post(24), .bigram = post(25)},
    {.paired = true, .from_cache7 = true, .value_plane = 3, .value_gate = 3, .x0 = post(26), .bigram = post(27)},
    {.long_window = true, .key_offset = true, .from_cache7 = true, .out_gate = post(12)},
}};

// Attention bank slot j of layer i (§2.1): i for i ≤ 5, i − 1 for i ≥ 7.
constexpr int64_t attention_slot(int layer) { return layer <= 5 ? layer : layer - 1; }

inline constexpr int64_t kPostSkipLane = 28;  // σ(λ_skip)·P[28]·cache3 at layer 6
}  // namespace gpt::model_detail
