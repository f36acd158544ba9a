// Test hooks: the places where a test may hold or crash the program. Each is
// armed by an environment variable read once, and costs one branch when it
// is not set. A test that waits for a hook instead of sleeping passes on a
// machine ten times faster or slower alike.
#pragma once

#include <cstdint>

namespace nmt {

// NMT_TEST_HOLD=POINT[@N]:FILE holds the process the Nth time (default: the
// first) that any of its threads reaches POINT: it creates FILE (holding its
// pid), says "test hold: at POINT" on stderr, and waits there until FILE is
// removed or, when `until_signal`, a SIGINT/SIGTERM has come in
// (util/interrupt.h). The points:
//   train-step     after each training step's update (and its log line)
//   save           every checkpoint save, its folder staged, before the swap
//   save-replace   the same, for a save that replaces a checkpoint in place
//   decode-step    each batch or step of decoding (translate, evaluate, check-po)
//   score-batch    each batch the scorer scores (check-po)
//   prepare-round  each round of chunks a corpus preparation has encoded
void test_hold(const char* point, bool until_signal);

// NMT_TEST_CRASH_AT=RANK:STEP kills that rank with SIGKILL (no cleanup, as a
// crash or an OOM kill would) when it reaches STEP, in a group's first
// attempt only (`restart` 0; a restarted group meets no such crash).
void test_crash_at(int64_t rank, int64_t step, int64_t restart);

}  // namespace nmt
