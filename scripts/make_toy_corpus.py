#!/usr/bin/python3
"""Deterministic toy Chinese -> English parallel corpus generator.

Writes data/toy/{train,valid,test}.{zh,en}: one sentence per line, UTF-8,
Unix newlines, line k of .zh translates to line k of .en.

The corpus comes from a small hand-written grammar over a hand-written
lexicon.  Every construction is translated by fixed rules, so each Chinese
sentence has exactly one English translation and a small model can, in
principle, reach 100% exact match.  The rules are chosen so that the two
sides differ in word order (time and place phrases come before the verb in
Chinese and after the object in English), in morphology (agreement, tense,
plurals, articles exist only in English) and in function words (classifiers,
了, 吗 exist only in Chinese): the model has to learn an alignment, not to
copy.

Data and engine.  The words and the tunable parts of the grammar are data in
scripts/toy_corpus/; this script is the engine that loads them and holds the
translation rules (word order, agreement, tense, articles) as code:

  pronouns.tsv    pronouns: English subject/object/possessive forms, person,
                  number, and which one (它) refers to animals only
  nouns.tsv       nouns: English singular/plural, classifier, kind, tags and,
                  for mass nouns, units (一杯茶 -> "a cup of tea")
  places.tsv      places: English for 在 + place and for 去 + place
  verbs.tsv       verbs: English forms, allowed objects, subjects, places,
                  tenses, and flags (stative, modal, skill, ...)
  adjectives.tsv  adjectives: English, what they describe, attributive and
                  predicate use
  words.yaml      closed classes: numerals, classifiers, time words, function
                  words, and adjective+noun pairs never combined
  grammar.yaml    corpus size and seed, the fixed pairs (我爱水课), and how
                  often each construction and each option is drawn, with the
                  word lists that restrict them

The .tsv files have a header row naming their columns (checked), '#'
comment lines, '-' for an empty cell and space-separated lists.  The engine
draws from every table and list in file order, so reordering rows changes the
corpus just as changing a word does (tests/toy_corpus_test.sh compares a
fresh run with data/toy/ byte for byte).

Conventions (see data/README.md):
  * English is lowercase except the pronoun "I"; tokens are separated by one
    space; questions end with " ?"; statements have no final punctuation.
  * Chinese has no spaces; questions end with "吗？"; statements have no final
    punctuation.

Only the standard library and PyYAML (Debian's python3-yaml, loaded with
yaml.safe_load) are used, and all randomness comes from one
random.Random(seed); nothing iterates over a set or relies on hash order, so
the output is byte-identical on every run (checked with /usr/bin/python3,
Python 3.11; random's seeded algorithms have been stable across 3.x).

Usage:  /usr/bin/python3 scripts/make_toy_corpus.py [--out DIR] [--seed N]
"""

import argparse
import hashlib
import os
import random
import sys
from collections import Counter, namedtuple

try:
    import yaml
except ImportError:
    sys.exit("error: make_toy_corpus.py needs PyYAML "
             "(Debian: apt-get install python3-yaml)")

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "toy_corpus")

# ===========================================================================
# Loading the data files
# ===========================================================================


def die(where, msg):
    sys.exit("error: %s: %s" % (where, msg))


def read_tsv(name, columns):
    """Rows of a .tsv lexicon table: a list of (where, {column: cell}).

    '#' lines and blank lines are skipped; the first other line must name
    exactly `columns` (a space-separated string), in order, so that a moved
    column cannot silently shift every entry.  A '-' cell becomes None.
    """
    columns = columns.split()
    path = os.path.join(DATA_DIR, name)
    rows, header_seen = [], False
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith("#"):
                continue
            where = "%s:%d" % (path, lineno)
            cells = line.split("\t")
            if not header_seen:
                if cells != columns:
                    die(where, "header must be %s" % "<TAB>".join(columns))
                header_seen = True
                continue
            # An empty or space-padded cell is a typo (two tabs, a stray
            # space) that would otherwise become a word of its own.
            if len(cells) != len(columns) or any(
                    not c or c != c.strip() for c in cells):
                die(where, "expected %d tab-separated non-empty cells (use "
                    "'-' for an empty one), got %r" % (len(columns), line))
            rows.append((where, {k: (None if c == "-" else c)
                                 for k, c in zip(columns, cells)}))
    return rows


def words(cell):
    """A space-separated list cell as a tuple ('-' -> empty)."""
    return tuple(cell.split()) if cell else ()


def yes_no(where, cell):
    if cell not in ("yes", "no"):
        die(where, "expected yes or no, got %r" % cell)
    return cell == "yes"


def load_yaml(name):
    """A YAML data file, loaded with yaml.safe_load and checked for the YAML
    surprises that would otherwise change the corpus without an error."""
    path = os.path.join(DATA_DIR, name)
    with open(path, encoding="utf-8") as f:
        text = f.read()

    # safe_load silently keeps the last of two equal keys: look at the
    # parsed (not yet constructed) document first.
    def no_duplicates(node):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for k, v in node.value:
                if k.value in seen:
                    die("%s:%d" % (path, k.start_mark.line + 1),
                        "duplicate key %r" % k.value)
                seen.add(k.value)
                no_duplicates(v)
        elif isinstance(node, yaml.SequenceNode):
            for v in node.value:
                no_duplicates(v)
    no_duplicates(yaml.compose(text, Loader=yaml.SafeLoader))

    # YAML 1.1 reads unquoted yes/no/on/off as booleans and 2024-06-11 as a
    # date; no setting is either, so any such value is a quoting mistake.
    def plain(x, at):
        if isinstance(x, dict):
            for k, v in x.items():
                plain(k, at + " key")
                plain(v, "%s.%s" % (at, k) if at else k)
        elif isinstance(x, list):
            for i, v in enumerate(x):
                plain(v, "%s[%d]" % (at, i))
        elif isinstance(x, bool) or not isinstance(
                x, (str, int, float, type(None))):
            die(path, "%s: %r was read as a %s; quote it if it is a word"
                % (at or "top level", x, type(x).__name__))
    data = yaml.safe_load(text)
    plain(data, "")
    return data


