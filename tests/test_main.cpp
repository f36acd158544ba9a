#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  spdlog::set_level(spdlog::level::warn);
  at::set_num_threads(2);
  return RUN_ALL_TESTS();
}
