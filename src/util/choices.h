// A closed list of names a user chooses from (a flag's or a config key's
// values), written once beside its enum: the parser, the names that --help,
// the command line's checks and the config's validation offer, and the
// message listing them all come from that one table. Plain C++.
//
//   enum class DeviceKind { kCpu, kCuda, kAuto };
//   inline constexpr ChoiceList<DeviceKind, 3> kDeviceChoices{{{
//       {DeviceKind::kCpu, "cpu"}, {DeviceKind::kCuda, "cuda"}, {DeviceKind::kAuto, "auto"}}}};
//   kDeviceChoices.parse("cuda", "--device")   // DeviceKind::kCuda
//   kDeviceChoices.listed()                    // "cpu | cuda | auto"
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "util/errors.h"

namespace nmt {

template <typename E>
struct Choice {
  E value;
  const char* name;
};

template <typename E, size_t N>
struct ChoiceList {
  std::array<Choice<E>, N> items;

  auto begin() const { return items.begin(); }
  auto end() const { return items.end(); }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Choice<E>& c : items) out.emplace_back(c.name);
    return out;
  }
  // "a | b | c", for messages and help texts.
  std::string listed() const {
    std::string out;
    for (const Choice<E>& c : items) out += (out.empty() ? "" : " | ") + std::string(c.name);
    return out;
  }
  std::optional<E> find(const std::string& name) const {
    for (const Choice<E>& c : items)
      if (name == c.name) return c.value;
    return std::nullopt;
  }
  const char* name(E value) const {
    for (const Choice<E>& c : items)
      if (c.value == value) return c.name;
    return "?";
  }
  // InputError "WHAT: 'x' is not one of: a | b | c" (exit 2) for any other name.
  E parse(const std::string& name, const std::string& what) const {
    if (const std::optional<E> v = find(name)) return *v;
    throw InputError(what + ": '" + name + "' is not one of: " + listed());
  }
};

}  // namespace nmt
