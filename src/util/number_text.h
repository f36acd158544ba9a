// Numbers as text a person reads: the shortest decimal that reads back as
// the same double (0.1, not 0.10000000000000001, which printing 17 digits
// gives). Plain C++17.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace nmt {

// "3" for 3.0, "0.025", "1e-09"; strtod() of the text gives v back.
inline std::string shortest_number(double v) {
  if (std::isfinite(v) && v == static_cast<double>(static_cast<int64_t>(v)) && std::abs(v) < 1e15)
    return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace nmt
