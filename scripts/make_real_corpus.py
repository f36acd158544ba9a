#!/usr/bin/python3
"""Real Chinese -> English parallel corpus from Debian's gettext catalogs.

Free software ships its user-visible messages together with translations
made by people (GNU Translation Project, GNOME, Xfce, ... translators).  The
compiled catalogs (.mo files) of Debian bookworm's Simplified-Chinese locale
(zh_CN) give tens of thousands of human-translated English -> Chinese message
pairs.  This script turns a pinned set of Debian packages into a clean,
de-duplicated, line-aligned Chinese -> English corpus:

  1. download each pinned package (exact version, checked against a pinned
     SHA-256) with `apt-get download` into a cache folder (nothing is
     installed);
  2. read the zh_CN .mo files straight out of the package's data tarball and
     parse the .mo binary format (no gettext tools needed);
  3. normalise (mnemonics, whitespace) and filter the pairs, counting every
     reason a pair is dropped;
  4. de-duplicate (one English target per Chinese source);
  5. split into test / valid / train by SHA-256 and write
     {train,valid,test}.{zh,en} plus each package's copyright file
     (copyright/PACKAGE);
  6. print counts per package, per filter and per split, placeholder
     statistics and the SHA-256 of the six files.

Source side (.zh) = msgstr (Chinese), target side (.en) = msgid (English;
for plural entries the singular, or the plural where only it has the
Chinese side's printf conversions, see use_plural).
Placeholders (%s, %1$d, {name}, <b>...</b>, --long-option, ...) are kept on
purpose: they let the project measure whether translations preserve them.

The output is byte-identical on every run: packages are pinned by version
and checksum, nothing iterates over a set or relies on Python's hash(), and
ties are broken by plain string order.

Usage:
  /usr/bin/python3 scripts/make_real_corpus.py [--out DIR] [--cache DIR]

Needs `apt-get` (with bookworm sources and an up-to-date package list, e.g.
after `apt-get update`) and `dpkg-deb`; only the standard library is used.
"""

import argparse
import hashlib
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import unicodedata
from collections import Counter, defaultdict

