// The communicator's collectives against closed forms. Run under
//   mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 loom_dist_tests
// (the "mpi" back end) and on its own (world size 1, the "local" back end): every expected
// value below is written for any world size. Rank r contributes values such as r + 1 + i, so
// the sum over ranks is known: size * (1 + i) + size * (size - 1) / 2.
//
// `loom_dist_tests --fault=throw|kill|stall` is the fault drill of run_fault.sh: rank 1 raises,
// dies or stops while rank 0 waits in an allreduce.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/dist/communicator.h"
#include "runtime/dtype_traits.h"

namespace loom::dist {
namespace {

Communicator& comm() { return world(); }
double N() { return comm().size(); }
int R() { return comm().rank(); }
// Sum over ranks r of (r + base).
double rank_sum(double base) { return N() * base + N() * (N() - 1) / 2; }

TEST(Dist, BackendMatchesLauncher) {
  const LaunchEnv env = launch_env();
  EXPECT_EQ(comm().size(), env.size);
  EXPECT_EQ(comm().rank(), env.rank);
  EXPECT_STREQ(comm().backend(), env.source.empty() ? "local" : "mpi");
}

TEST(Dist, AllreduceSumFloat32InPlace) {
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(R() + 1 + i);
  comm().allreduce(x.data(), x.data(), x.size(), DType::kFloat32);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], rank_sum(1.0 + i)) << i;
}

TEST(Dist, AllreduceOutOfPlaceLeavesSend) {
  std::vector<double> send(17), recv(17, -1);
  for (size_t i = 0; i < send.size(); ++i) send[i] = R() * 10.0 + i;
  comm().allreduce(send.data(), recv.data(), send.size(), DType::kFloat64);
  for (size_t i = 0; i < send.size(); ++i) {
    ASSERT_EQ(send[i], R() * 10.0 + i);
    ASSERT_EQ(recv[i], 10.0 * N() * (N() - 1) / 2 + N() * i);
  }
}

TEST(Dist, AllreduceAverageAndPrescaledSum) {
  std::vector<double> avg(64), pre(64), both(64);
  for (size_t i = 0; i < avg.size(); ++i) avg[i] = pre[i] = both[i] = R() + 1.0 + i;
  comm().allreduce(avg.data(), avg.data(), avg.size(), DType::kFloat64, ReduceOp::kAverage);
  comm().allreduce(pre.data(), pre.data(), pre.size(), DType::kFloat64, ReduceOp::kSum, 0.25);
  // Gradient accumulation over k=3 micro-steps and N ranks: one scale 1/(3N).
  comm().allreduce(both.data(), both.data(), both.size(), DType::kFloat64, ReduceOp::kAverage,
                   1.0 / 3);
  for (size_t i = 0; i < avg.size(); ++i) {
    ASSERT_DOUBLE_EQ(avg[i], rank_sum(1.0 + i) / N());
    ASSERT_DOUBLE_EQ(pre[i], rank_sum(1.0 + i) * 0.25);
    ASSERT_DOUBLE_EQ(both[i], rank_sum(1.0 + i) / (3 * N()));
  }
}

TEST(Dist, AllreduceFloat16SumsInFloat) {
  // Integers below 2048 are exact in binary16, so the sum is exact; 0.5 * sum is too.
  std::vector<uint16_t> x(300), y(300);
  for (size_t i = 0; i < x.size(); ++i) x[i] = y[i] = float_to_half_bits(float(R() + 1 + i));
  comm().allreduce(x.data(), x.data(), x.size(), DType::kFloat16);
  comm().allreduce(y.data(), y.data(), y.size(), DType::kFloat16, ReduceOp::kSum, 0.5);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(half_bits_to_float(x[i]), rank_sum(1.0 + i)) << i;
    ASSERT_EQ(half_bits_to_float(y[i]), rank_sum(1.0 + i) * 0.5) << i;
  }
}