# --- Lexicon entry types ---------------------------------------------------
# The fields are described in the header of each .tsv file.
Pron = namedtuple("Pron", "zh subj obj poss person plural animal")
Noun = namedtuple("Noun", "zh sg pl cl kind tags units")
Place = namedtuple("Place", "zh at to")
Verb = namedtuple("Verb", "zh base s3 past part objs subj places tenses flags")
Adj = namedtuple("Adj", "zh en applies attr pred state")
ALL_T = ("pres", "hab", "past", "fut")


def is_mass(n):
    return n.cl is None and n.kind != "kin"


class Lexicon:
    """Every word the generator knows, read from DATA_DIR."""

    def __init__(self):
        self.pronouns = []
        for where, r in read_tsv(
                "pronouns.tsv", "zh subj obj poss person number refers"):
            if r["person"] not in ("1", "2", "3") or \
                    r["number"] not in ("sg", "pl") or \
                    r["refers"] not in ("h", "a"):
                die(where, "person must be 1/2/3, number sg/pl, refers h/a")
            self.pronouns.append(Pron(r["zh"], r["subj"], r["obj"], r["poss"],
                                      int(r["person"]), r["number"] == "pl",
                                      r["refers"] == "a"))
        animal = [p for p in self.pronouns if p.animal]
        if len(animal) != 1:
            sys.exit("error: pronouns.tsv: exactly one pronoun must have "
                     "refers = a (它)")
        self.it = animal[0]
        self.human_pronouns = [p for p in self.pronouns if not p.animal]
        self.pron_zh = [p.zh for p in self.pronouns]

        words_yaml = load_yaml("words.yaml")
        self.nums = [tuple(x) for x in words_yaml["numerals"]]
        self.classifiers = words_yaml["classifiers"]
        self.times = words_yaml["times"]
        self.function_words = words_yaml["function_words"]
        self.attr_block = {tuple(x) for x in words_yaml["attr_block"]}

        self.nouns = []
        for where, r in read_tsv("nouns.tsv", "zh sg pl cl kind tags units"):
            units = tuple(tuple(u.split()) for u in r["units"].split(";")) \
                if r["units"] else ()
            for cl in [r["cl"]] + [u[0] for u in units if u]:
                if cl is not None and cl not in self.classifiers:
                    die(where, "classifier %s is not in words.yaml" % cl)
            if any(len(u) != 3 for u in units):
                die(where, "units: 'classifier singular plural'; ...")
            self.nouns.append(Noun(r["zh"], r["sg"], r["pl"], r["cl"],
                                   r["kind"], words(r["tags"]), units))
        self.noun = {n.zh: n for n in self.nouns}

        self.places = [Place(r["zh"], r["at"], r["to"]) for _, r in
                       read_tsv("places.tsv", "zh at to")]
        self.place = {p.zh: p for p in self.places}

        self.verbs = []
        for where, r in read_tsv(
                "verbs.tsv",
                "zh base s3 past part objs subj places tenses flags"):
            tenses = ALL_T if r["tenses"] == "all" else words(r["tenses"])
            places = words(r["places"])
            if not set(tenses) <= set(ALL_T) or not tenses:
                die(where, "tenses: 'all' or some of %s" % " ".join(ALL_T))
            if not set(places) <= set(self.place):
                die(where, "places must be in places.tsv")
            self.verbs.append(Verb(
                r["zh"], r["base"], r["s3"], r["past"], r["part"] or "",
                # None (not an empty tuple) marks an intransitive verb.
                words(r["objs"]) or None, words(r["subj"]), places, tenses,
                words(r["flags"])))

        self.adjs = []
        for where, r in read_tsv("adjectives.tsv",
                                 "zh en applies attr pred state"):
            if r["attr"] not in ("bare", "de", None):
                die(where, "attr must be bare, de or -")
            self.adjs.append(Adj(r["zh"], r["en"], words(r["applies"]),
                                 r["attr"], yes_no(where, r["pred"]),
                                 yes_no(where, r["state"])))

    def entries(self):
        """All distinct Chinese lexicon strings, in a fixed order.

        The lexicon size printed in the summary is their number: 看 "read"
        and 看 "watch", or 做 "make" and 做 "do", count once.
        """
        seen = {}
        for group in ([p.zh for p in self.pronouns],
                      [n.zh for n in self.nouns],
                      [p.zh for p in self.places], [v.zh for v in self.verbs],
                      [a.zh for a in self.adjs], [z for z, _ in self.nums],
                      list(self.classifiers), list(self.times),
                      list(self.function_words)):
            for zh in group:
                seen.setdefault(zh, True)
        return list(seen)


# The option names of grammar.yaml's weight tables that the engine knows: a
# misspelt one would otherwise be drawn and then fall into the wrong branch.
SUBJECT_ANIMAL = ("it", "dem_animal", "poss_animal")
OPTIONS = {
    "constructions": ("action", "adjective", "location", "have", "modal"),
    "subject.human": ("pron", "person", "kin", "plural", "poss_person",
                      "dem_person", "coord"),
    "subject.animal_beside_human": SUBJECT_ANIMAL,
    "subject.animal_only": SUBJECT_ANIMAL,
    "object.human_forms": ("dem", "poss", "person", "numeral"),
    "object.thing_forms": ("generic", "numeral", "dem", "poss"),
    "action.tenses": ALL_T,
    "adjective.subjects": ("human", "animal", "thing", "mass"),
    "have.modes": ("positive", "negative", "question"),
    "modal.verbs": ("喜欢", "想", "会"),
}


def load_grammar(lex):
    """grammar.yaml, with its option names and word lists checked."""
    g = load_yaml("grammar.yaml")
    where = os.path.join(DATA_DIR, "grammar.yaml")

    def at(dotted):
        x = g
        for part in dotted.split("."):
            x = x[part]
        return x
    for dotted, known in OPTIONS.items():
        for name in at(dotted):
            if name not in known:
                die(where, "%s: %r is not one of %s"
                    % (dotted, name, ", ".join(known)))
    for dotted in ("adjective.times", "location.times"):
        for zh in at(dotted):
            if zh not in lex.times:
                die(where, "%s: %r is not a time word in words.yaml"
                    % (dotted, zh))
    for dotted in ("object.animal_things", "adjective.possessive_only",
                   "have.object_nouns"):
        for zh in at(dotted):
            if zh not in lex.noun:
                die(where, "%s: %r is not in nouns.tsv"
                    % (dotted, zh))
    for zh in at("location.animal_places"):
        if zh not in lex.place:
            die(where, "location.animal_places: %r is not in "
                "places.tsv" % zh)
    return g