# ===========================================================================
# Pinned packages
# ===========================================================================
# (package, exact version, architecture, SHA-256 of the .deb, licence of the
# catalogs as stated in the package's /usr/share/doc/PACKAGE/copyright).
#
# All are Debian 12 "bookworm" packages from main: architecture all, or amd64
# for those that ship their catalogs with the program (on another machine,
# `dpkg --add-architecture amd64` and `apt-get update` make them
# downloadable; only the catalogs are read).  A version can leave the archive when
# a point release or security update replaces it (most likely for the
# +deb12uN ones); the script then stops with a clear message.  Put the old
# .deb (from snapshot.debian.org) into the cache folder, where it is used if
# its SHA-256 matches, or update the pin and rebuild the corpus.
PACKAGES = [
    # C library and GNU/Linux command-line tools
    ("libc-l10n", "2.36-9+deb12u14", "all",
     "95285badd0b02ca7e90e8f20d17c912170ffaeb48db10f113d1ece042b59248d", "LGPL-2.1+"),
    ("coreutils", "9.1-1", "amd64",
     "61038f857e346e8500adf53a2a0a20859f4d3a3b51570cc876b153a2d51a3091", "GPL-3+"),
    ("util-linux-locales", "2.38.1-5+deb12u3", "all",
     "2cb091d6fdc2f38d3ce414102877dcc7434e4d42f18b58e73708219c2b9ec18e", "GPL-2+"),
    ("bash", "5.2.15-2+b13", "amd64",
     "82130bb6a560cd2a7234d8018baf73f188f5dd56413d5aa0accc987b2197a6a1", "GPL-3+"),
    ("tar", "1.34+dfsg-1.2+deb12u1", "amd64",
     "24fb92e98c2969171f81a8b589263d705f6b1670f95d121cd74c810d4605acc3", "GPL-3+"),
    ("grep", "3.8-5", "amd64",
     "3264acea728df3c48a54f20e9291b965130e306b9d00adac76647049da7196df", "GPL-3+"),
    ("sed", "4.9-1+deb12u1", "amd64",
     "fd557efeee8aae4619c2cb7f68aadccb804322ad4a99ab048aaae5901d253885", "GPL-3+"),
    ("diffutils", "1:3.8-4", "amd64",
     "8bdfedc14c1035e3750e9f055ac9c1ecd9b5d05d9e6dc6466c4e9237eef407dd", "GPL-3+"),
    ("gettext", "0.21-12", "amd64",
     "8c1f9d43575373ce311f51d00a13afbb4888d63aa559a93a3472f5d77513b60c", "GPL-3+"),
    ("gettext-base", "0.21-12", "amd64",
     "5cb39c7acc7125e677ec98d0426a987daf0ce062f749f2a9421b2511f6dd5ab7", "GPL-3+"),
    ("make", "4.3-4.1", "amd64",
     "a1a83af8cbd854af887b72ad196b1f4af58387815e21ced1000253a116a46e2a", "GPL-3+"),
    ("binutils-common", "2.40-2", "amd64",
     "ab314134f43a0891a48f69a9bc33d825da748fa5e0ba2bebb7a5c491b026f1a0", "GPL-3+"),
    ("wget", "1.21.3-1+deb12u1", "amd64",
     "b389052d1d8a8cacec4f0380d9ee54e8082bfbebe374299be95b5286c9380f80", "GPL-3+"),
    ("gnupg-l10n", "2.2.40-1.1+deb12u2", "all",
     "c985452d06cc7b3b1044cd1eb3f2acac773836d34cafb35b5a4bebae02c1caa0", "GPL-3+"),
    ("e2fsprogs-l10n", "1.47.0-2", "all",
     "30830c185a0d02d444ad7b900ee5353d13f442dc5479847ce700ba34136a2df8", "GPL-2"),
    ("libparted-i18n", "3.5-3+deb12u1", "all",
     "67cf70945deafadd52306caa5afdf4609f3df205ff2b4050a6da3fc7a0b23d1a", "GPL-3+"),
    ("cryptsetup-bin", "2:2.6.1-4~deb12u2", "amd64",
     "ac25a10b8c7a5fbd4ffe64a830edd24a7e04b3416914bbb096c21e92e15a65d2", "GPL-2+ with OpenSSL exception"),
    ("procps", "2:4.0.2-3", "amd64",
     "d9d0e75779cb79af869181f17b93c5c263a2b89cac6a0193c436160a4483ddc1", "LGPL-2.1+"),
    ("psmisc", "23.6-1", "amd64",
     "9d02f654bdf280a6622a9b1371f7a1fa44546702d11991e438558bc259df7b69", "GPL-2+"),
    ("man-db", "2.11.2-2", "amd64",
     "4134d16ea0233ebe78b2d1d271194fcf49a69eb2850421b0f3d76055e221fcea", "GPL-2+"),
    ("nano", "7.2-1+deb12u1", "amd64",
     "45a9b3960aa5ac18552459225ec26800abb73fc2edd11626046daf6d968ac968", "GPL-3+"),
    ("login", "1:4.13+dfsg1-1+deb12u2", "amd64",
     "f1cc45bf505a8457340dc3c36f3a01a1835aaf564d73d9d394afb8ccfb6595a0", "BSD-3-clause"),
    ("sudo", "1.9.13p3-1+deb12u4", "amd64",
     "ea9987f92630be504998516e1ed9c821c483131d0576ff35a09d6e7f8deff10f", "ISC (sudo), public-domain (sudoers)"),
    ("adduser", "3.134", "all",
     "c24fe4eb8e60d8632d72ed104cce7c92cff200847c897dc8ba764b6c47b519e0", "GPL-2+"),
    ("libpam-runtime", "1.5.2-6+deb12u2", "all",
     "7a4f26d54c1e3ee8c68095f9d9013d13dd89a33ff78ef87330d21f21235fc278", "BSD-3-clause or GPL"),
    # Debian package management
    ("dpkg", "1.21.23", "amd64",
     "f89e9f8d1a4a50ade44be3ed59a6ec55460fce205d2f8520c5c492137c5b609b", "GPL-2+"),
    ("apt", "2.6.2", "amd64",
     "796fc7fe18866f5b1fb27a115d7339e549d71b7ddbc15b8d6fc4226c243e96d1", "GPL-2+"),
    ("libapt-pkg6.0", "2.6.2", "amd64",
     "023a7017b75295fc7037c7a4352847f9516a36a82cc5e1650d6832d238860913", "GPL-2+"),
    ("aptitude-common", "0.8.13-5", "all",
     "3310ec70a514fbebd7082059d5cebf97e82485abfcb13c9ad21858e09abadc36", "GPL-2+"),
    ("git", "1:2.39.5-0+deb12u3", "amd64",
     "637a85ddd6247fab13bdd0592f2f39aff04ce4dbf0655d3ab553ac359a38ce6f", "GPL-2"),
    # Networking, GLib/GTK and GNOME desktop
    ("network-manager", "1.42.4-1+deb12u1", "amd64",
     "9b203dadd4751fc3fce1211eb3122fb55426e295d07808f7420a360ba186f1ba", "GPL-2+"),
    ("libglib2.0-data", "2.74.6-2+deb12u9", "all",
     "d98434e097009dedd2f2382c48b7debab5b14261966c0e0506a991b2496bea5f", "LGPL-2+ and LGPL-2.1+"),
    ("libgtk-3-common", "3.24.38-2~deb12u3", "all",
     "f2642d127d85440acbfc2ed404d3932d8b2fbe8a576ead7f93f35ac1fa999c92", "LGPL-2+"),
    ("libgtk2.0-common", "2.24.33-2+deb12u1", "all",
     "f55a9800d3721b1de246e4bfaf94a63ca50efdfa49eb5fa2362ed4fa79258299", "LGPL-2+"),
    ("gnome-control-center-data", "1:43.6-2~deb12u1", "all",
     "f76430c1f6db2be884bbc0e37cfa43752b49d252abb94d9cce494e8cdd8882a1", "GPL-2+ and GPL-3+ and LGPL-2.1+ (and others)"),
    ("nautilus-data", "43.2-1", "all",
     "2b0ba8ce95bbd9007ab4ff34070f67c2d41ca5c0b155bf8a12776f2ebb9b1481", "GPL-3+"),
    ("gedit-common", "44.2-1", "all",
     "3d9446b4ddcc7db0df41d9ee7f71b60a1d29ad688b6acbe04fe6fbea3461d5ef", "GPL-2"),
    ("evolution-common", "3.46.4-2+deb12u1", "all",
     "52e3a67ba3f2815fa864f600f5e3c2afd6ebc0b3487b50525df75006d4172b46", "LGPL-2 or LGPL-3"),
]

