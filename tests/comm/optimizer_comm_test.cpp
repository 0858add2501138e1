// The sharded optimizer is one code path for every communicator (thread ranks in tests, NCCL on GPUs): it talks
// only to the Comm interface. Shown twice: (1) through a third Comm type the optimizer has never heard of, which
// forwards to thread ranks and records every call, the parameters come out bitwise the same and every rank issues
// the same collectives in the same order with the same counts (what NCCL requires); (2) no source file of
// trainer/optim names a communicator implementation or inspects the dynamic type. The asynchronous schedule:
// (3) a communicator that runs each collective only when it is waited for gives bitwise the same parameters (the
// optimizer waits before it reads), every reduction of a step is issued before its first gather, and reductions
// the backward reports final are issued at the report, in the same order on every rank.
#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <functional>
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
  PendingCollective all_reduce_async(Tensor& t, ReduceOp op) override {
    log("all_reduce_async", t);
    return inner_.all_reduce_async(t, op);
  }
  PendingCollective reduce_scatter_async(const Tensor& input, Tensor& output, ReduceOp op) override {
    log("reduce_scatter_async", input);
    return inner_.reduce_scatter_async(input, output, op);
  }
  PendingCollective all_gather_async(const Tensor& input, Tensor& output) override {
    log("all_gather_async", output);
    return inner_.all_gather_async(input, output);
  }
  void mark(const std::string& what) { calls.push_back({what, 0, DType::f32}); }
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

// Every parameter of kSpecs with seeded values; embed starts as lm_headᵀ (tied).
void add_initial_parameters(ParameterSet& ps) {
  for (size_t i = 0; i < kSpecs.size(); ++i) {
    ps.add(kSpecs[i].name, random_values(kSpecs[i].shape, kSpecs[i].dtype, 100 + i), kSpecs[i].kind);
  }
  transpose(ps.get("lm_head").value, ps.get("embed").value);
}

// Step s's gradients on rank r: seeded by step, parameter and rank, so ranks differ and reductions matter.
void set_rank_gradients(ParameterSet& ps, int64_t s, int r) {
  for (size_t i = 0; i < kSpecs.size(); ++i) {
    Parameter& p = ps.get(kSpecs[i].name);
    p.grad.copy_from(random_values(p.grad.shape(), p.grad.dtype(),
                                   1000 * static_cast<uint64_t>(s) + 10 * i + static_cast<uint64_t>(r)));
  }
}

// Runs `steps` optimizer steps on W thread ranks (rank-dependent gradients), optionally through RecordingComm.
std::vector<RankResult> run(int world, bool recorded, int64_t steps) {
  std::vector<RankResult> results(static_cast<size_t>(world));
  test::run_thread_ranks(world, [&](int r, Comm& thread_comm) {
    RecordingComm recorder(thread_comm);
    Comm& comm = recorded ? static_cast<Comm&>(recorder) : thread_comm;
    ParameterSet ps;
    add_initial_parameters(ps);
    Optimizer opt(ps, tiny(), comm);
    const Schedule sched(tiny());
    for (int64_t s = 0; s < steps; ++s) {
      set_rank_gradients(ps, s, r);
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
      if (c.op.starts_with("reduce_scatter") || c.op.starts_with("all_gather")) {
        EXPECT_EQ(c.numel % world, 0) << c.op;
      }
    }
  }
}

// Runs a collective only when its handle is waited for (or destroyed): an optimizer that read a reduction's output
// before waiting, or returned before waiting for a gather, would see stale data. Every rank waits in the same
// order, so the thread ranks still pair up.
class DeferredComm final : public Comm {
 public:
  explicit DeferredComm(Comm& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  void all_reduce(Tensor& t, ReduceOp op) override { inner_.all_reduce(t, op); }
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override { inner_.reduce_scatter(in, out, op); }
  void all_gather(const Tensor& in, Tensor& out) override { inner_.all_gather(in, out); }
  void broadcast(Tensor& t, int root) override { inner_.broadcast(t, root); }
  void barrier() override { inner_.barrier(); }
  PendingCollective all_reduce_async(Tensor& t, ReduceOp op) override {
    return later([this, t, op]() mutable { inner_.all_reduce(t, op); });
  }
  PendingCollective reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op) override {
    return later([this, in, out, op]() mutable { inner_.reduce_scatter(in, out, op); });
  }
  PendingCollective all_gather_async(const Tensor& in, Tensor& out) override {
    return later([this, in, out]() mutable { inner_.all_gather(in, out); });
  }

 private:
  class Later final : public PendingCollective::Completion {
   public:
    explicit Later(std::function<void()> run) : run_(std::move(run)) {}
    void wait() override { run_(); }

   private:
    std::function<void()> run_;
  };
  static PendingCollective later(std::function<void()> run) {
    return PendingCollective(std::make_unique<Later>(std::move(run)));
  }
  Comm& inner_;
};

// Like run(), through DeferredComm; `report` (if set) is called between begin_step and step with the step index.
std::vector<RankResult> run_with(int world, int64_t steps, bool deferred,
                                 const std::function<void(Optimizer&, int64_t)>& report) {
  std::vector<RankResult> results(static_cast<size_t>(world));
  test::run_thread_ranks(world, [&](int r, Comm& thread_comm) {
    DeferredComm deferring(thread_comm);
    RecordingComm recorder(deferred ? static_cast<Comm&>(deferring) : thread_comm);
    ParameterSet ps;
    add_initial_parameters(ps);
    Optimizer opt(ps, tiny(), recorder);
    const Schedule sched(tiny());
    for (int64_t s = 0; s < steps; ++s) {
      set_rank_gradients(ps, s, r);
      recorder.mark("begin " + std::to_string(s));
      opt.begin_step(sched.at(s));
      if (report) report(opt, s);
      recorder.mark("step " + std::to_string(s));
      opt.step(sched.at(s));
    }
    for (const Parameter& p : ps.all()) results[static_cast<size_t>(r)].values.push_back(p.value.clone());
    results[static_cast<size_t>(r)].calls = recorder.calls;
  });
  return results;
}

void expect_same_values(const std::vector<RankResult>& got, const std::vector<RankResult>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].values.size(), want[r].values.size());
    for (size_t i = 0; i < got[r].values.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(got[r].values[i], want[r].values[i]))
          << what << ": W=" << got.size() << " rank " << r << " parameter " << kSpecs[i].name;
    }
  }
}

