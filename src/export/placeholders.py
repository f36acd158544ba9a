#!/usr/bin/env python3
"""Placeholder protection for a model exported by `nmt export`.

This model was trained with placeholder protection: before it reads a line,
each placeholder of the source (printf conversions such as %s, %'d or %1$s,
Python's %(name)s, {name} fields, markup tags such as <b>, character
references such as &amp;, --long-options) becomes a sentinel symbol
(U+E001, U+E002, ...), and its translation carries the same sentinels, which
are turned back into the source's placeholders afterwards. `nmt translate`
does both steps itself; CTranslate2 does neither, so its callers use this
file, which does them exactly as nmt does (Python 3.8+, standard library).

As a program (needs the ctranslate2 and sentencepiece packages):

    python3 placeholders.py translate [--beam 4] [--compute-type int8] \\
        [--device cpu] [--max-len 160] [--batch-size 32] < in.zh > out.en

translates stdin line by line with the model in this folder and writes the
translations with their placeholders restored. A line whose translation lost
one of the source's placeholders is named on stderr (nmt constrains its
decoding so that this cannot happen; CTranslate2 cannot, so check them).

As a module, around your own CTranslate2 calls:

    import placeholders
    m = placeholders.mask(line)                    # m.text: the line with sentinels
    tokens = src_sp.encode(m.text, out_type=str)   # src.model of this folder
    result = translator.translate_batch([tokens])[0]
    raw = tgt_sp.decode(result.hypotheses[0])      # still with sentinels
    lost = placeholders.missing(raw, m)            # placeholders it dropped
    text = placeholders.restore(raw, m)

Printf conversions are numbered by the argument they print, so "%2$s 的 %1$s"
and "%s of %s" carry the same sentinels; a translation whose conversions come
out in argument order gets them without positions ("%s ... %d"), in another
order with positions ("%2$d ... %1$s"), which printf reads the same way. A
sentinel the source does not have is dropped. mask_target() masks a
reference translation the same way (to score one with score_batch).
"""

import sys

MAX_SENTINELS = 24


def sentinel(k):
    """Sentinel k (1 <= k <= MAX_SENTINELS) as text: U+E000 + k."""
    return chr(0xE000 + k)


# --- The recogniser, on UTF-8 bytes as nmt reads lines ----------------------

def _digit(c):
    return 48 <= c <= 57


def _alpha(c):
    return 65 <= c <= 90 or 97 <= c <= 122


def _ident(c):
    return _alpha(c) or _digit(c) or c == 95  # '_'


class _Directive:
    def __init__(self):
        self.length = 0          # 0: not a directive
        self.percent = False     # "%%"
        self.named = False       # %(name)s
        self.position = 0        # n of "%n$", 0: the next argument in turn
        self.size = b""
        self.conversion = 0
        self.position_end = 0    # where "n$" ends (1 when there is none)


def _digits_at(s, j):
    v = 0
    while j < len(s) and _digit(s[j]):
        v = min(100000, v * 10 + s[j] - 48)
        j += 1
    return j, v


def _star_at(s, j):
    """'*' or '*m$' at s[j]: where it ends (j: none; None: malformed)."""
    if j >= len(s) or s[j] != ord("*"):
        return j
    k, m = _digits_at(s, j + 1)
    if k > j + 1:
        if k >= len(s) or s[k] != ord("$") or m == 0:
            return None
        return k + 1
    return j + 1


_MACRO_SIZES = {b"8", b"16", b"32", b"64", b"LEAST8", b"LEAST16", b"LEAST32", b"LEAST64",
                b"FAST8", b"FAST16", b"FAST32", b"FAST64", b"MAX", b"PTR"}


def _macro_at(s, j, d):
    """<PRIu64>, <PRIdMAX>, ... at s[j]: where it ends (j: none)."""
    if s[j:j + 4] != b"<PRI" or j + 5 >= len(s) or s[j + 4] not in b"diouxX":
        return j
    end = s.find(b">", j + 5)
    if end < 0:
        return j
    size = s[j + 5:end]
    if size not in _MACRO_SIZES:
        return j
    d.conversion = s[j + 4]
    d.size = size
    return end + 1


