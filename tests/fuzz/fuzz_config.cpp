// The config loader: YAML text and --set assignments.
// Input: the YAML text, then each assignment after a byte 0xFF
// ("yaml\xFFmodel.heads=8\xFFtrain.lr=1e-3"): that byte is never part of
// UTF-8 text, so every other byte (NUL too) reaches the parsers. Expected
// failures are InputError;
// any other exception escapes and counts as a crash. Properties checked:
// a rejected --set list leaves the config as it was, the result passes
// validate(), its strings are UTF-8 text, and to_yaml() of it parses back
// to the same config.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "fuzz_util.h"
#include "util/errors.h"
#include "util/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nmt;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t sep = input.find('\xFF', start);
    parts.push_back(input.substr(start, sep == std::string::npos ? std::string::npos : sep - start));
    if (sep == std::string::npos) break;
    start = sep + 1;
  }
  const std::vector<std::string> sets(parts.begin() + 1, parts.end());

  Config cfg;
  try {
    cfg = parse_config(parts[0], "fuzz.yaml");
  } catch (const InputError&) {
    return 0;
  }
  const std::string before = to_yaml(cfg);
  try {
    apply_overrides(cfg, sets);
  } catch (const InputError&) {
    fuzz::check(to_yaml(cfg) == before, "a rejected --set changed the config");
  }
  try {
    validate(cfg);
  } catch (const InputError& e) {
    fuzz::fail(std::string("an accepted config fails validate(): ") + e.what());
  }
  for (const std::string* s :
       {&cfg.data.train_src, &cfg.data.train_tgt, &cfg.data.valid_src, &cfg.data.valid_tgt, &cfg.data.test_src,
        &cfg.data.test_tgt, &cfg.data.prepared_dir, &cfg.train.checkpoint_dir, &cfg.train.metrics_file})
    fuzz::check(utf8::valid(*s) && s->find('\0') == std::string::npos, "an accepted string is not UTF-8 text");
  const std::string resolved = to_yaml(cfg);
  Config again;
  try {
    again = parse_config(resolved, "resolved.yaml");
  } catch (const InputError& e) {
    fuzz::fail(std::string("to_yaml() output does not parse back: ") + e.what() + "\n" + resolved);
  }
  fuzz::check(to_yaml(again) == resolved, "to_yaml() output parses to another config:\n" + resolved +
                                              "---\n" + to_yaml(again));
  return 0;
}