def weights(mapping):
    """A grammar.yaml weight table {option: weight} as [(weight, option)] in
    file order, the form Generator.weighted draws from."""
    return [(w, k) for k, w in mapping.items()]


# ===========================================================================
# English helpers
# ===========================================================================

def article(next_word):
    # The lexicon avoids exceptions to this rule (see nouns.tsv).
    return "an" if next_word[0] in "aeiou" else "a"


class Phrase:
    """A phrase in both languages plus the lexicon entries it used."""

    def __init__(self, zh="", en=(), keys=()):
        self.zh = zh
        self.en = list(en)
        self.keys = list(keys)


class Subj(Phrase):
    """A sentence subject: adds what English agreement needs."""

    def __init__(self, zh, en, keys, person=3, plural=False, animate="h",
                 tags=(), first=False):
        super().__init__(zh, en, keys)
        self.person, self.plural = person, plural
        self.animate = animate          # "h" human, "a" animal, "o" object
        self.tags = tuple(tags)
        self.first = first              # contains I/we (no questions then)

    @property
    def sg3(self):
        return self.person == 3 and not self.plural


def do_aux(s):
    return "does" if s.sg3 else "do"


def be_present(s):
    if s.person == 1 and not s.plural:
        return "am"
    return "is" if s.sg3 else "are"


def be_past(s):
    return "was" if (not s.plural and s.person != 2) else "were"


# ===========================================================================
# Generator
# ===========================================================================

