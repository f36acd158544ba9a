#include "cli/options.h"
#include "cli/check_causality.h"

#include <cstdio>
#include <filesystem>
#include <random>

#include "checkpoint/checkpoint.h"
#include "model/causality.h"
#include "data/dataset.h"
#include "util/device.h"
#include "util/errors.h"

namespace nmt {

namespace cli {

// `nmt check-causality`: its options, filled into `args` when it is the one given.
CLI::App* add_check_causality_command(CLI::App& app, CausalityArgs& args) {
  auto* cmd =
      app.add_subcommand("check-causality", "show that decoder outputs ignore future target tokens (exit 0 if so)");
  cmd->add_option("--checkpoint", args.checkpoint, "checkpoint folder")->required();
  cmd->add_option("--sentences", args.sentences, "validation sentences to test")->check(int_range(1, 100000));
  cmd->add_flag("--disable-causal-mask", args.disable_causal_mask,
                "drop the decoder's causal mask, to see the check fail");
  add_runtime_flags(cmd, args.runtime);
  return cmd;
}

int run_check_causality(const CausalityArgs& args) {
  c10::Device device(c10::kCPU);
  if (args.runtime.device) device = resolve_device(*args.runtime.device, "--device");
  LoadedCheckpoint ck = load_checkpoint(args.checkpoint, device);
  if (args.runtime.attention)
    ck.model->set_attention_backend(*args.runtime.attention);
  ck.model->set_disable_causal_mask(args.disable_causal_mask);
  set_threads(args.runtime.threads.value_or(ck.cfg.train.threads));
  torch::manual_seed(0);

  // Sample sentences from the validation split the model was trained with,
  // or random token sequences when it is not at hand.
  std::vector<std::vector<int64_t>> src, tgt;
  const auto& d = ck.cfg.data;
  if (std::filesystem::exists(d.valid_src) && std::filesystem::exists(d.valid_tgt)) {
    const auto corpus = load_parallel(d.valid_src, d.valid_tgt, *ck.src_tok, *ck.tgt_tok, 0,
                                      ck.cfg.tokenizer.protect_placeholders);
    for (int64_t i = 0; i < args.sentences && i < static_cast<int64_t>(corpus.src.size()); ++i)
      src.push_back(corpus.src[i]), tgt.push_back(corpus.tgt[i]);
  } else {
    std::mt19937_64 rng(1);
    for (int64_t i = 0; i < args.sentences; ++i) {
      std::vector<int64_t> s(5 + i % 7), t(6 + i % 9);
      for (auto& x : s) x = kEndId + 1 + rng() % (ck.src_tok->vocab_size() - kEndId - 1);
      for (auto& x : t) x = kEndId + 1 + rng() % (ck.tgt_tok->vocab_size() - kEndId - 1);
      src.push_back(s), tgt.push_back(t);
    }
  }
  spdlog::info("check-causality: {} sentences, attention '{}'{}", src.size(),
               ops::backend_name(ck.model->attention_backend()),
               args.disable_causal_mask ? ", causal mask DISABLED" : "");
  const CausalityReport report = check_causality(ck.model, src, tgt, device);
  std::printf("%8s  %22s  %22s\n", "position", "max |Δ| future tokens", "max |∂/∂ future|");
  for (const auto& r : report.rows)
    std::printf("%8lld  %22.3e  %22.3e\n", static_cast<long long>(r.position), r.max_delta,
                r.max_future_grad);
  std::printf("verdict: %s\n", report.causal ? "CAUSAL (future tokens have no influence)"
                                             : "LEAK (future tokens influence earlier outputs)");
  return report.causal ? kExitOk : kExitRuntime;
}

}  // namespace cli
}  // namespace nmt
