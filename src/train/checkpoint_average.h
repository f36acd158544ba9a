// `nmt average`: the mean of several checkpoints' model weights, parameter
// by parameter (fairseq's average_checkpoints.py), written as a checkpoint
// folder that translate, evaluate, serve and export load like any other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

struct AverageSummary {
  int64_t checkpoints = 0;  // how many were averaged
  int64_t parameters = 0;   // values in each
  int64_t step = 0;         // the latest input's step, which the output's state.yaml carries
};

// Averages the model weights of `inputs` (checkpoint folders, or run folders:
// their best/, else last/, as translate reads them) into the checkpoint
// folder `output`: the first input's config and tokenizers, the latest
// input's training state without its metrics (they describe other weights),
// no optimizer state (an average is for inference, not for resuming).
// InputError (exit 2), one line naming the file, when fewer than two
// inputs are given, when their tokenizers (vocabularies), parameters
// (names, shapes) or model settings differ, or when `output` exists (and,
// with overwrite, holds anything but a checkpoint). The output is staged
// and swapped in whole (train/checkpoint_writer.h): never half-written.
AverageSummary average_checkpoints(const std::vector<std::string>& inputs, const std::string& output,
                                   bool overwrite);

}  // namespace nmt
