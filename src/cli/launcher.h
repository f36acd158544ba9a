// `nmt train --nproc N`: starts N local ranks of the same command (one
// process each) with the variables a data-parallel rank reads (MASTER_ADDR,
// MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK; see train/distributed.h) and
// watches them: a rank that fails stops the others, with a message naming
// it; SIGINT/SIGTERM to the launcher reach every rank once.
#pragma once

namespace nmt::cli {

// argv: the launcher's own command line (its --nproc is dropped for the
// ranks, --threads cores/N added unless given). Returns the exit code: 0 when
// every rank succeeded, else the first failing rank's (130/143 after an
// interrupt).
int launch_local_ranks(int nproc, int argc, char** argv);

}  // namespace nmt::cli