TEST(OptimizerComm, CollectivesThatLandOnlyAtTheWaitGiveTheSameParameters) {
  for (int world : {1, 2, 4}) {
    const auto direct = run(world, false, 4);
    expect_same_values(run_with(world, 4, /*deferred=*/true, {}), direct, "deferred");
  }
}

TEST(OptimizerComm, EveryReductionOfAStepIsIssuedBeforeItsFirstGather) {
  const auto results = run_with(2, 4, false, {});
  bool gathered = false;
  int reductions = 0;
  for (const CallRecord& c : results[0].calls) {
    if (c.op.starts_with("step")) gathered = false;
    if (c.op == "all_gather_async") gathered = true;
    if (c.op == "reduce_scatter_async" || c.op == "all_reduce_async") {
      EXPECT_FALSE(gathered) << "a reduction issued after a gather of the same step";
      ++reductions;
    }
    EXPECT_NE(c.op, "reduce_scatter") << "a blocking reduction in the step";
    EXPECT_NE(c.op, "all_reduce") << "a blocking reduction in the step";
  }
  EXPECT_EQ(reductions, 4 + 3 * 2);  // qk_bank every step; lm_head (embed folded), value_embeds, scalars at 1, 3
}

TEST(OptimizerComm, ReductionsReportedFinalAreIssuedAtTheReportInOneOrder) {
  // Reports as a backward would make them: lm_head first (it waits for embed while tied), then the bank, then embed
  // with the input stage; on bank-only steps the Adam names are noted and nothing more.
  auto report = [](Optimizer& opt, int64_t) {
    opt.gradients_final({"lm_head"});
    opt.gradients_final({"qk_bank", "scalars"});
    opt.gradients_final({"embed"});
  };
  for (int world : {1, 2, 4}) {
    const auto direct = run(world, false, 4);
    const auto reported = run_with(world, 4, false, report);
    expect_same_values(reported, direct, "reported");
    expect_same_values(run_with(world, 4, true, report), direct, "reported, deferred");
    for (int r = 1; r < world; ++r) {
      EXPECT_EQ(reported[static_cast<size_t>(r)].calls, reported[0].calls) << "W=" << world << " rank " << r;
    }
    // What each step issued between begin_step and step: the reported reductions, in report order.
    std::vector<std::vector<CallRecord>> early;
    bool open = false;
    for (const CallRecord& c : reported[0].calls) {
      if (c.op.starts_with("begin")) {
        early.emplace_back();
        open = true;
      } else if (c.op.starts_with("step")) {
        open = false;
      } else if (open) {
        early.back().push_back(c);
      }
    }
    const CallRecord bank{"reduce_scatter_async", 8 * 4 * 12, DType::bf16};
    const CallRecord scalars{"all_reduce_async", 8, DType::f32};
    const CallRecord lm_head{"reduce_scatter_async", 8 * 32, DType::bf16};
    const std::vector<std::vector<CallRecord>> want = {
        {bank}, {bank, scalars, lm_head}, {bank}, {bank, scalars, lm_head}};
    EXPECT_EQ(early, want) << "W=" << world;
  }
}

TEST(OptimizerComm, StepProtocolErrorsAreNamed) {
  ParameterSet ps;
  ps.add("scalars", random_values({8}, DType::f32, 1), ParamKind::adam);
  auto comm = make_single_rank_comm();
  Optimizer opt(ps, tiny(), *comm);
  const Schedule sched(tiny());
  EXPECT_THROW(opt.gradients_final({"scalars"}), Error);  // no open step
  opt.begin_step(sched.at(1));
  EXPECT_THROW(opt.gradients_final({"nonesuch"}), Error);
  EXPECT_THROW(opt.begin_step(sched.at(2)), Error);
  EXPECT_THROW(opt.step(sched.at(2)), Error);
  opt.abandon_step();
  EXPECT_NO_THROW(opt.step(sched.at(1)));
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
  const std::vector<std::string> forbidden = {"dynamic_cast",
                                              "typeid",
                                              "ThreadRank",
                                              "SingleRank",
                                              "make_single_rank_comm",
                                              "Nccl",
                                              "nccl",
                                              "SPEEDRUN_HAVE_NCCL",
                                              "comm/comm_factory.h",
                                              "comm/local_launcher.h",
                                              "comm/rendezvous.h"};
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
