// Placeholder protection (tokenizer.protect_placeholders): before the model
// reads a line, each placeholder of the source (data/placeholders.h) becomes
// an indexed sentinel symbol; in training the target's matching placeholders
// become the same sentinels; after decoding, the sentinels of a translation
// are turned back into the source's placeholders. The model then only has
// to place a few symbols it sees in its input, not to spell "%1$lu" or
// "<span weight=\"bold\">" piece by piece.
//
// Printf conversions are indexed by the argument they print (a positional
// "%2$s" is argument 2; "%s" the next one in turn), so a Chinese "%2$s 的
// %1$s" and its English "%s of %s" carry the same sentinels. A translation
// whose conversions come out in argument order gets them back without
// positions ("%s ... %d", as English messages have them); in another order,
// with positions ("%2$d ... %1$s"), which printf reads the same way. Every
// other placeholder ({0}, <b>, &amp;, --force) stands for its own text.
// Plain C++17, no LibTorch.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/sentinels.h"

namespace nmt::data {

// The sentinels themselves (tokenizer/sentinels.h), named here too.
using nmt::kMaxSentinels;
using nmt::sentinel;
using nmt::sentinel_symbols;

struct MaskedSource {
  struct Slot {
    std::string text;  // the placeholder as the source has it ("%2$lu", "<b>"); empty: unused
    int arg = 0;       // > 0: the printf argument it prints
    std::string conversion;  // printf: the conversion without its position ("%lu")
    // Where the source first has it, it follows an ASCII letter or digit or
    // another placeholder directly ("file%d", "%s%s"): restore_target then
    // leaves it glued where the translation glues it.
    bool glued = false;
  };
  std::string text;         // the line with sentinels
  std::vector<Slot> slots;  // slots[k - 1] for sentinel k
};

// The source line with its placeholders replaced (those beyond kMaxSentinels,
// and lines with more printf arguments than that, stay as they are).
MaskedSource mask_source(const std::string& line);

// A training target with the placeholders that `source` has replaced by the
// same sentinels; the others stay verbatim.
std::string mask_target(const std::string& line, const MaskedSource& source);

// What the two tokenizers read for a (source, target) pair in training or
// scoring: the pair as it is, or with `protect` both sides masked.
std::pair<std::string, std::string> model_pair(const std::string& source, const std::string& target, bool protect);

// The sentinel numbers in `text`, in order, repeats included.
std::vector<int> sentinels_in(const std::string& text);

// A translation with its sentinels turned back into the source's
// placeholders; a sentinel the source does not have is dropped. A
// placeholder that comes right after a word of the translation ("now" +
// "%s") or right after another placeholder gets a space before it, unless
// the source glued it the same way (Slot::glued) or it is one that text
// touches (markup, entities, "%%", "%m"): decoding forces a missing
// placeholder in at the end (decode/placeholder_constraint.h), where the
// model wrote no space for it.
std::string restore_target(const std::string& translation, const MaskedSource& source);

// Text a person is shown (a token of an attention map, a line of them) with
// each sentinel written as the placeholder it stands for, the source's own
// text ("%2$lu", "<b>"): a sentinel is a private-use character that fonts
// draw as a box. One the source lacks (which restore_target drops) is
// written "[#k]".
std::string show_sentinels(const std::string& text, const MaskedSource& source);

}  // namespace nmt::data