TEST(Dist, AllreduceIntegers) {
  std::vector<int32_t> a(10);
  std::vector<int64_t> b(10);
  for (int i = 0; i < 10; ++i) {
    a[i] = R() + 1 + i;
    b[i] = (int64_t(1) << 40) * (R() + 1) + i;
  }
  comm().allreduce(a.data(), a.data(), a.size(), DType::kInt32);
  comm().allreduce(b.data(), b.data(), b.size(), DType::kInt64);
  const int64_t n = comm().size();
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(a[i], rank_sum(1.0 + i));
    ASSERT_EQ(b[i], (int64_t(1) << 40) * (n * (n + 1) / 2) + n * i);
  }
}

TEST(Dist, RejectsUndefinedReductions) {
  int32_t v = 1;
  uint8_t u = 1;
  EXPECT_THROW(comm().allreduce(&v, &v, 1, DType::kInt32, ReduceOp::kAverage), DistError);
  EXPECT_THROW(comm().allreduce(&u, &u, 1, DType::kUint8), DistError);
  EXPECT_THROW(comm().broadcast(&v, 1, DType::kInt32, comm().size()), DistError);
  try {
    comm().allreduce(&v, &v, 1, DType::kInt32, ReduceOp::kSum, 0.5);
    FAIL() << "a scaled int32 sum was accepted";
  } catch (const DistError& e) {
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
}

TEST(Dist, ReduceScatterNcclLayouts) {
  const size_t count = 5;
  const int n = comm().size();
  std::vector<float> buf(n * count), out(count);
  for (size_t j = 0; j < buf.size(); ++j) buf[j] = float(R() + j);
  std::vector<float> copy = buf;
  // Out of place: rank r gets the sum of chunk r.
  comm().reduce_scatter(copy.data(), out.data(), count, DType::kFloat32, ReduceOp::kAverage);
  // In place: the result lands at offset rank * count of the same buffer.
  comm().reduce_scatter(buf.data(), buf.data() + R() * count, count, DType::kFloat32);
  for (size_t i = 0; i < count; ++i) {
    const double j = R() * count + i;  // global index of this rank's element i
    ASSERT_EQ(buf[R() * count + i], rank_sum(j));
    ASSERT_FLOAT_EQ(out[i], rank_sum(j) / n);
  }
}

TEST(Dist, AllGatherNcclLayouts) {
  const size_t count = 3;
  const int n = comm().size();
  std::vector<int32_t> mine(count), out(n * count, -1), inplace(n * count, -1);
  for (size_t i = 0; i < count; ++i) mine[i] = inplace[R() * count + i] = 100 * R() + int(i);
  comm().all_gather(mine.data(), out.data(), count, DType::kInt32);
  comm().all_gather(inplace.data() + R() * count, inplace.data(), count, DType::kInt32);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[r * count + i], 100 * r + int(i));
      ASSERT_EQ(inplace[r * count + i], 100 * r + int(i));
    }
}

TEST(Dist, BroadcastFromLastRank) {
  const int root = comm().size() - 1;
  std::vector<double> x(7);
  for (size_t i = 0; i < x.size(); ++i) x[i] = R() == root ? 3.5 * i : -1.0;
  comm().broadcast(x.data(), x.size(), DType::kFloat64, root);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], 3.5 * i);
}

TEST(Dist, NonBlockingOverlapsWork) {
  // Two allreduces in flight while this rank computes; completion is driven by test().
  std::vector<float> a(1 << 20), b(1 << 16);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(R() + (i % 100));
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(2 * R());
  auto ra = comm().iallreduce(a.data(), a.data(), a.size(), DType::kFloat32);
  auto rb = comm().iallreduce(b.data(), b.data(), b.size(), DType::kFloat32, ReduceOp::kAverage);
  double work = 0;
  for (int step = 0; step < 200; ++step) {
    for (int k = 0; k < 2000; ++k) work += std::sqrt(double(k + step));
    ra->test();
  }
  rb->wait();
  ra->wait();
  EXPECT_GT(work, 0);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], rank_sum(double(i % 100))) << i;
  for (size_t i = 0; i < b.size(); ++i) ASSERT_FLOAT_EQ(b[i], N() - 1) << i;
}

