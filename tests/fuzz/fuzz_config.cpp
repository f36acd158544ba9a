// The config loader: YAML text and --set assignments.
// Input: the YAML text, then each assignment after a NUL byte
// ("yaml\0model.heads=8\0train.lr=1e-3"). Expected failures are InputError;
// any other exception escapes and counts as a crash. Properties checked:
// a rejected --set list leaves the config as it was, the result passes
// validate(), and to_yaml() of it parses back to the same config.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "fuzz_util.h"
#include "util/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nmt;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t nul = input.find('\0', start);
    parts.push_back(input.substr(start, nul == std::string::npos ? std::string::npos : nul - start));
    if (nul == std::string::npos) break;
    start = nul + 1;
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
