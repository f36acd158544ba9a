// A checkpoint's state.yaml and manifest.txt parsers, both on every input
// (the seeds hold either kind). Expected failures are InputError; any other
// exception escapes and counts as a crash. Property: what parses is written
// back by the writer the trainer uses and parses again to the same value.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"
#include "checkpoint/state.h"
#include "fuzz_util.h"
#include "util/errors.h"

namespace {

// Equal, NaN equal to NaN (best is NaN before the first evaluation).
bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

bool same(const nmt::TrainingState& a, const nmt::TrainingState& b) {
  if (a.step != b.step || !(a.position == b.position) || !same(a.best, b.best) ||
      a.evals_since_best != b.evals_since_best || a.metrics.size() != b.metrics.size())
    return false;
  for (auto i = a.metrics.begin(), j = b.metrics.begin(); i != a.metrics.end(); ++i, ++j)
    if (i->first != j->first || !same(i->second, j->second)) return false;
  return true;
}

void state(const std::string& text) {
  using namespace nmt;
  TrainingState s;
  try {
    s = parse_training_state(text, "state.yaml");
  } catch (const InputError&) {
    return;
  }
  const std::string written = training_state_yaml(s);
  TrainingState again;
  try {
    again = parse_training_state(written, "written state.yaml");
  } catch (const InputError& e) {
    fuzz::fail(std::string("training_state_yaml() output does not parse back: ") + e.what() + "\n" + written);
  }
  fuzz::check(same(s, again), "training_state_yaml() output parses to another state:\n" + written);
}

void manifest(const std::string& text) {
  using namespace nmt;
  std::vector<ManifestEntry> entries;
  try {
    entries = parse_manifest(text, "manifest.txt");
  } catch (const InputError&) {
    return;
  }
  const std::string written = format_manifest(entries);
  std::vector<ManifestEntry> again;
  try {
    again = parse_manifest(written, "written manifest.txt");
  } catch (const InputError& e) {
    fuzz::fail(std::string("format_manifest() output does not parse back: ") + e.what() + "\n" + written);
  }
  fuzz::check(again.size() == entries.size(), "format_manifest() output has another entry count");
  for (size_t i = 0; i < entries.size(); ++i)
    fuzz::check(again[i].file == entries[i].file && again[i].size == entries[i].size &&
                    again[i].sha256 == entries[i].sha256,
                "format_manifest() output parses to another entry: " + entries[i].file);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  state(text);
  manifest(text);
  return 0;
}
