#!/usr/bin/python3
"""Deterministic toy Chinese -> English parallel corpus generator.

Writes data/toy/{train,valid,test}.{zh,en}: one sentence per line, UTF-8,
Unix newlines, line k of .zh translates to line k of .en.

The corpus comes from a small hand-written grammar over a hand-written
lexicon (tables below).  Every construction is translated by fixed rules,
so each Chinese sentence has exactly one English translation and a small
model can, in principle, reach 100% exact match.  The rules are chosen so
that the two sides differ in word order (time and place phrases come before
the verb in Chinese and after the object in English), in morphology
(agreement, tense, plurals, articles exist only in English) and in function
words (classifiers, 了, 吗 exist only in Chinese): the model has to learn an
alignment, not to copy.

Conventions (see data/README.md):
  * English is lowercase except the pronoun "I"; tokens are separated by one
    space; questions end with " ?"; statements have no final punctuation.
  * Chinese has no spaces; questions end with "吗？"; statements have no final
    punctuation.

Only the standard library is used and all randomness comes from one
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

DEFAULT_SEED = 20240611
N_TEST = 1000
N_VALID = 500
N_TRAIN = 26000          # keeps the files well under a few MB
MAX_ZH_CHARS = 20        # keep sentences short for a small model
MIN_EN_WORDS, MAX_EN_WORDS = 3, 14

# ===========================================================================
# Lexicon
# ===========================================================================
# Every table row is one lexicon entry.  The lexicon size printed in the
# summary is the number of distinct Chinese strings over all tables (看 "read"
# and 看 "watch", or 做 "make" and 做 "do", count once).

# --- Pronouns: subject form, object form, possessive, person, plural -------
Pron = namedtuple("Pron", "zh subj obj poss person plural")
PRONOUNS = [
    Pron("我", "I", "me", "my", 1, False),
    Pron("你", "you", "you", "your", 2, False),
    Pron("他", "he", "him", "his", 3, False),
    Pron("她", "she", "her", "her", 3, False),
    Pron("它", "it", "it", "its", 3, False),   # only for animals
    Pron("我们", "we", "us", "our", 1, True),
    Pron("你们", "you", "you", "your", 2, True),
    Pron("他们", "they", "them", "their", 3, True),
    Pron("她们", "they", "them", "their", 3, True),
]
HUMAN_PRONOUNS = [p for p in PRONOUNS if p.zh != "它"]
PRON_ZH = [p.zh for p in PRONOUNS]
IT = PRONOUNS[4]

# --- Nouns -----------------------------------------------------------------
# zh, English singular, English plural, classifier (count nouns), kind, tags,
# units (mass nouns only: (classifier, unit singular, unit plural), e.g.
# 一杯茶 -> "a cup of tea").  Articles are not stored: "a"/"an" is chosen from
# the first letter of the word that follows it (adjective or noun); the
# lexicon deliberately avoids words where that rule fails (hour, university).
# Kinds decide which verbs and adjectives a noun goes with.
Noun = namedtuple("Noun", "zh sg pl cl kind tags units")


def N(zh, sg, pl, cl, kind, tags=(), units=()):
    return Noun(zh, sg, pl, cl, kind, tuple(tags), tuple(units))


NOUNS = [
    # people (bare subject/object -> "the teacher"; 们 -> "the teachers")
    # tag "poss": may take a possessive (我的老师 "my teacher"; *我的女孩)
    N("老师", "teacher", "teachers", "位", "person", ["adult", "poss"]),
    N("医生", "doctor", "doctors", "位", "person", ["adult", "poss"]),
    N("学生", "student", "students", "个", "person", ["child", "poss"]),
    N("护士", "nurse", "nurses", "个", "person", ["adult"]),
    N("孩子", "child", "children", "个", "person", ["child", "poss"]),
    # "the friend" / "the neighbor" sound odd: 朋友 and 邻居 are never bare
    # (only 我的朋友 "my friend", 那个邻居 "that neighbor", 三个朋友 …).
    N("朋友", "friend", "friends", "个", "person",
      ["adult", "child", "nobare", "poss"]),
    N("警察", "police officer", "police officers", "个", "person", ["adult"]),
    N("男人", "man", "men", "个", "person", ["adult"]),
    N("女人", "woman", "women", "个", "person", ["adult"]),
    N("男孩", "boy", "boys", "个", "person", ["child"]),
    N("女孩", "girl", "girls", "个", "person", ["child"]),
    N("农民", "farmer", "farmers", "个", "person", ["adult"]),
    N("司机", "driver", "drivers", "个", "person", ["adult"]),
    N("厨师", "cook", "cooks", "个", "person", ["adult"]),
    N("工人", "worker", "workers", "个", "person", ["adult"]),
    N("邻居", "neighbor", "neighbors", "个", "person",
      ["adult", "child", "nobare", "poss"]),
    # 人 only after a numeral: 三个人 -> "three people"
    N("人", "person", "people", "个", "person", ["adult", "numonly"]),
    # kinship terms behave like names: no article, no numeral, no plural
    N("妈妈", "mom", None, None, "kin", ["adult"]),
    N("爸爸", "dad", None, None, "kin", ["adult"]),
    N("爷爷", "grandpa", None, None, "kin", ["adult"]),
    N("奶奶", "grandma", None, None, "kin", ["adult"]),
    # animals (never bare subjects: 猫很可爱 would mean "cats are cute")
    N("猫", "cat", "cats", "只", "animal"),
    N("狗", "dog", "dogs", "只", "animal"),
    N("鸟", "bird", "birds", "只", "animal"),
    N("鱼", "fish", "fish", "条", "animal"),
    N("老鼠", "mouse", "mice", "只", "animal"),
    N("羊", "sheep", "sheep", "只", "animal"),
    N("马", "horse", "horses", "匹", "animal"),
    N("牛", "cow", "cows", "头", "animal"),
    N("猪", "pig", "pigs", "头", "animal"),
    N("大象", "elephant", "elephants", "头", "animal"),
    N("兔子", "rabbit", "rabbits", "只", "animal"),
    N("鸭子", "duck", "ducks", "只", "animal"),
    N("熊猫", "panda", "pandas", "只", "animal"),
    N("老虎", "tiger", "tigers", "只", "animal"),
    N("猴子", "monkey", "monkeys", "只", "animal"),
    N("蛇", "snake", "snakes", "条", "animal"),
    N("鹅", "goose", "geese", "只", "animal"),
    N("狼", "wolf", "wolves", "只", "animal"),
    # countable food
    N("苹果", "apple", "apples", "个", "food", ["fruit"]),
    N("香蕉", "banana", "bananas", "根", "food", ["fruit"]),
    N("橘子", "orange", "oranges", "个", "food", ["fruit"]),
    N("草莓", "strawberry", "strawberries", "颗", "food", ["fruit"]),
    N("西红柿", "tomato", "tomatoes", "个", "food", ["fruit"]),
    N("土豆", "potato", "potatoes", "个", "food", ["fruit"]),
    N("鸡蛋", "egg", "eggs", "个", "food", ["cooked"]),
    N("蛋糕", "cake", "cakes", "个", "food", ["cooked"]),
    N("饺子", "dumpling", "dumplings", "个", "food", ["cooked"]),
    N("包子", "bun", "buns", "个", "food", ["cooked"]),
    # mass food and drink: generic "rice"; 一碗米饭 -> "a bowl of rice"
    N("米饭", "rice", None, None, "foodm", units=[("碗", "bowl", "bowls")]),
    N("面条", "noodles", None, None, "foodm", ["cooked"], [("碗", "bowl", "bowls")]),
    N("汤", "soup", None, None, "foodm", units=[("碗", "bowl", "bowls")]),
    N("面包", "bread", None, None, "foodm", units=[("块", "piece", "pieces")]),
    N("茶", "tea", None, None, "drink", units=[("杯", "cup", "cups")]),
    N("咖啡", "coffee", None, None, "drink", units=[("杯", "cup", "cups")]),
    N("水", "water", None, None, "drink",
      units=[("杯", "glass", "glasses"), ("瓶", "bottle", "bottles")]),
    N("牛奶", "milk", None, None, "drink",
      units=[("杯", "glass", "glasses"), ("瓶", "bottle", "bottles")]),
    N("果汁", "juice", None, None, "drink",
      units=[("杯", "glass", "glasses"), ("瓶", "bottle", "bottles")]),
    # things to read, write, watch, listen to
    N("书", "book", "books", "本", "read"),
    N("杂志", "magazine", "magazines", "本", "read"),
    N("报纸", "newspaper", "newspapers", "份", "read"),
    N("信", "letter", "letters", "封", "letter"),
    N("歌", "song", "songs", "首", "song"),
    N("电影", "movie", "movies", "部", "movie"),
    # everyday objects
    N("词典", "dictionary", "dictionaries", "本", "thing"),
    N("笔", "pen", "pens", "支", "thing", ["small"]),
    N("铅笔", "pencil", "pencils", "支", "thing", ["small"]),
    N("伞", "umbrella", "umbrellas", "把", "thing", ["small"]),
    N("钥匙", "key", "keys", "把", "thing", ["small"]),
    N("刀", "knife", "knives", "把", "thing", ["small"]),
    N("椅子", "chair", "chairs", "把", "thing", ["furniture"]),
    N("桌子", "table", "tables", "张", "thing", ["furniture"]),
    N("床", "bed", "beds", "张", "thing", ["furniture"]),
    N("照片", "photo", "photos", "张", "thing", ["small"]),
    N("地图", "map", "maps", "张", "thing", ["small"]),
    N("票", "ticket", "tickets", "张", "thing", ["small"]),
    N("手表", "watch", "watches", "块", "thing", ["small"]),
    N("电脑", "computer", "computers", "台", "thing"),
    N("手机", "phone", "phones", "个", "thing", ["small"]),
    N("盒子", "box", "boxes", "个", "thing"),
    N("杯子", "cup", "cups", "个", "thing", ["dish"]),
    N("盘子", "plate", "plates", "个", "thing", ["dish"]),
    N("车", "car", "cars", "辆", "vehicle"),
    N("自行车", "bike", "bikes", "辆", "vehicle"),
    N("公共汽车", "bus", "buses", "辆", "vehicle"),
    N("衬衫", "shirt", "shirts", "件", "clothes"),
    N("外套", "coat", "coats", "件", "clothes"),
    N("帽子", "hat", "hats", "顶", "clothes"),
    # 鞋 is counted in pairs, so it behaves like a mass noun with a unit
    N("鞋", "shoes", None, None, "clothes", units=[("双", "pair", "pairs")]),
    N("花", "flower", "flowers", "朵", "plant"),
    N("树", "tree", "trees", "棵", "plant"),
    # 水课 (slang): a course that is easy to pass -> "easy course"
    N("水课", "easy course", "easy courses", "门", "course"),
    # school subjects and other mass nouns without a unit
    N("数学", "math", None, None, "subject"),
    N("历史", "history", None, None, "subject"),
    N("科学", "science", None, None, "subject"),
    N("音乐", "music", None, None, "music"),
    N("作业", "homework", None, None, "homework"),
    N("问题", "question", "questions", "个", "problem"),
]
NOUN = {n.zh: n for n in NOUNS}


def is_mass(n):
    return n.cl is None and n.kind != "kin"


# --- Places: 在 + place (location) and 去 + place (goal) ---------------------
Place = namedtuple("Place", "zh at to")
PLACES = [
    Place("学校", "at school", "to school"),
    Place("公园", "in the park", "to the park"),
    Place("家", "at home", None),          # "go home" is the verb 回家
    Place("图书馆", "in the library", "to the library"),
    Place("医院", "in the hospital", "to the hospital"),
    Place("商店", "in the shop", "to the shop"),
    Place("超市", "in the supermarket", "to the supermarket"),
    Place("饭馆", "in the restaurant", "to the restaurant"),
    Place("教室", "in the classroom", "to the classroom"),
    Place("厨房", "in the kitchen", "to the kitchen"),
    Place("办公室", "in the office", "to the office"),
    Place("动物园", "at the zoo", "to the zoo"),
    Place("农场", "on the farm", "to the farm"),
    Place("花园", "in the garden", "to the garden"),
    Place("海边", "at the beach", "to the beach"),
    Place("游泳池", "in the pool", "to the pool"),
]
PLACE = {p.zh: p for p in PLACES}
ALL_PLACES = [p.zh for p in PLACES]

# --- Verbs -------------------------------------------------------------------
# zh, base, 3rd person singular, past, part (words that follow the verb form:
# a particle before the object, "listen to", or the rest of a fixed phrase,
# "take a walk"), objs (None: intransitive; else allowed object kinds, noun
# zh strings, "pron", "place"), subj (allowed subjects: "h" any human,
# "adult", "a" any animal, or animal zh strings), places (where 在 + place may
# be added), tenses ("pres" no time word, "hab" 每天, "past" 昨天/今天 + 了,
# "fut" 明天), flags:
#   stative   no time words and no numeral objects (like, love, know)
#   skill     may follow 会 "can"
#   modal     may follow 喜欢 "like to" / 想 "want to"
#   nobare    no bare generic non-human object (看见: "I saw dogs" is odd)
#   daily     a counted object is fine with 每天 (每天吃一个苹果)
Verb = namedtuple("Verb", "zh base s3 past part objs subj places tenses flags")
ALL_T = ("pres", "hab", "past", "fut")
HUM = ("h",)
EATERS = ("h", "猫", "狗", "猴子", "熊猫", "老鼠", "猪", "兔子", "鸭子")
DRINKERS = ("h", "猫", "狗", "马", "牛", "羊", "猪")


def V(zh, base, s3, past, part="", objs=None, subj=HUM, places=(),
      tenses=ALL_T, flags=()):
    return Verb(zh, base, s3, past, part, objs, subj, tuple(places),
                tuple(tenses), tuple(flags))


HUMAN_OBJ = ("person", "kin", "pron")
# What an animal subject may eat, drink or like besides people and animals.
ANIMAL_THINGS = ("鱼", "面包", "苹果", "香蕉", "草莓", "米饭", "水", "牛奶")
VERBS = [
    # transitive
    V("喜欢", "like", "likes", "liked",
      objs=("animal", "food", "foodm", "drink", "read", "movie", "song",
            "subject", "music", "plant", "course", "clothes", "vehicle")
      + HUMAN_OBJ, subj=("h", "a"), tenses=("pres",), flags=("stative",)),
    V("爱", "love", "loves", "loved",
      objs=("animal", "food", "foodm", "drink", "subject", "music", "course")
      + HUMAN_OBJ, tenses=("pres",), flags=("stative",)),
    V("讨厌", "hate", "hates", "hated",
      objs=("animal", "food", "foodm", "drink", "subject", "homework",
            "course"), tenses=("pres",), flags=("stative",)),
    V("认识", "know", "knows", "knew", objs=("person", "pron"),
      tenses=("pres",), flags=("stative",)),
    V("吃", "eat", "eats", "ate", objs=("food", "foodm", "鱼"), subj=EATERS,
      places=("家", "饭馆", "学校", "厨房", "公园"), flags=("modal", "daily")),
    V("喝", "drink", "drinks", "drank", objs=("drink",), subj=DRINKERS,
      places=("家", "饭馆", "办公室", "公园"), flags=("modal", "daily")),
    V("看", "read", "reads", "read", objs=("read",),
      places=("图书馆", "家", "教室", "公园"), flags=("modal",)),
    V("看", "watch", "watches", "watched", objs=("movie",), places=("家",),
      flags=("modal",)),
    V("看见", "see", "sees", "saw", objs=("animal", "vehicle", "plant")
      + HUMAN_OBJ, places=("公园", "学校", "动物园", "商店", "超市", "农场",
                           "花园", "医院"),
      tenses=("past",), flags=("nobare",)),
    V("买", "buy", "buys", "bought",
      objs=("food", "foodm", "drink", "read", "thing", "clothes", "vehicle",
            "花", "票"), places=("商店", "超市"), flags=("modal",)),
    V("卖", "sell", "sells", "sold",
      objs=("food", "read", "vehicle", "花", "clothes"),
      places=("商店", "超市"), flags=("modal",)),
    V("写", "write", "writes", "wrote", objs=("letter", "song", "书"),
      places=("家", "教室", "办公室", "图书馆"), flags=("modal", "skill")),
    V("画", "draw", "draws", "drew", objs=("animal", "plant", "车"),
      places=("家", "教室", "公园", "花园"), flags=("modal", "skill")),
    V("带", "bring", "brings", "brought",
      objs=("书", "笔", "铅笔", "伞", "钥匙", "词典", "手机", "地图", "票",
            "food", "drink"), tenses=("hab", "past", "fut"), flags=("daily",)),
    V("找到", "find", "finds", "found",
      objs=("animal", "笔", "伞", "钥匙", "手机", "手表", "票", "书"),
      places=("公园", "学校", "家", "商店"), tenses=("past",)),
    V("丢", "lose", "loses", "lost",
      objs=("笔", "铅笔", "伞", "钥匙", "手机", "手表", "票", "书", "帽子",
            "地图"), places=("公园", "学校", "商店"), tenses=("past",)),
    V("做", "make", "makes", "made",
      objs=("蛋糕", "饺子", "包子", "面条", "汤"), places=("家", "厨房"),
      flags=("modal", "skill")),
    V("做", "do", "does", "did", objs=("homework",),
      places=("家", "图书馆", "教室"), tenses=("pres", "hab", "past", "fut"),
      flags=("modal",)),
    V("学", "learn", "learns", "learned", objs=("subject", "music"),
      places=("学校", "家", "图书馆"), flags=("modal",)),
    V("教", "teach", "teaches", "taught", objs=("subject", "music", "course"),
      subj=("adult",), places=("学校",), flags=("modal", "skill")),
    V("听", "listen", "listens", "listened", "to", objs=("music", "song"),
      places=("家", "公园"), flags=("modal",)),
    V("帮助", "help", "helps", "helped", objs=HUMAN_OBJ,
      places=("学校", "医院", "家", "办公室")),
    V("等", "wait", "waits", "waited", "for", objs=HUMAN_OBJ,
      places=("学校", "公园", "商店", "医院")),
    V("喂", "feed", "feeds", "fed", objs=("animal",),
      places=("家", "农场", "动物园", "公园")),
    V("洗", "wash", "washes", "washed",
      objs=("fruit", "车", "dish", "衬衫", "外套", "鞋"),
      places=("家", "厨房"), flags=("modal",)),
    V("去", "go", "goes", "went", objs=("place",), flags=("modal",)),
    # intransitive
    V("游泳", "swim", "swims", "swam", subj=("h", "鱼", "鸭子", "狗", "鹅"),
      places=("游泳池", "海边"), flags=("modal", "skill")),
    V("跑步", "run", "runs", "ran", places=("公园", "学校", "海边"),
      flags=("modal",)),
    V("跑", "run", "runs", "ran",
      subj=("狗", "猫", "马", "兔子", "羊", "老鼠", "猪", "狼", "老虎"),
      places=("公园", "花园", "农场")),
    V("睡觉", "sleep", "sleeps", "slept", subj=("h", "a"), places=("家",),
      flags=("modal",)),
    V("唱歌", "sing", "sings", "sang", places=("家", "学校", "公园", "教室"),
      flags=("modal", "skill")),
    V("跳舞", "dance", "dances", "danced",
      places=("家", "学校", "公园", "教室"), flags=("modal", "skill")),
    V("哭", "cry", "cries", "cried", tenses=("past", "fut")),
    V("笑", "laugh", "laughs", "laughed", tenses=("past", "fut")),
    V("散步", "take", "takes", "took", "a walk",
      places=("公园", "海边", "花园"), flags=("modal",)),
    V("工作", "work", "works", "worked", subj=("adult",),
      places=("医院", "学校", "办公室", "商店", "农场", "饭馆"),
      flags=("modal",)),
    V("学习", "study", "studies", "studied",
      places=("图书馆", "学校", "家", "教室"), flags=("modal",)),
    V("休息", "rest", "rests", "rested", places=("家", "公园", "办公室"),
      flags=("modal",)),
    V("回家", "go", "goes", "went", "home", flags=("modal",)),
    V("做饭", "cook", "cooks", "cooked", places=("家", "厨房"),
      flags=("modal", "skill")),
    V("开车", "drive", "drives", "drove", subj=("adult",),
      flags=("modal", "skill")),
    V("打篮球", "play", "plays", "played", "basketball",
      places=("学校", "公园"), flags=("modal", "skill")),
    V("踢足球", "play", "plays", "played", "football",
      places=("学校", "公园"), flags=("modal", "skill")),
    V("飞", "fly", "flies", "flew", subj=("鸟",), places=("花园", "公园")),
    V("来", "come", "comes", "came", tenses=("hab", "past", "fut")),
]

# --- Adjectives ----------------------------------------------------------
# zh, en, applies (what it can describe: "h" humans, "adult", "child", "a"
# animals, noun kinds/tags or noun zh strings), attr (attributive form: "b"
# bare, 大狗; "d" with 的, 可爱的猫; None: predicate only), pred (may be a
# predicate, 他很忙), state (a temporary state, so it may take 昨天/明天/今天/
# 现在: "he was tired yesterday"; "he was tall yesterday" would be odd).
Adj = namedtuple("Adj", "zh en applies attr pred state")
ADJS = [
    Adj("高", "tall", ("h",), None, True, False),
    Adj("矮", "short", ("h",), None, True, False),
    Adj("累", "tired", ("h",), None, True, True),
    Adj("忙", "busy", ("h",), None, True, True),
    Adj("饿", "hungry", ("h", "a"), None, True, True),
    Adj("渴", "thirsty", ("h", "a"), None, True, True),
    Adj("高兴", "happy", ("h",), None, True, True),
    Adj("难过", "sad", ("h",), None, True, True),
    Adj("年轻", "young", ("adult",), None, True, False),
    Adj("老", "old", ("adult",), None, True, False),
    Adj("聪明", "smart", ("h", "a"), "d", True, False),
    Adj("漂亮", "beautiful", ("h", "plant", "clothes"), "d", True, False),
    Adj("可爱", "cute", ("child", "a"), "d", True, False),
    Adj("友好", "friendly", ("h", "a"), "d", True, False),
    Adj("胖", "fat", ("a",), None, True, False),
    Adj("大", "big", ("a", "thing", "vehicle", "fruit", "clothes"), "b",
        True, False),
    Adj("小", "small", ("thing", "vehicle", "fruit", "clothes"), "b",
        True, False),
    Adj("新", "new", ("thing", "read", "vehicle", "clothes"), "b", True,
        False),
    Adj("旧", "old", ("thing", "read", "vehicle", "clothes"), "b", True,
        False),
    Adj("红", "red", ("苹果", "花", "车", "衬衫", "帽子", "伞"), "b", False,
        False),
    Adj("白", "white", ("猫", "狗", "兔子", "马", "衬衫", "帽子", "车", "鞋",
                       "外套", "自行车", "伞", "手机"), "b", False, False),
    Adj("黑", "black", ("猫", "狗", "兔子", "马", "衬衫", "帽子", "车", "鞋",
                       "外套", "自行车", "伞", "手机"), "b", False, False),
    Adj("贵", "expensive", ("thing", "vehicle", "clothes"), None, True, False),
    Adj("便宜", "cheap", ("thing", "vehicle", "clothes", "read"), None, True,
        False),
    Adj("好吃", "delicious", ("cooked", "fruit", "米饭", "面包"), "d", True,
        False),
    Adj("好喝", "tasty", ("drink",), "d", True, False),
    Adj("有趣", "interesting", ("read", "movie", "subject", "问题"), "d",
        True, False),
    Adj("容易", "easy", ("subject", "problem", "homework"), None, True, False),
    Adj("难", "difficult", ("subject", "problem", "homework"), None, True,
        False),
    Adj("热", "hot", ("drink", "汤"), "b", False, False),
    Adj("冷", "cold", ("水", "牛奶", "果汁"), "b", False, False),
    Adj("好", "good", ("person", "read", "movie", "song"), "b", False, False),
    Adj("干净", "clean", ("dish", "furniture", "clothes"), None, True, False),
    Adj("脏", "dirty", ("dish", "furniture", "clothes"), None, True, False),
    Adj("重", "heavy", ("盒子", "电脑", "桌子", "椅子", "词典", "书",
                     "自行车"), None, True, False),
]
# Adjectives never put in front of a noun they would fuse with (大大象).
ATTR_BLOCK = {("大", "大象")}

# --- Numerals 1-10 (两, not 二, before a classifier) -----------------------
NUMS = [("一", None), ("两", "two"), ("三", "three"), ("四", "four"),
        ("五", "five"), ("六", "six"), ("七", "seven"), ("八", "eight"),
        ("九", "nine"), ("十", "ten")]

# --- Classifiers (which noun takes which is stored on the noun) ----------
CLASSIFIERS = {
    "个": "general", "位": "polite, people", "只": "animals", "条": "long animals",
    "匹": "horses", "头": "large animals", "根": "long thin things",
    "颗": "small round things", "本": "bound volumes", "份": "copies",
    "封": "letters", "首": "songs", "部": "films", "支": "pens",
    "把": "things with a handle", "张": "flat things", "块": "pieces, watches",
    "台": "machines", "辆": "vehicles", "件": "garments", "顶": "hats",
    "双": "pairs", "朵": "flowers", "棵": "trees", "门": "courses",
    "碗": "bowl", "杯": "cup, glass", "瓶": "bottle",
}

# --- Time words: zh -> en ----------------------------------------------------
TIMES = {"今天": "today", "昨天": "yesterday", "明天": "tomorrow",
         "每天": "every day", "现在": "now"}

# --- Function words --------------------------------------------------------
FUNCTION_WORDS = {
    "不": "not (present, future, adjectives, 在)",
    "没": "not (past actions; 没 + verb, no 了)",
    "没有": "do not have",
    "有": "have",
    "吗": "yes/no question particle",
    "在": "at / in (location)",
    "和": "and",
    "很": "degree word before a predicate adjective (not translated)",
    "非常": "very",
    "了": "completed action (past)",
    "的": "possessive / attributive marker",
    "这": "this", "那": "that",
    "们": "plural of people nouns",
    "会": "can (before a verb); will (明天会 + adjective)",
    "想": "want to (before a verb)",
}


def lexicon_entries():
    """All distinct Chinese lexicon strings, in a fixed order."""
    seen = {}
    for group in ([p.zh for p in PRONOUNS], [n.zh for n in NOUNS],
                  [p.zh for p in PLACES], [v.zh for v in VERBS],
                  [a.zh for a in ADJS], [z for z, _ in NUMS],
                  list(CLASSIFIERS), list(TIMES), list(FUNCTION_WORDS)):
        for zh in group:
            seen.setdefault(zh, True)
    return list(seen)


# ===========================================================================
# English helpers
# ===========================================================================

def article(next_word):
    # The lexicon avoids exceptions to this rule (see the Noun comment).
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
    def __init__(self, seed):
        self.rng = random.Random(seed)
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
        """table: list of (weight, value)."""
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
        for a in ADJS:
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
                    ok = self.noun_matches(NOUN[target.keys[-1]], a.applies)
            elif target.kind in ("person", "kin"):
                ok = (self.human_matches(target.tags, a.applies)
                      or "person" in a.applies)
            else:
                ok = (self.noun_matches(target, a.applies)
                      and (a.zh, target.zh) not in ATTR_BLOCK)
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
        return adj.zh + ("的" if adj.attr == "d" else "") + zh_noun

    def np_generic(self, n, adj_p=0.15):
        """Bare noun = generic: plural for count nouns, bare mass noun.

        我喜欢猫 -> "I like cats", 他喝茶 -> "he drinks tea".
        """
        adj = self.attr_adj(n, adj_p)
        en = (n.pl or n.sg).split()
        keys = [n.zh]
        if adj:
            en = [adj.en] + en
            keys.append(adj.zh)
            if adj.attr == "d":
                keys.append("的")
        return Phrase(self.zh_attr(adj, n.zh), en, keys)

    def np_indef_sg(self, n, adj_p=0.15):
        """Bare noun after 没有/有…吗: "a cat" (count) or "water" (mass)."""
        if is_mass(n):
            return self.np_generic(n, adj_p)
        adj = self.attr_adj(n, adj_p)
        words = n.sg.split()
        keys = [n.zh]
        if adj:
            words = [adj.en] + words
            keys.append(adj.zh)
            if adj.attr == "d":
                keys.append("的")
        return Phrase(self.zh_attr(adj, n.zh), [article(words[0])] + words,
                      keys)

    def np_numeral(self, n, adj_p=0.15, one_p=0.45, most=10):
        """Numeral + classifier + noun: 三本书 -> "three books"."""
        if n.kind in ("food", "foodm", "drink"):
            most = min(most, 3)       # nobody eats eight bowls of rice
        i = 0 if self.chance(one_p) else self.rng.randrange(1, most)
        num_zh, num_en = NUMS[i]
        adj = self.attr_adj(n, adj_p)
        keys = [n.zh, num_zh]
        if adj:
            keys.append(adj.zh)
            if adj.attr == "d":
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
        p = self.pick(HUMAN_PRONOUNS, key=lambda q: q.zh)
        return Phrase(p.zh + "的" + n.zh, [p.poss] + n.sg.split(),
                      [p.zh, "的", n.zh])

    # --- subjects -------------------------------------------------------------
    def subject(self, spec, allow_first=True):
        """A subject allowed by spec ("h", "adult", "a", animal zh)."""
        animals_ok = "a" in spec or any(z in NOUN for z in spec)
        humans_ok = "h" in spec or "adult" in spec
        table = []
        if humans_ok:
            table += [(34, "pron"), (18, "person"), (9, "kin"), (6, "plural"),
                      (6, "poss_person"), (4, "dem_person"), (8, "coord")]
        if animals_ok:
            table += [(4 if humans_ok else 12, "it"),
                      (8 if humans_ok else 30, "dem_animal"),
                      (6 if humans_ok else 24, "poss_animal")]
        for _ in range(50):
            s = self._subject(self.weighted(table), spec)
            if s is None or not self.subj_allowed(s, spec):
                continue
            if s.first and not allow_first:
                continue
            return s
        return None

    def _subject(self, how, spec):
        people = [n for n in NOUNS if n.kind == "person"
                  and "numonly" not in n.tags]
        kin = [n for n in NOUNS if n.kind == "kin"]
        animals = [n for n in NOUNS if n.kind == "animal"
                   and ("a" in spec or n.zh in spec)]
        if how == "pron":
            p = self.pick(HUMAN_PRONOUNS, key=lambda q: q.zh)
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
            return Subj(IT.zh, [IT.subj], [IT.zh], animate="a",
                        tags=("it",))
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
        def one():
            r = self.rng.random()
            if r < 0.35:
                p = self.pick([q for q in HUMAN_PRONOUNS if not q.plural],
                              key=lambda q: q.zh)
                return (p.zh, [p.subj], [p.zh], p.zh == "我", ("adult",))
            if r < 0.55:
                n = self.pick([n for n in NOUNS if n.kind == "kin"],
                              key=lambda q: q.zh)
                return (n.zh, [n.sg], [n.zh], False, n.tags)
            n = self.pick([n for n in NOUNS if n.kind == "person"
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
            return 2 if c[3] else (0 if c[2][0] in PRON_ZH else 1)
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
        for n in NOUNS:
            if verb.objs and self.noun_matches_obj(n, verb.objs):
                out.append(n)
        return out

    @staticmethod
    def noun_matches_obj(n, objs):
        if n.kind in ("person", "kin"):
            return n.kind in objs
        return (n.kind in objs or n.zh in objs
                or any(t in objs for t in n.tags))

    def obj(self, verb, subj, forms, most=10):
        """An object for verb.  forms: allowed NP forms, a subset of
        generic, numeral, dem, poss, person, pron; most: largest numeral."""
        cands = self.object_candidates(verb)
        if subj.animate == "a":
            # Animals eat, drink and like only animal things ("my dog
            # likes bread", not "my sheep drinks hot tea").
            cands = [n for n in cands if n.zh in ANIMAL_THINGS
                     or n.kind in ("animal", "person", "kin")]
            if not cands:
                return None
        use_pron = "pron" in verb.objs and "pron" in forms
        for _ in range(40):
            if use_pron and self.chance(0.25):
                ex = set(subj.keys)
                if subj.person == 1:
                    ex |= {"我", "我们"}
                if subj.person == 2:
                    ex |= {"你", "你们"}
                pool = [p for p in HUMAN_PRONOUNS if p.zh not in ex]
                p = self.pick(pool, key=lambda q: q.zh)
                return Phrase(p.zh, [p.obj], [p.zh])
            n = self.pick(cands, key=lambda q: q.zh)
            if n.zh in subj.keys:
                continue
            human = n.kind in ("person", "kin")
            opts = []
            if human:
                if "numonly" not in n.tags and n.kind == "person":
                    opts += [(1.5, "dem")]
                    if "poss" in n.tags:
                        opts += [(2, "poss")]
                    if "nobare" not in n.tags:
                        opts += [(5, "person")]
                if n.kind == "kin":
                    opts += [(5, "person")]
                if n.kind == "person":
                    opts += [(2, "numeral")]
            else:
                if "nobare" not in verb.flags:
                    opts += [(6, "generic")]
                if n.cl or n.units:          # 数学, 音乐: no numeral
                    opts += [(5, "numeral")]
                if not is_mass(n):
                    opts += [(1.2, "dem"), (1.2, "poss")]
            opts = [(w, f) for w, f in opts if f in forms]
            if not opts:
                continue
            if "numonly" in n.tags and "numeral" not in forms:
                continue
            f = self.weighted(opts)
            if f == "generic":
                ph = self.np_generic(n, 0 if subj.animate == "a" else 0.15)
            elif f == "numeral":
                ph = self.np_numeral(n, adj_p=0 if subj.animate == "a"
                                     else 0.15, most=most)
            elif f == "dem":
                ph = self.np_demonstrative(n)
            elif f == "poss":
                ph = self.np_possessive(n)
            else:
                ph = self.np_person_def(n)
            # Occasionally coordinate two objects of the same form:
            # 猫和狗 -> "cats and dogs"; 一本书和两支笔 -> "a book and two pens".
            if f in ("generic", "numeral") and self.chance(0.08):
                others = [m for m in cands if m.zh != n.zh
                          and m.kind not in ("person", "kin")
                          and (f == "generic" or m.cl or m.units)]
                if others:
                    m = self.pick(others, key=lambda q: q.zh)
                    ph2 = (self.np_generic(m, 0) if f == "generic"
                           else self.np_numeral(m, 0, most=most))
                    ph = Phrase(ph.zh + "和" + ph2.zh, ph.en + ["and"] + ph2.en,
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
        if time_zh in ("昨天", "明天", "今天") and self.chance(0.15):
            return time_zh + subj_zh + rest_zh
        return subj_zh + time_zh + rest_zh

    def action(self):
        """Subject + verb (+ object) with tense, negation, question, place.

        Chinese: S TIME [不/没] [在 PLACE] V[了] O [了]   (了 after an
        intransitive verb phrase, after the verb if there is an object)
        English: S (AUX) V O PLACE TIME
        """
        verb = self.pick([v for v in VERBS if v.objs != ("place",)] +
                         [v for v in VERBS if v.objs == ("place",)] * 3,
                         key=lambda v: v.zh)
        tense = self.weighted([(w, t) for w, t in
                               ((14, "pres"), (16, "hab"), (32, "past"),
                                (28, "fut")) if t in verb.tenses])
        if tense == "pres" and verb.objs is None and \
                "stative" not in verb.flags and self.chance(0.5):
            tense = "hab" if "hab" in verb.tenses else tense
        question = self.chance(0.28)
        # 每天不… would mean "never", not "not every day": no negated 每天.
        neg = not question and tense != "hab" and self.chance(0.3)
        subj = self.subject(verb.subj, allow_first=not question)
        if subj is None:
            return None
        time_zh = {"pres": "", "hab": "每天", "fut": "明天",
                   "past": "今天" if self.chance(0.2) else "昨天"}[tense]
        keys = list(subj.keys)
        if time_zh:
            keys.append(time_zh)

        # object
        ozh, oen = "", []
        if verb.objs == ("place",):
            pl = self.pick([p for p in PLACES if p.to], key=lambda p: p.zh)
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
            o = self.obj(verb, subj, forms, most=3 if tense == "hab" else 10)
            if o is None:
                return None
            ozh, oen = o.zh, o.en
            keys += o.keys

        # place
        place = None
        if verb.places and verb.objs != ("place",) and self.chance(0.5):
            place = PLACE[self.pick(list(verb.places))]
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
            (TIMES[time_zh].split() if time_zh else [])
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
        kind = self.weighted([(58, "h"), (16, "a"), (16, "o"), (10, "m")])
        question = self.chance(0.28)
        neg = not question and self.chance(0.3)
        if kind == "h":
            s = self.subject(("h",), allow_first=not question)
        elif kind == "a":
            s = self.subject(("a",), allow_first=not question)
        elif kind == "o":
            n = self.pick([n for n in NOUNS if (n.cl or n.zh == "作业")
                           and n.kind not in ("person", "kin", "animal")],
                          key=lambda q: q.zh)
            # 作业 has no classifier: only 我的作业 -> "my homework".
            ph = (self.np_demonstrative(n) if n.cl and self.chance(0.6)
                  else self.np_possessive(n))
            s = Subj(ph.zh, ph.en, ph.keys, animate="o",
                     first=ph.keys[0] in ("我", "我们"))
            if s.first and question:
                return None
        else:   # bare mass subject = generic: 数学很难 -> "math is difficult"
            n = self.pick([n for n in NOUNS if n.kind in
                           ("subject", "foodm", "drink")], key=lambda q: q.zh)
            s = Subj(n.zh, n.sg.split(), [n.zh], animate="o",
                     plural=(n.sg == "noodles"))
        if s is None:
            return None
        cands = self.adj_for(s, pred=True)
        if not cands:
            return None
        adj = self.pick(cands, key=lambda a: a.zh)
        keys = s.keys + [adj.zh]
        time_zh = ""
        if adj.state and self.chance(0.6):
            time_zh = self.weighted([(3, "昨天"), (3, "明天"), (2, "今天"),
                                     (2, "现在")])
            keys.append(time_zh)
        if time_zh == "明天" and neg:
            return None   # 不会很忙 reads as "not very busy"; leave it out
        t_en = TIMES[time_zh].split() if time_zh else []
        very = not neg and not question and self.chance(0.25)

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
        question = self.chance(0.3)
        neg = not question and self.chance(0.3)
        s = self.subject(("h", "a"), allow_first=not question)
        if s is None:
            return None
        if s.animate == "a":
            pl = PLACE[self.pick(["家", "公园", "花园", "农场", "动物园"])]
        else:
            pl = self.pick(PLACES, key=lambda p: p.zh)
        time_zh = ""
        if self.chance(0.7):
            time_zh = self.weighted([(3, "昨天"), (3, "明天"), (2, "今天"),
                                     (2, "现在")])
        keys = s.keys + ["在", pl.zh] + ([time_zh] if time_zh else [])
        if neg:
            keys.append("不")
        t_en = TIMES[time_zh].split() if time_zh else []
        zh = self.front_time(s.zh, time_zh, ("不" if neg else "") + "在" + pl.zh)
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
        mode = self.weighted([(5, "pos"), (3, "neg"), (3, "q")])
        s = self.subject(("h",), allow_first=mode != "q")
        if s is None:
            return None
        cands = [n for n in NOUNS if n.kind in
                 ("animal", "thing", "read", "vehicle", "clothes", "food",
                  "drink", "plant")
                 or n.zh == "问题"
                 or (n.kind == "person" and n.zh in ("朋友", "孩子"))]
        n = self.pick(cands, key=lambda q: q.zh)
        keys = list(s.keys)
        if mode == "pos":
            o = self.np_numeral(n, adj_p=0.2)
            if self.chance(0.1):
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
        o = self.np_indef_sg(n, adj_p=0.15)
        keys += o.keys
        if mode == "neg":
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
        m = self.weighted([(4, "喜欢"), (4, "想"), (3, "会")])
        flag = "skill" if m == "会" else "modal"
        verb = self.pick([v for v in VERBS if flag in v.flags],
                         key=lambda v: v.zh)
        question = self.chance(0.28)
        neg = not question and self.chance(0.3)
        subj = self.subject(verb.subj, allow_first=not question)
        if subj is None:
            return None
        keys = subj.keys + [m, verb.zh]
        ozh, oen = "", []
        if verb.objs == ("place",):
            pl = self.pick([p for p in PLACES if p.to], key=lambda p: p.zh)
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
                self.chance(0.45):
            place = PLACE[self.pick(list(verb.places))]
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

    TEMPLATES = [(46, "action"), (16, "adjective"), (9, "location"),
                 (9, "have"), (20, "modal")]

    def sentence(self):
        while True:
            how = self.weighted(self.TEMPLATES)
            r = getattr(self, how)()
            if r is None:
                continue
            zh, en, keys = r
            n_words = len([w for w in en if w != "?"])
            if len(zh) > MAX_ZH_CHARS or not MIN_EN_WORDS <= n_words <= MAX_EN_WORDS:
                continue
            return zh, " ".join(en), keys, how


# ===========================================================================
# Corpus
# ===========================================================================

# Required pair (kept in train) and a few related variants.
FIXED = [
    ("我爱水课", "I love easy courses"),
    ("他爱水课", "he loves easy courses"),
    ("她爱水课", "she loves easy courses"),
    ("我们爱水课", "we love easy courses"),
    ("学生们爱水课", "the students love easy courses"),
    ("你爱水课吗？", "do you love easy courses ?"),
    ("我不爱水课", "I do not love easy courses"),
]
REQUIRED_TRAIN = "我爱水课"


def build(seed):
    gen = Generator(seed)
    total = N_TEST + N_VALID + N_TRAIN
    pool = {}          # zh -> en (insertion ordered: deterministic)
    pool_keys = {}
    kinds = Counter()
    for zh, en in FIXED:
        pool[zh] = en
        pool_keys[zh] = ["爱", "水课"]
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
    items.sort(key=lambda kv: kv[0] == REQUIRED_TRAIN)
    test, valid, train = (items[:N_TEST], items[N_TEST:N_TEST + N_VALID],
                          items[N_TEST + N_VALID:])
    return {"train": train, "valid": valid, "test": test}, pool_keys, kinds


def check(splits, pool_keys):
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
    if dict(splits["train"]).get(REQUIRED_TRAIN) != "I love easy courses":
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
    lex = lexicon_entries()
    rare = [(k, train_keys[k]) for k in lex if train_keys[k] < 20]
    if rare:
        errors.append("lexicon entries seen < 20 times in train: %s" % rare)
    if errors:
        sys.exit("error:\n  " + "\n  ".join(errors[:30]))
    return train_keys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(repo, "data", "toy"),
                    help="output directory (default: data/toy in the repo)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED,
                    help="random seed (default: %(default)s)")
    args = ap.parse_args()

    splits, pool_keys, kinds = build(args.seed)
    train_keys = check(splits, pool_keys)

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

    lex = lexicon_entries()
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
          % (len(lex), len(NOUNS), len({v.zh for v in VERBS}), len(ADJS),
             len(PLACES), len(CLASSIFIERS)))
    rarest = sorted(lex, key=lambda k: (train_keys[k], k))[:5]
    print("  rarest lexicon entries in train: %s"
          % ", ".join("%s %d" % (k, train_keys[k]) for k in rarest))
    total = sum(kinds.values())
    print("  constructions: %s" % ", ".join(
        "%s %.0f%%" % (k, 100.0 * v / total) for k, v in
        sorted(kinds.items(), key=lambda kv: -kv[1])))
    print("  sha256: " + "; ".join(digests))


if __name__ == "__main__":
    main()
