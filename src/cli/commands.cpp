#include "cli/options.h"
#include "cli/commands.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <optional>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/manifest.h"
#include "checkpoint/run_lock.h"
#include "data/prepare.h"
#include "config/config.h"
#include "data/po_catalog.h"
#include "data/text_io.h"
#include "runtime/length_limit.h"
#include "runtime/translator_impl.h"
#include "eval/bleu.h"
#include "eval/input_fit.h"
#include "eval/placeholders.h"
#include "eval/po_check.h"
#include "eval/po_rank.h"
#include "export/ctranslate2_export.h"
#include "ops/attention/attention.h"
#include "ops/linear/packed_linear.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/translation_service.h"
#include "train/checkpoint_average.h"
#include "train/checkpoint_writer.h"
#include "train/init_from.h"
#include "train/recent_block_cache.h"
#include "train/trainer.h"
#include "util/atomic_file.h"
#include "util/cpu_features.h"
#include "util/device.h"
#include "util/interrupt.h"
#include "util/thread_env.h"
#include "util/utf8.h"
#include "util/errors.h"
#include "viz/svg.h"

namespace nmt::cli {

namespace {

// nmt train: the runtime flags are config values (the run saves them with
// its config), set after the --set assignments, so they win.
void apply_runtime(Config& cfg, const TranslatorOptions& flags) {
  if (flags.attention) {
    cfg.attention.backend = *flags.attention;
    cfg.origin["attention.backend"] = "--attention";
  }
  if (flags.device) {
    cfg.attention.device = *flags.device;
    cfg.origin["attention.device"] = "--device";
  }
  if (flags.threads) {
    cfg.train.threads = *flags.threads;
    cfg.origin["train.threads"] = "--threads";
  }
}

// The checkpoint opened for translating, as the flags say: what they leave
// unset comes from its config. Logs what was opened and how it runs.
Translator open_translator(const std::string& dir, const TranslatorOptions& flags) {
  // The library names its options ("device: cuda requested, but ..."); here
  // they are flags.
  static const std::pair<const char*, const char*> kFlagOf[] = {
      {"device: ", "--device: "}, {"compute_type: ", "--compute-type: "}, {"threads: ", "--threads: "},
      {"attention: ", "--attention: "}, {"parallel_batches: ", "--parallel-batches: "}};
  Translator t = [&] {
    try {
      return Translator(dir, flags);
    } catch (const InputError& e) {
      const std::string what = e.what();
      for (const auto& [field, flag] : kFlagOf)
        if (what.rfind(field, 0) == 0) throw InputError(flag + what.substr(std::string(field).size()));
      throw;
    }
  }();
  const Translator::Impl& i = t.impl();
  if (!i.note.empty()) spdlog::warn("checkpoint: {}", i.note);
  spdlog::info("checkpoint {}; decoding: {}{}", t.model_name(), t.description(),
               i.compute_automatic ? " (compute type auto)" : "");
  return t;
}

// A call's options resolved against the checkpoint's decode section; logs
// the length limit and where its factor came from.
DecodeOptions decode_options(const Translator& t, const TranslationOptions& flags) {
  const DecodeOptions o = t.impl().decode_options(flags, "--max-len-factor");
  spdlog::info("length limit: {}", describe_length_limit(o, t.impl().engine->max_positions()));
  return o;
}

// How many translations stopped at the length limit: a warning naming
// them, or a line saying none did.
void log_length_limited(const std::string& what, const std::vector<size_t>& limited, size_t translations,
                        const DecodeOptions& options, int64_t max_positions) {
  const std::string line = what + ": " + describe_length_limited(limited, translations, options, max_positions);
  if (limited.empty()) spdlog::info("{}", line);
  else spdlog::warn("{}", line);
}

// FILE.svg for one sentence; FILE-1.svg, FILE-2.svg, ... for several.
std::string map_path(const std::string& pattern, size_t index, size_t count) {
  if (count == 1) return pattern;
  const std::filesystem::path p(pattern);
  return (p.parent_path() / (p.stem().string() + "-" + std::to_string(index + 1) +
                             p.extension().string()))
      .string();
}

// The heatmaps of translations already made: line i's source ids and the
// ids its translation was decoded to (no second decode).
void write_attention_maps(const Translator& t, const TranslateArgs& args, const std::vector<std::string>& lines,
                          const std::vector<PreparedLine>& sources, const std::vector<std::vector<int64_t>>& hyps) {
  const runtime::Engine& engine = *t.impl().engine;
  const int64_t layers = engine.model().shape().decoder_layers, heads = engine.model().shape().heads;
  const int64_t layer = args.map_layer < 0 ? layers - 1 : args.map_layer;
  if (layer >= layers)
    throw InputError("--attention-layer: " + std::to_string(args.map_layer) + " but the model has " +
                     std::to_string(layers) + " decoder layers");
  if (args.map_head >= heads)
    throw InputError("--attention-head: " + std::to_string(args.map_head) + " but the model has " +
                     std::to_string(heads) + " heads");
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::vector<int64_t>& src = sources[i].ids;
    if (src.empty()) continue;
    const int64_t tokens = sources[i].read_tokens;
    const std::vector<int64_t>& hyp = hyps[i];
    const runtime::AttentionMap map = engine.attention(sources[i], hyp).cross[static_cast<size_t>(layer)];
    // One head's weights, or their mean.
    std::vector<std::vector<double>> weights(static_cast<size_t>(map.rows), std::vector<double>(static_cast<size_t>(map.cols)));
    for (int64_t r = 0; r < map.rows; ++r)
      for (int64_t c = 0; c < map.cols; ++c) {
        double w = 0;
        if (args.map_head >= 0) {
          w = map.at(args.map_head, r, c);
        } else {
          for (int64_t h = 0; h < map.heads; ++h) w += map.at(h, r, c);
          w /= static_cast<double>(map.heads);
        }
        weights[static_cast<size_t>(r)][static_cast<size_t>(c)] = w;
      }
    std::vector<int64_t> produced = hyp;
    produced.push_back(kEndId);  // row t is the step that produced token t
    const std::string cut = tokens > static_cast<int64_t>(src.size())
                                ? ", source cut to " + std::to_string(src.size()) + " of " + std::to_string(tokens) +
                                      " tokens"
                                : "";
    const std::string title = lines[i] + "  →  " + engine.finish(sources[i], hyp) +
                              "  (cross-attention, layer " +
                              std::to_string(layer + 1) + ", " +
                              (args.map_head < 0 ? std::string("mean of heads")
                                                 : "head " + std::to_string(args.map_head + 1)) + cut + ")";
    const std::string path = map_path(args.attention_map, i, lines.size());
    // Sentinels drawn as the placeholders they stand for, as the explorer shows them.
    const auto shown = [&](std::vector<std::string> pieces) {
      for (std::string& p : pieces) p = sources[i].text.shown(p);
      return pieces;
    };
    write_file_atomic(path, viz::heatmap_svg(weights, shown(engine.target_tokenizer().pieces(produced)),
                                             shown(engine.source_tokenizer().pieces(src)), title));
    spdlog::info("attention map: {}", path);
  }
}

}  // namespace