def _directive(s, i):
    d = _Directive()
    j = i + 1
    if j < len(s) and s[j] == ord("%"):
        d.percent = True
        d.length = 2
        return d
    k, n = _digits_at(s, j)
    if j < k < len(s) and s[k] == ord("$"):  # positional: %1$s
        if n == 0:
            return _Directive()
        d.position = n
        j = k + 1
    d.position_end = j - i
    if j < len(s) and s[j] == ord("("):  # Python's %(name)s
        k = j + 1
        while k < len(s) and _ident(s[k]):
            k += 1
        if k == j + 1 or k >= len(s) or s[k] != ord(")"):
            return _Directive()
        j = k + 1
        d.named = True
    # Flags, without the space flag: in prose "50 % ok" is a percent sign.
    while j < len(s) and s[j] in b"-+#0'I":
        j += 1
    j = _star_at(s, j)
    if j is None:
        return _Directive()
    j, _ = _digits_at(s, j)
    if j < len(s) and s[j] == ord("."):
        j = _star_at(s, j + 1)
        if j is None:
            return _Directive()
        j, _ = _digits_at(s, j)
    m = _macro_at(s, j, d)
    if m != j:
        d.length = m - i
        return _Directive() if d.named else d
    for size in (b"hh", b"ll", b"h", b"l", b"L", b"q", b"j", b"z", b"Z", b"t"):
        if s[j:j + len(size)] == size:
            d.size = size
            j += len(size)
            break
    if j >= len(s) or s[j] == 0:
        return _Directive()
    c = s[j]
    if not (c in b"diouxXeEfFgGaAcspnCS" or (c == ord("m") and not d.named and not d.size)
            or (d.named and c == ord("r"))):
        return _Directive()
    d.conversion = c
    d.length = j + 1 - i
    return d


def _entity_length(s, i):
    j = i + 1
    if j < len(s) and s[j] == ord("#"):
        j += 1
        hexa = j < len(s) and s[j] in b"xX"
        if hexa:
            j += 1
        start = j
        while j < len(s) and (_digit(s[j]) or (hexa and s[j] in b"abcdefABCDEF")):
            j += 1
        if j == start:
            return 0
    else:
        start = j
        while j < len(s) and _alpha(s[j]):
            j += 1
        if j == start or j - start > 8:
            return 0
    return j + 1 - i if j < len(s) and s[j] == ord(";") else 0


def _brace_length(s, i):
    if i > 0 and s[i - 1] == ord("$"):
        return 0
    j = i + 1
    upper = lower = False
    while j < len(s) and (_ident(s[j]) or s[j] in b".[]"):
        upper = upper or 65 <= s[j] <= 90
        lower = lower or 97 <= s[j] <= 122
        j += 1
    if upper and not lower and j - i > 2:  # {INTEGER}: a word translators translate
        return 0
    if j < len(s) and s[j] == ord("!"):
        if j + 1 >= len(s) or s[j + 1] not in b"rsa":
            return 0
        j += 2
    if j < len(s) and s[j] == ord(":"):
        j += 1
        while j < len(s) and s[j] not in b"}{\n" and j - i < 40:
            j += 1
    if j >= len(s) or s[j] != ord("}") or j == i + 1:  # "{}" stays
        return 0
    return j + 1 - i


_TAGS = {b"b", b"i", b"u", b"s", b"tt", b"big", b"small", b"span", b"a", b"br", b"sub", b"sup", b"em",
         b"strong", b"p", b"markup"}


def _tag_length(s, i):
    j = i + 1
    if j < len(s) and s[j] == ord("/"):
        j += 1
    start = j
    while j < len(s) and _alpha(s[j]):
        j += 1
    if s[start:j] not in _TAGS:
        return 0
    if j < len(s) and s[j] not in b">/ \t\n":
        return 0
    while j < len(s) and s[j] not in b"><":
        j += 1
    return j + 1 - i if j < len(s) and s[j] == ord(">") else 0


def _option_length(s, i):
    if i > 0 and (_ident(s[i - 1]) or s[i - 1] == ord("-")):
        return 0
    j = i + 2
    if j >= len(s) or not (97 <= s[j] <= 122 or _digit(s[j])):
        return 0
    while j < len(s) and (_ident(s[j]) or s[j] == ord("-")):
        j += 1
    return j - i


def _spans(s):
    """(offset, length) of each placeholder of the bytes s, in order."""
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        n = 0
        if c == ord("%"):
            n = _directive(s, i).length
        elif c == ord("{"):
            n = _brace_length(s, i)
        elif c == ord("<"):
            n = _tag_length(s, i)
        elif c == ord("&"):
            n = _entity_length(s, i)
        elif s[i:i + 2] == b"--":
            n = _option_length(s, i)
        if n > 0:
            out.append((i, n))
            i += n
        else:
            i += 1
    return out


def _printf_argument(p):
    """"%2$lu" -> (2, b"%lu"); "%s" -> (0, b"%s"); not an argument: (-1, b"")."""
    if len(p) < 2 or p[0] != ord("%"):
        return -1, b""
    d = _directive(p, 0)
    if d.length != len(p) or d.percent or d.named or d.conversion == ord("m"):
        return -1, b""
    conversion = bytearray(b"%")
    i = d.position_end
    while i < len(p):  # without its position, nor its stars' ("%3$.*1$s" -> "%.*s")
        conversion.append(p[i])
        if p[i] == ord("*"):
            k = i + 1
            while k < len(p) and _digit(p[k]):
                k += 1
            if k > i + 1 and k < len(p) and p[k] == ord("$"):
                i = k
        i += 1
    return d.position, bytes(conversion)


