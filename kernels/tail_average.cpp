#include "kernels/tail_average.h"

#include "kernels/dispatch.h"

namespace gpt {

namespace {

void check_pair(const Tensor& acc, const Tensor& w, const char* op) {
  GPT_CHECK(is_floating(w.dtype()), op, ": weight must be f64, f32 or bf16, got ", w.describe());
  check_shape(acc, w.shape(), op);
  check_dtype(acc, stat_dtype(w.dtype()), op);
  check_same_device({&acc, &w}, op);
}

}  // namespace

void tail_accumulate(Tensor& acc, const Tensor& w, double rate, bool seed) {
  check_pair(acc, w, "tail_accumulate");
  GPT_BACKEND_CALL(w.device(), tail_accumulate, acc, w, rate, seed);
}

void tail_ship(Tensor& w, const Tensor& acc, double factor) {
  check_pair(acc, w, "tail_ship");
  GPT_BACKEND_CALL(w.device(), tail_ship, w, acc, factor);
}

double sum_of_squares(const Tensor& w) {
  GPT_CHECK(is_floating(w.dtype()), "sum_of_squares: expected f64, f32 or bf16, got ", w.describe());
  double sum = 0;
  GPT_BACKEND_CALL(w.device(), sum_of_squares, w, sum);
  return sum;
}

void scale_in_place(Tensor& w, double factor) {
  GPT_CHECK(is_floating(w.dtype()), "scale_in_place: expected f64, f32 or bf16, got ", w.describe());
  GPT_BACKEND_CALL(w.device(), scale_in_place, w, factor);
}

}  // namespace gpt