// `nmt train`: its options, filled into `args` when it is the one given.
CLI::App* add_train_command(CLI::App& app, TrainArgs& args) {
  auto* cmd = app.add_subcommand("train", "train a model from a YAML config");
  cmd->add_option("--config", args.config, "YAML config file");
  cmd->add_option("--resume", args.resume,
                  "continue a run exactly (run folder or checkpoint; its config unless --config)");
  cmd->add_flag("--overwrite", args.overwrite, "start afresh in a run folder that holds checkpoints, replacing them");
  cmd->add_option("--set", args.sets, "override a config key: key.path=value (repeatable)");
  cmd->add_option("--nproc", args.nproc,
                  "data-parallel: run N local ranks (one process each, threads = cores/N "
                  "unless --threads); multi-machine runs: docs/distributed.md")
      ->check(int_range(1, 256));
  cmd->add_option("--max-restarts", args.max_restarts,
                  "when a rank fails, restart the group from the last checkpoint up to K times "
                  "(the ranks also honour torchrun's TORCHELASTIC_RESTART_COUNT)")
      ->check(int_range(0, 1000));
  cmd->add_option("--profile", args.profile,
                  "profile N training steps (after 5 warm-up steps), print the top ops, "
                  "save nothing")
      ->check(int_range(1, 100000));
  add_runtime_flags(cmd, args.runtime);
  return cmd;
}

int run_train(const TrainArgs& args) {
  if (args.config.empty() && args.resume.empty())
    throw InputError("train: give --config FILE, or --resume DIR");
  if (args.overwrite && !args.resume.empty())
    throw InputError("train: --overwrite starts a run afresh; it does not go with --resume");
  // A resumed run continues with its checkpoint's config unless told otherwise.
  Config cfg = args.config.empty() ? resume_config(args.resume) : load_config(args.config);
  std::vector<std::string> sets = args.sets;
  apply_overrides(cfg, sets);
  apply_runtime(cfg, args.runtime);
  // A resumed run folder goes on in itself, wherever its config says it was
  // made (a run copied or moved elsewhere would otherwise save into the
  // original's folder), unless told otherwise.
  const bool dir_given = std::any_of(args.sets.begin(), args.sets.end(), [](const std::string& a) {
    return a.rfind("train.checkpoint_dir=", 0) == 0;
  });
  if (!args.resume.empty() && args.config.empty() && !dir_given) {
    const std::string run = run_folder_of(args.resume);
    if (!run.empty() && !same_folder(run, cfg.train.checkpoint_dir)) {
      spdlog::info("train: resuming the run in {}: its checkpoints stay there (its config names {})", run,
                   cfg.train.checkpoint_dir);
      cfg.train.checkpoint_dir = run;
      cfg.origin["train.checkpoint_dir"] = "--resume";
    }
  }
  // What the machine must offer, checked before the config is printed: a
  // refusal is one line, not the last of a page.
  const std::string precision_key = cfg.origin.count("train.precision")
                                        ? cfg.origin.at("train.precision") + ": train.precision"
                                        : "train.precision";
  resolve_precision(cfg.train.precision, resolve_device(cfg.attention.device, "attention.device"), precision_key);
  keep_freed_memory_for_reuse();
  use_recent_block_cache();
  RunStart start;
  // The config once the run's inputs are checked: a refused run ends on its error.
  start.inputs_checked = [&cfg] { spdlog::info("config {} resolved:\n{}", cfg.source_name, to_yaml(cfg)); };
  if (args.profile > 0) {
    profile_training(cfg, args.profile, std::cout, start);
    return kExitOk;
  }
  install_interrupt_handlers();
  start.resume = args.resume;
  start.overwrite = args.overwrite;
  const TrainResult result = train(cfg, start);
  return result.interrupted ? 128 + result.interrupted : kExitOk;
}