# --- Masking and restoring ---------------------------------------------------

def _b(text):
    return text.encode("utf-8", "surrogateescape")


def _s(data):
    return data.decode("utf-8", "surrogateescape")


def _sentinel_bytes(k):
    return _b(sentinel(k))


def _sentinel_at(s, i):
    """The sentinel number at s[i] (0: none)."""
    if i + 2 >= len(s) or s[i] != 0xEE:
        return 0
    c1, c2 = s[i + 1], s[i + 2]
    if (c1 & 0xC0) != 0x80 or (c2 & 0xC0) != 0x80:
        return 0
    k = ((0xE << 12) | ((c1 & 0x3F) << 6) | (c2 & 0x3F)) - 0xE000
    return k if 1 <= k <= MAX_SENTINELS else 0


class Slot:
    """What sentinel k stands for (Masked.slots[k - 1])."""

    def __init__(self, text=b"", arg=0, conversion=b"", glued=False):
        self.text = text              # the placeholder as the source has it; empty: unused
        self.arg = arg                # > 0: the printf argument it prints
        self.conversion = conversion  # printf: the conversion without its position
        self.glued = glued            # the source has it right after an ASCII letter, digit or placeholder

    def __repr__(self):
        return "Slot(%r, %d, %r, %r)" % (_s(self.text), self.arg, _s(self.conversion), self.glued)


def _ascii_alnum(c):
    return _digit(c) or (ord("a") <= c <= ord("z")) or (ord("A") <= c <= ord("Z"))


class Masked:
    """A source line with its placeholders replaced: .text for the model, .slots to restore."""

    def __init__(self, text, slots):
        self.text = text
        self.slots = slots

    def __repr__(self):
        return "Masked(%r, %r)" % (self.text, self.slots)


def mask(line):
    """The source line with each placeholder replaced by its sentinel."""
    s = _b(line)
    spans = _spans(s)
    # Pass 1: the printf arguments, numbered as printf numbers them.
    arg_of = [-1] * len(spans)
    turn = args = 0
    for n, (off, length) in enumerate(spans):
        position, _ = _printf_argument(s[off:off + length])
        if position < 0:
            continue
        if position == 0:
            turn += 1
            position = turn
        arg_of[n] = position
        args = max(args, position)
    if args > MAX_SENTINELS:  # not a line to meddle with
        return Masked(line, [])
    slots = [Slot() for _ in range(args)]
    other = {}  # placeholder text -> its sentinel
    ids = [0] * len(spans)
    for n, (off, length) in enumerate(spans):
        text = s[off:off + length]
        glued = off > 0 and (_ascii_alnum(s[off - 1]) or (n > 0 and sum(spans[n - 1]) == off))
        if arg_of[n] > 0:
            if not slots[arg_of[n] - 1].text:
                slots[arg_of[n] - 1] = Slot(text, arg_of[n], _printf_argument(text)[1], glued)
            ids[n] = arg_of[n]
            continue
        if text not in other:
            if len(slots) >= MAX_SENTINELS:
                continue  # left verbatim
            slots.append(Slot(text, glued=glued))
            other[text] = len(slots)
        ids[n] = other[text]
    out = bytearray()
    at = 0
    for n, (off, length) in enumerate(spans):
        if ids[n] == 0:
            continue
        out += s[at:off] + _sentinel_bytes(ids[n])
        at = off + length
    out += s[at:]
    return Masked(_s(bytes(out)), slots)


def mask_target(line, masked):
    """A translation of masked's source with the same placeholders as the same sentinels."""
    other = {}
    for k, slot in enumerate(masked.slots):
        if slot.arg == 0 and slot.text and slot.text not in other:
            other[slot.text] = k + 1
    s = _b(line)
    out = bytearray()
    at = 0
    turn = 0
    for off, length in _spans(s):
        text = s[off:off + length]
        k = 0
        position, _ = _printf_argument(text)
        if position >= 0:
            if position == 0:
                turn += 1
                position = turn
            if position <= len(masked.slots) and masked.slots[position - 1].arg == position:
                k = position
        elif text in other:
            k = other[text]
        if k == 0:
            continue
        out += s[at:off] + _sentinel_bytes(k)
        at = off + length
    out += s[at:]
    return _s(bytes(out))


