// `nmt`: train, translate and evaluate a zh→en Transformer.
#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "bench/src/bench_attention.h"
#include "cli/build_info.h"
#include "cli/check_causality.h"
#include "cli/commands.h"
#include "cli/launcher.h"
#include "ops/attention/backend.h"
#include "util/errors.h"
#include "util/interrupt.h"
#include "util/thread_env.h"

namespace {

// "--threads: -1 is not in 0..256": the range a person would write.
CLI::Validator int_range(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        try {
          size_t used = 0;
          const long long v = std::stoll(value, &used);
          if (used == value.size() && v >= lo && v <= hi) return "";
        } catch (const std::exception&) {
        }
        return value + " is not in " + std::to_string(lo) + ".." + std::to_string(hi);
      },
      std::to_string(lo) + ".." + std::to_string(hi));
}

CLI::Validator real_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        try {
          size_t used = 0;
          const double v = std::stod(value, &used);
          if (used == value.size() && v >= lo && v <= hi) return "";
        } catch (const std::exception&) {
        }
        char range[64];
        std::snprintf(range, sizeof range, "%g..%g", lo, hi);
        return value + " is not in " + range;
      },
      "");
}

void add_runtime_flags(CLI::App* sub, nmt::cli::RuntimeFlags& f) {
  sub->add_option("--attention", f.attention, "attention backend: " + nmt::ops::backend_choices())
      ->check(CLI::IsMember(nmt::ops::backend_names()));
  sub->add_option("--device", f.device, "device: cpu | cuda | auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  sub->add_option("--threads", f.threads, "intra-op threads (0 = all cores)")->check(int_range(0, 256));
}

// The length limits and the length penalty: translate, evaluate and serve.
void add_length_flags(CLI::App* sub, nmt::cli::DecodeFlags& f) {
  sub->add_option("--max-len", f.max_len, "maximum target tokens")->check(int_range(1, 4096));
  sub->add_option("--max-len-factor", f.max_len_factor,
                  "also stop after this many target tokens per source token, + 5 (0 = off)")
      ->check(real_range(0.0, 1000.0));
  sub->add_option("--length-penalty", f.length_penalty,
                  "GNMT length penalty alpha for beam search (0 = none)")
      ->check(real_range(0.0, 10.0));
  sub->add_flag("--no-placeholder-constraint", f.no_placeholder_constraint,
                "with a placeholder-protected model: let a translation leave out or repeat its source's "
                "placeholders (by default it carries each as often as the source does)");
}

void add_decode_flags(CLI::App* sub, nmt::cli::DecodeFlags& f) {
  add_length_flags(sub, f);
  sub->add_option("--batch-size", f.batch_size, "sentences decoded together")
      ->check(int_range(1, 100000));
  sub->add_option("--beam", f.beam, "beam size (0 = greedy; 1 gives the greedy output through beam search)")
      ->check(int_range(0, 64));
  sub->add_option("--parallel-batches", f.parallel_batches,
                  "batches decoded side by side on the CPU, one thread each with single-threaded ops; "
                  "greedy keeps each one full, taking the next lines as its sentences end "
                  "(default: one per --threads; 1 = one batch at a time using every thread)")
      ->check(int_range(1, 256));
  sub->add_flag("--no-cache", f.no_cache,
                "recompute the whole prefix each step instead of caching keys/values");
}

}  // namespace