// `nmt prepare`: its options, filled into `args` when it is the one given.
CLI::App* add_prepare_command(CLI::App& app, PrepareArgs& args) {
  auto* cmd =
      app.add_subcommand("prepare",
                         "prepare the training corpus once: tokenizers trained on a sample, every pair encoded into "
                         "memory-mapped shards (nmt train does it too when they are missing or stale)");
  cmd->add_option("--config", args.config, "YAML config file")->required();
  cmd->add_option("--set", args.sets, "override a config key: key.path=value (repeatable)");
  cmd->add_option("--threads", args.threads, "encoding threads (0 = all cores)")->check(int_range(0, 256));
  cmd->add_flag("--force", args.force, "prepare again even when the prepared corpus is up to date");
  return cmd;
}

int run_prepare(const PrepareArgs& args) {
  Config cfg = load_config(args.config);
  apply_overrides(cfg, args.sets);
  install_interrupt_handlers("stopping; nothing of this preparation is kept", "still stopping; Ctrl-C once more aborts");
  data::PrepareOptions opts;
  opts.threads = static_cast<int>(args.threads);
  opts.force = args.force;
  // Fine-tuning: the corpus is encoded with the starting checkpoint's
  // tokenizers, as `nmt train` will.
  CheckpointFiles init;
  if (!cfg.train.init_from.empty()) {
    init = read_init_checkpoint(cfg);
    opts.src_model = &init.at("src.model");
    opts.tgt_model = &init.at("tgt.model");
  }
  const data::PrepareReport r = data::prepare_corpus(cfg, opts);
  const std::string tokenizers = r.tokenizers_trained ? "trained on " + std::to_string(r.sampled) + " sampled pairs"
                                 : r.reused           ? "as they were"
                                                      : "kept";
  const std::string what = r.reused ? "up to date, checked" : "prepared (" + r.reason + ")";
  std::printf("prepared corpus: %s\n  %s\n  tokenizers: %s\n  %s in %.1f s\n", r.dir.c_str(), r.summary().c_str(),
              tokenizers.c_str(), what.c_str(), r.seconds);
  return kExitOk;
}

// `nmt translate`: its options, filled into `args` when it is the one given.
CLI::App* add_translate_command(CLI::App& app, TranslateArgs& args) {
  auto* cmd = app.add_subcommand("translate", "translate lines greedily (stdin or --input)");
  cmd->add_option("--checkpoint", args.checkpoint, "checkpoint folder (a run folder means its best/ or last/)")
      ->required();
  cmd->add_option("--input", args.input, "file with one sentence per line (default: stdin)");
  cmd->add_option("--output", args.output, "write the translations here (complete or not at all) instead of stdout");
  cmd->add_option("--attention-map", args.attention_map,
                  "write the cross-attention heatmap (SVG) here; FILE-N.svg for several lines");
  cmd->add_option("--attention-layer", args.map_layer, "decoder layer of the heatmap, from 0 (default: last)");
  cmd->add_option("--attention-head", args.map_head, "head of the heatmap, from 0 (default: mean over heads)");
  add_decode_flags(cmd, args.decode, args.runtime);
  add_runtime_flags(cmd, args.runtime);
  add_compute_type_flag(cmd, args.runtime);
  return cmd;
}

int run_translate(const TranslateArgs& args) {
  install_interrupt_handlers("stopping at the next batch (no --output file is written)",
                             "still stopping; Ctrl-C once more aborts");
  const Translator t = open_translator(args.checkpoint, args.runtime);
  const DecodeOptions opts = decode_options(t, args.decode);
  LineReader reader(args.input);
  // In chunks, so that a large input neither waits for its last line nor
  // sits in memory whole; --output is written once, complete, at the end.
  const size_t chunk = file_chunk_lines(opts);
  std::string output;
  // Kept for --attention-map only: every line, its source and its translation's ids.
  std::vector<std::string> all;
  std::vector<PreparedLine> all_sources;
  std::vector<std::vector<int64_t>> all_hyps;
  std::vector<SourceCut> cuts;   // over-long sources, numbered from 0 in the whole input
  std::vector<size_t> limited;   // translations that stopped at the length limit, likewise
  std::vector<LostPlaceholders> lost;  // translations that lost placeholders, likewise
  int64_t count = 0;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const std::vector<std::string> lines = reader.next(chunk, count, args.output);
    if (lines.empty()) break;
    TranslationBatch out = t.impl().engine->translate(lines, opts);
    for (const SourceCut& c : out.cuts) cuts.push_back({c.line + static_cast<size_t>(count), c.tokens});
    for (const size_t i : out.length_limited) limited.push_back(i + static_cast<size_t>(count));
    for (LostPlaceholders& l : out.placeholders_lost) lost.push_back({l.line + static_cast<size_t>(count), l.missing});
    for (const std::string& l : out.translations) {
      if (args.output.empty()) std::cout << l << '\n';
      else output += l + '\n';
    }
    std::cout.flush();
    count += static_cast<int64_t>(lines.size());
    if (!args.attention_map.empty()) {
      all.insert(all.end(), lines.begin(), lines.end());
      std::move(out.sources.begin(), out.sources.end(), std::back_inserter(all_sources));
      std::move(out.ids.begin(), out.ids.end(), std::back_inserter(all_hyps));
    }
  }
  if (!args.output.empty()) write_file_atomic(args.output, output);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("translated {} lines in {:.2f} s ({:.1f} sentences/s; beam {}, parallel batches {})", count, seconds,
               count / std::max(seconds, 1e-9), opts.beam,
               opts.parallel_batches > 0 ? std::to_string(opts.parallel_batches) : std::string("one per thread"));
  const int64_t max_positions = t.impl().engine->max_positions();
  if (!cuts.empty()) spdlog::warn("translate: {}", describe_cuts(cuts, max_positions));
  log_length_limited("translate", limited, static_cast<size_t>(count), opts, max_positions);
  if (!lost.empty())
    spdlog::warn("translate: {}",
                 describe_lost_placeholders(lost, static_cast<size_t>(count), opts.protect_placeholders));
  if (!args.attention_map.empty()) write_attention_maps(t, args, all, all_sources, all_hyps);
  return kExitOk;
}

