// Masks and restores as nmt does (data/placeholder_mask.h), for comparison
// with the helper that `nmt export` ships beside a protected model
// (src/export/placeholders.py; tests/placeholder_helper_test.py).
// Usage: placeholder_mask_dump SOURCES TARGETS TRANSLATIONS
// prints, per line i, three fields separated by U+001F: mask_source(source).text,
// mask_target(target, that mask) and restore_target(translation, that mask).
// Plain C++17: reads bytes as they are.
#include <fstream>
#include <iostream>
#include <string>

#include "data/placeholder_mask.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: placeholder_mask_dump SOURCES TARGETS TRANSLATIONS\n";
    return 2;
  }
  std::ifstream sources(argv[1], std::ios::binary), targets(argv[2], std::ios::binary),
      translations(argv[3], std::ios::binary);
  if (!sources || !targets || !translations) {
    std::cerr << "placeholder_mask_dump: cannot read an input file\n";
    return 2;
  }
  std::string source, target, translation;
  while (std::getline(sources, source) && std::getline(targets, target) && std::getline(translations, translation)) {
    const nmt::data::MaskedSource m = nmt::data::mask_source(source);
    std::cout << m.text << '\x1f' << nmt::data::mask_target(target, m) << '\x1f'
              << nmt::data::restore_target(translation, m) << '\n';
  }
  return 0;
}
