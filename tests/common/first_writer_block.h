#pragma once
// One attention block's chain of taped ops — projections viewed per head, QK-norm + rotary, key offset, value gate,
// attention, XSA, head gate, output projection — run forward and backward on either device, for the first-writer
// tests (tests/model/first_writer_test.cpp on the CPU, tests/gpu/first_writer_cuda_test.cpp on the GPU): its
// gradients must be the same bit for bit whether intermediate gradients are written by their first writers or,
// forced by allocating them all first, added into zeros.
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/rotary.h"
#include "tests/common/gradcheck.h"
#include "trainer/model/tape.h"
#include "trainer/model/taped_ops.h"

namespace gpt::first_writer {

struct BlockShape {
  int64_t tokens, heads, head_dim, window;
  std::vector<int32_t> cu;  // cu_seqlens, ending at tokens
  int64_t dim() const { return heads * head_dim; }
};

struct BlockInputs {
  BlockShape shape;
  Tensor u, wq, wk, wv, wo, ve, ve_gate, gates, dout, cu, cos, sin;
};

inline BlockInputs make_inputs(const BlockShape& s, DType dtype, Device device) {
  using testing::random_tensor;
  const int64_t d = s.dim(), lanes = 2 * s.heads;
  BlockInputs in;
  in.shape = s;
  auto put = [&](const Tensor& t) { return t.to(device); };
  in.u = put(random_tensor({s.tokens, d}, dtype, 1));
  in.wq = put(random_tensor({d, d}, dtype, 2, 0.2));
  in.wk = put(random_tensor({d, d}, dtype, 3, 0.2));
  in.wv = put(random_tensor({d, d}, dtype, 4, 0.2));
  in.wo = put(random_tensor({d, d}, dtype, 5, 0.2));
  in.ve = put(random_tensor({s.tokens, d}, dtype, 6));
  in.ve_gate = put(random_tensor({s.heads, 12}, dtype, 7, 0.5));
  in.gates = put(random_tensor({s.tokens, lanes}, dtype, 8));
  in.dout = put(random_tensor({s.tokens, d}, dtype, 9));
  Tensor cu = Tensor::empty({static_cast<int64_t>(s.cu.size())}, DType::i32);
  for (size_t i = 0; i < s.cu.size(); ++i) cu.data<int32_t>()[i] = s.cu[i];
  in.cu = put(cu);
  const RotaryTables tables(s.head_dim, s.tokens);
  in.cos = tables.cos_table(dtype, device);
  in.sin = tables.sin_table(dtype, device);
  return in;
}

struct BlockGrads {
  std::vector<double> du, dwq, dwk, dwv, dwo, dve, dve_gate, dgates;
};

// Runs the block forward and backward. With `all_add`, every intermediate gradient is allocated (zero-filled)
// before the backward, so every op adds, as before first writers could overwrite. `views_allocated_early` (if
// given) tells whether any per-head view had allocated its base's gradient by the end of the forward.
inline BlockGrads run_block(const BlockInputs& in, bool all_add, bool* views_allocated_early = nullptr) {
  const BlockShape& s = in.shape;
  Tape tape;
  Var u(in.u.clone()), wq(in.wq.clone()), wk(in.wk.clone()), wv(in.wv.clone()), wo(in.wo.clone());
  Var ve_flat(in.ve.clone()), ve_gate(in.ve_gate.clone()), gates(in.gates.clone());
  auto per_head = [&](Var flat) { return taped::view(tape, flat, {s.tokens, s.heads, s.head_dim}); };
  Var q_flat = taped::linear(tape, u, wq), k_flat = taped::linear(tape, u, wk), v_flat = taped::linear(tape, u, wv);
  Var q0 = per_head(q_flat), k0 = per_head(k_flat), v0 = per_head(v_flat), ve = per_head(ve_flat);
  if (views_allocated_early != nullptr) {
    *views_allocated_early = q_flat.has_grad() || k_flat.has_grad() || v_flat.has_grad() || ve_flat.has_grad();
  }
  Var q = taped::qk_norm_rotary(tape, q0, in.cos, in.sin, RotaryLayout::normal);
  Var k1 = taped::qk_norm_rotary(tape, k0, in.cos, in.sin, RotaryLayout::normal);
  Var k = taped::key_offset(tape, k1);
  Var v = taped::value_gate(tape, v0, u, ve, ve_gate);
  Var y0 = taped::attention(tape, q, k, v, in.cu, Tensor(), /*paired=*/false, s.window, 0.35f);
  Var y1 = taped::xsa(tape, y0, v, gates, 0);
  Var y2 = taped::head_gate(tape, y1, gates, s.heads);
  Var y_flat = taped::view(tape, y2, {s.tokens, s.dim()});
  Var out = taped::linear(tape, y_flat, wo);
  if (all_add) {
    for (Var* var : {&q_flat, &k_flat, &v_flat, &ve_flat, &q0, &k0, &v0, &ve, &q,  &k1,      &k,    &v,
                     &y0,     &y1,     &y2,     &y_flat,  &u,  &wq, &wk, &wv, &wo, &ve_gate, &gates}) {
      var->grad();
    }
  }
  out.grad().copy_from(in.dout);
  tape.backward();
  return {u.grad().to_doubles(),  wq.grad().to_doubles(),      wk.grad().to_doubles(),      wv.grad().to_doubles(),
          wo.grad().to_doubles(), ve_flat.grad().to_doubles(), ve_gate.grad().to_doubles(), gates.grad().to_doubles()};
}

// Every gradient of the two runs, compared element by element (NaN never equals: an unwritten element fails).
inline void expect_same_gradients(const BlockGrads& written, const BlockGrads& added) {
  EXPECT_EQ(written.du, added.du) << "du";
  EXPECT_EQ(written.dwq, added.dwq) << "dwq";
  EXPECT_EQ(written.dwk, added.dwk) << "dwk";
  EXPECT_EQ(written.dwv, added.dwv) << "dwv";
  EXPECT_EQ(written.dwo, added.dwo) << "dwo";
  EXPECT_EQ(written.dve, added.dve) << "dve";
  EXPECT_EQ(written.dve_gate, added.dve_gate) << "dve_gate";
  EXPECT_EQ(written.dgates, added.dgates) << "dgates";
  double norm = 0;
  for (double g : written.du) norm += g * g;
  EXPECT_GT(norm, 0.0) << "the block's input gradient must not vanish";
}

}  // namespace gpt::first_writer
