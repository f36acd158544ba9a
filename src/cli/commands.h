// Subcommands of the `nmt` executable: each has its arguments, an
// add_X_command that declares its options (defined beside its run function),
// and run_X, which returns the process exit code; InputError (exit 2) and
// other exceptions (exit 1) are mapped in main().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nmt/translator.h"
#include "serve/http_server.h"

namespace CLI {
class App;
}

namespace nmt::cli {

// Every subcommand that runs a model takes how to run it (--attention,
// --device, --threads; the decoding commands --compute-type and
// --parallel-batches) into the library's TranslatorOptions, and the decoding
// commands what to decode (--beam, --max-len, ...) into its
// TranslationOptions (nmt/translator.h): parsed into their types as the
// command line is read (cli/options.h), unset ones from the config.

struct TrainArgs {
  std::string config;
  std::string resume;  // continue this run folder/checkpoint exactly
  bool overwrite = false;  // a new run may replace the checkpoints in its folder
  std::vector<std::string> sets;  // --set key.path=value
  int64_t profile = 0;            // > 0: profile this many steps instead of training
  int64_t nproc = 1;              // > 1: launch this many local ranks (data parallel)
  int64_t max_restarts = 0;       // > 0: restart a failed group from its last checkpoint
  TranslatorOptions runtime;      // --attention, --device, --threads: the config's keys, overridden
};
CLI::App* add_train_command(CLI::App& app, TrainArgs& args);
int run_train(const TrainArgs& args);

// `nmt prepare`: the training corpus prepared once into shards (data/prepare.h).
struct PrepareArgs {
  std::string config;
  std::vector<std::string> sets;  // --set key.path=value
  int64_t threads = 0;            // encoding threads (0 = all cores)
  bool force = false;             // prepare again even when fresh
};
CLI::App* add_prepare_command(CLI::App& app, PrepareArgs& args);
int run_prepare(const PrepareArgs& args);

struct TranslateArgs {
  std::string checkpoint;
  std::string input;          // empty = stdin
  std::string output;         // empty = stdout; else written whole (atomically) at the end
  std::string attention_map;  // write cross-attention heatmaps (SVG) here
  int64_t map_layer = -1;     // decoder layer for the map (-1 = last)
  int64_t map_head = -1;      // head for the map (-1 = mean over heads)
  TranslationOptions decode;
  TranslatorOptions runtime;
};
CLI::App* add_translate_command(CLI::App& app, TranslateArgs& args);
int run_translate(const TranslateArgs& args);

struct EvaluateArgs {
  std::string checkpoint, src, ref;
  std::string output;  // optional: write hypotheses here
  TranslationOptions decode;
  TranslatorOptions runtime;
};
CLI::App* add_evaluate_command(CLI::App& app, EvaluateArgs& args);
int run_evaluate(const EvaluateArgs& args);

// `nmt score`: BLEU, chrF2, exact match (and placeholders, given the
// sources) of a file of translations against references.
struct ScoreArgs {
  std::string hyp, ref, src;
};
CLI::App* add_score_command(CLI::App& app, ScoreArgs& args);
int run_score(const ScoreArgs& args);

// `nmt check-po`: a reviewer's check of a Chinese gettext catalog. Without a
// checkpoint, placeholders only; with one, every translated entry is also
// back-translated and scored, and the entries whose English fits their
// Chinese worst are listed. Exit 0, or 3 (kExitFaultsFound) when placeholders are wrong.
struct CheckPoArgs {
  std::string file;
  std::string checkpoint;    // empty: placeholder checks only
  int64_t top = 20;          // entries listed by rank (0 = all)
  std::string rank = "combined";  // combined | support | gap | score | chrf (see run_check_po)
  bool json = false;
  bool hints = true;         // list msgid option names the msgstr lacks (not faults)
  TranslationOptions decode;
  TranslatorOptions runtime;
};
CLI::App* add_check_po_command(CLI::App& app, CheckPoArgs& args);
int run_check_po(const CheckPoArgs& args);

// `nmt export`: a checkpoint as a CTranslate2 model directory.
struct ExportArgs {
  std::string checkpoint, output;
  std::string format = "ctranslate2";
  bool overwrite = false;
};
CLI::App* add_export_command(CLI::App& app, ExportArgs& args);
int run_export(const ExportArgs& args);

// `nmt average`: checkpoints' model weights averaged into a new checkpoint
// (train/checkpoint_average.h).
struct AverageArgs {
  std::vector<std::string> checkpoints;
  std::string output;
  bool overwrite = false;
};
CLI::App* add_average_command(CLI::App& app, AverageArgs& args);
int run_average(const AverageArgs& args);

// `nmt convert`: checkpoints saved before model.safetensors made readable
// by the runtime alone (train/checkpoint_writer.h add_model_safetensors).
struct ConvertArgs {
  std::string checkpoint;
};
CLI::App* add_convert_command(CLI::App& app, ConvertArgs& args);
int run_convert(const ConvertArgs& args);

// `nmt serve`: the HTTP service (serve/http_server.h).
struct ServeArgs {
  std::string checkpoint;
  std::string host = "127.0.0.1";
  int64_t port = 8080;
  std::string port_file;
  int64_t max_batch_tokens = 1024, max_delay_ms = 10, max_queue = 512;
  int64_t max_sentences = 64, max_body_bytes = 1 << 20;
  serve::ConnectionLimits connections;  // serve/http_server.h
  int64_t workers = 0;  // batches translated at once (0: one per thread on the CPU, 1 on CUDA)
  std::string batching = "continuous";  // greedy requests: continuous | static
  std::vector<std::string> allow_hosts, allow_origins;  // serve/access.h
  std::string api_key_file;
  TranslationOptions decode;  // the length limits (the beam comes with each request)
  TranslatorOptions runtime;
};
CLI::App* add_serve_command(CLI::App& app, ServeArgs& args);
int run_serve(const ServeArgs& args);

}  // namespace nmt::cli
