// `nmt`: train, translate and evaluate a zh→en Transformer.
#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "cli/build_info.h"
#include "cli/check_causality.h"
#include "cli/commands.h"
#include "cli/launcher.h"
#include "decode/torch_decoding.h"
#include "ops/linear/cpu/float_gemm.h"
#include "util/errors.h"
#include "util/interrupt.h"
#include "util/thread_env.h"

namespace {

// `nmt bench-attention ...` is the program nmt-bench-attention beside this
// one (bench/src/bench_attention_main.cpp), run with the same arguments;
// a build of nmt alone (scripts/setup.sh --demo) lacks it.
int run_bench_program(char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string bench = (self.parent_path() / "nmt-bench-attention").string();
  if (ec || ::access(bench.c_str(), X_OK) != 0) {
    std::cerr << "nmt: error: bench-attention: " << bench
              << " is not built (scripts/setup.sh --demo builds nmt alone): cmake --build "
              << self.parent_path().string() << " --target nmt-bench-attention\n";
    return nmt::kExitInput;
  }
  argv[0] = const_cast<char*>(bench.c_str());
  ::execv(bench.c_str(), argv);
  std::cerr << "nmt: error: bench-attention: cannot run " << bench << ": " << std::strerror(errno) << "\n";
  return nmt::kExitRuntime;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "bench-attention") return run_bench_program(argv);
  // A training step's products all run on OpenMP's pool where oneDNN's or
  // MKL's float32 gemm is loaded (oneDNN's bf16 one comes with LibTorch).
  nmt::ensure_library_settings(argv, nmt::ops::cpu::float_gemm_available());
  // Before any thread of ours starts (util/interrupt.h says why).
  nmt::take_signals_on_own_thread();
  // The runtime decodes on the CPU alone; this program lends it LibTorch for
  // a GPU, LibTorch's attention and checkpoints saved before model.safetensors.
  nmt::install_torch_runtime();
  // Logs go to stderr so that stdout carries only results (translations).
  spdlog::set_default_logger(spdlog::stderr_color_mt("nmt"));
  spdlog::set_pattern("[%H:%M:%S] %v");

  CLI::App app{"nmt: a Chinese→English Transformer trainer with its own attention operators"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  app.set_version_flag("--version", std::function<std::string()>(nmt::cli::build_info), "what this nmt was built with, and the CPU and GPUs it finds");
  // Every option's --help shows its default (subcommands inherit this).
  app.option_defaults()->always_capture_default();

  // The subcommands; each declares its options beside its run function.
  nmt::cli::TrainArgs train;
  CLI::App* train_cmd = nmt::cli::add_train_command(app, train);
  nmt::cli::PrepareArgs prepare;
  CLI::App* prep_cmd = nmt::cli::add_prepare_command(app, prepare);
  nmt::cli::TranslateArgs translate;
  CLI::App* tr_cmd = nmt::cli::add_translate_command(app, translate);
  nmt::cli::EvaluateArgs eval;
  CLI::App* ev_cmd = nmt::cli::add_evaluate_command(app, eval);
  nmt::cli::ScoreArgs score;
  CLI::App* sc_cmd = nmt::cli::add_score_command(app, score);
  nmt::cli::CausalityArgs causality;
  CLI::App* cc_cmd = nmt::cli::add_check_causality_command(app, causality);
  nmt::cli::CheckPoArgs check_po;
  CLI::App* po_cmd = nmt::cli::add_check_po_command(app, check_po);
  nmt::cli::ExportArgs exp;
  CLI::App* ex_cmd = nmt::cli::add_export_command(app, exp);
  nmt::cli::AverageArgs average;
  CLI::App* av_cmd = nmt::cli::add_average_command(app, average);
  nmt::cli::ConvertArgs convert;
  CLI::App* cv_cmd = nmt::cli::add_convert_command(app, convert);
  nmt::cli::ServeArgs serve;
  CLI::App* sv_cmd = nmt::cli::add_serve_command(app, serve);
  // Listed here, run by its own program (run_bench_program).
  app.add_subcommand("bench-attention",
                     "time the attention backends against each other and sgemm, one process per case "
                     "(nmt bench-attention --help)");

  // A word where the subcommand goes that names none: say which, rather than
  // CLI11's "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      found = found || sub->get_name() == argv[1];
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) {
      std::cerr << "nmt: error: unknown command '" << argv[1] << "' (commands: " << known << "; see nmt --help)\n";
      return nmt::kExitInput;
    }
  }

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
    if (av_cmd->parsed()) return nmt::cli::run_average(average);
    if (cv_cmd->parsed()) return nmt::cli::run_convert(convert);
    if (sv_cmd->parsed()) return nmt::cli::run_serve(serve);
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
