// Subcommands of the `nmt` executable. Each returns the process exit code;
// InputError (exit 2) and other exceptions (exit 1) are mapped in main().
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace nmt::cli {

// Flags every subcommand that runs a model accepts.
struct RuntimeFlags {
  std::optional<std::string> attention;  // --attention torch|naive|flash
  std::optional<std::string> device;     // --device cpu|cuda|auto
  std::optional<int64_t> threads;        // --threads N (0 = all cores)
};

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;  // --set key.path=value
  RuntimeFlags runtime;
};
int run_train(const TrainArgs& args);

struct TranslateArgs {
  std::string checkpoint;
  std::string input;  // empty = stdin
  std::optional<int64_t> max_len, batch_size;
  RuntimeFlags runtime;
};
int run_translate(const TranslateArgs& args);

struct EvaluateArgs {
  std::string checkpoint, src, ref;
  std::string output;  // optional: write hypotheses here
  RuntimeFlags runtime;
};
int run_evaluate(const EvaluateArgs& args);

}  // namespace nmt::cli
