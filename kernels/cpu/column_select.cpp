// CPU reference of kernels/column_select.h: rows in parallel, columns in order within a row.
#include "kernels/column_select.h"
#include "kernels/cpu/dispatch.h"

namespace gpt::cpu {

namespace {

void check_columns(const Tensor& columns, int64_t vocab, const char* op) {
  const int64_t* c = columns.data<int64_t>();
  for (int64_t j = 0; j < columns.size(0); ++j) {
    GPT_CHECK(c[j] >= 0 && c[j] < vocab, op, ": column ", c[j], " at ", j, " is outside [0, ", vocab, ")");
  }
}

}  // namespace

void column_gather(const Tensor& table, const Tensor& columns, Tensor& out) {
  const int64_t rows = table.size(0), vocab = table.size(1), width = columns.size(0);
  check_columns(columns, vocab, "column_gather");
  const int64_t* c = columns.data<int64_t>();
  dispatch_floating(table.dtype(), "column_gather", [&]<typename T>() {
    const T* tp = table.data<T>();
    T* op = out.data<T>();
#pragma omp parallel for schedule(static) if (rows * width > (1 << 15))
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < width; ++j) op[r * width + j] = tp[r * vocab + c[j]];
    }
  });
}

void column_scatter_add(const Tensor& src, const Tensor& columns, Tensor& table) {
  const int64_t rows = table.size(0), vocab = table.size(1), width = columns.size(0);
  check_columns(columns, vocab, "column_scatter_add");
  const int64_t* c = columns.data<int64_t>();
  dispatch_floating(table.dtype(), "column_scatter_add", [&]<typename T>() {
    const T* sp = src.data<T>();
    T* tp = table.data<T>();
#pragma omp parallel for schedule(static) if (rows * width > (1 << 15))
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < width; ++j) {
        T& dst = tp[r * vocab + c[j]];
        dst = store<T>(load(dst) + load(sp[r * width + j]));
      }
    }
  });
}

}  // namespace gpt::cpu
