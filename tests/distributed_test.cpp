// Data-parallel training (train/distributed.h) with real processes: 2 ranks
// with half the batch each train exactly like 1 process with the whole
// batch, and a rank that dies makes the other fail promptly, naming it.
// The ranks are tests/dist_worker.cpp processes talking over loopback.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"

namespace nmt {
namespace {

using Proc = testing::Process;
using testing::slurp;
using testing::wait_for;

int next_port() {
  // Distinct per test process and call: a block of 10 ports per process, and
  // processes that run side by side have pids less than the number of
  // blocks apart. (With 20000 + pid % 20000 + 7 k, two test processes 7 pids
  // apart shared a port and joined each other's groups.) The blocks lie
  // below the kernel's ephemeral range (ip_local_port_range, 32768 and up by
  // default): a port in it can be taken by any outgoing connection of a test
  // running beside this one, which once made a rank fail to bind
  // ("Address already in use").
  static int port = [] {
    int low = 32768;
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    range >> low;
    const int blocks = low > 20010 ? (low - 20000) / 10 : 2000;
    return 20000 + static_cast<int>(::getpid() % blocks) * 10;
  }();
  return ++port;
}

Proc spawn_rank(const std::vector<std::string>& args, int rank, int world, int port,
                const std::string& log) {
  return testing::spawn(args,
                        {"WORLD_SIZE=" + std::to_string(world), "RANK=" + std::to_string(rank),
                         "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port), "NMT_DIST_TIMEOUT=20"},
                        log);
}

std::vector<at::Tensor> load(const std::string& path) {
  std::vector<at::Tensor> t;
  torch::load(t, path);
  return t;
}

const std::string kWorker = NMT_DIST_WORKER;

TEST(DataParallel, TwoRanksWithHalfTheBatchTrainExactlyLikeOneProcess) {
  const std::string dir = testing::temp_dir("data_parallel");
  Proc one = spawn_rank({kWorker, dir + "/one.pt", "20", "16"}, 0, 1, next_port(), dir + "/one.log");
  ASSERT_EQ(wait_for(one, std::chrono::seconds(300)), 0) << slurp(one.log);
  const int port = next_port();
  Proc r0 = spawn_rank({kWorker, dir + "/two.pt", "20", "16"}, 0, 2, port, dir + "/r0.log");
  Proc r1 = spawn_rank({kWorker, dir + "/two.pt", "20", "16"}, 1, 2, port, dir + "/r1.log");
  ASSERT_EQ(wait_for(r0, std::chrono::seconds(300)), 0) << slurp(r0.log);
  ASSERT_EQ(wait_for(r1, std::chrono::seconds(60)), 0) << slurp(r1.log);
  const auto a = load(dir + "/one.pt"), b = load(dir + "/two.pt");
  // float64: the two runs differ only in the order gradients are summed
  // (each rank's half, then the all-reduce), ~1e-16 relative per step.
  const double loss_diff = (a[0] - b[0]).abs().max().item<double>();
  const double weight_diff = (a[1] - b[1]).abs().max().item<double>();
  std::printf("max |loss difference| over 20 steps %.3g, max |weight difference| %.3g\n", loss_diff, weight_diff);
  EXPECT_LT(loss_diff, 1e-10);
  EXPECT_LT(weight_diff, 1e-10);
  EXPECT_LT(a[0][19].item<double>(), a[0][0].item<double>() - 0.5);  // it did learn
}

TEST(DataParallel, AKilledRankMakesTheOtherFailPromptlyNamingIt) {
  const std::string dir = testing::temp_dir("data_parallel_killed");
  const int port = next_port();
  Proc r0 = spawn_rank({kWorker, dir + "/dead.pt", "40", "16", "1", "6"}, 0, 2, port, dir + "/d0.log");
  Proc r1 = spawn_rank({kWorker, dir + "/dead.pt", "40", "16", "1", "6"}, 1, 2, port, dir + "/d1.log");
  const auto t0 = std::chrono::steady_clock::now();
  const int s1 = wait_for(r1, std::chrono::seconds(120));
  EXPECT_TRUE(WIFSIGNALED(s1) && WTERMSIG(s1) == SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const int s0 = wait_for(r0, std::chrono::seconds(40));  // NMT_DIST_TIMEOUT=20 s
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("rank 0 gave up %.1f s after rank 1 died (%.1f s into the run)\n", seconds,
              std::chrono::duration<double>(killed - t0).count());
  ASSERT_NE(s0, -1) << "rank 0 hung: " << slurp(r0.log);
  EXPECT_TRUE(WIFEXITED(s0) && WEXITSTATUS(s0) == 1);
  const std::string log = slurp(r0.log);
  EXPECT_NE(log.find("rank 1 at step 5"), std::string::npos) << log;
  EXPECT_NE(log.find("a rank died, hung or was cut off"), std::string::npos) << log;
  EXPECT_LE(seconds, 25.0);
}

}  // namespace
}  // namespace nmt