class Generator:
    """Draws sentence pairs from the lexicon with the rules below.

    Each construction (action, adjective, location, have, modal) is one
    method; grammar.yaml says how often each is drawn and gives the
    probabilities and weights of its options (self.g).  Every random draw
    goes through self.rng in a fixed order, so the same seed and data give
    the same corpus.
    """

    def __init__(self, seed, lex, grammar):
        self.rng = random.Random(seed)
        self.lex = lex
        self.g = grammar
        # Lexicon usage so far; choices are weighted towards rarely used
        # entries so that every entry is seen often enough in train.
        self.used = Counter()

    # --- random helpers -----------------------------------------------------
    def chance(self, p):
        return self.rng.random() < p

    def pick(self, items, key=lambda x: x):
        """Choose an item, favouring lexicon entries used less so far."""
        weights = [1.0 / (1.0 + self.used[key(it)]) ** 0.5 for it in items]
        return self.rng.choices(items, weights=weights, k=1)[0]

    def weighted(self, table):
        """table: list of (weight, value); one random() walks it in order."""
        total = sum(w for w, _ in table)
        r = self.rng.random() * total
        for w, v in table:
            r -= w
            if r < 0:
                return v
        return table[-1][1]

    # --- matching -----------------------------------------------------------
    @staticmethod
    def noun_matches(n, specs):
        return (n.kind in specs or n.zh in specs
                or any(t in specs for t in n.tags)
                or (n.kind in ("person", "kin") and "h" in specs)
                or (n.kind == "animal" and "a" in specs))

    @staticmethod
    def subj_allowed(s, spec):
        if s.animate == "h":
            return "h" in spec or ("adult" in spec and "adult" in s.tags)
        if s.animate == "a":
            return "a" in spec or any(k in spec for k in s.keys)
        return False

    def adj_for(self, target, attr=None, pred=None):
        """Adjectives that can describe target (a Subj or a Noun)."""
        out = []
        for a in self.lex.adjs:
            if attr is not None and (a.attr is not None) != attr:
                continue
            if pred is not None and a.pred != pred:
                continue
            if isinstance(target, Subj):
                if target.animate == "h":
                    ok = self.human_matches(target.tags, a.applies)
                elif target.animate == "a":
                    ok = "a" in a.applies or any(k in a.applies
                                                 for k in target.keys)
                else:
                    ok = self.noun_matches(self.lex.noun[target.keys[-1]],
                                           a.applies)
            elif target.kind in ("person", "kin"):
                ok = (self.human_matches(target.tags, a.applies)
                      or "person" in a.applies)
            else:
                ok = (self.noun_matches(target, a.applies)
                      and (a.zh, target.zh) not in self.lex.attr_block)
            if ok:
                out.append(a)
        return out

    @staticmethod
    def human_matches(tags, applies):
        return ("h" in applies or ("adult" in applies and "adult" in tags)
                or ("child" in applies and "child" in tags))

    # --- noun phrases --------------------------------------------------------
    def attr_adj(self, n, p):
        """Optionally an attributive adjective for noun n (probability p)."""
        if n.kind == "kin" or not self.chance(p):
            return None
        cands = self.adj_for(n, attr=True)
        return self.pick(cands, key=lambda a: a.zh) if cands else None

    @staticmethod
    def zh_attr(adj, zh_noun):
        if adj is None:
            return zh_noun
        return adj.zh + ("的" if adj.attr == "de" else "") + zh_noun

    def np_generic(self, n, adj_p):
        """Bare noun = generic: plural for count nouns, bare mass noun.

        我喜欢猫 -> "I like cats", 他喝茶 -> "he drinks tea".
        """
        adj = self.attr_adj(n, adj_p)
        en = (n.pl or n.sg).split()
        keys = [n.zh]
        if adj:
            en = [adj.en] + en
            keys.append(adj.zh)
            if adj.attr == "de":
                keys.append("的")
        return Phrase(self.zh_attr(adj, n.zh), en, keys)

    def np_indef_sg(self, n, adj_p):
        """Bare noun after 没有/有…吗: "a cat" (count) or "water" (mass)."""
        if is_mass(n):
            return self.np_generic(n, adj_p)
        adj = self.attr_adj(n, adj_p)
        en = n.sg.split()
        keys = [n.zh]
        if adj:
            en = [adj.en] + en
            keys.append(adj.zh)
            if adj.attr == "de":
                keys.append("的")
        return Phrase(self.zh_attr(adj, n.zh), [article(en[0])] + en, keys)

    def np_numeral(self, n, adj_p, most=None):
        """Numeral + classifier + noun: 三本书 -> "three books".

        most: the largest numeral (default: the largest there is).
        """
        g = self.g["numeral"]
        most = most or len(self.lex.nums)
        if n.kind in g["food_kinds"]:
            most = min(most, g["food_most"])   # no eight bowls of rice
        # randrange(1, most) is an index: two .. the most-th numeral.
        i = 0 if self.chance(g["one"]) else self.rng.randrange(1, most)
        num_zh, num_en = self.lex.nums[i]
        adj = self.attr_adj(n, adj_p)
        keys = [n.zh, num_zh]
        if adj:
            keys.append(adj.zh)
            if adj.attr == "de":
                keys.append("的")
        if is_mass(n):
            cl, unit_sg, unit_pl = self.rng.choice(n.units)
            inner = ([adj.en] if adj else []) + n.sg.split()
            unit = unit_sg if i == 0 else unit_pl
            en = [unit, "of"] + inner
        else:
            cl = n.cl
            en = ([adj.en] if adj else []) + (n.sg if i == 0 else n.pl).split()
        keys.append(cl)
        en = [article(en[0]) if i == 0 else num_en] + en
        return Phrase(num_zh + cl + self.zh_attr(adj, n.zh), en, keys)

    def np_person_def(self, n):
        """Bare person noun = definite: 老师 -> "the teacher"; 妈妈 -> "mom"."""
        if n.kind == "kin":
            return Phrase(n.zh, [n.sg], [n.zh])
        return Phrase(n.zh, ["the"] + n.sg.split(), [n.zh])

    def np_demonstrative(self, n):
        """这/那 + classifier + noun: 这本书 -> "this book"."""
        dem_zh, dem_en = self.rng.choice([("这", "this"), ("那", "that")])
        return Phrase(dem_zh + n.cl + n.zh, [dem_en] + n.sg.split(),
                      [dem_zh, n.cl, n.zh])

    def np_possessive(self, n):
        """Pronoun + 的 + noun: 我的猫 -> "my cat"."""
        p = self.pick(self.lex.human_pronouns, key=lambda q: q.zh)
        return Phrase(p.zh + "的" + n.zh, [p.poss] + n.sg.split(),
                      [p.zh, "的", n.zh])

    # --- subjects -------------------------------------------------------------
    def subject(self, spec, allow_first=True):
        """A subject allowed by spec ("h", "adult", "a", animal zh)."""
        g = self.g["subject"]
        animals_ok = "a" in spec or any(z in self.lex.noun for z in spec)
        humans_ok = "h" in spec or "adult" in spec
        table = []
        if humans_ok:
            table += weights(g["human"])
        if animals_ok:
            table += weights(g["animal_beside_human" if humans_ok
                               else "animal_only"])
        for _ in range(g["tries"]):
            s = self._subject(self.weighted(table), spec)
            if s is None or not self.subj_allowed(s, spec):
                continue
            if s.first and not allow_first:
                continue
            return s
        return None

    def _subject(self, how, spec):
        people = [n for n in self.lex.nouns if n.kind == "person"
                  and "numonly" not in n.tags]
        kin = [n for n in self.lex.nouns if n.kind == "kin"]
        animals = [n for n in self.lex.nouns if n.kind == "animal"
                   and ("a" in spec or n.zh in spec)]
        if how == "pron":
            p = self.pick(self.lex.human_pronouns, key=lambda q: q.zh)
            return Subj(p.zh, [p.subj], [p.zh], p.person, p.plural, "h",
                        ("adult",), p.person == 1)
        bare_people = [n for n in people if "nobare" not in n.tags]
        if how == "person":
            n = self.pick(bare_people, key=lambda q: q.zh)
            ph = self.np_person_def(n)
            return Subj(ph.zh, ph.en, ph.keys, tags=n.tags)
        if how == "kin":
            n = self.pick(kin, key=lambda q: q.zh)
            return Subj(n.zh, [n.sg], [n.zh], tags=n.tags)
        if how == "plural":
            n = self.pick(bare_people, key=lambda q: q.zh)
            return Subj(n.zh + "们", ["the"] + n.pl.split(), [n.zh, "们"],
                        plural=True, tags=n.tags)
        if how == "poss_person":
            n = self.pick([n for n in people if "poss" in n.tags],
                          key=lambda q: q.zh)
            ph = self.np_possessive(n)
            return Subj(ph.zh, ph.en, ph.keys, tags=n.tags,
                        first=ph.keys[0] in ("我", "我们"))
        if how == "dem_person":
            n = self.pick(people, key=lambda q: q.zh)
            ph = self.np_demonstrative(n)
            return Subj(ph.zh, ph.en, ph.keys, tags=n.tags)
        if how == "coord":
            return self.coord_subject()
        if not animals:
            return None
        if how == "it":
            it = self.lex.it
            return Subj(it.zh, [it.subj], [it.zh], animate="a", tags=("it",))
        n = self.pick(animals, key=lambda q: q.zh)
        if how == "dem_animal":
            ph = self.np_demonstrative(n)
            return Subj(ph.zh, ph.en, ph.keys, animate="a")
        ph = self.np_possessive(n)
        return Subj(ph.zh, ph.en, ph.keys, animate="a",
                    first=ph.keys[0] in ("我", "我们"))

    def coord_subject(self):
        """X 和 Y: two singular people or pronouns; "I" always goes last.

        我和妈妈 -> "mom and I"; 老师和学生 -> "the teacher and the student".
        """
        g = self.g["subject"]

        def one():
            r = self.rng.random()
            if r < g["coord_pron_below"]:
                p = self.pick([q for q in self.lex.human_pronouns
                               if not q.plural], key=lambda q: q.zh)
                return (p.zh, [p.subj], [p.zh], p.zh == "我", ("adult",))
            if r < g["coord_kin_below"]:
                n = self.pick([n for n in self.lex.nouns if n.kind == "kin"],
                              key=lambda q: q.zh)
                return (n.zh, [n.sg], [n.zh], False, n.tags)
            n = self.pick([n for n in self.lex.nouns if n.kind == "person"
                           and "numonly" not in n.tags
                           and "nobare" not in n.tags], key=lambda q: q.zh)
            return (n.zh, ["the"] + n.sg.split(), [n.zh], False, n.tags)

        a, b = one(), one()
        if a[0] == b[0]:
            return None
        # English order is fixed by rank, whatever the Chinese order: he/she/
        # you first, then nouns, "I" last (我和妈妈 -> "mom and I", 妈妈和他
        # -> "he and mom"; "mom and he" is correct but stilted).
        def rank(c):
            return 2 if c[3] else (0 if c[2][0] in self.lex.pron_zh else 1)
        x, y = sorted([a, b], key=rank)   # stable: ties keep Chinese order
        en = x[1] + ["and"] + y[1]
        first = a[3] or b[3]
        person = 1 if first else 3
        # The pair counts as adults only if both are (for 工作, 开车, ...).
        tags = (("adult",) if "adult" in a[4] and "adult" in b[4]
                else ("child",))
        return Subj(a[0] + "和" + b[0], en, a[2] + ["和"] + b[2], person,
                    True, "h", tags, first)

    # --- objects ----------------------------------------------------------------
    def object_candidates(self, verb):
        out = []
        for n in self.lex.nouns:
            if verb.objs and self.noun_matches_obj(n, verb.objs):
                out.append(n)
        return out

    @staticmethod
    def noun_matches_obj(n, objs):
        if n.kind in ("person", "kin"):
            return n.kind in objs
        return (n.kind in objs or n.zh in objs
                or any(t in objs for t in n.tags))

    def obj(self, verb, subj, forms, most=None):
        """An object for verb.  forms: allowed NP forms, a subset of
        generic, numeral, dem, poss, person, pron; most: largest numeral."""
        g = self.g["object"]
        cands = self.object_candidates(verb)
        if subj.animate == "a":
            # Animals eat, drink and like only animal things ("my dog
            # likes bread", not "my sheep drinks hot tea").
            cands = [n for n in cands if n.zh in g["animal_things"]
                     or n.kind in ("animal", "person", "kin")]
            if not cands:
                return None
        use_pron = "pron" in verb.objs and "pron" in forms
        hw, tw = g["human_forms"], g["thing_forms"]
        # Animal subjects get plain objects ("my dog likes bread").
        adj_p = 0 if subj.animate == "a" else g["adjective"]
        for _ in range(g["tries"]):
            if use_pron and self.chance(g["pronoun"]):
                ex = set(subj.keys)
                if subj.person == 1:
                    ex |= {"我", "我们"}
                if subj.person == 2:
                    ex |= {"你", "你们"}
                pool = [p for p in self.lex.human_pronouns if p.zh not in ex]
                p = self.pick(pool, key=lambda q: q.zh)
                return Phrase(p.zh, [p.obj], [p.zh])
            n = self.pick(cands, key=lambda q: q.zh)
            if n.zh in subj.keys:
                continue
            human = n.kind in ("person", "kin")
            opts = []
            if human:
                if "numonly" not in n.tags and n.kind == "person":
                    opts += [(hw["dem"], "dem")]
                    if "poss" in n.tags:
                        opts += [(hw["poss"], "poss")]
                    if "nobare" not in n.tags:
                        opts += [(hw["person"], "person")]
                if n.kind == "kin":
                    opts += [(hw["person"], "person")]
                if n.kind == "person":
                    opts += [(hw["numeral"], "numeral")]
            else:
                if "nobare" not in verb.flags:
                    opts += [(tw["generic"], "generic")]
                if n.cl or n.units:          # 数学, 音乐: no numeral
                    opts += [(tw["numeral"], "numeral")]
                if not is_mass(n):
                    opts += [(tw["dem"], "dem"), (tw["poss"], "poss")]
            opts = [(w, f) for w, f in opts if f in forms]
            if not opts:
                continue
            if "numonly" in n.tags and "numeral" not in forms:
                continue
            f = self.weighted(opts)
            if f == "generic":
                ph = self.np_generic(n, adj_p)
            elif f == "numeral":
                ph = self.np_numeral(n, adj_p, most=most)
            elif f == "dem":
                ph = self.np_demonstrative(n)
            elif f == "poss":
                ph = self.np_possessive(n)
            else:
                ph = self.np_person_def(n)
            # Occasionally coordinate two objects of the same form:
            # 猫和狗 -> "cats and dogs"; 一本书和两支笔 -> "a book and two pens".
            if f in ("generic", "numeral") and self.chance(g["coordinate"]):
                others = [m for m in cands if m.zh != n.zh
                          and m.kind not in ("person", "kin")
                          and (f == "generic" or m.cl or m.units)]
                if others:
                    m = self.pick(others, key=lambda q: q.zh)
                    ph2 = (self.np_generic(m, 0) if f == "generic"
                           else self.np_numeral(m, 0, most=most))
                    ph = Phrase(ph.zh + "和" + ph2.zh,
                                ph.en + ["and"] + ph2.en,
                                ph.keys + ["和"] + ph2.keys)
            return ph
        return None

    # --- clauses ------------------------------------------------------------------
    def finish(self, zh, en, keys, question):
        if question:
            return zh + "吗？", en + ["?"], keys + ["吗"]
        return zh, en, keys

    def front_time(self, subj_zh, time_zh, rest_zh):
        """Chinese time word after the subject, sometimes before it."""
        if time_zh in ("昨天", "明天", "今天") and \
                self.chance(self.g["time_first"]):
            return time_zh + subj_zh + rest_zh
        return subj_zh + time_zh + rest_zh

    def action(self):
        """Subject + verb (+ object) with tense, negation, question, place.

        Chinese: S TIME [不/没] [在 PLACE] V[了] O [了]   (了 after an
        intransitive verb phrase, after the verb if there is an object)
        English: S (AUX) V O PLACE TIME
        """
        g = self.g["action"]
        verbs = self.lex.verbs
        # 去 + place is one verb but has many objects: draw it more often.
        verb = self.pick([v for v in verbs if v.objs != ("place",)] +
                         [v for v in verbs if v.objs == ("place",)]
                         * g["go_copies"], key=lambda v: v.zh)
        tense = self.weighted([(w, t) for w, t in weights(g["tenses"])
                               if t in verb.tenses])
        if tense == "pres" and verb.objs is None and \
                "stative" not in verb.flags and \
                self.chance(g["intransitive_habit"]):
            tense = "hab" if "hab" in verb.tenses else tense
        question = self.chance(g["question"])
        # 每天不… would mean "never", not "not every day": no negated 每天.
        neg = not question and tense != "hab" and self.chance(g["negative"])
        subj = self.subject(verb.subj, allow_first=not question)
        if subj is None:
            return None
        # The 今天 draw happens whatever the tense (the dict is built
        # first); keep it that way, or every later draw shifts.
        time_zh = {"pres": "", "hab": "每天", "fut": "明天",
                   "past": "今天" if self.chance(g["today"]) else "昨天"}[tense]
        keys = list(subj.keys)
        if time_zh:
            keys.append(time_zh)

        # object
        ozh, oen = "", []
        if verb.objs == ("place",):
            pl = self.pick([p for p in self.lex.places if p.to],
                           key=lambda p: p.zh)
            ozh, oen = pl.zh, pl.to.split()
            keys.append(pl.zh)
        elif verb.objs:
            # Which object forms read naturally in each clause type:
            #  * positive past needs a specific object (一个苹果, 这本书):
            #    我昨天吃了苹果 is unnatural, so no bare generic object;
            #  * habits without 每天 take generic objects (他喝茶 "he drinks
            #    tea"), 每天 also allows a count (每天吃一个苹果);
            #  * numerals are never negated (*"did not buy three books").
            forms = {"person", "pron"}
            if "stative" in verb.flags:
                forms |= {"generic", "dem", "poss"}
            elif tense == "past":
                forms |= {"dem", "poss"}
                forms |= {"generic"} if neg else {"numeral"}
                if verb.tenses == ("past",):
                    forms.discard("generic")     # *"did not find keys"
            elif tense == "pres":
                forms |= {"generic"}
            elif tense == "hab":
                forms |= {"generic"}
                if "daily" in verb.flags:     # 每天吃一个苹果, not 每天卖一个饺子
                    forms.add("numeral")
            else:   # future
                forms |= {"generic", "dem", "poss"}
                if not neg:
                    forms.add("numeral")
            o = self.obj(verb, subj, forms,
                         most=g["habit_most"] if tense == "hab" else None)
            if o is None:
                return None
            ozh, oen = o.zh, o.en
            keys += o.keys

        # place
        place = None
        if verb.places and verb.objs != ("place",) and \
                self.chance(g["place"]):
            place = self.lex.place[self.pick(list(verb.places))]
            keys += ["在", place.zh]

        # Chinese
        le = tense == "past" and not neg
        zh = ""
        if neg:
            zh += "没" if tense == "past" else "不"
            keys.append(zh)
        if place:
            zh += "在" + place.zh
        zh += verb.zh
        if verb.objs:
            zh += ("了" if le else "") + ozh
        elif le:
            zh += "了"
        if le:
            keys.append("了")
        keys.append(verb.zh)
        zh = self.front_time(subj.zh, time_zh, zh)

        # English
        part = verb.part.split()
        tail = oen + (place.at.split() if place else []) + \
            (self.lex.times[time_zh].split() if time_zh else [])
        if tense in ("pres", "hab"):
            aux, finite = do_aux(subj), (verb.s3 if subj.sg3 else verb.base)
        elif tense == "past":
            aux, finite = "did", verb.past
        else:
            aux, finite = "will", None
        if question:
            en = [aux] + subj.en + [verb.base] + part + tail
        elif neg:
            en = subj.en + [aux, "not", verb.base] + part + tail
        elif finite is None:
            en = subj.en + ["will", verb.base] + part + tail
        else:
            en = subj.en + [finite] + part + tail
        return self.finish(zh, en, keys, question)

    def adjective(self):
        """Predicate adjective: 他很忙 -> "he is busy".

        Positive statements need 很 (not translated) or 非常 ("very");
        negation is 不 + adjective even in the past; questions drop 很.
        """
        g = self.g["adjective"]
        kind = self.weighted(weights(g["subjects"]))
        question = self.chance(g["question"])
        neg = not question and self.chance(g["negative"])
        if kind == "human":
            s = self.subject(("h",), allow_first=not question)
        elif kind == "animal":
            s = self.subject(("a",), allow_first=not question)
        elif kind == "thing":
            n = self.pick([n for n in self.lex.nouns
                           if (n.cl or n.zh in g["possessive_only"])
                           and n.kind not in ("person", "kin", "animal")],
                          key=lambda q: q.zh)
            # 作业 has no classifier: only 我的作业 -> "my homework".
            ph = (self.np_demonstrative(n)
                  if n.cl and self.chance(g["demonstrative"])
                  else self.np_possessive(n))
            s = Subj(ph.zh, ph.en, ph.keys, animate="o",
                     first=ph.keys[0] in ("我", "我们"))
            if s.first and question:
                return None
        else:   # bare mass subject = generic: 数学很难 -> "math is difficult"
            n = self.pick([n for n in self.lex.nouns
                           if n.kind in g["mass_kinds"]], key=lambda q: q.zh)
            # Tag "plural": an English plural mass noun ("noodles are").
            s = Subj(n.zh, n.sg.split(), [n.zh], animate="o",
                     plural="plural" in n.tags)
        if s is None:
            return None
        cands = self.adj_for(s, pred=True)
        if not cands:
            return None
        adj = self.pick(cands, key=lambda a: a.zh)
        keys = s.keys + [adj.zh]
        time_zh = ""
        if adj.state and self.chance(g["time"]):
            time_zh = self.weighted(weights(g["times"]))
            keys.append(time_zh)
        if time_zh == "明天" and neg:
            return None   # 不会很忙 reads as "not very busy"; leave it out
        t_en = self.lex.times[time_zh].split() if time_zh else []
        very = not neg and not question and self.chance(g["very"])

        if time_zh == "明天":
            keys.append("会")
            zh_pred = "会" + ("" if question else ("非常" if very else "很")) \
                + adj.zh
            if question:
                en = ["will"] + s.en + ["be", adj.en] + t_en
            else:
                en = s.en + ["will", "be"] + (["very"] if very else []) + \
                    [adj.en] + t_en
        else:
            be = be_past(s) if time_zh == "昨天" else be_present(s)
            if question:
                zh_pred = adj.zh
                en = [be] + s.en + [adj.en] + t_en
            elif neg:
                zh_pred = "不" + adj.zh
                en = s.en + [be, "not", adj.en] + t_en
            else:
                zh_pred = ("非常" if very else "很") + adj.zh
                en = s.en + [be] + (["very"] if very else []) + [adj.en] + t_en
        keys.append("不" if neg else ("非常" if very else
                                       ("很" if not question else "吗")))
        zh = self.front_time(s.zh, time_zh, zh_pred)
        return self.finish(zh, en, keys, question)

    def location(self):
        """在 + place as the predicate: 他在学校 -> "he is at school"."""
        g = self.g["location"]
        question = self.chance(g["question"])
        neg = not question and self.chance(g["negative"])
        s = self.subject(("h", "a"), allow_first=not question)
        if s is None:
            return None
        if s.animate == "a":
            pl = self.lex.place[self.pick(list(g["animal_places"]))]
        else:
            pl = self.pick(self.lex.places, key=lambda p: p.zh)
        time_zh = ""
        if self.chance(g["time"]):
            time_zh = self.weighted(weights(g["times"]))
        keys = s.keys + ["在", pl.zh] + ([time_zh] if time_zh else [])
        if neg:
            keys.append("不")
        t_en = self.lex.times[time_zh].split() if time_zh else []
        zh = self.front_time(s.zh, time_zh,
                             ("不" if neg else "") + "在" + pl.zh)
        at = pl.at.split()
        if time_zh == "明天":
            if question:
                en = ["will"] + s.en + ["be"] + at + t_en
            else:
                en = s.en + ["will"] + (["not"] if neg else []) + ["be"] + \
                    at + t_en
        else:
            be = be_past(s) if time_zh == "昨天" else be_present(s)
            if question:
                en = [be] + s.en + at + t_en
            else:
                en = s.en + [be] + (["not"] if neg else []) + at + t_en
        return self.finish(zh, en, keys, question)

    def have(self):
        """有: 我有三本书 -> "I have three books"; 他没有车 -> "he does not
        have a car"; 你有笔吗？ -> "do you have a pen ?"."""
        g = self.g["have"]
        mode = self.weighted(weights(g["modes"]))
        s = self.subject(("h",), allow_first=mode != "question")
        if s is None:
            return None
        cands = [n for n in self.lex.nouns if n.kind in g["object_kinds"]
                 or n.zh in g["object_nouns"]]
        n = self.pick(cands, key=lambda q: q.zh)
        keys = list(s.keys)
        if mode == "positive":
            o = self.np_numeral(n, adj_p=g["adjective"])
            if self.chance(g["coordinate"]):
                m = self.pick([c for c in cands if c.zh != n.zh
                               and c.kind != "person"], key=lambda q: q.zh)
                o2 = self.np_numeral(m, adj_p=0)
                o = Phrase(o.zh + "和" + o2.zh, o.en + ["and"] + o2.en,
                           o.keys + ["和"] + o2.keys)
            zh = s.zh + "有" + o.zh
            en = s.en + ["has" if s.sg3 else "have"] + o.en
            keys += ["有"] + o.keys
            return zh, en, keys
        if n.kind == "person":
            return None
        o = self.np_indef_sg(n, adj_p=g["indef_adjective"])
        keys += o.keys
        if mode == "negative":
            zh = s.zh + "没有" + o.zh
            en = s.en + [do_aux(s), "not", "have"] + o.en
            keys += ["没有", "没", "有"]
            return zh, en, keys
        zh = s.zh + "有" + o.zh
        en = [do_aux(s)] + s.en + ["have"] + o.en
        keys.append("有")
        return self.finish(zh, en, keys, True)

    def modal(self):
        """喜欢/想/会 + verb phrase.

        喜欢 -> "like to", 想 -> "want to", 会 -> "can" (negative "cannot").
        """
        g = self.g["modal"]
        m = self.weighted(weights(g["verbs"]))
        flag = "skill" if m == "会" else "modal"
        verb = self.pick([v for v in self.lex.verbs if flag in v.flags],
                         key=lambda v: v.zh)
        question = self.chance(g["question"])
        neg = not question and self.chance(g["negative"])
        subj = self.subject(verb.subj, allow_first=not question)
        if subj is None:
            return None
        keys = subj.keys + [m, verb.zh]
        ozh, oen = "", []
        if verb.objs == ("place",):
            pl = self.pick([p for p in self.lex.places if p.to],
                           key=lambda p: p.zh)
            ozh, oen = pl.zh, pl.to.split()
            keys.append(pl.zh)
        elif verb.objs:
            forms = {"generic"} if m != "想" else {"generic", "numeral", "dem"}
            o = self.obj(verb, subj, forms | {"person", "pron"})
            if o is None:
                return None
            ozh, oen = o.zh, o.en
            keys += o.keys
        place = None
        if m != "会" and verb.places and verb.objs != ("place",) and \
                self.chance(g["place"]):
            place = self.lex.place[self.pick(list(verb.places))]
            keys += ["在", place.zh]
        zh = subj.zh + ("不" if neg else "") + m + \
            ("在" + place.zh if place else "") + verb.zh + ozh
        if neg:
            keys.append("不")
        vp = [verb.base] + verb.part.split() + oen + \
            (place.at.split() if place else [])
        if m == "会":
            if question:
                en = ["can"] + subj.en + vp
            else:
                en = subj.en + ["cannot" if neg else "can"] + vp
        else:
            word = {"喜欢": ("like", "likes"), "想": ("want", "wants")}[m]
            if question:
                en = [do_aux(subj)] + subj.en + [word[0], "to"] + vp
            elif neg:
                en = subj.en + [do_aux(subj), "not", word[0], "to"] + vp
            else:
                en = subj.en + [word[1] if subj.sg3 else word[0], "to"] + vp
        return self.finish(zh, en, keys, question)

    def sentence(self):
        """One pair: (zh, en, lexicon keys used, construction name).

        A construction that finds no fitting words returns None and is
        redrawn, as is a sentence outside the length limits.
        """
        c = self.g["corpus"]
        while True:
            how = self.weighted(weights(self.g["constructions"]))
            r = getattr(self, how)()
            if r is None:
                continue
            zh, en, keys = r
            n_words = len([w for w in en if w != "?"])
            if len(zh) > c["max_zh_chars"] or \
                    not c["min_en_words"] <= n_words <= c["max_en_words"]:
                continue
            return zh, " ".join(en), keys, how


