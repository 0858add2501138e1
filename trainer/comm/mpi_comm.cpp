#include "trainer/comm/mpi_comm.h"

#include <cstdlib>
#include <string>

#include "base/check.h"
#include "trainer/comm/rank_status.h"

#ifdef SPEEDRUN_HAVE_MPI
#include <mpi.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <limits>
#include <list>
#include <thread>
#include <vector>

#include "trainer/comm/rank_order_reduce.h"
#endif

namespace gpt {

#ifndef SPEEDRUN_HAVE_MPI

bool mpi_available() { return false; }

std::unique_ptr<Comm> make_mpi_comm(int expected_world_size, std::chrono::milliseconds) {
  GPT_FAIL("world size ", expected_world_size,
           " on CPU ranks needs MPI, but this build found none (install "
           "libopenmpi-dev, scripts/setup does)");
}

void mpi_broadcast_bytes(std::span<std::byte>, int, int) {
  GPT_FAIL("the NCCL id cannot travel through MPI: this build found no MPI (set SPEEDRUN_RENDEZVOUS_DIR instead)");
}

#else

namespace {

constexpr int kFailureTag = 17;
constexpr size_t kFailureNoteBytes = 1024;  // int32 exit code, then the reason, NUL-terminated

std::atomic<int> g_received_signal{0};
extern "C" void remember_signal(int sig) { g_received_signal.store(sig); }

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  GPT_FAIL("MPI error in ", call, ": ", std::string(text, static_cast<size_t>(length)));
}

// MPI_Init once per process; MPI_Finalize at exit unless the job was aborted.
void ensure_mpi_initialized() {
  int initialized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  if (initialized) return;
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
}

int world_size_of_mpi() {
  int world = 0;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world), "MPI_Comm_size");
  return world;
}

void check_world(int expected) {
  const int world = world_size_of_mpi();
  GPT_CHECK(world == expected, "MPI sees a world of ", world, " process(es) but the launch environment asks for ",
            expected, ": start CPU ranks with mpirun -np N, srun (with MPI support) or train_gpt --ranks N");
}

int mpi_count(size_t bytes, const char* op) {
  GPT_CHECK(bytes <= static_cast<size_t>(std::numeric_limits<int>::max()), op, ": ", bytes,
            " bytes per rank exceed MPI's int count");
  return static_cast<int>(bytes);
}