namespace {

void print_scores(const std::vector<std::string>& hyp, const std::vector<std::string>& ref,
                  const std::vector<std::string>& src) {
  std::printf("%s\nchrF2 = %.2f\nexact match = %.2f%%\n", eval::format_bleu(eval::corpus_bleu(hyp, ref)).c_str(),
              eval::chrf(hyp, ref), 100.0 * eval::exact_match(hyp, ref));
  if (src.empty()) return;
  const eval::PlaceholderReport ph = eval::placeholder_report(src, hyp, ref);
  if (ph.lines > 0 || ph.lines_with_reference > 0) std::printf("%s\n", eval::format_placeholders(ph).c_str());
}

}  // namespace

// `nmt score`: its options, filled into `args` when it is the one given.
CLI::App* add_score_command(CLI::App& app, ScoreArgs& args) {
  auto* cmd = app.add_subcommand("score", "score a file of translations against references");
  cmd->add_option("--hyp", args.hyp, "translations, one per line")->required();
  cmd->add_option("--ref", args.ref, "references, line-aligned")->required();
  cmd->add_option("--src", args.src, "sources, line-aligned (adds the placeholder report)");
  return cmd;
}

int run_score(const ScoreArgs& args) {
  const auto hyp = read_lines(args.hyp), ref = read_lines(args.ref);
  const auto src = args.src.empty() ? std::vector<std::string>{} : read_lines(args.src);
  if (hyp.size() != ref.size())
    throw InputError(args.hyp + ": has " + std::to_string(hyp.size()) + " lines but " + args.ref + " has " +
                     std::to_string(ref.size()));
  if (!src.empty() && src.size() != ref.size())
    throw InputError(args.src + ": has " + std::to_string(src.size()) + " lines but " + args.ref + " has " +
                     std::to_string(ref.size()));
  std::printf("sentences %zu\n", ref.size());
  print_scores(hyp, ref, src);
  return kExitOk;
}

// `nmt evaluate`: its options, filled into `args` when it is the one given.
CLI::App* add_evaluate_command(CLI::App& app, EvaluateArgs& args) {
  auto* cmd = app.add_subcommand("evaluate", "translate --src and score it against --ref");
  cmd->add_option("--checkpoint", args.checkpoint, "checkpoint folder")->required();
  cmd->add_option("--src", args.src, "source sentences, one per line")->required();
  cmd->add_option("--ref", args.ref, "reference translations, line-aligned")->required();
  cmd->add_option("--output", args.output, "also write the translations here");
  add_decode_flags(cmd, args.decode, args.runtime);
  add_runtime_flags(cmd, args.runtime);
  add_compute_type_flag(cmd, args.runtime);
  return cmd;
}

int run_evaluate(const EvaluateArgs& args) {
  install_interrupt_handlers("stopping at the next batch (no scores, no --output file)",
                             "still stopping; Ctrl-C once more aborts");
  const Translator t = open_translator(args.checkpoint, args.runtime);
  const auto src = read_lines(args.src);
  const auto ref = read_lines(args.ref);
  if (src.size() != ref.size())
    throw InputError(args.ref + ": has " + std::to_string(ref.size()) + " lines but " + args.src +
                     " has " + std::to_string(src.size()));
  const DecodeOptions opts = decode_options(t, args.decode);
  const auto start = std::chrono::steady_clock::now();
  const TranslationBatch out = t.impl().engine->translate(src, opts);
  const std::vector<std::string>& hyp = out.translations;
  const int64_t max_positions = t.impl().engine->max_positions();
  if (!out.cuts.empty()) spdlog::warn("evaluate: {}: {}", args.src, describe_cuts(out.cuts, max_positions));
  log_length_limited("evaluate: " + args.src, out.length_limited, src.size(), opts, max_positions);
  if (!out.placeholders_lost.empty())
    spdlog::warn("evaluate: {}: {}", args.src,
                 describe_lost_placeholders(out.placeholders_lost, src.size(), opts.protect_placeholders));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!args.output.empty()) {
    std::string text;
    for (const auto& h : hyp) text += h + "\n";
    write_file_atomic(args.output, text);
  }
  std::printf("sentences %zu (beam %lld, %.1f sentences/s)\n", src.size(),
              static_cast<long long>(opts.beam), src.size() / std::max(seconds, 1e-9));
  print_scores(hyp, ref, src);
  return kExitOk;
}

namespace {

// "FILE:LINE", with a plural entry's forms: "msgstr[1]", "msgstr[0,1]" (forms of equal text).
std::string where(const std::string& file, const eval::PoItem& item) {
  std::string s = file + ":" + std::to_string(item.entry->line);
  if (!item.entry->msgid_plural) return s;
  s += " msgstr[";
  for (size_t k = 0; k < item.forms.size(); ++k) s += (k ? "," : "") + std::to_string(item.forms[k]);
  return s + "]";
}

// A checkpoint whose translations are mostly wrong ranks catalogs by noise.
// The ranking's figures (docs/bench/check_po.md) come from a checkpoint at
// validation BLEU 38.99; below this, its back-translations are too often
// wrong for the order to mean much.
constexpr double kMinRankingBleu = 20.0;

// The warning for a checkpoint too weak to rank with ("" when it is not).
std::string ranking_warning(const TrainingState& state) {
  const auto bleu = state.metrics.find("bleu");
  if (bleu == state.metrics.end())
    return "the checkpoint records no validation BLEU (train.valid_bleu_sentences 0, or no validation yet): how well "
           "it ranks is unknown";
  if (bleu->second >= kMinRankingBleu) return "";
  return fmt::format("the checkpoint's validation BLEU is {:.1f} (step {}), under {:.0f}: its back-translations are too "
                     "often wrong for this ranking to mean much; train it longer",
                     bleu->second, state.step, kMinRankingBleu);
}

std::string quoted(const std::string& text) { return "\"" + data::po_escape(text) + "\""; }

}  // namespace