# ===========================================================================
# Corpus
# ===========================================================================

def build(seed, lex, grammar):
    """Generate unique pairs and split them: ({split: pairs}, keys, kinds).

    The fixed pairs (grammar.yaml) come first, then generated ones until
    there are enough; one shuffle then decides the split of each pair.
    """
    gen = Generator(seed, lex, grammar)
    c, fixed = grammar["corpus"], grammar["fixed"]
    n_test, n_valid = c["test"], c["valid"]
    total = n_test + n_valid + c["train"]
    pool = {}          # zh -> en (insertion ordered: deterministic)
    pool_keys = {}
    kinds = Counter()
    for zh, en in fixed["pairs"]:
        pool[zh] = en
        pool_keys[zh] = list(fixed["keys"])
    attempts = 0
    while len(pool) < total:
        attempts += 1
        if attempts > 50 * total:
            sys.exit("error: could not generate enough unique sentences")
        zh, en, keys, how = gen.sentence()
        if zh in pool:
            # The grammar must be a function: one source, one translation.
            if pool[zh] != en:
                sys.exit("error: ambiguous source %s -> %r / %r"
                         % (zh, pool[zh], en))
            continue
        pool[zh] = en
        pool_keys[zh] = keys
        kinds[how] += 1
        gen.used.update(set(keys))
    items = list(pool.items())
    gen.rng.shuffle(items)
    # The required pair goes to train whatever the shuffle did.
    items.sort(key=lambda kv: kv[0] == fixed["required"])
    test, valid, train = (items[:n_test], items[n_test:n_test + n_valid],
                          items[n_test + n_valid:])
    return {"train": train, "valid": valid, "test": test}, pool_keys, kinds