class MpiComm final : public Comm {
 public:
  explicit MpiComm(std::chrono::milliseconds timeout) : timeout_(timeout) {
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &data_), "MPI_Comm_dup");
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &notes_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(data_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(notes_, MPI_ERRORS_RETURN);
    check_mpi(MPI_Comm_rank(data_, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(data_, &world_), "MPI_Comm_size");
    // A signal from outside (the launcher stopping the job, Ctrl-C) ends the run through the failure path, so
    // that rank 0 still writes its summary.
    struct sigaction action {};
    action.sa_handler = remember_signal;
    sigemptyset(&action.sa_mask);
    for (int sig : {SIGTERM, SIGINT}) sigaction(sig, &action, nullptr);
  }
  // Communicators are not freed: after a failure a pending collective may still reference them, and MPI_Finalize
  // (at exit) releases everything.
  ~MpiComm() override = default;

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  void all_reduce(Tensor& t, ReduceOp op) override {
    GPT_CHECK(t.is_cpu(), "all_reduce: the MPI communicator handles CPU tensors only");
    const size_t bytes = t.nbytes();
    std::vector<uint8_t>& all = gather_all(t.raw(), bytes, t.numel(), t.dtype(), "all_reduce");
    std::vector<uint8_t> result(bytes);
    reduce_in_rank_order(t.dtype(), rank_buffers(all, bytes), 0, t.numel(), op, result.data());
    std::memcpy(t.raw(), result.data(), bytes);
    release_staging();
  }

  void reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) override {
    check_chunked(input, output, "reduce_scatter");
    check_agreement(input.numel(), input.dtype(), "reduce_scatter");
    // Rank q sends chunk r of its input to rank r: each rank then holds every rank's copy of its own chunk.
    const size_t chunk = output.nbytes();
    std::vector<uint8_t>& send = staging(input.nbytes());
    std::memcpy(send.data(), input.raw(), input.nbytes());
    std::vector<uint8_t>& received = staging(input.nbytes());
    const int count = mpi_count(chunk, "reduce_scatter");
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ialltoall(send.data(), count, MPI_BYTE, received.data(), count, MPI_BYTE, data_, &request),
              "MPI_Ialltoall");
    wait(request, "reduce_scatter");
    reduce_in_rank_order(input.dtype(), rank_buffers(received, chunk), 0, output.numel(), op, output.raw());
    release_staging();
  }

  void all_gather(const Tensor& input, Tensor& output) override {
    check_chunked(output, input, "all_gather");
    std::vector<uint8_t>& all = gather_all(input.raw(), input.nbytes(), input.numel(), input.dtype(), "all_gather");
    std::memcpy(output.raw(), all.data(), output.nbytes());
    release_staging();
  }

  void broadcast(Tensor& t, int root) override {
    GPT_CHECK(root >= 0 && root < world_, "broadcast: root ", root, " outside [0, ", world_, ")");
    GPT_CHECK(t.is_cpu(), "broadcast: the MPI communicator handles CPU tensors only");
    check_agreement(t.numel(), t.dtype(), "broadcast");
    std::vector<uint8_t>& buffer = staging(t.nbytes());
    std::memcpy(buffer.data(), t.raw(), t.nbytes());
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibcast(buffer.data(), mpi_count(t.nbytes(), "broadcast"), MPI_BYTE, root, data_, &request),
              "MPI_Ibcast");
    wait(request, "broadcast");
    std::memcpy(t.raw(), buffer.data(), t.nbytes());
    release_staging();
  }

  void barrier() override {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibarrier(data_, &request), "MPI_Ibarrier");
    wait(request, "barrier");
  }

  void notify_failure(int exit_code, const std::string& reason) override {
    if (notified_) return;
    notified_ = true;
    // The note buffers stay alive until exit: the sends may complete after this returns.
    std::vector<uint8_t>& note = abandoned_.emplace_back(kFailureNoteBytes, 0);
    const int32_t code = exit_code;
    std::memcpy(note.data(), &code, sizeof(code));
    std::memcpy(note.data() + sizeof(code), reason.data(), std::min(reason.size(), kFailureNoteBytes - 5));
    std::vector<MPI_Request> requests;
    for (int q = 0; q < world_; ++q) {
      if (q == rank_) continue;
      MPI_Request& r = requests.emplace_back(MPI_REQUEST_NULL);
      if (MPI_Isend(note.data(), static_cast<int>(note.size()), MPI_BYTE, q, kFailureTag, notes_, &r) != MPI_SUCCESS)
        r = MPI_REQUEST_NULL;
    }
    // Small messages go out eagerly; give the transport a moment to push them, never wait on a dead peer.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    int done = 0;
    while (!done && std::chrono::steady_clock::now() < deadline) {
      if (MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        break;
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  void end_job_after_failure(int exit_code) override {
    if (rank_ != 0) {
      // Rank 0 aborts the job once its summary is written; if it is gone or stuck, end the job from here.
      const auto deadline = std::chrono::steady_clock::now() + kAbortGrace;
      while (std::chrono::steady_clock::now() < deadline) {
        poll_notes_quietly();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }

 private:
  void check_chunked(const Tensor& whole, const Tensor& chunk, const char* op) const {
    GPT_CHECK(whole.dtype() == chunk.dtype(), op, ": dtypes differ (", whole.describe(), " vs ", chunk.describe(), ")");
    GPT_CHECK(whole.numel() == chunk.numel() * world_, op, ": the whole tensor must hold world_size (", world_,
              ") × the chunk's elements, got ", whole.describe(), " and ", chunk.describe());
    GPT_CHECK(whole.is_cpu() && chunk.is_cpu(), op, ": the MPI communicator handles CPU tensors only");
  }

  // Every rank must call the same collective with the same count and dtype; a mismatch would otherwise corrupt
  // memory or hang, so the ranks compare (count, dtype, op) first and all of them throw together.
  void check_agreement(int64_t count, DType dtype, const char* op) {
    const int64_t mine[3] = {count, static_cast<int64_t>(dtype), static_cast<int64_t>(std::hash<std::string>{}(op))};
    std::vector<uint8_t>& send = staging(sizeof(mine));
    std::memcpy(send.data(), mine, sizeof(mine));
    std::vector<uint8_t>& received = staging(sizeof(mine) * static_cast<size_t>(world_));
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallgather(send.data(), 3, MPI_INT64_T, received.data(), 3, MPI_INT64_T, data_, &request),
              "MPI_Iallgather");
    wait(request, op);
    std::vector<int64_t> all(static_cast<size_t>(3 * world_));
    std::memcpy(all.data(), received.data(), received.size());
    release_staging();
    for (int q = 0; q < world_; ++q) {
      const int64_t* theirs = all.data() + 3 * q;
      GPT_CHECK(theirs[0] == count && theirs[1] == mine[1] && theirs[2] == mine[2], op, ": rank ", q,
                " called a different collective or count/dtype (", count, " ", dtype_name(dtype), " here, ", theirs[0],
                " ", dtype_name(static_cast<DType>(theirs[1])), " there)");
    }
  }

  // Every rank's `bytes` bytes, in rank order, in a staging buffer (released by the caller).
  std::vector<uint8_t>& gather_all(const void* data, size_t bytes, int64_t count, DType dtype, const char* op) {
    check_agreement(count, dtype, op);
    std::vector<uint8_t>& send = staging(bytes);
    std::memcpy(send.data(), data, bytes);
    std::vector<uint8_t>& all = staging(bytes * static_cast<size_t>(world_));
    const int n = mpi_count(bytes, op);
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallgather(send.data(), n, MPI_BYTE, all.data(), n, MPI_BYTE, data_, &request), "MPI_Iallgather");
    wait(request, op);
    return all;
  }

  std::vector<const void*> rank_buffers(const std::vector<uint8_t>& all, size_t bytes) const {
    std::vector<const void*> out;
    for (int q = 0; q < world_; ++q) out.push_back(all.data() + static_cast<size_t>(q) * bytes);
    return out;
  }

  // MPI may still write into the buffers of a collective that was left by an exception: they are owned here and
  // kept (abandoned) instead of freed when that happens.
  std::vector<uint8_t>& staging(size_t bytes) { return staging_.emplace_back(bytes); }
  void release_staging() { staging_.clear(); }

  void wait(MPI_Request& request, const char* op) {
    const auto start = std::chrono::steady_clock::now();
    for (int polls = 0;; ++polls) {
      int done = 0;
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), op);
      if (done) return;
      try {
        throw_on_note_or_signal();
        const auto waited = std::chrono::steady_clock::now() - start;
        GPT_CHECK(waited < timeout_, op, " waited ", std::chrono::duration_cast<std::chrono::seconds>(waited).count(),
                  " s for the other ranks (watchdog timeout ", kCollectiveTimeoutVar, "=",
                  std::chrono::duration<double>(timeout_).count(), " s)");
      } catch (...) {
        abandon_staging();
        throw;
      }
      if (polls > 200) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  void abandon_staging() {
    for (auto& buffer : staging_) abandoned_.push_back(std::move(buffer));
    staging_.clear();
  }

  void throw_on_note_or_signal() {
    int flag = 0;
    MPI_Status status{};
    if (MPI_Iprobe(MPI_ANY_SOURCE, kFailureTag, notes_, &flag, &status) == MPI_SUCCESS && flag) {
      std::vector<char> note(kFailureNoteBytes + 1, '\0');
      MPI_Recv(note.data(), static_cast<int>(kFailureNoteBytes), MPI_BYTE, status.MPI_SOURCE, kFailureTag, notes_,
               MPI_STATUS_IGNORE);
      int32_t code = 1;
      std::memcpy(&code, note.data(), sizeof(code));
      throw PeerFailure(status.MPI_SOURCE, code, std::string(note.data() + sizeof(code)));
    }
    if (const int sig = g_received_signal.load()) {
      GPT_FAIL("interrupted by ", signal_name(sig), " (signal ", sig, ")");
    }
  }

  // While waiting to be aborted: drain notes so that senders' buffers complete.
  void poll_notes_quietly() {
    try {
      throw_on_note_or_signal();
    } catch (const std::exception&) {
    }
  }

  MPI_Comm data_ = MPI_COMM_NULL;
  MPI_Comm notes_ = MPI_COMM_NULL;  // failure notes, apart from the collectives' traffic
  int rank_ = 0;
  int world_ = 1;
  std::chrono::milliseconds timeout_;
  bool notified_ = false;
  std::list<std::vector<uint8_t>> staging_;
  std::list<std::vector<uint8_t>> abandoned_;
};

}  // namespace

bool mpi_available() { return true; }

std::unique_ptr<Comm> make_mpi_comm(int expected_world_size, std::chrono::milliseconds collective_timeout) {
  ensure_mpi_initialized();
  check_world(expected_world_size);
  return std::make_unique<MpiComm>(collective_timeout);
}

void mpi_broadcast_bytes(std::span<std::byte> bytes, int root, int expected_world_size) {
  ensure_mpi_initialized();
  check_world(expected_world_size);
  check_mpi(MPI_Bcast(bytes.data(), mpi_count(bytes.size(), "broadcast"), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
}

#endif  // SPEEDRUN_HAVE_MPI

}  // namespace gpt
