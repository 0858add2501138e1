// The sharded optimizer is one code path for every communicator (thread ranks in tests, NCCL on GPUs): it talks
// only to the Comm interface. Shown twice: (1) through a third Comm type the optimizer has never heard of, which
// forwards to thread ranks and records every call, the parameters come out bitwise the same and every rank issues
// the same collectives in the same order with the same counts (what NCCL requires); (2) no source file of
// trainer/optim names a communicator implementation or inspects the dynamic type.
#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "kernels/transpose.h"
#include "trainer/optim/optimizer.h"
#include "source_dir.h"
#include "tests/common/thread_ranks.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

struct CallRecord {
  std::string op;
  int64_t numel = 0;
  DType dtype = DType::f32;
  bool operator==(const CallRecord&) const = default;
};

// Forwards to another communicator and logs each call.
class RecordingComm final : public Comm {
 public:
  explicit RecordingComm(Comm& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  void all_reduce(Tensor& t, ReduceOp op) override {
    log("all_reduce", t);
    inner_.all_reduce(t, op);
  }
  void reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) override {
    log("reduce_scatter", input);
    inner_.reduce_scatter(input, output, op);
  }
  void all_gather(const Tensor& input, Tensor& output) override {
    log("all_gather", output);
    inner_.all_gather(input, output);
  }
  void broadcast(Tensor& t, int root) override {
    log("broadcast", t);
    inner_.broadcast(t, root);
  }
  void barrier() override {
    calls.push_back({"barrier", 0, DType::f32});
    inner_.barrier();
  }
  std::vector<CallRecord> calls;

 private:
  void log(const char* op, const Tensor& t) { calls.push_back({op, t.numel(), t.dtype()}); }
  Comm& inner_;
};

const Recipe& tiny() {
  static const Recipe r = load_recipe("tiny");
  return r;
}

Tensor random_values(const Shape& shape, DType dt, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 0.05);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = nd(rng);
  return Tensor::from_doubles(v, shape, dt);
}

struct Spec {
  const char* name;
  Shape shape;
  DType dtype;
  ParamKind kind;
};
const std::vector<Spec> kSpecs = {
    {"qk_bank", {8, 4, 12}, DType::bf16, ParamKind::bank}, {"lm_head", {8, 32}, DType::bf16, ParamKind::adam},
    {"embed", {32, 8}, DType::bf16, ParamKind::adam},      {"value_embeds", {16, 8}, DType::bf16, ParamKind::adam},
    {"scalars", {8}, DType::f32, ParamKind::adam},
};

struct RankResult {
  std::vector<Tensor> values;
  std::vector<CallRecord> calls;
};

// Runs `steps` optimizer steps on W thread ranks (rank-dependent gradients), optionally through RecordingComm.
std::vector<RankResult> run(int world, bool recorded, int64_t steps) {
  std::vector<RankResult> results(static_cast<size_t>(world));
  test::run_thread_ranks(world, [&](int r, Comm& thread_comm) {
    RecordingComm recorder(thread_comm);
    Comm& comm = recorded ? static_cast<Comm&>(recorder) : thread_comm;
    ParameterSet ps;
    for (size_t i = 0; i < kSpecs.size(); ++i) {
      ps.add(kSpecs[i].name, random_values(kSpecs[i].shape, kSpecs[i].dtype, 100 + i), kSpecs[i].kind);
    }
    transpose(ps.get("lm_head").value, ps.get("embed").value);
    Optimizer opt(ps, tiny(), comm);
    const Schedule sched(tiny());
    for (int64_t s = 0; s < steps; ++s) {
      for (size_t i = 0; i < kSpecs.size(); ++i) {
        Parameter& p = ps.get(kSpecs[i].name);
        p.grad.copy_from(random_values(p.grad.shape(), p.grad.dtype(),
                                       1000 * static_cast<uint64_t>(s) + 10 * i + static_cast<uint64_t>(r)));
      }
      opt.step(sched.at(s));
    }
    for (const Parameter& p : ps.all()) results[static_cast<size_t>(r)].values.push_back(p.value.clone());
    results[static_cast<size_t>(r)].calls = recorder.calls;
  });
  return results;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(OptimizerComm, AnyCommImplementationGivesTheSameParameters) {
  const int64_t steps = 4;  // banks every step, Adam on steps 1 and 3
  for (int world : {1, 2, 4}) {
    const auto direct = run(world, false, steps);
    const auto recorded = run(world, true, steps);
    for (int r = 0; r < world; ++r) {
      const auto& d = direct[static_cast<size_t>(r)].values;
      const auto& g = recorded[static_cast<size_t>(r)].values;
      ASSERT_EQ(d.size(), g.size());
      for (size_t i = 0; i < d.size(); ++i) {
        EXPECT_TRUE(bitwise_equal(d[i], g[i])) << "W=" << world << " rank " << r << " parameter " << i;
      }
    }
    const auto& calls0 = recorded[0].calls;
    EXPECT_FALSE(calls0.empty()) << "W=" << world << ": the optimizer never communicated";
    for (int r = 1; r < world; ++r) {
      EXPECT_EQ(recorded[static_cast<size_t>(r)].calls, calls0)
          << "W=" << world << ": rank " << r << " issued different collectives than rank 0";
    }
    // Chunked collectives only on counts divisible by W (NCCL's reduce-scatter/all-gather contract).
    for (const CallRecord& c : calls0) {
      if (c.op == "reduce_scatter" || c.op == "all_gather") {
        EXPECT_EQ(c.numel % world, 0) << c.op;
      }
    }
  }
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(OptimizerComm, OptimSourcesDependOnlyOnTheCommInterface) {
  const fs::path optim = fs::path(SPEEDRUN_SOURCE_DIR) / "trainer" / "optim";
  ASSERT_TRUE(fs::is_directory(optim)) << optim;
  // Anything that would let the optimizer tell communicators apart: RTTI, implementation names, their headers.
  // (Plain substrings: "nccl" also covers the nccl_comm.h header; libstdc++'s <regex> trips GCC 12 warnings.)
  const std::vector<std::string> forbidden = {"dynamic_cast", "typeid", "ThreadRank", "SingleRank",
                                              "make_single_rank_comm", "Nccl", "nccl", "SPEEDRUN_HAVE_NCCL",
                                              "comm/comm_factory.h", "comm/local_launcher.h", "comm/rendezvous.h"};
  int files = 0;
  for (const auto& entry : fs::directory_iterator(optim)) {
    const std::string text = read_file(entry.path());
    for (const std::string& word : forbidden)
      EXPECT_EQ(text.find(word), std::string::npos)
          << entry.path().filename() << " mentions '" << word << "': the optimizer must see only Comm";
    ++files;
  }
  EXPECT_GE(files, 2);
}

}  // namespace
}  // namespace gpt
