#include "kernels/tail_average.h"

namespace gpt {

namespace {

void check_pair(const Tensor& acc, const Tensor& w, const char* op) {
  GPT_CHECK(is_floating(w.dtype()), op, ": weight must be f64, f32 or bf16, got ", w.describe());
  check_shape(acc, w.shape(), op);
  check_dtype(acc, stat_dtype(w.dtype()), op);
  check_same_device({&acc, &w}, op);
}

// The §S ops have no CUDA kernels yet: a CUDA tensor is a clear error, in every build.
void require_cpu(const Tensor& t, const char* op) {
  GPT_CHECK(t.device() == Device::cpu, op, ": no CUDA kernel yet (§S ops are CPU only), got ", t.describe());
}

}  // namespace

void tail_accumulate(Tensor& acc, const Tensor& w, double rate, bool seed) {
  check_pair(acc, w, "tail_accumulate");
  require_cpu(w, "tail_accumulate");
  cpu::tail_accumulate(acc, w, rate, seed);
}

void tail_ship(Tensor& w, const Tensor& acc, double factor) {
  check_pair(acc, w, "tail_ship");
  require_cpu(w, "tail_ship");
  cpu::tail_ship(w, acc, factor);
}

double sum_of_squares(const Tensor& w) {
  GPT_CHECK(is_floating(w.dtype()), "sum_of_squares: expected f64, f32 or bf16, got ", w.describe());
  require_cpu(w, "sum_of_squares");
  return cpu::sum_of_squares(w);
}

void scale_in_place(Tensor& w, double factor) {
  GPT_CHECK(is_floating(w.dtype()), "scale_in_place: expected f64, f32 or bf16, got ", w.describe());
  require_cpu(w, "scale_in_place");
  cpu::scale_in_place(w, factor);
}

}  // namespace gpt