def check(splits, pool_keys, lex, grammar):
    """Sanity checks; exit with an error if any fails."""
    errors = []
    seen = {}
    for name, pairs in splits.items():
        for zh, en in pairs:
            if zh in seen:
                errors.append("%s in %s and %s" % (zh, seen[zh], name))
            seen[zh] = name
            if "\n" in zh or "\n" in en or " " in zh or "  " in en:
                errors.append("bad spacing: %r / %r" % (zh, en))
            if any(w != w.lower() and w != "I" for w in en.split()):
                errors.append("casing: %r" % en)
            if en.endswith("?") != zh.endswith("吗？"):
                errors.append("question mismatch: %s / %s" % (zh, en))
    fixed = grammar["fixed"]
    if dict(splits["train"]).get(fixed["required"]) != fixed["required_en"]:
        errors.append("required pair missing from train")
    # Valid/test may only use lexicon entries, characters and English words
    # that occur in train.
    train_keys = Counter()
    train_chars, train_words = set(), set()
    for zh, en in splits["train"]:
        train_keys.update(set(pool_keys[zh]))
        train_chars.update(zh)
        train_words.update(en.split())
    for name in ("valid", "test"):
        for zh, en in splits[name]:
            if not set(zh) <= train_chars or not set(en.split()) <= train_words:
                errors.append("unseen token in %s: %s / %s" % (name, zh, en))
    least = grammar["corpus"]["min_train_count"]
    rare = [(k, train_keys[k]) for k in lex.entries() if train_keys[k] < least]
    if rare:
        errors.append("lexicon entries seen < %d times in train: %s"
                      % (least, rare))
    if errors:
        sys.exit("error:\n  " + "\n  ".join(errors[:30]))
    return train_keys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    lex = Lexicon()
    grammar = load_grammar(lex)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(repo, "data", "toy"),
                    help="output directory (default: data/toy in the repo)")
    ap.add_argument("--seed", type=int, default=grammar["corpus"]["seed"],
                    help="random seed (default: %(default)s)")
    args = ap.parse_args()

    splits, pool_keys, kinds = build(args.seed, lex, grammar)
    train_keys = check(splits, pool_keys, lex, grammar)

    os.makedirs(args.out, exist_ok=True)
    digests = []
    for name, pairs in splits.items():
        for lang, col in (("zh", 0), ("en", 1)):
            path = os.path.join(args.out, "%s.%s" % (name, lang))
            data = "".join(p[col] + "\n" for p in pairs).encode("utf-8")
            with open(path, "wb") as f:
                f.write(data)
            digests.append("%s.%s %s" % (name, lang,
                                         hashlib.sha256(data).hexdigest()[:16]))

    entries = lex.entries()
    print("toy corpus written to %s (seed %d)" % (args.out, args.seed))
    for name, pairs in splits.items():
        en_len = sum(len([w for w in en.split() if w != "?"])
                     for _, en in pairs) / len(pairs)
        zh_len = sum(len(zh) for zh, _ in pairs) / len(pairs)
        n_q = sum(en.endswith("?") for _, en in pairs)
        print("  %-5s %6d pairs  mean en words %.2f  mean zh chars %.2f  "
              "questions %.1f%%" % (name, len(pairs), en_len, zh_len,
                                    100.0 * n_q / len(pairs)))
    all_en = [len(en.split()) - en.endswith("?") for p in splits.values()
              for _, en in p]
    all_zh = [len(zh) for p in splits.values() for zh, _ in p]
    print("  en words min/max %d/%d, zh chars min/max %d/%d"
          % (min(all_en), max(all_en), min(all_zh), max(all_zh)))
    print("  lexicon: %d distinct Chinese entries (%d nouns, %d verbs, "
          "%d adjectives, %d places, %d classifiers)"
          % (len(entries), len(lex.nouns), len({v.zh for v in lex.verbs}),
             len(lex.adjs), len(lex.places), len(lex.classifiers)))
    rarest = sorted(entries, key=lambda k: (train_keys[k], k))[:5]
    print("  rarest lexicon entries in train: %s"
          % ", ".join("%s %d" % (k, train_keys[k]) for k in rarest))
    total = sum(kinds.values())
    print("  constructions: %s" % ", ".join(
        "%s %.0f%%" % (k, 100.0 * v / total) for k, v in
        sorted(kinds.items(), key=lambda kv: -kv[1])))
    print("  sha256: " + "; ".join(digests))


if __name__ == "__main__":
    main()