# Where catalogs live inside a package.  Only message catalogs: LC_TIME etc.
# are ignored.
MO_PATH = re.compile(r"^(?:\./)?usr/share/locale/zh_CN/LC_MESSAGES/([^/]+)\.mo$")

N_TEST = 2000
N_VALID = 1000

# Longest message kept, in characters, on either side.  200 characters is
# about 35 English words: one long sentence.  Longer catalog entries are
# almost always help paragraphs or licence texts, which would be skipped by
# the trainer's length limit (data.max_len tokens) anyway and mostly read as
# lists rather than sentences.
MAX_CHARS = 200

# Length ratio bounds: len(Chinese) / len(English), in characters, counted
# after normalisation.  A Chinese translation is typically 0.25-0.6 times as
# long as its English original (one character ~ one syllable, no spaces).
# Only grossly mismatched pairs are dropped: a Chinese side more than 1.5x
# the English one, or under 1/10 of it.  The bounds are only applied when
# the English side has at least MIN_CHARS_FOR_RATIO characters, because the
# ratio of very short strings ("OK" -> "确定") says nothing.
RATIO_MIN = 0.10
RATIO_MAX = 1.50
MIN_CHARS_FOR_RATIO = 12

# ===========================================================================
# .mo parsing
# ===========================================================================
MO_MAGIC = 0x950412DE