// `nmt check-po`: its options, filled into `args` when it is the one given.
CLI::App* add_check_po_command(CLI::App& app, CheckPoArgs& args) {
  auto* cmd =
      app.add_subcommand("check-po",
                         "check a Chinese gettext catalog (.po): placeholders, and with --checkpoint the entries whose "
                         "back-translation is furthest from their msgid (exit 3 when placeholders are wrong)");
  cmd->add_option("FILE.po", args.file, "the catalog (msgunfmt turns an installed .mo back into one)")->required();
  cmd->add_option("--checkpoint", args.checkpoint,
                  "checkpoint or run folder: back-translate and rank every translated entry");
  cmd->add_option("--top", args.top, "entries listed by rank (0 = all; default 20)")->check(int_range(0, 100000000));
  cmd->add_option("--rank", args.rank,
                  "rank by: combined (gap, lowered for a msgstr too short or too long for its msgid, for "
                  "Latin words the msgid lacks, and when it looks exchanged with another entry's; default) "
                  "| gap (the msgid's log-probability per token given the msgstr, minus the "
                  "back-translation's) | support (given the msgstr minus given nothing) | score (the "
                  "msgid's alone) | chrf (back-translation vs msgid)")
      ->check(CLI::IsMember({"combined", "support", "gap", "score", "chrf"}));
  cmd->add_flag("--json", args.json, "print one JSON object instead of text");
  // A callback, not "!--no-hints": CLI11 would show that as --no-hints{false}.
  cmd->add_flag_callback("--no-hints", [&args] { args.hints = false; },
                "leave out the hints: option names of the msgid (--force) that the msgstr lacks, which "
                "translations keep verbatim (hints are no faults: they never change the exit code)");
  add_decode_flags(cmd, args.decode, args.runtime);
  add_runtime_flags(cmd, args.runtime);
  add_compute_type_flag(cmd, args.runtime);
  return cmd;
}

