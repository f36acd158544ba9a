// `nmt bench-attention`: times the attention backends against each other and
// against a plain sgemm, one child process per case so that each case's peak
// memory is its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/attention/backend.h"

namespace CLI {
class App;
}

namespace nmt::bench {

struct BenchArgs {
  std::string device = "cpu";  // cpu | cuda
  std::string csv;             // empty: no CSV, only the table on stdout
  std::string dtype = "float32";  // float32 | bf16: q, k, v, dO (sgemm stays float32)
  bool quick = false;          // the reduced set CI runs (caps repeats at 3)
  int64_t threads = 0;         // 0 = all cores; passed on to every child
  std::vector<std::string> backends = ops::backend_names();
  int repeats = 5;  // timed runs per case; the median is reported
  // Which of LibTorch's SDPA kernels the torch backend may use on CUDA: auto
  // (LibTorch's own choice, which on Hopper prefers cuDNN) or exactly one of
  // flash | efficient | cudnn | math (the others switched off, so a case the
  // kernel cannot run fails rather than falling back).
  std::string sdpa = "auto";
  // Self-attention lengths and head dims to run (B = 8, H = 8, with and
  // without the causal mask), plus the cross-attention case. Empty: the
  // default plan (which adds T = 8192 and 16384 at B = 1).
  std::vector<int64_t> lens;
  std::vector<int64_t> head_dims;
  // Internal: run one case in this process and print its result line. Set by
  // the parent when it re-executes itself (--case SPEC); empty = parent.
  std::string single_case;
};

// Returns the process exit code: 0, or 1 when a case failed (the CSV still
// holds the others). Bad arguments throw InputError (exit 2).
// `nmt bench-attention`'s options (bench_attention.cpp, beside its run function).
CLI::App* add_bench_attention_command(CLI::App& app, BenchArgs& args);
int run_bench_attention(const BenchArgs& args);

}  // namespace nmt::bench