def parse_mo(data, name):
    """Return [(msgctxt or None, msgid, msgid_plural or None, msgstr), ...]
    from a .mo file (bytes, undecoded).

    A .mo file starts with a magic number (which also gives the byte order),
    a format revision, the number of strings N, the offset of the table of
    original strings and the offset of the table of translations.  Each table
    holds N (length, offset) pairs of 32-bit integers.  A key "ctxt\\x04id"
    carries a message context; plural entries hold "singular\\x00plural" as
    key and "form0\\x00form1..." as value: we keep both English forms and
    form 0 of the translation (Chinese has a single form).
    """
    if len(data) < 20:
        raise ValueError(f"{name}: too short for a .mo file")
    for order in ("<", ">"):
        if struct.unpack(order + "I", data[:4])[0] == MO_MAGIC:
            break
    else:
        raise ValueError(f"{name}: bad .mo magic number")
    revision, count, orig_off, trans_off = struct.unpack(order + "4I", data[4:20])
    if revision >> 16 not in (0, 1):
        raise ValueError(f"{name}: unknown .mo major revision {revision >> 16}")

    def string(table, i):
        length, offset = struct.unpack_from(order + "2I", data, table + 8 * i)
        if offset + length > len(data):
            raise ValueError(f"{name}: string {i} runs past the end of the file")
        return data[offset:offset + length]

    entries = []
    for i in range(count):
        key, value = string(orig_off, i), string(trans_off, i)
        ctxt = None
        if b"\x04" in key:
            ctxt, key = key.split(b"\x04", 1)
        msgid, _, plural = key.partition(b"\x00")
        msgstr = value.split(b"\x00", 1)[0]
        entries.append((ctxt, msgid, plural if _ else None, msgstr))
    return entries


def catalog_charset(entries):
    """The charset declared in the header entry (empty msgid), default UTF-8."""
    for ctxt, msgid, _plural, msgstr in entries:
        if ctxt is None and msgid == b"":
            m = re.search(rb"charset=([-\w]+)", msgstr)
            if m:
                return m.group(1).decode("ascii")
    return "UTF-8"


# ===========================================================================
# Normalisation
# ===========================================================================
# A mnemonic (keyboard accelerator) marks one letter of a menu or button
# label: GTK writes "_File", Qt "&File", LibreOffice "~File".  Chinese
# translations usually append the letter in brackets: "文件(_F)", "文件(&F)",
# sometimes a whole English word: "印象派艺术家(_GIMPressionist)".  We strip
# mnemonics on both sides so that both read as plain text.
ZH_MNEMONIC = re.compile(r"\s*[(（]([_&~])([A-Za-z0-9])[)）]")
ZH_MNEMONIC_WORD = re.compile(r"\s*[(（]([_&~])([A-Za-z0-9])[A-Za-z0-9]*[)）]")
# A marker followed by an ASCII letter or digit.  The marker must not be
# doubled ("__" and "&&" are escaped literal characters).
MNEMONIC_CANDIDATE = re.compile(r"(?<![_&~])([_&~])([A-Za-z0-9])")
# "&amp;", "&#38;", "&nbsp;": entities, not mnemonics.
ENTITY = re.compile(r"&#?\w+;")
WORD = re.compile(r".[A-Za-z0-9_]*")
WHITESPACE = re.compile(r"\s+")


def uses_gtk_mnemonics(pairs):
    """True for a catalog of GUI labels: at least 2% of its translations (and
    at least 5) carry a bracketed mnemonic such as "(_F)".  In such catalogs
    a "_" at the start of a word is a mnemonic even when the translator kept
    it inline ("_Tab 触发器" for "_Tab trigger"); elsewhere ("_sym",
    "_open_osfhandle" in binutils) it is part of an identifier."""
    n = sum(1 for zh, _en in pairs if ZH_MNEMONIC.search(zh))
    return n >= 5 and n >= 0.02 * len(pairs)


def strip_mnemonic(text, hint, other, gtk):
    """Remove at most one mnemonic marker from `text`.

    hint:  (marker, letter) when the Chinese side showed a bracketed mnemonic
           such as "(_F)", else None.
    other: the other side of the pair.  Outside GTK-style catalogs, a token
           that also appears verbatim on the other side ("_netdev",
           "_POSIX2_VERSION") is an identifier that the translator copied, not
           a mnemonic.
    gtk:   the catalog uses GTK mnemonics (see uses_gtk_mnemonics).
    Without a hint only a word-initial "_" counts ("_Save", "Save _As"): "&"
    and "~" are too common in ordinary text, and a "_" inside a word
    ("file_name") is an identifier.  With a hint, the marker before the hinted
    letter is removed wherever it is ("Sa_ve").  A token with a second
    underscore ("_NET_WM_NAME") is never a mnemonic.
    """
    hinted, word_initial = [], []
    for m in MNEMONIC_CANDIDATE.finditer(text):
        i = m.start()
        marker, letter = m.group(1), m.group(2)
        if marker == "&" and ENTITY.match(text, i):
            continue
        word = WORD.match(text, i).group(0)
        if "_" in word[1:] or (word in other and not gtk):
            continue
        if hint is not None and marker == hint[0] and letter.lower() == hint[1].lower():
            hinted.append(i)
        if marker == "_" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_%$\\/-.@")):
            word_initial.append(i)
    # The hinted marker if there is one.  Otherwise (no hint, or the
    # translator chose another letter: "Do _Not Synchronize" -> "不同步(_S)")
    # a word-initial "_", if it is the only one.
    if hinted:
        i = hinted[0]
    elif len(word_initial) == 1:
        i = word_initial[0]
    else:
        return text
    return text[:i] + text[i + 1:]


