#include "train/checkpoint_average.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <tuple>

#include "checkpoint/checkpoint.h"
#include "checkpoint/manifest.h"
#include "model/parameter_table.h"
#include "train/checkpoint_writer.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/interrupt.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

// The first model.* key whose value differs between two configs ("" when
// none does). Dropout only shapes training: checkpoints that differ in a
// dropout rate average as well as any.
std::string model_difference(const Config& a, const Config& b, std::string* a_value, std::string* b_value) {
  for (const std::string& key : config_keys("model")) {
    if (key.find("dropout") != std::string::npos) continue;
    *a_value = config_value(a, key), *b_value = config_value(b, key);
    if (*a_value != *b_value) return key;
  }
  return "";
}

// What may become the output: missing, an empty folder, or with overwrite a
// checkpoint folder and nothing else.
void check_output(const std::string& output, bool overwrite) {
  std::error_code ec;
  const fs::path parent = fs::absolute(output).parent_path();
  if (!fs::is_directory(parent, ec)) throw InputError(output + ": parent folder " + parent.string() + " does not exist");
  if (!fs::exists(fs::symlink_status(output, ec))) return;
  if (!fs::is_directory(fs::symlink_status(output, ec))) throw InputError(output + ": exists and is not a folder");
  if (fs::is_empty(output, ec) && !ec) return;
  if (!overwrite) throw InputError(output + ": exists; choose another --output or pass --overwrite to replace it");
  if (const std::string foreign = first_foreign_entry(output, is_checkpoint_file_name); !foreign.empty())
    throw InputError(foreign + ": not written by nmt (" + output +
                     " is not a checkpoint); --overwrite replaces only a checkpoint or an empty folder");
}

}  // namespace

AverageSummary average_checkpoints(const std::vector<std::string>& inputs, const std::string& output,
                                   bool overwrite) {
  if (inputs.size() < 2)
    throw InputError("--checkpoints: give at least two checkpoints to average (got " +
                     std::to_string(inputs.size()) + ")");
  check_output(output, overwrite);
  // The first checkpoint's model receives the average; the sums are kept in
  // double, one tensor per parameter, and each input is dropped once added.
  LoadedCheckpoint first = load_checkpoint(inputs.front(), c10::Device(c10::kCPU));
  const std::vector<ParamEntry> table = parameter_table(*first.model);
  std::vector<at::Tensor> sums;
  int64_t values = 0;
  for (const ParamEntry& e : table) {
    sums.push_back(e.tensor.detach().to(at::kDouble));
    values += e.tensor.numel();
  }
  TrainingState latest = first.state;
  const std::string first_weights = first.dir + "/model.pt";
  for (size_t k = 1; k < inputs.size(); ++k) {
    throw_if_interrupted();
    const LoadedCheckpoint ck = load_checkpoint(inputs[k], c10::Device(c10::kCPU));
    for (const auto& [name, mine, theirs] : {std::tuple{"src.model", &ck.src_model, &first.src_model},
                                             std::tuple{"tgt.model", &ck.tgt_model, &first.tgt_model}})
      if (*mine != *theirs)
        throw InputError(ck.dir + "/" + name + ": another vocabulary than " + first.dir + "/" + name +
                         " (only checkpoints with the same tokenizers can be averaged)");
    const std::vector<ParamEntry> other = parameter_table(*ck.model);
    for (size_t i = 0; i < std::max(table.size(), other.size()); ++i) {
      if (i >= other.size() || i >= table.size() || other[i].name != table[i].name)
        throw InputError(ck.dir + "/model.pt: parameter " + (i < other.size() ? other[i].name : "(none)") +
                         " where " + first_weights + " has " + (i < table.size() ? table[i].name : "(none)") +
                         " (another architecture)");
      if (!other[i].tensor.sizes().equals(table[i].tensor.sizes()))
        throw InputError(ck.dir + "/model.pt: parameter " + table[i].name + " has shape " +
                         c10::str(other[i].tensor.sizes()) + ", " + first_weights + " has " +
                         c10::str(table[i].tensor.sizes()));
    }
    std::string a_value, b_value;
    if (const std::string key = model_difference(first.cfg, ck.cfg, &a_value, &b_value); !key.empty())
      throw InputError(ck.dir + "/config.yaml: " + key + " is " + b_value + ", " + first.dir + "/config.yaml has " +
                       a_value + " (another architecture)");
    for (size_t i = 0; i < table.size(); ++i) sums[i].add_(other[i].tensor.detach().to(at::kDouble));
    if (ck.state.step >= latest.step) latest = ck.state;
  }
  {
    at::NoGradGuard no_grad;
    const double n = static_cast<double>(inputs.size());
    for (size_t i = 0; i < table.size(); ++i) table[i].tensor.copy_(sums[i].div_(n));
  }
  latest.metrics.clear();
  latest.best = std::numeric_limits<double>::quiet_NaN();
  latest.evals_since_best = 0;
  throw_if_interrupted();
  check_output(output, overwrite);  // again: the folder may have changed while the inputs were read
  save_checkpoint(output, first.model, nullptr, latest, first.cfg, TokenizerBytes{first.src_model, first.tgt_model});
  AverageSummary s;
  s.checkpoints = static_cast<int64_t>(inputs.size());
  s.parameters = values;
  s.step = latest.step;
  return s;
}

}  // namespace nmt