// About 130 lines, most of them the report (text or JSON) of what the
// ranking (eval/po_rank.h) and the placeholder check (eval/po_check.h) found.
int run_check_po(const CheckPoArgs& args) {
  install_interrupt_handlers("stopping at the next batch (no report)", "still stopping; Ctrl-C once more aborts");
  const data::PoCatalog catalog = data::read_po(args.file);
  const eval::PoCheck check = eval::check_placeholders(catalog);
  std::vector<const eval::PoItem*> faulty, hinted;
  for (const auto& item : check.items) {
    if (!item.problems.empty()) faulty.push_back(&item);
    if (args.hints && !item.hints.empty()) hinted.push_back(&item);
  }

  // The ranking judges each distinct translation once (a plural entry's
  // forms of equal text are one row).
  const eval::PoCheck texts = eval::distinct_texts(check);
  std::vector<eval::RankedItem> ranked;
  std::string model_name, model_warning;
  if (!args.checkpoint.empty() && !check.items.empty()) {
    const Translator t = open_translator(args.checkpoint, args.runtime);
    model_name = t.model_name();
    model_warning = ranking_warning(t.impl().state);
    if (!model_warning.empty()) spdlog::warn("check-po: {}", model_warning);
    const DecodeOptions opts = decode_options(t, args.decode);
    eval::PoModel model;
    model.protect_placeholders = opts.protect_placeholders;
    eval::TokenCounts read;  // the msgstrs' tokens, and how many the model's vocabulary lacks
    model.translate = [&](const std::vector<std::string>& chinese) {
      TranslationBatch batch = t.impl().engine->translate(chinese, opts);
      for (const PreparedLine& line : batch.sources) read.add(line.ids, kUnkId);
      const std::vector<SourceCut>& cuts = batch.cuts;
      const std::vector<size_t>& limited = batch.length_limited;
      if (!limited.empty()) {  // named by their catalog lines (the lines are the items' msgstrs, in order)
        std::string named;
        for (size_t k = 0; k < limited.size() && k < 5; ++k)
          if (limited[k] < texts.items.size()) named += (named.empty() ? "" : ", ") + where(args.file, texts.items[limited[k]]);
        spdlog::warn("check-po: {} of {} back-translations stopped at the length limit ({}) before ending: {}{}",
                     limited.size(), chinese.size(),
                     describe_length_limit(opts, t.impl().engine->max_positions(), false), named,
                     limited.size() > 5 ? ", ..." : "");
      }
      // The lines are the items' msgstrs, in order (rank_translations).
      for (const SourceCut& c : cuts)
        if (c.line < texts.items.size())
          spdlog::warn("check-po: {}: msgstr of {} tokens, cut to the first {} this model reads",
                       where(args.file, texts.items[c.line]), c.tokens, t.impl().engine->max_positions());
      return std::move(batch.translations);
    };
    model.score = [&](const std::vector<std::string>& sources, const std::vector<std::string>& targets, bool protect) {
      std::vector<eval::PairScore> scores;
      for (const auto& lp : t.impl().engine->score(sources, targets, protect))
        scores.push_back({runtime::mean_logprob(lp), lp.size()});
      return scores;
    };
    const auto start = std::chrono::steady_clock::now();
    ranked = eval::rank_translations(texts, model, eval::parse_rank_by(args.rank));
    spdlog::info("check-po: {} translations back-translated and scored in {:.1f} s", texts.items.size(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    // The fit judged on this catalog itself, whatever the checkpoint's own
    // validation says (a model can fit its training data and not this).
    std::vector<double> chrf;
    for (const eval::RankedItem& r : ranked) chrf.push_back(r.chrf);
    const std::string misfit =
        eval::input_fit_problems(read, eval::median(chrf), static_cast<int64_t>(ranked.size()));
    if (!misfit.empty()) {
      const std::string warning = "this model does not fit the catalog: " + misfit +
                                  "; its back-translations are mostly wrong and the ranking says little (a model "
                                  "trained on software messages, configs/real.yaml, fits such catalogs)";
      spdlog::warn("check-po: {}", warning);
      model_warning += (model_warning.empty() ? "" : "; ") + warning;
    }
  }
  const size_t shown = args.top == 0 ? ranked.size() : std::min(ranked.size(), static_cast<size_t>(args.top));

  if (args.json) {
    using nlohmann::json;
    auto base = [&](const eval::PoItem& item) {
      json j = {{"line", item.entry->line}, {"msgid", item.english}, {"msgstr", item.chinese}};
      if (item.entry->context) j["msgctxt"] = *item.entry->context;
      if (item.entry->msgid_plural) j["form"] = item.form, j["forms"] = item.forms;
      j["flags"] = item.entry->flags;
      return j;
    };
    json out = {{"file", args.file},
                {"entries", check.entries},
                {"translated", check.translated},
                {"fuzzy", check.fuzzy},
                {"untranslated", check.untranslated},
                {"obsolete", check.obsolete},
                {"placeholders", json::array()},
                {"hints", json::array()},
                {"ranked", json::array()}};
    for (const auto* item : faulty) {
      json j = base(*item);
      for (const auto& p : item->problems) j["problems"].push_back({{"kind", eval::fault_name(p.fault)}, {"placeholder", p.detail}});
      out["placeholders"].push_back(j);
    }
    for (const auto* item : hinted) {
      json j = base(*item);
      for (const auto& p : item->hints) j["hints"].push_back({{"kind", eval::fault_name(p.fault)}, {"word", p.detail}});
      out["hints"].push_back(j);
    }
    if (!model_name.empty()) {
      out["model"] = model_name;
      out["rank"] = args.rank;
      if (!model_warning.empty()) out["warning"] = model_warning;
    }
    for (size_t k = 0; k < shown; ++k) {
      const eval::RankedItem& r = ranked[k];
      json j = base(*r.item);
      j["back_translation"] = r.back;
      j["score"] = r.score;
      j["gap"] = r.gap;
      j["chrf"] = r.chrf;
      j["support"] = r.support;
      j["tokens"] = r.tokens;
      j["length"] = r.form.length;
      j["foreign"] = r.form.foreign;
      j["combined"] = r.combined;
      j["rival"] = r.rival ? json(*r.rival) : json(nullptr);
      if (r.rival_item) j["rival_line"] = r.rival_item->entry->line;
      out["ranked"].push_back(j);
    }
    std::printf("%s\n", out.dump(1).c_str());
  } else {
    std::printf("check-po: %s: %zu entries; %zu translated and checked (skipped: %zu fuzzy, %zu untranslated, "
                "%zu obsolete)\n",
                args.file.c_str(), check.entries, check.translated, check.fuzzy, check.untranslated, check.obsolete);
    std::printf("\nplaceholders: %zu translation(s) differ from their msgid\n", faulty.size());
    for (const auto* item : faulty) {
      std::string what;
      for (const auto& p : item->problems) what += (what.empty() ? "" : "; ") + std::string(eval::fault_name(p.fault)) + " " + p.detail;
      std::printf("%s: %s\n  msgid  %s\n  msgstr %s\n", where(args.file, *item).c_str(), what.c_str(),
                  quoted(item->english).c_str(), quoted(item->chinese).c_str());
    }
    if (!hinted.empty()) {
      std::printf("\nhints: %zu translation(s) lack an option name of their msgid, which translations keep "
                  "verbatim (no fault by itself; --no-hints leaves these out)\n",
                  hinted.size());
      for (const auto* item : hinted) {
        std::string what;
        for (const auto& p : item->hints) what += (what.empty() ? "" : "; ") + std::string(eval::fault_name(p.fault)) + " " + p.detail;
        std::printf("%s: %s\n  msgid  %s\n  msgstr %s\n", where(args.file, *item).c_str(), what.c_str(),
                    quoted(item->english).c_str(), quoted(item->chinese).c_str());
      }
    }
    if (!model_name.empty()) {
      std::printf("\nfurthest from their msgid, by %s (model %s): %zu of %zu\n", args.rank.c_str(), model_name.c_str(),
                  shown, ranked.size());
      if (!model_warning.empty()) std::printf("warning: %s\n", model_warning.c_str());
      for (size_t k = 0; k < shown; ++k) {
        const eval::RankedItem& r = ranked[k];
        std::printf("%s: combined %.2f  gap %.2f  length %+.2f  foreign %.2f  rival %s  support %.2f  score %.2f  chrF %.1f\n"
                    "  msgid  %s\n  msgstr %s\n  back   %s\n",
                    where(args.file, *r.item).c_str(), r.combined, r.gap, r.form.length, r.form.foreign,
                    r.rival ? fmt::format("{:+.2f}", *r.rival).c_str() : "none", r.support,
                    r.score, r.chrf, quoted(r.item->english).c_str(),
                    quoted(r.item->chinese).c_str(), quoted(r.back).c_str());
        if (r.rival && *r.rival > 0)
          std::printf("  exchanged with %s? both fit better so (%+.2f per token): msgid %s\n",
                      where(args.file, *r.rival_item).c_str(), *r.rival, quoted(r.rival_item->english).c_str());
      }
    } else if (args.checkpoint.empty()) {
      std::printf("\n(no --checkpoint: placeholders only; with one, every translation is also back-translated and "
                  "ranked)\n");
    }
  }
  return faulty.empty() ? kExitOk : kExitFaultsFound;
}

// `nmt export`: its options, filled into `args` when it is the one given.
CLI::App* add_export_command(CLI::App& app, ExportArgs& args) {
  auto* cmd = app.add_subcommand("export", "write a checkpoint as a CTranslate2 model directory");
  cmd->add_option("--checkpoint", args.checkpoint, "checkpoint or run folder (its best/, else last/)")->required();
  cmd->add_option("--format", args.format, "target format: ctranslate2")->check(CLI::IsMember({"ctranslate2"}));
  cmd->add_option("--output", args.output, "model folder to create")->required();
  cmd->add_flag("--overwrite", args.overwrite, "replace --output if it exists");
  return cmd;
}

int run_export(const ExportArgs& args) {
  install_interrupt_handlers("stopping (nothing of the export is kept)", "still stopping; Ctrl-C once more aborts");
  // Weights are exported as trained (float32, CPU); CTranslate2 quantizes at
  // load time if asked (compute_type).
  const LoadedCheckpoint ck = load_checkpoint(args.checkpoint, c10::Device(c10::kCPU));
  const ExportSummary s = export_ctranslate2(ck, args.output, args.overwrite);
  spdlog::info("export: {} (step {}) -> {}: CTranslate2 TransformerSpec, {} variables ({} aliased), {:.1f} MB, "
               "vocabularies {} / {} pieces; load with ctranslate2.Translator(\"{}\"), tokenize with its src.model",
               ck.dir, ck.state.step, args.output, s.variables, s.aliases, s.bytes / 1e6, s.src_vocab, s.tgt_vocab,
               args.output);
  return kExitOk;
}

// `nmt average`: its options, filled into `args` when it is the one given.
CLI::App* add_average_command(CLI::App& app, AverageArgs& args) {
  auto* cmd = app.add_subcommand(
      "average", "average the model weights of several checkpoints of one model into a new checkpoint");
  cmd->add_option("--checkpoints", args.checkpoints,
                  "two or more checkpoints (or run folders: their best/, else last/), e.g. RUN/step-*")
      ->required();
  cmd->add_option("--output", args.output, "checkpoint folder to create")->required();
  cmd->add_flag("--overwrite", args.overwrite, "replace --output if it holds a checkpoint");
  return cmd;
}

int run_average(const AverageArgs& args) {
  install_interrupt_handlers("the checkpoint being read");
  const AverageSummary s = average_checkpoints(args.checkpoints, args.output, args.overwrite);
  spdlog::info("average: {} checkpoints, {} parameters each -> {} (step {}); use it as any checkpoint "
               "(translate, evaluate, serve, export)",
               s.checkpoints, s.parameters, args.output, s.step);
  return kExitOk;
}

CLI::App* add_convert_command(CLI::App& app, ConvertArgs& args) {
  auto* cmd = app.add_subcommand(
      "convert", "add model.safetensors to checkpoints saved without it, so that the runtime alone (the C++ "
                 "library, Python) opens them");
  cmd->add_option("--checkpoint", args.checkpoint, "a checkpoint folder, or a run folder (all its checkpoints)")
      ->required();
  return cmd;
}

int run_convert(const ConvertArgs& args) {
  install_interrupt_handlers("the checkpoint being converted");
  namespace fs = std::filesystem;
  const fs::path given(args.checkpoint);
  std::error_code ec;
  if (!fs::is_directory(given, ec)) throw InputError(args.checkpoint + ": no such checkpoint folder");
  // A checkpoint folder, or a run folder's every checkpoint.
  const bool one = fs::exists(given / kManifestFile, ec);
  std::vector<fs::path> folders;
  if (one) folders.push_back(given);
  else
    for (const std::string& name : checkpoints_in(given.string())) folders.push_back(given / name);
  if (folders.empty()) throw InputError(args.checkpoint + ": not a checkpoint (no manifest.txt, best/ or last/)");
  // A trainer's run: its lock, so that no save replaces a folder mid-way.
  const fs::path run = one ? given.parent_path() : given;
  std::unique_ptr<RunLock> lock;
  if (fs::exists(run / kRunLockFile, ec)) lock = std::make_unique<RunLock>(run.string());
  int added = 0;
  for (const fs::path& f : folders) {
    throw_if_interrupted();
    const bool wrote = add_model_safetensors(f.string());
    added += wrote;
    spdlog::info("convert: {}: {}", f.string(), wrote ? "model.safetensors added" : "has model.safetensors already");
  }
  spdlog::info("convert: {} of {} checkpoints converted; the runtime alone opens them now", added, folders.size());
  return kExitOk;
}

// `nmt serve`: its options, filled into `args` when it is the one given.
CLI::App* add_serve_command(CLI::App& app, ServeArgs& args) {
  auto* cmd =
      app.add_subcommand("serve", "an HTTP translation service with dynamic batching and the attention explorer");
  cmd->add_option("--checkpoint", args.checkpoint, "checkpoint or run folder (its best/, else last/)")->required();
  cmd->add_option("--host", args.host, "address to listen on");
  cmd->add_option("--port", args.port, "port (0 = any free port; see --port-file)")->check(int_range(0, 65535));
  cmd->add_option("--port-file", args.port_file, "write the port listened on to this file once ready");
  cmd->add_option("--max-batch-tokens", args.max_batch_tokens,
                  "source tokens merged into one batch (a larger request goes alone)")
      ->check(int_range(1, 1 << 20));
  cmd->add_option("--max-delay-ms", args.max_delay_ms,
                  "with --batching static, how long the oldest waiting request waits for others to join its "
                  "batch (continuous batching starts a request at once and lets others join between steps)")
      ->check(int_range(0, 60000));
  cmd->add_option("--max-queue", args.max_queue, "sentences waiting; beyond it requests get 503")
      ->check(int_range(1, 1 << 20));
  cmd->add_option("--max-sentences", args.max_sentences, "sentences per request (413 beyond)")
      ->check(int_range(1, 1 << 16));
  cmd->add_option("--max-body-bytes", args.max_body_bytes, "request body size (413 beyond)")
      ->check(int_range(64, 1 << 30));
  auto& c = args.connections;
  cmd->add_option("--max-connections", c.max_connections,
                  "connections open at once in all; beyond it a connection's request gets 503 with Retry-After")
      ->check(int_range(1, 1 << 20));
  cmd->add_option("--max-connections-per-client", c.max_per_client,
                  "connections open at once from one client address (503 beyond)")
      ->check(int_range(1, 1 << 20));
  cmd->add_option("--header-timeout", c.header_seconds,
                  "seconds for a request's headers, from the connection's start or its previous answer; a "
                  "connection slower than that is closed")
      ->check(int_range(1, 3600));
  cmd->add_option("--body-timeout", c.body_seconds, "seconds for a request's body after its headers (closed beyond)")
      ->check(int_range(1, 3600));
  cmd->add_option("--idle-timeout", c.idle_seconds,
                  "seconds a connection may stay silent (between requests, or mid-request) before it is closed")
      ->check(int_range(1, 3600));
  cmd->add_option("--http-threads", c.http_threads, "threads moving bytes on epoll (translation runs on --workers)")
      ->check(int_range(1, 64));
  cmd->add_option("--workers", args.workers,
                  "batches translated side by side, each on one thread (default: one per --threads "
                  "on the CPU, 1 on CUDA)")
      ->check(int_range(1, 256));
  cmd->add_option("--batching", args.batching,
                  "continuous (greedy and beam requests join and leave a running batch between decoding "
                  "steps) or static (whole batches)")
      ->check(CLI::IsMember({"continuous", "static"}));
  cmd->add_option("--allow-host", args.allow_hosts,
                  "a host name this service answers to besides IP addresses and localhost (repeatable; "
                  "requests naming any other Host get 403)");
  cmd->add_option("--allow-origin", args.allow_origins,
                  "a web origin whose pages may call the API, e.g. https://example.org (repeatable; the "
                  "service's own pages always may, other browser requests get 403)");
  cmd->add_option("--api-key-file", args.api_key_file,
                  "require 'Authorization: Bearer KEY' on /v1/* and /metrics, KEY one of this file's lines");
  add_length_flags(cmd, args.decode);  // the beam comes with each request
  add_runtime_flags(cmd, args.runtime);
  add_compute_type_flag(cmd, args.runtime);
  return cmd;
}

int run_serve(const ServeArgs& args) {
  serve::AccessPolicy access;
  access.allow_hosts = args.allow_hosts;
  for (const std::string& h : access.allow_hosts)
    if (h.empty() || h.find_first_of(":/[] \t") != std::string::npos)
      throw InputError("--allow-host: '" + h + "' is not a host name (no port, no scheme)");
  // As a browser's Origin header writes them, or refused: one that can never
  // match would answer every call of that page 403.
  for (const std::string& o : args.allow_origins) {
    access.allow_origins.push_back(serve::normalize_origin(o));
    if (access.allow_origins.back() != o)
      spdlog::info("--allow-origin {}: matched as {}, as a browser sends it", o, access.allow_origins.back());
  }
  if (!args.api_key_file.empty()) access.api_keys = serve::read_api_keys(args.api_key_file);
  const Translator t = open_translator(args.checkpoint, args.runtime);
  serve::Model model;
  model.translator = &t;
  model.decode = decode_options(t, args.decode);
  model.decode.stop_on_interrupt = false;  // a signal drains the service instead (serve/http_server.h)
  if (model.decode.beam > 1)
    spdlog::info("requests without \"beam\" are decoded with beam {} (decode.beam), length penalty {}",
                 model.decode.beam, model.decode.length_penalty);
  model.workers = args.workers > 0 ? args.workers : (t.impl().device == Device::kCpu ? t.impl().threads : 1);
  model.examples = serve::example_sentences(t.impl().config.data.valid_src);
  if (model.examples.empty())
    spdlog::info("serve: the explorer offers no examples: {} (the model's data.valid_src) is not readable here",
                 t.impl().config.data.valid_src);
  serve::ServerOptions options;
  options.host = args.host;
  options.port = static_cast<int>(args.port);
  options.port_file = args.port_file;
  options.max_body_bytes = args.max_body_bytes;
  options.connections = args.connections;
  options.batching.max_batch_tokens = args.max_batch_tokens;
  options.batching.max_delay_ms = args.max_delay_ms;
  options.batching.max_queue = args.max_queue;
  options.batching.workers = model.workers;
  options.batching.continuous = args.batching == "continuous";
  options.limits.max_sentences = args.max_sentences;
  options.access = std::move(access);
  serve::Metrics metrics;
  serve::TranslationService service(std::move(model), metrics);
  return serve::run_server(service, metrics, options);
}

}  // namespace nmt::cli
