// nmt-bench-attention: the attention benchmark as a program of its own, so
// that `nmt` (and the demo's build of it) does not carry the harness;
// `nmt bench-attention ARGS` runs it as `nmt-bench-attention bench-attention
// ARGS` (src/cli/main.cpp), and it runs its cases the same way.
#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "bench/src/bench_attention.h"
#include "util/errors.h"
#include "util/thread_env.h"

int main(int argc, char** argv) {
  nmt::ensure_library_settings(argv);
  spdlog::set_default_logger(spdlog::stderr_color_mt("nmt"));
  spdlog::set_pattern("[%H:%M:%S] %v");
  CLI::App app{"nmt-bench-attention: the attention backends timed against each other and sgemm"};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();
  nmt::bench::BenchArgs bench;
  nmt::bench::add_bench_attention_command(app, bench);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "nmt: error: " << e.what() << " (see nmt bench-attention --help)\n";
    return nmt::kExitInput;
  }
  try {
    return nmt::bench::run_bench_attention(bench);
  } catch (const nmt::InputError& e) {
    std::cerr << "nmt: error: " << e.what() << "\n";
    return nmt::kExitInput;
  } catch (const c10::Error& e) {
    std::cerr << "nmt: runtime error: " << e.what_without_backtrace() << "\n";
    return nmt::kExitRuntime;
  } catch (const std::exception& e) {
    std::cerr << "nmt: runtime error: " << e.what() << "\n";
    return nmt::kExitRuntime;
  }
}