def normalise(zh, en, gtk):
    """Strip mnemonics on both sides, collapse whitespace, strip the ends."""
    bracket = ZH_MNEMONIC_WORD if gtk else ZH_MNEMONIC
    m = bracket.search(zh)
    hint = (m.group(1), m.group(2)) if m else None
    zh = bracket.sub("", zh)
    en = strip_mnemonic(en, hint, zh, gtk)
    # A translator may also keep the marker inline ("_Tab 触发器").
    zh = strip_mnemonic(zh, None, en, gtk)
    zh = WHITESPACE.sub(" ", zh).strip()
    en = WHITESPACE.sub(" ", en).strip()
    return zh, en


# ===========================================================================
# Filters
# ===========================================================================
# printf conversions: %s, %d, %5.2f, %-10s, %'d, %1$s, %lu, %zu, %<PRIu64>,
# and the escaped percent sign %% (matched so that "%%d" is not read as "%d").
# The space flag ("% d") is left out: in messages "50% done" is far more
# common than a space-padded number.
PRINTF = re.compile(
    r"%(?:\d+\$)?[-+#0']*(?:\d+|\*(?:\d+\$)?)?(?:\.(?:\d+|\*(?:\d+\$)?))?"
    r"(?:hh|h|ll|l|L|q|j|z|Z|t|I)?(?:[diouxXeEfFgGaAcspnm%]|<PRI\w+>)")


def printf_conversions(text):
    """The printf conversions of `text`, in order, without "%%"."""
    return [c for c in PRINTF.findall(text) if c != "%%"]


def is_cjk(ch):
    """A Han character (CJK Unified Ideographs and extensions, compatibility)."""
    o = ord(ch)
    return (0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or
            0x20000 <= o <= 0x3134F or 0xF900 <= o <= 0xFAFF)


# strftime conversions (%Y, %-e, %H), only used to ignore them in has_letter.
STRFTIME = re.compile(r"%[-_0^#]*[A-Za-z]")
# Desktop-entry keyword lists ("Text;Editor;Plaintext;"): translators append
# Chinese search terms to the English ones rather than translate them.
_KEYWORD = r"\w[\w .+/-]{0,39}"
KEYWORDS = re.compile(f"{_KEYWORD}(?:;{_KEYWORD})+;?")


def has_letter(text):
    """Any letter left once printf and strftime conversions are removed
    ("%s: %s" and "%a, %d %B %Y" have none)."""
    return any(ch.isalpha() for ch in STRFTIME.sub("", PRINTF.sub("", text)))


# (key, description) in the order the filters are applied; a pair is counted
# under the first filter it fails.
FILTERS = [
    ("untranslated", "empty translation, or identical to the English"),
    ("credits", "\"translator-credits\" and similar pseudo-messages"),
    ("multi_line", "a newline inside the message (help paragraphs, tables)"),
    ("keywords", "desktop-entry keyword list (\"Text;Editor;\")"),
    ("no_letters", "no letter on the English side besides printf/strftime conversions"),
    ("no_chinese", "no Chinese character on the Chinese side"),
    ("too_long", f"more than {MAX_CHARS} characters on either side"),
    ("ratio", f"len(zh)/len(en) outside [{RATIO_MIN}, {RATIO_MAX}]"
              f" (English of {MIN_CHARS_FOR_RATIO}+ characters)"),
]
PSEUDO_MSGIDS = {"translator-credits", "translator_credits", "TRANSLATORS",
                 "Your names", "Your emails"}


