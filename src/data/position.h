// Where the training data stream stands. Plain C++ (checkpoints store it).
#pragma once

#include <cstdint>

namespace nmt {

// `batch` batches of `epoch` (0-based) are consumed.
struct DataPosition {
  int64_t epoch = 0;
  int64_t batch = 0;
  bool operator==(const DataPosition& o) const { return epoch == o.epoch && batch == o.batch; }
};

}  // namespace nmt