def sentinels_in(text):
    """The sentinel numbers in text, in order, repeats included."""
    s = _b(text)
    out = []
    i = 0
    while i < len(s):
        k = _sentinel_at(s, i)
        if k:
            out.append(k)
            i += 3
        else:
            i += 1
    return out


def missing(translation, masked):
    """The source's placeholders that a translation (still with sentinels) has fewer times than the source."""
    have = sentinels_in(translation)
    lost = []
    for k in sentinels_in(masked.text):
        if k in have:
            have.remove(k)
        elif 0 < k <= len(masked.slots):
            lost.append(_s(masked.slots[k - 1].text))
    return lost


def restore(translation, masked):
    """A translation with its sentinels turned back into masked's placeholders.

    A placeholder right after a word or another placeholder gets a space
    before it, unless the source glued it so too or it is markup or an
    entity or "%%" (decoding forces a missing placeholder in where the
    model wrote no space)."""
    s = _b(translation)
    slots = masked.slots
    # Are the printf arguments in order, each once? Then without positions.
    order = []
    i = 0
    while i < len(s):
        k = _sentinel_at(s, i)
        if k and k <= len(slots) and slots[k - 1].arg > 0:
            order.append(k)
        i += 1
    in_order = all(k == j + 1 for j, k in enumerate(order))
    out = bytearray()
    placeholder_end = -1  # where the last placeholder written ends in out
    i = 0
    while i < len(s):
        k = _sentinel_at(s, i)
        if k == 0:
            out.append(s[i])
            i += 1
            continue
        i += 3
        if k > len(slots):
            continue  # not the source's: dropped
        slot = slots[k - 1]
        if not slot.text:
            continue
        # Words' neighbours: conversions that print an argument, Python's and
        # brace fields, options; not "%%" or "%m", markup or entities.
        spaced = slot.arg > 0 or slot.text[:2] == b"%(" or slot.text[:1] == b"{" or slot.text[:2] == b"--"
        after_word = len(out) > 0 and (_ascii_alnum(out[-1]) or placeholder_end == len(out))
        if after_word and not slot.glued and spaced:
            out += b" "
        if slot.arg > 0 and in_order:
            out += slot.conversion
        elif slot.arg > 0:
            out += b"%" + str(slot.arg).encode() + b"$" + slot.conversion[1:]
        else:
            out += slot.text
        placeholder_end = len(out)
    return _s(bytes(out))


# --- translate: CTranslate2 with the model beside this file ------------------

def _translate(argv):
    import argparse
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(prog="placeholders.py translate",
                                     description="Translate stdin with the model in " + here)
    parser.add_argument("--beam", type=int, default=1, help="beam size (default: %(default)s, greedy)")
    parser.add_argument("--compute-type", default="default", help="CTranslate2 compute type (default: %(default)s)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: %(default)s)")
    parser.add_argument("--max-len", type=int, default=160, help="most target tokens (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=32, help="lines per batch (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=0, help="CTranslate2 intra_threads (default: all)")
    args = parser.parse_args(argv)
    if args.beam < 1 or args.max_len < 1 or args.batch_size < 1:
        parser.error("--beam, --max-len and --batch-size must be at least 1")
    try:
        import ctranslate2
        import sentencepiece
    except ImportError as e:
        print("placeholders.py: error: %s (pip install ctranslate2 sentencepiece)" % e, file=sys.stderr)
        sys.exit(1)
    translator = ctranslate2.Translator(here, device=args.device, compute_type=args.compute_type,
                                        intra_threads=args.threads)
    src_sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(here, "src.model"))
    tgt_sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(here, "tgt.model"))
    specials = {tgt_sp.id_to_piece(i) for i in range(4)}  # <pad> <unk> <start> <end>
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="surrogateescape", newline="\n")
    stdout = open(sys.stdout.fileno(), "w", encoding="utf-8", errors="surrogateescape", newline="\n")
    number = 0
    lines = [l.rstrip("\n").rstrip("\r") for l in stdin]
    for start in range(0, len(lines), args.batch_size):
        masks = [mask(l) for l in lines[start:start + args.batch_size]]
        results = translator.translate_batch([src_sp.encode(m.text, out_type=str) for m in masks],
                                             beam_size=args.beam, max_decoding_length=args.max_len)
        for m, r in zip(masks, results):
            number += 1
            raw = tgt_sp.decode([p for p in r.hypotheses[0] if p not in specials])
            lost = missing(raw, m)
            if lost:
                print("placeholders.py: line %d: the translation lost %s" % (number, " ".join(lost)),
                      file=sys.stderr)
            stdout.write(restore(raw, m) + "\n")
    stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    if sys.argv[1] != "translate":
        print("placeholders.py: error: unknown command '%s' (known: translate)" % sys.argv[1], file=sys.stderr)
        sys.exit(2)
    _translate(sys.argv[2:])