def check(zh_raw, en_raw, gtk):
    """Return (filter key or None, zh, en) for one catalog entry."""
    if not zh_raw.strip() or zh_raw == en_raw:
        return "untranslated", None, None
    if en_raw.strip() in PSEUDO_MSGIDS:
        return "credits", None, None
    # A trailing (or leading) newline only ends a printf line; it is not a
    # second line.
    if "\n" in zh_raw.strip() or "\n" in en_raw.strip():
        return "multi_line", None, None
    zh, en = normalise(zh_raw, en_raw, gtk)
    if not zh or zh == en:
        return "untranslated", None, None
    if KEYWORDS.fullmatch(en):
        return "keywords", None, None
    if not has_letter(en):
        return "no_letters", None, None
    if not any(is_cjk(ch) for ch in zh):
        return "no_chinese", None, None
    if len(zh) > MAX_CHARS or len(en) > MAX_CHARS:
        return "too_long", None, None
    if len(en) >= MIN_CHARS_FOR_RATIO and not RATIO_MIN <= len(zh) / len(en) <= RATIO_MAX:
        return "ratio", None, None
    return None, zh, en


def conversions(text):
    """The printf conversion types of `text`, sorted ("%%" left out).  Only
    the type counts: "%2$s" and "%'d" match "%s" and "%d"."""
    return sorted(c if c.endswith(">") else c[-1] for c in printf_conversions(text))


def use_plural(zh, singular, plural):
    """For a plural entry, pair the Chinese with the English plural instead
    of the singular?  Chinese has one form, used for every number, so it
    usually keeps the number: "正在移动 %d 件事件" is "Moving an event" /
    "Moving %d events".  We keep the singular unless it lacks conversions the
    Chinese has and the plural has them all ("%d file" / "%d files" keeps
    the singular)."""
    want = conversions(zh)
    return conversions(singular) != want and conversions(plural) == want


# ===========================================================================
# Placeholder statistics (reported for the test split)
# ===========================================================================
BRACE = re.compile(r"\{[A-Za-z0-9_]+\}")
# Markup tags only: "<file>", "<目录>" in usage lines are metavariables,
# which translators translate.
TAG = re.compile(r"</?(?:a|b|i|u|s|tt|big|small|sub|sup|span|br|p|em|strong|code|kbd|"
                 r"li|ul|ol|h[1-6]|hr|div|font|img|table|tr|td|th|pre|markup)"
                 r"(?:\s[^<>]*)?/?>")
LONG_OPTION = re.compile(r"(?<![\w-])--[A-Za-z0-9][-A-Za-z0-9_]*")

# (key, description, function text -> list of placeholders found)
PLACEHOLDERS = [
    ("printf", "printf conversion: %s, %d, %1$s, %'d, %lu, ... (not %%)", printf_conversions),
    ("brace", "brace field: {name}, {0}", BRACE.findall),
    ("tag", "markup tag: <b>, </i>, <span ...>, <br/>", TAG.findall),
    ("long_option", "long option: --name", LONG_OPTION.findall),
]


