// `nmt train --nproc N`: starts N local ranks of the same command (one
// process each) with the variables a data-parallel rank reads (MASTER_ADDR,
// MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK; see train/distributed.h) and
// watches them: a rank that fails stops the others, with a message naming
// it; SIGINT/SIGTERM to the launcher reach every rank once.
// `--max-restarts K` restarts a failed group from its last checkpoint.
#pragma once

namespace nmt::cli {

// argv: the launcher's own command line (its --nproc and --max-restarts are
// dropped for the ranks, --threads cores/N added unless given). When a rank
// fails, the others are stopped; with max_restarts > 0 the group is then
// started again, up to that many times, with TORCHELASTIC_RESTART_COUNT set
// as torchrun sets it, so that it continues from the run folder's last
// checkpoint (train/checkpoint_manager.h RunStart::restart). No restart after
// an interrupt or a refused input (exit 2). Returns the exit code: 0 when
// every rank succeeded, else the last attempt's first failing rank's
// (130/143 after an interrupt).
int launch_local_ranks(int nproc, int max_restarts, int argc, char** argv);

}  // namespace nmt::cli
