// The command line's shared pieces: validators whose messages name the
// range a person would write, and the flag groups several subcommands take
// (runtime, length limits, decoding). Each subcommand declares its own
// options beside its run function (cli/commands.cpp, cli/check_causality.cpp,
// bench/src/bench_attention.cpp); main() only lists the subcommands.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "ops/attention/backend.h"
#include "ops/linear/packed_linear.h"
#include "util/device_choices.h"

namespace nmt::cli {

// "--threads: -1 is not in 0..256": the range a person would write.
inline CLI::Validator int_range(int64_t lo, int64_t hi) {
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

// word: a word also taken besides the numbers ("auto"), or "".
inline CLI::Validator real_range(double lo, double hi, const std::string& word = "") {
  return CLI::Validator(
      [lo, hi, word](std::string& value) -> std::string {
        if (!word.empty() && value == word) return "";
        try {
          size_t used = 0;
          const double v = std::stod(value, &used);
          if (used == value.size() && v >= lo && v <= hi) return "";
        } catch (const std::exception&) {
        }
        char range[64];
        std::snprintf(range, sizeof range, "%g..%g", lo, hi);
        return value + " is not in " + range + (word.empty() ? "" : " (or " + word + ")");
      },
      "");
}

// An option whose value is one of `choices`, stored typed in `target` as
// the command line is read (its help shows the names: TEXT:{a,b,c}).
template <typename E, size_t N>
CLI::Option* add_choice_option(CLI::App* sub, const std::string& name, std::optional<E>& target,
                               const ChoiceList<E, N>& choices, const std::string& help) {
  return sub
      ->add_option_function<std::string>(
          name, [&target, &choices, name](const std::string& value) { target = choices.parse(value, name); },
          help)
      ->check(CLI::IsMember(choices.names()));
}

// How to run the model: every subcommand that runs one.
inline void add_runtime_flags(CLI::App* sub, TranslatorOptions& f) {
  add_choice_option(sub, "--attention", f.attention, ops::kAttentionBackends,
                    "attention backend: " + ops::backend_choices());
  add_choice_option(sub, "--device", f.device, kDeviceChoices, "device: " + kDeviceChoices.listed());
  sub->add_option("--threads", f.threads, "threads (0 = all cores)")->check(int_range(0, 256));
}

// The dense layers' arithmetic when decoding: translate, evaluate, check-po, serve.
inline void add_compute_type_flag(CLI::App* sub, TranslatorOptions& f) {
  add_choice_option(sub, "--compute-type", f.compute_type, ops::kComputeTypeChoices,
                    "dense layers in " + ops::kComputeTypeChoices.listed() +
                        " (auto: int8 where the CPU has AVX2 or AVX-512 VNNI); default: the config's "
                        "decode.compute_type");
}

// The length limits and the length penalty: translate, evaluate and serve.
inline void add_length_flags(CLI::App* sub, TranslationOptions& f) {
  sub->add_option("--max-len", f.max_decoding_length, "maximum target tokens")->check(int_range(1, 4096));
  sub->add_option_function<std::string>(
         "--max-len-factor",
         [&f](const std::string& v) {
           f.max_length_factor = v == "auto" ? TranslationOptions::kAutoLengthFactor : std::stod(v);
         },
         "also stop after this many target tokens per source token, + 5 (0 = off; auto = from the "
         "training corpus's target/source length ratio; default: the config's decode.max_len_factor)")
      ->type_name("FACTOR|auto")
      ->check(real_range(0.0, 1000.0, "auto"));
  sub->add_option("--length-penalty", f.length_penalty,
                  "GNMT length penalty alpha for beam search (0 = none; default: the config's decode.length_penalty)")
      ->check(real_range(0.0, 10.0));
  sub->add_flag_callback("--no-placeholder-constraint", [&f] { f.placeholder_constraint = false; },
                         "with a placeholder-protected model: let a translation leave out or repeat its source's "
                         "placeholders (by default it carries each as often as the source does)");
}

inline void add_decode_flags(CLI::App* sub, TranslationOptions& f, TranslatorOptions& runtime) {
  add_length_flags(sub, f);
  sub->add_option("--batch-size", f.max_batch_size, "sentences decoded together")->check(int_range(1, 100000));
  sub->add_option("--beam", f.beam_size,
                  "beam size (0 = greedy; 1 gives the greedy output through beam search; default: the config's "
                  "decode.beam)")
      ->check(int_range(0, 64));
  sub->add_option("--parallel-batches", runtime.parallel_batches,
                  "batches decoded side by side on the CPU, one thread each with single-threaded ops; "
                  "each keeps full, taking the next lines as its sentences end "
                  "(default: one per --threads; 1 = one batch at a time using every thread)")
      ->check(int_range(1, 256));
}

}  // namespace nmt::cli