TEST(Dist, BigBufferResNet18Gradients) {
  // ResNet-18's 11.7 M parameters as one flat float32 bucket (47 MB).
  const size_t n = 11'700'000;
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = float(R() + int(i % 1000));
  comm().allreduce(g.data(), g.data(), n, DType::kFloat32, ReduceOp::kAverage);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(g[i], float(rank_sum(double(i % 1000)) / N())) << i;
}

TEST(Dist, StatsCountEveryCollective) {
  comm().reset_stats();
  float x[4] = {1, 2, 3, 4};
  std::vector<float> all(4 * comm().size());
  comm().allreduce(x, x, 4, DType::kFloat32);
  comm().allreduce(x, x, 4, DType::kFloat32);
  comm().iallreduce(x, x, 4, DType::kFloat32)->wait();
  comm().all_gather(x, all.data(), 4, DType::kFloat32);
  comm().broadcast(x, 4, DType::kFloat32);
  comm().barrier();
  const CommStats& s = comm().stats();
  EXPECT_EQ(s.allreduce, 3u);
  EXPECT_EQ(s.all_gather, 1u);
  EXPECT_EQ(s.broadcast, 1u);
  EXPECT_EQ(s.barrier, 1u);
  EXPECT_EQ(s.reduce_scatter, 0u);
  EXPECT_EQ(s.collectives(), 6u);
  EXPECT_EQ(s.bytes, 5u * 16u);
}

TEST(Dist, CheckSameNamesTheDifferingRank) {
  const std::string plan = "bucket plan: 3 buckets of 1 MB, 25 MB, 7 MB";
  comm().check_same("bucket plan", plan.data(), plan.size());
  if (comm().size() == 1) return;
  const std::string mine = R() == 1 ? plan + " (rank 1 differs)" : plan;
  try {
    comm().check_same("bucket plan", mine.data(), mine.size());
    FAIL() << "different bytes passed check_same";
  } catch (const DistError& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) 1 differ from rank 0"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("bucket plan"), std::string::npos) << e.what();
  }
}

TEST(Dist, LocalBackendIsIdentityWithoutLauncher) {
  auto local = make_backend("local");
  EXPECT_EQ(local->size(), 1);
  EXPECT_EQ(local->rank(), 0);
  double x[3] = {1, 2, 3}, y[3] = {0, 0, 0};
  local->allreduce(x, y, 3, DType::kFloat64, ReduceOp::kAverage, 2.0);
  EXPECT_EQ(y[0], 2.0);
  EXPECT_EQ(y[2], 6.0);
  local->all_gather(x, y, 3, DType::kFloat64);
  EXPECT_EQ(y[1], 2.0);
  local->barrier();
  EXPECT_EQ(local->stats().collectives(), 3u);
  EXPECT_THROW(make_backend("gloo"), DistError);
}

// rank 1 raises / dies / stops; rank 0 waits in an allreduce and must not hang.
int fault_drill(const std::string& kind) {
  Communicator& c = init();
  float x[4] = {0, 0, 0, 0};
  c.allreduce(x, x, 4, DType::kFloat32);  // both ranks are up
  if (c.rank() == 1) {
    if (kind == "throw") throw std::runtime_error("rank 1 failed on purpose (fault drill)");
    if (kind == "kill") std::raise(SIGKILL);
    if (kind == "stall") std::this_thread::sleep_for(std::chrono::seconds(120));
  }
  c.allreduce(x, x, 4, DType::kFloat32);  // rank 0 waits here for a peer that never comes
  std::fprintf(stderr, "fault drill: rank %d was not stopped\n", c.rank());
  return 3;
}

// The report of ranks other than 0: only their failures, prefixed with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace loom::dist

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--fault=", 8) == 0) return loom::dist::fault_drill(argv[i] + 8);
  ::testing::InitGoogleTest(&argc, argv);
  loom::dist::init();
  // Only rank 0 prints the gtest report; a failure on any rank still fails the job.
  if (loom::dist::world().rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new loom::dist::RankFailurePrinter(loom::dist::world().rank()));
  }
  const int rc = RUN_ALL_TESTS();
  loom::dist::finalize();
  return rc;
}
