#include "checkpoint/state.h"

#include <yaml-cpp/yaml.h>

#include <cmath>

#include "util/errors.h"
#include "util/utf8.h"

namespace nmt {

std::string training_state_yaml(const TrainingState& s) {
  YAML::Emitter out;
  out.SetDoublePrecision(17);
  out << YAML::BeginMap << YAML::Key << "step" << YAML::Value << s.step;
  out << YAML::Key << "epoch" << YAML::Value << s.position.epoch;
  out << YAML::Key << "batch_in_epoch" << YAML::Value << s.position.batch;
  out << YAML::Key << "best" << YAML::Value << s.best;
  out << YAML::Key << "evals_since_best" << YAML::Value << s.evals_since_best;
  out << YAML::Key << "train_seconds" << YAML::Value << s.train_seconds;
  out << YAML::Key << "wall_seconds" << YAML::Value << s.wall_seconds;
  if (std::isfinite(s.target_source_ratio))
    out << YAML::Key << "target_source_ratio" << YAML::Value << s.target_source_ratio;
  if (!s.precision.empty()) out << YAML::Key << "precision" << YAML::Value << s.precision;
  out << YAML::Key << "metrics" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, value] : s.metrics) out << YAML::Key << name << YAML::Value << value;
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

TrainingState parse_training_state(const std::string& yaml, const std::string& path) {
  TrainingState s;
  // yaml-cpp keeps bytes that are not UTF-8 (and turns a NUL in a plain
  // scalar into a stray byte 0xA0) but writes them back as U+FFFD, so such a
  // metric name would not survive training_state_yaml().
  if (!utf8::valid(yaml)) throw InputError(path + ": unreadable training state: not valid UTF-8");
  if (yaml.find('\0') != std::string::npos)
    throw InputError(path + ": unreadable training state: NUL character");
  try {
    const YAML::Node n = YAML::Load(yaml);
    s.step = n["step"].as<int64_t>();
    s.position.epoch = n["epoch"].as<int64_t>();
    s.position.batch = n["batch_in_epoch"].as<int64_t>();
    s.best = n["best"].as<double>();
    s.evals_since_best = n["evals_since_best"].as<int64_t>();
    // Absent from checkpoints written before the clock was kept.
    if (n["train_seconds"]) s.train_seconds = n["train_seconds"].as<double>();
    if (n["wall_seconds"]) s.wall_seconds = n["wall_seconds"].as<double>();
    // Absent from checkpoints written before it was recorded: NaN.
    if (n["target_source_ratio"]) s.target_source_ratio = n["target_source_ratio"].as<double>();
    if (n["precision"]) s.precision = n["precision"].as<std::string>();
    for (const auto& kv : n["metrics"]) s.metrics[kv.first.as<std::string>()] = kv.second.as<double>();
    if (s.step < 0 || s.position.epoch < 0 || s.position.batch < 0 || s.evals_since_best < 0 ||
        !(s.train_seconds >= 0) || !(s.wall_seconds >= 0))
      throw YAML::Exception(YAML::Mark::null_mark(), "negative counter or time");
    if (n["target_source_ratio"] && !(s.target_source_ratio > 0 && std::isfinite(s.target_source_ratio)))
      throw YAML::Exception(YAML::Mark::null_mark(), "target_source_ratio is not a positive number");
    if (n["precision"] && s.precision != "float32" && s.precision != "bf16")
      throw YAML::Exception(YAML::Mark::null_mark(), "precision is neither float32 nor bf16");
  } catch (const YAML::Exception& e) {
    throw InputError(path + ": unreadable training state: " + e.msg);
  }
  return s;
}

}  // namespace nmt