# ===========================================================================
# Packages: download and extraction
# ===========================================================================
def deb_file_name(name, version, arch):
    """The file name `apt-get download` gives the package."""
    return f"{name}_{version.replace(':', '%3a')}_{arch}.deb"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(name, version, arch, sha256, cache):
    """Path of the pinned .deb in `cache`, downloading it when needed."""
    path = os.path.join(cache, deb_file_name(name, version, arch))
    if os.path.exists(path):
        if sha256_file(path) == sha256:
            return path
        os.remove(path)       # stale or partial download
    spec = f"{name}:{arch}={version}"
    proc = subprocess.run(["apt-get", "download", "-q", spec], cwd=cache,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0 or not os.path.exists(path):
        lines = [l for l in proc.stdout.splitlines() if l.startswith("E:")]
        why = lines[-1] if lines else f"apt-get exit status {proc.returncode}"
        sys.exit(f"error: cannot download pinned package {spec} ({why}); "
                 f"if it has left the archive, put its .deb (snapshot.debian.org keeps every "
                 f"version) into {cache}, or update the pin")
    got = sha256_file(path)
    if got != sha256:
        sys.exit(f"error: {spec}: SHA-256 {got} differs from the pinned {sha256}")
    return path


def read_package(path, name):
    """Return ({catalog name: .mo bytes}, copyright text) of one .deb."""
    tar_bytes = subprocess.run(["dpkg-deb", "--fsys-tarfile", path], check=True,
                               stdout=subprocess.PIPE).stdout
    catalogs, copyright_text = {}, None
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tf:
        for member in tf:
            m = MO_PATH.match(member.name)
            if m and member.isfile():
                catalogs[m.group(1)] = tf.extractfile(member).read()
            elif member.name.lstrip("./") == f"usr/share/doc/{name}/copyright" and member.isfile():
                copyright_text = tf.extractfile(member).read().decode("utf-8")
    if copyright_text is None:
        sys.exit(f"error: {name}: no usr/share/doc/{name}/copyright in the package")
    return catalogs, copyright_text


# ===========================================================================
# Split
# ===========================================================================
def sha256_hex(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def group_key(en):
    """Pairs whose English differs only in case, spacing or punctuation share a
    key ("Save As…", "Save as...").  Each group goes to one split as a whole,
    so the test English is never a training target in disguise."""
    return "".join(ch for ch in en.casefold() if ch.isalnum())


def split(pairs):
    """Assign (zh, en) pairs to test / valid / train.

    Groups (see group_key) are visited in the order of the SHA-256 of their
    key; a group goes to test if it still fits there, else to valid if it
    fits, else to train.  Nearly all groups have one pair, so test and valid
    end up with exactly N_TEST and N_VALID pairs.  Each split is written in
    the order of the SHA-256 of its Chinese lines (a fixed shuffle).
    """
    groups = defaultdict(list)
    for zh, en in pairs:
        groups[group_key(en)].append((zh, en))
    order = sorted(groups, key=lambda k: (sha256_hex(k), k))
    out = {"test": [], "valid": [], "train": []}
    for k in order:
        g = groups[k]
        if len(out["test"]) + len(g) <= N_TEST:
            out["test"] += g
        elif len(out["valid"]) + len(g) <= N_VALID:
            out["valid"] += g
        else:
            out["train"] += g
    for name in out:
        out[name].sort(key=lambda p: (sha256_hex(p[0]), p[0]))
    return out


# ===========================================================================
# Main
# ===========================================================================
def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(repo, "data", "real"),
                    help="output folder (default: data/real in the repository)")
    ap.add_argument("--cache", default="/tmp/nmt-real-corpus-debs",
                    help="where downloaded .deb files are kept (default: %(default)s)")
    args = ap.parse_args()
    os.makedirs(args.cache, exist_ok=True)

    drop = Counter()                       # filter key -> entries dropped
    per_pkg = {}                           # package -> Counter of stats
    occurrences = Counter()                # (zh, en) -> catalog entries giving it
    sources_of = defaultdict(list)         # (zh, en) -> packages, in pin order
    copyrights = {}

    # Fetch everything first, so that a missing package stops the run early.
    debs = [fetch(name, version, arch, sha256, args.cache)
            for name, version, arch, sha256, _licence in PACKAGES]
    for (name, version, *_rest), path in zip(PACKAGES, debs):
        catalogs, copyrights[name] = read_package(path, name)
        if not catalogs:
            sys.exit(f"error: {name}={version} has no zh_CN message catalog")
        st = per_pkg[name] = Counter()
        st["catalogs"] = len(catalogs)
        for cat in sorted(catalogs):
            entries = parse_mo(catalogs[cat], f"{name}:{cat}.mo")
            charset = catalog_charset(entries)
            raw = []
            for _ctxt, msgid, plural, msgstr in entries:
                if msgid == b"":
                    continue                       # the header entry
                zh_raw = unicodedata.normalize("NFC", msgstr.decode(charset))
                en_raw = unicodedata.normalize("NFC", msgid.decode(charset))
                if plural is not None:
                    st["plural"] += 1
                    en_plural = unicodedata.normalize("NFC", plural.decode(charset))
                    if use_plural(zh_raw, en_raw, en_plural):
                        en_raw = en_plural
                        st["plural_en"] += 1
                raw.append((zh_raw, en_raw))
            gtk = uses_gtk_mnemonics(raw)
            for zh_raw, en_raw in raw:
                st["entries"] += 1
                why, zh, en = check(zh_raw, en_raw, gtk)
                if why:
                    drop[why] += 1
                    continue
                st["kept"] += 1
                occurrences[(zh, en)] += 1
                if name not in sources_of[(zh, en)]:
                    sources_of[(zh, en)].append(name)

    # De-duplication.  Identical pairs count once; a Chinese source with
    # several English targets keeps the one most catalog entries give, ties
    # going to the smallest string (code point order).
    targets = defaultdict(list)
    for (zh, en), n in occurrences.items():
        targets[zh].append((-n, en))
    pairs = []
    conflicts = 0
    for zh in sorted(targets):
        choices = sorted(targets[zh])
        conflicts += len(choices) - 1
        pairs.append((zh, choices[0][1]))
    kept_entries = sum(occurrences.values())
    duplicates = kept_entries - len(occurrences)

    for zh, en in pairs:
        pkgs = sources_of[(zh, en)]
        per_pkg[pkgs[0]]["first"] += 1
        for p in pkgs:
            per_pkg[p]["final"] += 1

    splits = split(pairs)
    os.makedirs(args.out, exist_ok=True)
    for name in ("train", "valid", "test"):
        for side, idx in (("zh", 0), ("en", 1)):
            with open(os.path.join(args.out, f"{name}.{side}"), "w", encoding="utf-8",
                      newline="\n") as f:
                for p in splits[name]:
                    f.write(p[idx] + "\n")

    # Each package's copyright file, unchanged, next to the data.
    cdir = os.path.join(args.out, "copyright")
    if os.path.isdir(cdir):
        shutil.rmtree(cdir)
    os.makedirs(cdir)
    for name, *_rest in PACKAGES:
        with open(os.path.join(cdir, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(copyrights[name])

    report(per_pkg, drop, duplicates, conflicts, pairs, splits)
    print("\nSHA-256 of the output files:")
    for name in ("train", "valid", "test"):
        for side in ("zh", "en"):
            print(f"  {sha256_file(os.path.join(args.out, f'{name}.{side}'))}  {name}.{side}")


def report(per_pkg, drop, duplicates, conflicts, pairs, splits):
    total = sum(st["entries"] for st in per_pkg.values())
    print("Per package (entries read, kept after filters, final pairs containing it,"
          " final pairs first found in it):")
    print(f"  {'package':28} {'version':24} {'catalogs':>8} {'entries':>8} {'kept':>7}"
          f" {'final':>7} {'first':>7}  licence")
    for name, version, _arch, _sha, licence in PACKAGES:
        st = per_pkg[name]
        print(f"  {name:28} {version:24} {st['catalogs']:8} {st['entries']:8} {st['kept']:7}"
              f" {st['final']:7} {st['first']:7}  {licence}")
    print(f"\nCatalog entries read: {total}")
    n_plural = sum(st["plural"] for st in per_pkg.values())
    n_plural_en = sum(st["plural_en"] for st in per_pkg.values())
    print(f"  plural entries: {n_plural}; paired with the English plural: {n_plural_en}")
    print("Dropped by filter (first failing filter):")
    for key, desc in FILTERS:
        print(f"  {key:14} {drop[key]:7}  {desc}")
    kept = total - sum(drop.values())
    print(f"Kept after filters: {kept}")
    print(f"  identical pairs merged:        {duplicates:7}")
    print(f"  other targets of a source:     {conflicts:7}")
    print(f"Final pairs: {len(pairs)}")
    for name in ("train", "valid", "test"):
        print(f"  {name:6} {len(splits[name]):7}")
    print("\nSources (Chinese lines) with at least one placeholder of each kind:")
    print(f"  {'kind':12} {'test':>5} {'(en)':>6} {'valid':>6} {'train':>6}")
    rows = [(key, desc, lambda t, f=find: bool(f(t))) for key, desc, find in PLACEHOLDERS]
    rows.append(("any", "any of the above",
                 lambda t: any(f(t) for _k, _d, f in PLACEHOLDERS)))
    for key, desc, has in rows:
        n = {name: sum(1 for zh, _en in splits[name] if has(zh)) for name in splits}
        n_en = sum(1 for _zh, en in splits["test"] if has(en))
        print(f"  {key:12} {n['test']:5} {'(' + str(n_en) + ')':>6} {n['valid']:6}"
              f" {n['train']:6}  {desc}")
    print("  (en): test pairs whose English target has one")


if __name__ == "__main__":
    main()
