#include "cli/commands.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "data/dataset.h"
#include "decode/translator.h"
#include "ops/attention/attention.h"
#include "train/trainer.h"
#include "util/device.h"
#include "util/errors.h"

namespace nmt::cli {

namespace {

// Flags win over the config, and are validated like config values.
void apply_runtime(Config& cfg, const RuntimeFlags& flags) {
  if (flags.attention) apply_override(cfg, "attention.backend=" + *flags.attention);
  if (flags.device) apply_override(cfg, "attention.device=" + *flags.device);
  if (flags.threads) apply_override(cfg, "train.threads=" + std::to_string(*flags.threads));
}

struct Session {
  LoadedCheckpoint ck;
  c10::Device device{c10::kCPU};
};

Session open_checkpoint(const std::string& dir, const RuntimeFlags& flags) {
  Session s;
  // The device flag is checked before the (slower) checkpoint load.
  if (flags.device) s.device = resolve_device(*flags.device, "--device");
  const ops::AttentionBackend backend =
      flags.attention ? ops::parse_backend(*flags.attention) : ops::AttentionBackend::kTorch;
  s.ck = load_checkpoint(dir, s.device);
  if (!flags.device) {
    s.device = resolve_device(s.ck.cfg.attention.device, s.ck.dir + "/config.yaml: attention.device");
    s.ck.model->to(s.device);
  }
  apply_runtime(s.ck.cfg, flags);
  s.ck.model->set_attention_backend(flags.attention ? backend
                                                    : ops::parse_backend(s.ck.cfg.attention.backend));
  const int64_t threads = set_threads(s.ck.cfg.train.threads);
  spdlog::info("checkpoint {} (step {}), device {}, {} threads, attention '{}'", s.ck.dir,
               s.ck.state.step, s.device.str(), threads,
               ops::backend_name(s.ck.model->attention_backend()));
  return s;
}

}  // namespace

int run_train(const TrainArgs& args) {
  Config cfg = load_config(args.config);
  for (const auto& s : args.sets) apply_override(cfg, s);
  apply_runtime(cfg, args.runtime);
  spdlog::info("config {} resolved:\n{}", args.config, to_yaml(cfg));
  train(cfg);
  return kExitOk;
}

int run_translate(const TranslateArgs& args) {
  Session s = open_checkpoint(args.checkpoint, args.runtime);
  std::vector<std::string> lines;
  if (args.input.empty() || args.input == "-") {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(line);
    }
  } else {
    lines = read_lines(args.input);
  }
  const auto& dc = s.ck.cfg.decode;
  const auto out = translate_lines(s.ck.model, *s.ck.src_tok, *s.ck.tgt_tok, lines,
                                   args.batch_size.value_or(dc.batch_size),
                                   args.max_len.value_or(dc.max_len), s.device);
  for (const auto& l : out) std::cout << l << '\n';
  std::cout.flush();
  return kExitOk;
}

int run_evaluate(const EvaluateArgs& args) {
  Session s = open_checkpoint(args.checkpoint, args.runtime);
  const auto src = read_lines(args.src);
  const auto ref = read_lines(args.ref);
  if (src.size() != ref.size())
    throw InputError(args.ref + ": has " + std::to_string(ref.size()) + " lines but " + args.src +
                     " has " + std::to_string(src.size()));
  const auto& dc = s.ck.cfg.decode;
  const auto hyp = translate_lines(s.ck.model, *s.ck.src_tok, *s.ck.tgt_tok, src, dc.batch_size,
                                   dc.max_len, s.device);
  if (!args.output.empty()) {
    std::ofstream out(args.output);
    if (!out) throw InputError(args.output + ": cannot write");
    for (const auto& h : hyp) out << h << '\n';
  }
  std::printf("sentences %zu\nexact_match %.2f%%\n", src.size(), 100.0 * exact_match(hyp, ref));
  return kExitOk;
}

}  // namespace nmt::cli
