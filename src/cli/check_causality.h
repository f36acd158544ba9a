// `nmt check-causality`: runs the check in model/causality.h on a checkpoint.
#pragma once

#include <string>

#include "cli/commands.h"

namespace nmt {

namespace cli {

struct CausalityArgs {
  std::string checkpoint;
  int64_t sentences = 8;
  bool disable_causal_mask = false;
  TranslatorOptions runtime;  // --attention, --device, --threads
};
CLI::App* add_check_causality_command(CLI::App& app, CausalityArgs& args);
// Exit 0 when causal, 1 when leakage is found.
int run_check_causality(const CausalityArgs& args);

}  // namespace cli
}  // namespace nmt