int main(int argc, char** argv) {
  nmt::ensure_quiet_thread_pools(argv);
  // Logs go to stderr so that stdout carries only results (translations).
  spdlog::set_default_logger(spdlog::stderr_color_mt("nmt"));
  spdlog::set_pattern("[%H:%M:%S] %v");

  CLI::App app{"nmt: a Chinese→English Transformer trainer with its own attention operators"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  app.set_version_flag("--version", std::function<std::string()>(nmt::cli::build_info), "what this nmt was built with, and the CPU and GPUs it finds");

  nmt::cli::TrainArgs train;
  auto* train_cmd = app.add_subcommand("train", "train a model from a YAML config");
  train_cmd->add_option("--config", train.config, "YAML config file");
  train_cmd->add_option("--resume", train.resume,
                        "continue a run exactly (run folder or checkpoint; its config unless --config)");
  train_cmd->add_flag("--overwrite", train.overwrite,
                      "start afresh in a run folder that holds checkpoints, replacing them");
  train_cmd->add_option("--set", train.sets, "override a config key: key.path=value (repeatable)");
  train_cmd->add_option("--nproc", train.nproc,
                        "data-parallel: run N local ranks (one process each, threads = cores/N "
                        "unless --threads); see the README for multi-machine runs")
      ->check(int_range(1, 256));
  train_cmd->add_option("--max-restarts", train.max_restarts,
                        "when a rank fails, restart the group from the last checkpoint up to K times "
                        "(the ranks also honour torchrun's TORCHELASTIC_RESTART_COUNT)")
      ->check(int_range(0, 1000));
  train_cmd->add_option("--profile", train.profile,
                        "profile N training steps (after 5 warm-up steps), print the top ops, "
                        "save nothing")
      ->check(int_range(1, 100000));
  add_runtime_flags(train_cmd, train.runtime);

  nmt::cli::PrepareArgs prepare;
  auto* prep_cmd = app.add_subcommand(
      "prepare", "prepare the training corpus once: tokenizers trained on a sample, every pair encoded into "
                 "memory-mapped shards (nmt train does it too when they are missing or stale)");
  prep_cmd->add_option("--config", prepare.config, "YAML config file")->required();
  prep_cmd->add_option("--set", prepare.sets, "override a config key: key.path=value (repeatable)");
  prep_cmd->add_option("--threads", prepare.threads, "encoding threads (0 = all cores)")->check(int_range(0, 256));
  prep_cmd->add_flag("--force", prepare.force, "prepare again even when the prepared corpus is up to date");

  nmt::cli::TranslateArgs translate;
  auto* tr_cmd = app.add_subcommand("translate", "translate lines greedily (stdin or --input)");
  tr_cmd->add_option("--checkpoint", translate.checkpoint,
                     "checkpoint folder (a run folder means its best/ or last/)")
      ->required();
  tr_cmd->add_option("--input", translate.input, "file with one sentence per line (default: stdin)");
  tr_cmd->add_option("--output", translate.output,
                     "write the translations here (complete or not at all) instead of stdout");
  tr_cmd->add_option("--attention-map", translate.attention_map,
                     "write the cross-attention heatmap (SVG) here; FILE-N.svg for several lines");
  tr_cmd->add_option("--attention-layer", translate.map_layer,
                     "decoder layer of the heatmap, from 0 (default: last)");
  tr_cmd->add_option("--attention-head", translate.map_head,
                     "head of the heatmap, from 0 (default: mean over heads)");
  add_decode_flags(tr_cmd, translate.decode);
  add_runtime_flags(tr_cmd, translate.runtime);

  nmt::cli::EvaluateArgs eval;
  auto* ev_cmd = app.add_subcommand("evaluate", "translate --src and score it against --ref");
  ev_cmd->add_option("--checkpoint", eval.checkpoint, "checkpoint folder")->required();
  ev_cmd->add_option("--src", eval.src, "source sentences, one per line")->required();
  ev_cmd->add_option("--ref", eval.ref, "reference translations, line-aligned")->required();
  ev_cmd->add_option("--output", eval.output, "also write the translations here");
  add_decode_flags(ev_cmd, eval.decode);
  add_runtime_flags(ev_cmd, eval.runtime);

  nmt::cli::ScoreArgs score;
  auto* sc_cmd = app.add_subcommand("score", "score a file of translations against references");
  sc_cmd->add_option("--hyp", score.hyp, "translations, one per line")->required();
  sc_cmd->add_option("--ref", score.ref, "references, line-aligned")->required();
  sc_cmd->add_option("--src", score.src, "sources, line-aligned (adds the placeholder report)");

  nmt::cli::CausalityArgs causality;
  auto* cc_cmd = app.add_subcommand(
      "check-causality", "show that decoder outputs ignore future target tokens (exit 0 if so)");
  cc_cmd->add_option("--checkpoint", causality.checkpoint, "checkpoint folder")->required();
  cc_cmd->add_option("--sentences", causality.sentences, "validation sentences to test")
      ->check(int_range(1, 100000));
  cc_cmd->add_flag("--disable-causal-mask", causality.disable_causal_mask,
                   "drop the decoder's causal mask, to see the check fail");
  add_runtime_flags(cc_cmd, causality.runtime);

  nmt::cli::CheckPoArgs check_po;
  auto* po_cmd = app.add_subcommand(
      "check-po", "check a Chinese gettext catalog (.po): placeholders, and with --checkpoint the entries whose "
                  "back-translation is furthest from their msgid (exit 3 when placeholders are wrong)");
  po_cmd->add_option("FILE.po", check_po.file, "the catalog (msgunfmt turns an installed .mo back into one)")
      ->required();
  po_cmd->add_option("--checkpoint", check_po.checkpoint,
                     "checkpoint or run folder: back-translate and rank every translated entry");
  po_cmd->add_option("--top", check_po.top, "entries listed by rank (0 = all; default 20)")
      ->check(int_range(0, 100000000));
  po_cmd->add_option("--rank", check_po.rank,
                     "rank by: combined (gap, lowered for a msgstr too short or too long for its msgid, for "
                     "Latin words the msgid lacks, and when it looks exchanged with another entry's; default) "
                     "| gap (the msgid's log-probability per token given the msgstr, minus the "
                     "back-translation's) | support (given the msgstr minus given nothing) | score (the "
                     "msgid's alone) | chrf (back-translation vs msgid)")
      ->check(CLI::IsMember({"combined", "support", "gap", "score", "chrf"}));
  po_cmd->add_flag("--json", check_po.json, "print one JSON object instead of text");
  po_cmd->add_flag("!--no-hints", check_po.hints,
                   "leave out the hints: option names of the msgid (--force) that the msgstr lacks, which "
                   "translations keep verbatim (hints are no faults: they never change the exit code)");
  add_decode_flags(po_cmd, check_po.decode);
  add_runtime_flags(po_cmd, check_po.runtime);

  nmt::cli::ExportArgs exp;
  auto* ex_cmd = app.add_subcommand("export", "write a checkpoint as a CTranslate2 model directory");
  ex_cmd->add_option("--checkpoint", exp.checkpoint, "checkpoint or run folder (its best/, else last/)")->required();
  ex_cmd->add_option("--format", exp.format, "target format: ctranslate2")
      ->check(CLI::IsMember({"ctranslate2"}));
  ex_cmd->add_option("--output", exp.output, "model folder to create")->required();
  ex_cmd->add_flag("--overwrite", exp.overwrite, "replace --output if it exists");

  nmt::cli::ServeArgs serve;
  auto* sv_cmd = app.add_subcommand("serve", "an HTTP translation service with dynamic batching and the attention explorer");
  sv_cmd->add_option("--checkpoint", serve.checkpoint, "checkpoint or run folder (its best/, else last/)")->required();
  sv_cmd->add_option("--host", serve.host, "address to listen on (default 127.0.0.1)");
  sv_cmd->add_option("--port", serve.port, "port (0 = any free port; see --port-file)")->check(int_range(0, 65535));
  sv_cmd->add_option("--port-file", serve.port_file, "write the port listened on to this file once ready");
  sv_cmd->add_option("--max-batch-tokens", serve.max_batch_tokens,
                     "source tokens merged into one batch (a larger request goes alone)")
      ->check(int_range(1, 1 << 20));
  sv_cmd->add_option("--max-delay-ms", serve.max_delay_ms,
                     "how long the oldest waiting request waits for others to join its batch")
      ->check(int_range(0, 60000));
  sv_cmd->add_option("--max-queue", serve.max_queue, "sentences waiting; beyond it requests get 503")
      ->check(int_range(1, 1 << 20));
  sv_cmd->add_option("--max-sentences", serve.max_sentences, "sentences per request (413 beyond)")
      ->check(int_range(1, 1 << 16));
  sv_cmd->add_option("--max-body-bytes", serve.max_body_bytes, "request body size (413 beyond)")
      ->check(int_range(64, 1 << 30));
  sv_cmd->add_option("--connections", serve.connections, "connections served at once")
      ->check(int_range(1, 4096));
  sv_cmd->add_option("--workers", serve.workers,
                     "batches translated side by side, each on one thread (default: one per --threads "
                     "on the CPU, 1 on CUDA)")
      ->check(int_range(1, 256));
  sv_cmd->add_option("--batching", serve.batching,
                     "greedy requests: continuous (join and leave a running batch between decoding steps) "
                     "or static (whole batches, as beam search always is)")
      ->check(CLI::IsMember({"continuous", "static"}));
  add_length_flags(sv_cmd, serve.decode);  // the beam comes with each request
  add_runtime_flags(sv_cmd, serve.runtime);

  nmt::bench::BenchArgs bench;
  auto* bench_cmd = app.add_subcommand(
      "bench-attention",
      "time the attention backends against each other and sgemm (one process per case)");
  bench_cmd->add_option("--device", bench.device, "device: cpu | cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  bench_cmd->add_option("--csv", bench.csv, "also write the results to this CSV file");
  bench_cmd->add_option("--dtype", bench.dtype,
                        "dtype of q, k, v and dO: float32 | bf16 (sgemm stays float32)")
      ->check(CLI::IsMember({"float32", "bf16"}));
  bench_cmd->add_flag("--quick", bench.quick,
                      "reduced set for CI: T = 128, 512 and cross, at most 3 repeats");
  bench_cmd->add_option("--threads", bench.threads, "intra-op threads (0 = all cores)")
      ->check(int_range(0, 256));
  bench_cmd->add_option("--backends", bench.backends,
                        "comma-separated subset of " + nmt::ops::backend_choices())
      ->delimiter(',');
  bench_cmd->add_option("--lens", bench.lens,
                        "comma-separated self-attention lengths (B = 8, H = 8) instead of the default "
                        "plan")
      ->delimiter(',')
      ->check(int_range(1, 1 << 20));
  bench_cmd->add_option("--head-dims", bench.head_dims,
                        "comma-separated head dims instead of the default plan's")
      ->delimiter(',')
      ->check(int_range(1, 256));
  bench_cmd->add_option("--repeats", bench.repeats, "timed runs per case (median reported)")
      ->check(int_range(1, 1000));
  bench_cmd->add_option("--case", bench.single_case, "internal: run one case in this process")
      ->group("");  // hidden: used by the per-case child processes

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "nmt: error: " << e.what() << " (see nmt --help)\n";
    return nmt::kExitInput;
  }

  try {
    if (train_cmd->parsed()) {
      if ((train.nproc > 1 || train.max_restarts > 0) && !std::getenv("WORLD_SIZE"))
        return nmt::cli::launch_local_ranks(static_cast<int>(train.nproc), static_cast<int>(train.max_restarts),
                                            argc, argv);
      return nmt::cli::run_train(train);
    }
    if (prep_cmd->parsed()) return nmt::cli::run_prepare(prepare);
    if (tr_cmd->parsed()) return nmt::cli::run_translate(translate);
    if (ev_cmd->parsed()) return nmt::cli::run_evaluate(eval);
    if (sc_cmd->parsed()) return nmt::cli::run_score(score);
    if (cc_cmd->parsed()) return nmt::cli::run_check_causality(causality);
    if (po_cmd->parsed()) return nmt::cli::run_check_po(check_po);
    if (ex_cmd->parsed()) return nmt::cli::run_export(exp);
    if (sv_cmd->parsed()) return nmt::cli::run_serve(serve);
    if (bench_cmd->parsed()) return nmt::bench::run_bench_attention(bench);
  } catch (const nmt::InputError& e) {
    std::cerr << "nmt: error: " << e.what() << "\n";
    return nmt::kExitInput;
  } catch (const nmt::Interrupted& e) {
    std::cerr << "nmt: " << e.what() << "\n";
    return 128 + e.signal();
  } catch (const nmt::IoError& e) {
    std::cerr << "nmt: error: " << e.what() << "\n";
    return nmt::kExitRuntime;
  } catch (const c10::Error& e) {
    std::cerr << "nmt: runtime error: " << e.what_without_backtrace() << "\n";
    return nmt::kExitRuntime;
  } catch (const std::exception& e) {
    std::cerr << "nmt: runtime error: " << e.what() << "\n";
    return nmt::kExitRuntime;
  }
  return nmt::kExitInput;
}
