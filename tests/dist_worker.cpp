// One data-parallel rank for tests/distributed_test.cpp: trains the tiny
// test model in float64, with dropout, on the first pairs of the toy
// validation split, and (rank 0) writes every step's loss and the final
// weights. The ranks are described by the variables nmt train reads
// (WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT, NMT_DIST_TIMEOUT).
//
// Usage: dist_worker OUT.pt STEPS GLOBAL_BATCH_SENTENCES [DIE_RANK DIE_STEP]
//   (rank DIE_RANK kills itself with SIGKILL at step DIE_STEP)
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <torch/serialize.h>

#include "data/batch_source.h"
#include "test_util.h"
#include "train/distributed.h"
#include "train/scheduler.h"
#include "train/train_step.h"
#include "util/device.h"

int main(int argc, char** argv) {
  using namespace nmt;
  if (argc != 4 && argc != 6) {
    std::fprintf(stderr, "usage: dist_worker OUT.pt STEPS GLOBAL_BATCH_SENTENCES [DIE_RANK DIE_STEP]\n");
    return 2;
  }
  try {
    const std::string out = argv[1];
    const int64_t steps = std::atoll(argv[2]), batch = std::atoll(argv[3]);
    const int64_t die_rank = argc == 6 ? std::atoll(argv[4]) : -1, die_step = argc == 6 ? std::atoll(argv[5]) : -1;
    const DistributedEnv env = distributed_env_from_environment();
    set_threads(1);

    const auto& paths = testing::toy_tokenizers();
    const Tokenizer zh(paths.src_model), en(paths.tgt_model);
    const ParallelCorpus data = head(load_parallel(testing::toy("valid.zh"), testing::toy("valid.en"), zh, en, 64), 96);
    Config cfg = testing::tiny_config();
    cfg.model.dropout = 0.1;  // the masks must not depend on the number of ranks either
    torch::manual_seed(0);
    Transformer model = build_model(cfg, zh.vocab_size(), en.vocab_size());
    model->to(torch::kDouble);
    model->train();
    TrainConfig tc;
    tc.lr = 3e-3, tc.warmup_steps = 4, tc.label_smoothing = 0.1, tc.clip_norm = 1.0, tc.seed = 5;
    std::shared_ptr<GradientSync> sync;
    if (env.active()) sync = std::make_shared<C10dGradientSync>(env, torch::kCPU);
    else sync = std::make_shared<LocalSync>();
    TrainStep step(model, tc, torch::kCPU, sync);
    step.broadcast_state();
    BatchSource source(data, 0, batch, tc.seed, env.rank, env.world_size);
    std::vector<double> losses;
    for (int64_t s = 1; s <= steps; ++s) {
      if (env.rank == die_rank && s == die_step) ::raise(SIGKILL);
      losses.push_back(step.run(source.next(), s, learning_rate(tc, s)).loss.item<double>());
    }
    if (env.rank == 0) {
      std::vector<at::Tensor> saved{torch::tensor(losses, torch::kDouble), step.optimizer().flat_param().clone()};
      torch::save(saved, out);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_worker: %s\n", e.what());
    return 1;
  }
}
