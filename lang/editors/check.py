#!/usr/bin/env python3
"""Check the editor support for .mist files in lang/editors/.

Python 3 standard library only. Run from anywhere:

    python3 lang/editors/check.py [--mistc PATH] [--no-vim] [--vim PATH] [--no-tests] [-v]

What it checks (any failure makes the exit status 1):

1. The word lists the highlighters use agree with the compiler's own tables,
   as `mistc --print-vocabulary` prints them (--mistc PATH; default
   build/bin/mistc): keywords, built-in ops, shard words, element types, train
   and optimizer settings and optimizers; and with lang/SPEC.md's keyword
   block, op table (11.1) and train section (8).
2. vscode/package.json, vscode/language-configuration.json and
   vscode/syntaxes/mist.tmLanguage.json parse as JSON and are consistent
   (language id, extension, paths, scopeName); every rule of the grammar is
   well formed, every include resolves, every capture number exists.
3. Every regex of the grammar compiles with Python's `re` after translating
   the Oniguruma constructs Python spells differently (named groups
   (?<n>..), \\h, \\H, \\z, \\Z, POSIX brackets [[:alpha:]]); constructs with
   no Python equivalent (\\G, \\K, \\R, \\X, \\p{..}, absent operator (?~..),
   and atomic groups / possessive quantifiers before Python 3.11) are
   reported and the rule is skipped. The current grammar needs none of them,
   and the script says so.
4. A small TextMate tokenizer (match, begin/end, captures, includes; ties go
   to the end pattern, then to the earlier rule) runs the grammar over every
   .mist file under examples/ and stdlib/models/ (and tests/, but not the
   adversarial corpus tests/corpus/, unless --no-tests) plus a generated
   file of edge cases. A reference lexer that
   mirrors support/Lexer.cpp gives the expected class of every token; each
   character of each token must carry the matching scope (keywords
   keyword.control.*, built-in calls support.function.builtin.*, numbers
   constant.numeric.*, ...), and ordinary identifiers none.
5. If vim is installed: the syntax file loads without errors in a headless vim
   (`vim -Es -u NONE ...`), ftdetect sets filetype=mist, a known keyword
   position is a mist group, and the syntax group under every character of
   the same files agrees with the reference lexer as well.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
VSCODE = os.path.join(HERE, "vscode")
VIMDIR = os.path.join(HERE, "vim")

# --------------------------------------------------------------------------
# Word lists (checked against mistc --print-vocabulary in check_word_lists).

KEYWORDS = ["import", "block", "model", "input", "pre", "repeat", "post", "return",
            "train", "true", "false"]
BUILTINS = ["embedding", "position_embedding", "layernorm", "rmsnorm", "linear", "lm_head",
            "attention", "rope", "gelu", "silu", "dropout", "slice", "concat", "cross_entropy"]
SHARD_WORDS = ["none", "column", "row", "vocab"]
DTYPES = ["bf16", "f16", "f32", "i32", "u8"]
DIMENSIONS = ["b", "s"]
TRAIN_KEYS = ["global_batch", "seq_len", "warmup_steps", "lr_decay", "min_lr", "decay_fraction",
              "lr", "grad_clip", "dtype", "master_dtype", "grad_dtype", "optimizer", "cluster"]
OPTIMIZER_SETTINGS = ["lr", "betas", "weight_decay", "wd", "eps", "no_decay"]
OPTIMIZERS = ["adamw", "sgd"]

KEYWORD_CLASS = {
    "import": "kw.import",
    "block": "kw.decl", "model": "kw.decl", "input": "kw.decl",
    "pre": "kw.section", "repeat": "kw.section", "post": "kw.section", "train": "kw.section",
    "return": "kw.return",
    "true": "bool", "false": "bool",
}

# Expected TextMate scope prefix for each token class (None: no scope at all).
TM_SCOPE = {
    "comment": "comment.line.double-slash.mist",
    "kw.import": "keyword.control.import.mist",
    "kw.decl": "keyword.control.declaration.mist",
    "kw.section": "keyword.control.section.mist",
    "kw.return": "keyword.control.return.mist",
    "bool": "constant.language.boolean.mist",
    "builtin": "support.function.builtin.mist",
    "shard.word": "constant.language.shard.mist",
    "dtype": "support.type.dtype.mist",
    "dim": "variable.language.dimension.mist",
    "name.block": "entity.name.function.block.mist",
    "name.model": "entity.name.type.model.mist",
    "name.input": "variable.other.input.mist",
    "train.key": "variable.other.property.train.mist",
    "optimizer": "support.function.optimizer.mist",
    "int": "constant.numeric.integer.mist",
    "float": "constant.numeric.float.mist",
    "string": "string.quoted.double.mist",
    "invalid": "invalid.illegal",
    "op.assign": "keyword.operator.assignment.mist",
    "op.arith": "keyword.operator.arithmetic.mist",
    "punct": "punctuation.",
    "default": None,
}

# Expected Vim syntax groups for each token class ("" is no group).
VIM_GROUPS = {
    "comment": {"mistComment", "mistTodo"},
    "kw.import": {"mistInclude"},
    "kw.decl": {"mistKeyword"},
    "kw.section": {"mistSection"},
    "kw.return": {"mistReturn"},
    "bool": {"mistBoolean"},
    "builtin": {"mistBuiltin"},
    "shard.word": {"mistShardWord"},
    "dtype": {"mistType"},
    "dim": {"mistDimension"},
    "name.block": {"mistBlockName"},
    "name.model": {"mistModelName"},
    "name.input": {"mistInputName"},
    "train.key": {"mistTrainKey"},
    "optimizer": {"mistOptimizer"},
    "int": {"mistNumber"},
    "float": {"mistFloat"},
    "string": {"mistString"},
    "invalid": {"mistError", "mistStringError"},
    "op.assign": {"mistOperator"},
    "op.arith": {"mistOperator"},
    "punct": {"mistDelimiter"},
    "default": {""},
}

# The standard group each mist group must link to.
VIM_LINKS = {
    "mistComment": "Comment", "mistTodo": "Todo", "mistInclude": "Include",
    "mistKeyword": "Keyword", "mistSection": "Keyword", "mistReturn": "Keyword",
    "mistBoolean": "Boolean", "mistBuiltin": "Function", "mistShardWord": "Constant",
    "mistType": "Type", "mistDimension": "Special", "mistBlockName": "Function",
    "mistModelName": "Type", "mistInputName": "Identifier", "mistTrainKey": "Identifier",
    "mistOptimizer": "Function", "mistString": "String", "mistStringError": "Error",
    "mistNumber": "Number", "mistFloat": "Float", "mistOperator": "Operator",
    "mistDelimiter": "Delimiter", "mistError": "Error",
}


class Report:
    def __init__(self, verbose):
        self.verbose = verbose
        self.failures = 0

    def ok(self, msg):
        print("ok    " + msg)

    def info(self, msg):
        print("      " + msg)

    def fail(self, msg):
        self.failures += 1
        print("FAIL  " + msg)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# --------------------------------------------------------------------------
# 1. Word lists against the compiler sources.

def compiler_vocabulary(mistc):
    """The language's words as mistc's own tables hold them (mistc --print-vocabulary)."""
    out = subprocess.run([mistc, "--print-vocabulary"], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    return json.loads(out)


def check_word_lists(rep, mistc):
    def compare(what, ours, theirs, source):
        if sorted(set(ours)) == sorted(set(theirs)):
            rep.ok("%s match %s (%d)" % (what, source, len(set(ours))))
        else:
            rep.fail("%s differ from %s: only here %s, only there %s" % (
                what, source, sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours))))

    try:
        spec = read(os.path.join(ROOT, "lang", "SPEC.md"))
    except OSError as e:
        rep.fail("cannot read lang/SPEC.md: %s" % e)
        return
    try:
        vocab = compiler_vocabulary(mistc)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        rep.fail("cannot read the compiler's vocabulary from %s --print-vocabulary: %s "
                 "(build mistc, or pass --mistc PATH)" % (mistc, e))
        return
    source = "mistc --print-vocabulary"

    compare("keywords", KEYWORDS, vocab["keywords"], source)
    m = re.search(r"\*\*Keywords\*\*.*?```\n(.*?)```", spec, re.S)
    compare("keywords", KEYWORDS, m.group(1).split() if m else [], "lang/SPEC.md section 2")

    compare("built-in ops", BUILTINS, vocab["builtins"], source)
    m = re.search(r"### 11\.1.*?\n(.*?)\n### ", spec, re.S)
    compare("built-in ops", BUILTINS,
            re.findall(r"^\| `(\w+)` \| \d+ \|", m.group(1) if m else "", re.M),
            "lang/SPEC.md section 11.1")

    compare("shard words", SHARD_WORDS, vocab["shard_words"], source)
    compare("element types", DTYPES, vocab["dtypes"], source)

    compare("train settings", TRAIN_KEYS, vocab["train_settings"], source)
    m = re.search(r"## 8\. The train section(.*?)\n## 9\.", spec, re.S)
    compare("train settings", TRAIN_KEYS,
            re.findall(r"^\| `(\w+)` \|", m.group(1) if m else "", re.M),
            "lang/SPEC.md section 8")
    compare("optimizer settings", OPTIMIZER_SETTINGS, vocab["optimizer_settings"], source)
    compare("optimizers", OPTIMIZERS, vocab["optimizers"], source)


# --------------------------------------------------------------------------
# 2./3. JSON files, grammar structure, regex translation.

POSIX_CLASSES = {
    "alpha": "A-Za-z", "digit": "0-9", "alnum": "A-Za-z0-9", "upper": "A-Z",
    "lower": "a-z", "space": r" \t\n\r\f\v", "blank": r" \t", "punct": r"!-/:-@\[-`{-~",
    "xdigit": "0-9A-Fa-f", "word": "A-Za-z0-9_", "cntrl": r"\x00-\x1f\x7f",
    "print": r"\x20-\x7e", "graph": r"\x21-\x7e",
}


class Untranslatable(Exception):
    pass


def translate_regex(src):
    """Oniguruma (TextMate) regex -> Python regex. Returns (pattern, notes)."""
    out = []
    notes = []
    i = 0
    in_class = False
    n = len(src)
    while i < n:
        c = src[i]
        if c == "\\":
            if i + 1 >= n:
                raise Untranslatable("trailing backslash")
            d = src[i + 1]
            if d == "h":
                out.append("0-9A-Fa-f" if in_class else "[0-9A-Fa-f]")
                notes.append(r"\h -> hex-digit class")
            elif d == "H":
                if in_class:
                    raise Untranslatable(r"\H inside a character class")
                out.append("[^0-9A-Fa-f]")
                notes.append(r"\H -> non-hex-digit class")
            elif d == "z" and not in_class:
                out.append(r"\Z")
                notes.append(r"\z -> \Z")
            elif d == "Z" and not in_class:
                out.append(r"(?=\n?\Z)")
                notes.append(r"\Z -> (?=\n?\Z)")
            elif d in "GKRXyY" and not in_class:
                raise Untranslatable("\\" + d + " has no Python equivalent")
            elif d in "pP" and i + 2 < n and src[i + 2] == "{":
                raise Untranslatable("Unicode property \\" + d + "{..}")
            elif d == "k" and i + 2 < n and src[i + 2] == "<":
                j = src.index(">", i)
                out.append("(?P=" + src[i + 3:j] + ")")
                notes.append(r"\k<name> -> (?P=name)")
                i = j + 1
                continue
            else:
                out.append(src[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "[" and src.startswith("[:", i):
                j = src.find(":]", i + 2)
                name = src[i + 2:j] if j > 0 else ""
                neg = name.startswith("^")
                if neg or name not in POSIX_CLASSES:
                    raise Untranslatable("POSIX class [:%s:]" % name)
                out.append(POSIX_CLASSES[name])
                notes.append("[:%s:] -> ASCII range" % name)
                i = j + 2
                continue
            if c == "[":
                raise Untranslatable("nested character class")
            if c == "&" and src.startswith("&&", i):
                raise Untranslatable("character class intersection &&")
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if i < n and src[i] == "^":
                out.append("^")
                i += 1
            if i < n and src[i] == "]":  # a literal ] first in the class
                out.append(r"\]")
                i += 1
            continue
        if src.startswith("(?<", i) and not src.startswith("(?<=", i) and \
                not src.startswith("(?<!", i):
            out.append("(?P<")
            notes.append("(?<name> -> (?P<name>")
            i += 3
            continue
        if src.startswith("(?~", i):
            raise Untranslatable("absent operator (?~..)")
        if sys.version_info < (3, 11):
            if src.startswith("(?>", i):
                raise Untranslatable("atomic group (Python < 3.11)")
            if c in "*+?}" and i + 1 < n and src[i + 1] == "+":
                raise Untranslatable("possessive quantifier (Python < 3.11)")
        out.append(c)
        i += 1
    return "".join(out), notes


class Grammar:
    RULE_KEYS = {"name", "contentName", "match", "begin", "end", "while", "captures",
                 "beginCaptures", "endCaptures", "whileCaptures", "patterns", "include",
                 "comment", "applyEndPatternLast", "disabled", "repository"}

    def __init__(self, data, rep):
        self.data = data
        self.rep = rep
        self.repo = data.get("repository", {})
        self.regex_count = 0
        self.skipped = []
        self.translated = []
        self.errors = 0
        self.used = set()
        self.flat_cache = {}
        self.root = {"patterns": data.get("patterns", [])}
        self._validate_rule(self.root, "patterns", top=True)
        for key, rule in self.repo.items():
            self._validate_rule(rule, "repository." + key)

    def _err(self, msg):
        self.errors += 1
        self.rep.fail("grammar: " + msg)

    def _compile(self, src, where):
        self.regex_count += 1
        try:
            py, notes = translate_regex(src)
        except Untranslatable as e:
            self.skipped.append("%s: %s" % (where, e))
            return None
        if notes:
            self.translated.append("%s: %s" % (where, ", ".join(sorted(set(notes)))))
        try:
            return re.compile(py)
        except re.error as e:
            self._err("%s: regex %r does not compile: %s" % (where, src, e))
            return None

    def _check_scope(self, name, where):
        if not isinstance(name, str) or not name:
            self._err("%s: scope name must be a non-empty string" % where)
            return
        for scope in name.split():
            if not re.fullmatch(r"[a-z0-9-]+(\.[a-z0-9-]+)*\.mist", scope):
                self._err("%s: scope %r is not a dotted name ending in .mist" % (where, scope))

    def _check_captures(self, caps, rx, where):
        if not isinstance(caps, dict):
            self._err("%s must be an object" % where)
            return
        for k, v in caps.items():
            if not k.isdigit():
                self._err("%s: capture key %r is not a number" % (where, k))
                continue
            if rx is not None and int(k) > rx.groups:
                self._err("%s: capture %s but the regex has %d groups" % (where, k, rx.groups))
            if not isinstance(v, dict) or not ("name" in v or "patterns" in v):
                self._err("%s.%s needs a name or patterns" % (where, k))
            if isinstance(v, dict) and "name" in v:
                self._check_scope(v["name"], "%s.%s" % (where, k))
            if isinstance(v, dict) and "patterns" in v:
                self._err("%s.%s: capture patterns are not supported by this check" % (where, k))

    def _validate_rule(self, rule, where, top=False):
        if not isinstance(rule, dict):
            self._err("%s is not an object" % where)
            return
        unknown = set(rule) - self.RULE_KEYS
        if unknown:
            self._err("%s: unknown keys %s" % (where, sorted(unknown)))
        if "while" in rule:
            self._err("%s: begin/while rules are not supported by this check" % where)
        kinds = [k for k in ("include", "match", "begin") if k in rule]
        if len(kinds) > 1:
            self._err("%s: has %s together" % (where, kinds))
        if "include" in rule:
            inc = rule["include"]
            if inc.startswith("#"):
                if inc[1:] not in self.repo:
                    self._err("%s: include %s is not in the repository" % (where, inc))
                self.used.add(inc[1:])
            elif inc not in ("$self", "$base"):
                self._err("%s: external include %s" % (where, inc))
            return
        if "name" in rule:
            self._check_scope(rule["name"], where + ".name")
        if "contentName" in rule:
            self._check_scope(rule["contentName"], where + ".contentName")
        if "match" in rule:
            rule["_rx"] = self._compile(rule["match"], where + ".match")
            if "captures" in rule:
                self._check_captures(rule["captures"], rule["_rx"], where + ".captures")
        elif "begin" in rule:
            if "end" not in rule:
                self._err("%s: begin without end" % where)
                return
            rule["_rx"] = self._compile(rule["begin"], where + ".begin")
            if re.search(r"\\[1-9]", rule["end"]):
                rule["_end_backref"] = True  # compiled per match, after substitution
                self._compile(re.sub(r"\\[1-9]", "x", rule["end"]), where + ".end")
            else:
                rule["_end"] = self._compile(rule["end"], where + ".end")
            for key, rx in (("captures", rule["_rx"]), ("beginCaptures", rule["_rx"]),
                            ("endCaptures", rule.get("_end"))):
                if key in rule:
                    self._check_captures(rule[key], rx, "%s.%s" % (where, key))
        elif "patterns" not in rule:
            self._err("%s: no match, begin, include or patterns" % where)
        for i, sub in enumerate(rule.get("patterns", [])):
            self._validate_rule(sub, "%s.patterns[%d]" % (where, i))

    def flatten(self, patterns, seen=()):
        """The concrete match and begin/end rules of a pattern list, in order."""
        key = id(patterns)
        if key in self.flat_cache and not seen:
            return self.flat_cache[key]
        out = []
        for rule in patterns:
            if "include" in rule:
                inc = rule["include"]
                target = self.root if inc in ("$self", "$base") else self.repo.get(inc[1:])
                if target is None or id(target) in seen:
                    continue
                out.extend(self._rule_rules(target, seen + (id(target),)))
            else:
                out.extend(self._rule_rules(rule, seen))
        if not seen:
            self.flat_cache[key] = out
        return out

    def _rule_rules(self, rule, seen):
        if rule.get("disabled"):
            return []
        if "match" in rule or "begin" in rule:
            return [rule] if rule.get("_rx") is not None else []
        return self.flatten(rule.get("patterns", []), seen)


def scopes_for(base, rule_name):
    return base + (tuple(rule_name.split()) if rule_name else ())


def apply_captures(chars, m, caps):
    if not caps:
        return
    for k in sorted(caps, key=int):
        g = int(k)
        if g > (m.re.groups or 0) or m.start(g) < 0 or "name" not in caps[k]:
            continue
        for p in range(m.start(g), m.end(g)):
            chars[p] = chars[p] + tuple(caps[k]["name"].split())


def tokenize(grammar, lines):
    """TextMate tokenization. Returns, per line, the scope tuple of every char."""
    root_scope = (grammar.data["scopeName"],)
    stack = [{"patterns": grammar.flatten(grammar.root["patterns"]), "end": None,
              "rule": None, "scopes": root_scope, "content": root_scope}]
    result = []
    for text in lines:
        line = text + "\n"
        chars = [None] * len(line)
        pos = 0
        guard = 0
        last_state = None
        while True:
            frame = stack[-1]
            best = None  # (start, order, kind, match, rule)
            if frame["end"] is not None:
                m = frame["end"].search(line, pos)
                if m:
                    order = 10 ** 6 if frame["rule"].get("applyEndPatternLast") else -1
                    best = (m.start(), order, "end", m, None)
            for i, rule in enumerate(frame["patterns"]):
                m = rule["_rx"].search(line, pos)
                if m and (best is None or (m.start(), i) < best[:2]):
                    best = (m.start(), i, "rule", m, rule)
            if best is None:
                for p in range(pos, len(line)):
                    chars[p] = frame["content"]
                break
            start, _, kind, m, rule = best
            for p in range(pos, start):
                chars[p] = frame["content"]
            state = (len(stack), m.start(), m.end(), kind, id(rule))
            guard = guard + 1 if m.end() == pos else 0
            if guard > 100 or state == last_state and m.end() == m.start():
                raise RuntimeError("tokenizer made no progress at column %d of %r" % (pos, text))
            last_state = state
            if kind == "end":
                r = frame["rule"]
                for p in range(m.start(), m.end()):
                    chars[p] = frame["scopes"]
                apply_captures(chars, m, r.get("endCaptures", r.get("captures")))
                stack.pop()
                pos = m.end()
                continue
            if "match" in rule:
                sc = scopes_for(frame["content"], rule.get("name"))
                for p in range(m.start(), m.end()):
                    chars[p] = sc
                apply_captures(chars, m, rule.get("captures"))
                pos = m.end()
                continue
            # begin/end
            sc = scopes_for(frame["content"], rule.get("name"))
            for p in range(m.start(), m.end()):
                chars[p] = sc
            apply_captures(chars, m, rule.get("beginCaptures", rule.get("captures")))
            if rule.get("_end_backref"):
                end_src = re.sub(r"\\([1-9])", lambda b: re.escape(m.group(int(b.group(1))) or ""),
                                 rule["end"])
                end_rx = re.compile(translate_regex(end_src)[0])
            else:
                end_rx = rule["_end"]
            stack.append({"patterns": grammar.flatten(rule.get("patterns", [])), "end": end_rx,
                          "rule": rule, "scopes": sc,
                          "content": scopes_for(sc, rule.get("contentName"))})
            pos = m.end()
        result.append(chars[:len(text)])
    return result


def check_vscode(rep):
    files = {}
    for rel in ("package.json", "language-configuration.json", "syntaxes/mist.tmLanguage.json"):
        path = os.path.join(VSCODE, rel)
        try:
            files[rel] = json.loads(read(path))
            rep.ok("vscode/%s is valid JSON" % rel)
        except (OSError, ValueError) as e:
            rep.fail("vscode/%s: %s" % (rel, e))
    if len(files) != 3:
        return None
    pkg, conf, gram = (files["package.json"], files["language-configuration.json"],
                       files["syntaxes/mist.tmLanguage.json"])

    problems = []
    for key in ("name", "version", "publisher", "engines"):
        if key not in pkg:
            problems.append("package.json has no %r" % key)
    langs = pkg.get("contributes", {}).get("languages", [])
    grams = pkg.get("contributes", {}).get("grammars", [])
    lang = next((l for l in langs if l.get("id") == "mist"), None)
    if lang is None:
        problems.append("package.json contributes no language 'mist'")
    else:
        if ".mist" not in lang.get("extensions", []):
            problems.append("language 'mist' does not claim .mist")
        cpath = os.path.normpath(os.path.join(VSCODE, lang.get("configuration", "")))
        if not lang.get("configuration") or cpath != os.path.join(VSCODE, "language-configuration.json"):
            problems.append("language configuration path %r" % lang.get("configuration"))
    g = next((x for x in grams if x.get("language") == "mist"), None)
    if g is None:
        problems.append("package.json contributes no grammar for 'mist'")
    else:
        if g.get("scopeName") != "source.mist" or gram.get("scopeName") != "source.mist":
            problems.append("scopeName: package.json %r, grammar %r" % (
                g.get("scopeName"), gram.get("scopeName")))
        gpath = os.path.normpath(os.path.join(VSCODE, g.get("path", "")))
        if gpath != os.path.join(VSCODE, "syntaxes", "mist.tmLanguage.json"):
            problems.append("grammar path %r" % g.get("path"))

    if conf.get("comments", {}).get("lineComment") != "//":
        problems.append("lineComment is not //")
    if "blockComment" in conf.get("comments", {}):
        problems.append(".mist has no block comments")
    brackets = [tuple(b) for b in conf.get("brackets", [])]
    if sorted(brackets) != sorted([("{", "}"), ("[", "]"), ("(", ")")]):
        problems.append("brackets are %s" % brackets)
    pairs = {(p["open"], p["close"]) if isinstance(p, dict) else tuple(p)
             for p in conf.get("autoClosingPairs", [])}
    for want in brackets + [('"', '"')]:
        if want not in pairs:
            problems.append("autoClosingPairs lack %s%s" % want)
    # The JavaScript regexes of the configuration use only syntax Python shares.
    regexes = {"wordPattern": conf.get("wordPattern")}
    regexes.update({"indentationRules." + k: v for k, v in conf.get("indentationRules", {}).items()})
    compiled = {}
    for k, v in regexes.items():
        if v is None:
            continue
        try:
            compiled[k] = re.compile(v)
        except re.error as e:
            problems.append("%s does not compile: %s" % (k, e))
    wp = compiled.get("wordPattern")
    if wp:
        for w in ("position_embedding", "gpt3_1_3b", "1e-3", "0.95"):
            if not wp.fullmatch(w):
                problems.append("wordPattern does not take %r as one word" % w)
    inc = compiled.get("indentationRules.increaseIndentPattern")
    dec = compiled.get("indentationRules.decreaseIndentPattern")
    if inc and not all(inc.search(s) for s in ("train {", "  pre {  // c", "model m(a) {")):
        problems.append("increaseIndentPattern misses an opening line")
    if inc and inc.search("  x = f(y)"):
        problems.append("increaseIndentPattern matches a plain statement")
    if dec and not dec.search("  }"):
        problems.append("decreaseIndentPattern misses a closing line")
    if problems:
        for p in problems:
            rep.fail("vscode: " + p)
    else:
        rep.ok("package.json and language-configuration.json are consistent "
               "(id mist, .mist, source.mist, paths, comments, brackets, pairs, regexes)")

    grammar = Grammar(gram, rep)
    unused = set(grammar.repo) - grammar.used
    if unused:
        rep.fail("grammar: repository entries never included: %s" % sorted(unused))
    if grammar.errors == 0 and not unused:
        rep.ok("grammar structure: %d repository rules, all includes resolve, captures exist, "
               "scope names end in .mist" % len(grammar.repo))
    if grammar.skipped:
        for s in grammar.skipped:
            rep.fail("grammar regex skipped (no Python equivalent): " + s)
    for t in grammar.translated:
        rep.info("translated for Python: " + t)
    if not grammar.skipped:
        rep.ok("all %d grammar regexes compile with Python re (%s)" % (
            grammar.regex_count,
            "%d translated" % len(grammar.translated) if grammar.translated
            else "no Oniguruma-only construct used, none translated or skipped"))
    return grammar


# --------------------------------------------------------------------------
# 4. Reference lexer (support/Lexer.cpp) and the expected class of each token.

SPACE = " \t\n\v\f\r"
IDSTART = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
IDCHAR = IDSTART | set("0123456789")
DIGITS = set("0123456789")
PUNCT = {"(": "(", ")": ")", "{": "{", "}": "}", "[": "[", "]": "]", ",": ",", ":": ":",
         ";": ";", "+": "+", "-": "-", "*": "*", "/": "/", "%": "%", "^": "^", "?": "?",
         ".": "."}


def lex_line(s):
    """Tokens of one line: (kind, text, start, end). Mirrors Lexer::next; lexing
    continues after an error, as a highlighter does."""
    toks = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c in SPACE:
            i += 1
            continue
        if s.startswith("//", i):
            toks.append(("comment", s[i:], i, n))
            break
        st = i
        if c in IDSTART:
            while i < n and s[i] in IDCHAR:
                i += 1
            w = s[st:i]
            toks.append(("kw" if w in KEYWORDS else "ident", w, st, i))
            continue
        if c in DIGITS:
            real = False
            while i < n and s[i] in DIGITS:
                i += 1
            if i + 1 < n and s[i] == "." and s[i + 1] in DIGITS:
                real = True
                i += 1
                while i < n and s[i] in DIGITS:
                    i += 1
            if i < n and s[i] in "eE":
                save = i
                i += 1
                if i < n and s[i] in "+-":
                    i += 1
                if i < n and s[i] in DIGITS:
                    real = True
                    while i < n and s[i] in DIGITS:
                        i += 1
                else:
                    i = save
            toks.append(("real" if real else "int", s[st:i], st, i))
            continue
        if c == '"':
            j = s.find('"', i + 1)
            if j < 0:
                toks.append(("error", s[st:], st, n))
                break
            toks.append(("string", s[st:j + 1], st, j + 1))
            i = j + 1
            continue
        if c in "%@" and i + 1 < n and s[i + 1] in IDCHAR:
            i += 1
            while i < n and (s[i] in IDCHAR or s[i] == "."):
                i += 1
            toks.append(("irname", s[st:i], st, i))
            continue
        i += 1
        if c == "=":
            if i < n and s[i] == "=":
                i += 1
                toks.append(("==", "==", st, i))
            else:
                toks.append(("=", "=", st, i))
            continue
        toks.append((PUNCT.get(c, "error"), c, st, i))
    return toks


def classify(lines):
    """[(line, start, end, class, text)] for every token of a file."""
    per_line = [lex_line(l) for l in lines]
    flat = [(ln, t) for ln, toks in enumerate(per_line) for t in toks if t[0] != "comment"]
    out = []
    for ln, toks in enumerate(per_line):
        for t in toks:
            if t[0] == "comment":
                out.append((ln, t[2], t[3], "comment", t[1]))
    train_state = 0  # 0 outside, 1 after `train`, 2 inside its braces
    for k, (ln, (kind, text, st, en)) in enumerate(flat):
        prev = flat[k - 1] if k > 0 else None
        prev2 = flat[k - 2] if k > 1 else None
        nxt = flat[k + 1] if k + 1 < len(flat) else None
        in_train = train_state == 2
        if kind == "kw":
            cls = KEYWORD_CLASS[text]
        elif kind == "ident":
            decl = (prev is not None and prev[0] == ln and prev[1][0] == "kw"
                    and prev[1][1] in ("block", "model", "input") and not in_train)
            if decl:
                cls = "name." + prev[1][1]
            elif in_train and text in TRAIN_KEYS + OPTIMIZER_SETTINGS:
                cls = "train.key"
            elif in_train and text in OPTIMIZERS:
                cls = "optimizer"
            elif text in BUILTINS and nxt is not None and nxt[0] == ln and nxt[1][0] == "(":
                cls = "builtin"
            elif (text in SHARD_WORDS and prev is not None and prev[1][0] == "="
                  and prev2 is not None and prev2[1][:2] == ("ident", "shard")
                  and prev2[0] == prev[0]):
                cls = "shard.word"
            elif text in DTYPES:
                cls = "dtype"
            elif text in DIMENSIONS:
                cls = "dim"
            else:
                cls = "default"
        elif kind == "int":
            cls = "int"
        elif kind == "real":
            cls = "float"
        elif kind == "string":
            cls = "string"
        elif kind == "=":
            cls = "op.assign"
        elif kind in "+-*/":
            cls = "op.arith"
        elif kind in ("(", ")", "{", "}", "[", "]", ",", ":", ";"):
            cls = "punct"
        else:  # error, irname, ==, %, ^, ?, .
            cls = "invalid"
        out.append((ln, st, en, cls, text))
        # train { ... } tracking, as the grammar's train region does it.
        if kind == "kw" and text == "train" and train_state == 0:
            train_state = 1
        elif train_state == 1:
            train_state = 2 if kind == "{" else 0
            if kind == "kw" and text == "train":
                train_state = 1
        elif train_state == 2 and kind == "}":
            train_state = 0
    return sorted(out)


def tm_mismatch(cls, scopes, root):
    sig = [s for s in scopes if s != root and not s.startswith("meta.")]
    want = TM_SCOPE[cls]
    if want is None:
        return bool(sig)
    if not any(s.startswith(want) for s in sig):
        return True
    if cls != "invalid" and any(s.startswith("invalid") for s in sig):
        return True
    return False


EDGE_CASES = r'''// Edge cases for the highlighters (generated by lang/editors/check.py). TODO
import "gpt"
import "unterminated
block b1(x, y = 2, dropout = 0.1, vocab = 8) { return x }
block  spaced_name (x) {
  a = linear(x, 8, shard = column, bias = false)
  c = linear (x, 8, shard=row)
  e = embedding(x, vocab, 8, shard = vocab)
  f = lm_head(x, vocab, shard = none, tied = true)
  g = linear(x, 8, shard =
             column)
  h = linear(x, 8, shard = // the value is on the next line
             row)
  i = linear(x, 8, shard = columnx)
  j = dropout(x, p = dropout) + dropout
  k = attention(x, heads = 2, head_dim = 4, causal = true, flash = false, dropout = 0.0)
  l = position_embedding(s, 8) * rmsnorm(x, eps = 1e-6)
  m = cross_entropy(layernorm(x), silu(gelu(rope(x, heads = 2, head_dim = 4))))
  n = concat(slice(x, 0, 4), slice(x, start = 4, size = 4))
  vocab = column + row + none
  lr = seq_len + adamw + sgd
  return linear_x + xlinear(x) + my_import + train_2 + _pre + b + s + bs + sb
}
model tmpl(vocab, hidden, kv_heads = heads, eps = 1e-5, flag = true) {
  input tokens: i32[b, s]
  input w : bf16[b, s, hidden]; input v: f16[b]; input u: f32[s]; input q: u8[b, s]
  pre { x = embedding(tokens, vocab, hidden, shard = vocab) }
  repeat hidden / 2 - 1 { x = x + x * x }
  post { return x }
}
model inst = tmpl(vocab = 256, hidden = 64 * 32)
train {
  global_batch = 16; seq_len = 64, warmup_steps = 0
  lr = 3e-4 grad_clip = 1.0 dtype = bf16 master_dtype = f32
  optimizer = adamw(lr = 1e-3, betas = (0.9, 0.95), weight_decay = 0.1, wd = 0.0, eps = 1e-8)
  optimizer = sgd
}
train
{ optimizer = sgd(lr = 1) }
nums = 0 007 1.5 1e3 1E+3 2.5e-3 2.5E3 1. .5 2e 2e+ 12ab 1e5e5 1.5.3 123456789012345678901
ir = %x %b.1 @pre.x.weight == % ^ ? . @ # $ ! & | < > ' ` ~ \ a%b x==y
spaces =<TAB>tab; formfeed =<FF>x<VT>; cr = 1<CR>
text = "a // not a comment" // but this is
done = "caf" + "\u00e9" + \u00e9 + x
'''.replace("<TAB>", "\t").replace("<FF>", "\f").replace("<VT>", "\v").replace("<CR>", "\r")

# Edge cases where the Vim syntax knowingly differs (see README): a keyword
# right after a number (`12import`, `3b`: vim keywords need a non-word
# character before them) and a comment between `train` and its `{`.
TM_ONLY_EDGE_CASES = ("x = 12import + 3b\n"
                      "train // a comment between the keyword and the brace\n"
                      "{ lr = 1 }\n")


# --------------------------------------------------------------------------
# 5. Vim.

VIM_SCRIPT = r'''
set nocompatible
let g:res = {'errors': [], 'files': {}, 'links': {}}
let v:errmsg = ''
try
  execute 'set runtimepath^=' . fnameescape(g:mist_vimdir)
  filetype plugin on
  syntax on
catch
  call add(g:res.errors, 'setup: ' . v:exception)
endtry
if v:errmsg != ''
  call add(g:res.errors, 'setup: ' . v:errmsg)
endif
for f in g:mist_files
  let v:errmsg = ''
  try
    execute 'edit ' . fnameescape(f)
  catch
    call add(g:res.errors, f . ': ' . v:exception)
  endtry
  if v:errmsg != ''
    call add(g:res.errors, f . ': ' . v:errmsg)
  endif
  let names = []
  for l in range(1, line('$'))
    let row = []
    for c in range(1, strlen(getline(l)))
      call add(row, synIDattr(synID(l, c, 1), 'name'))
    endfor
    call add(names, row)
  endfor
  let g:res.files[f] = {'ft': &filetype, 'syntax': get(b:, 'current_syntax', ''), 'commentstring': &commentstring, 'names': names}
  bwipeout!
endfor
for g in g:mist_groups
  let g:res.links[g] = synIDattr(synIDtrans(hlID(g)), 'name')
endfor
call writefile([json_encode(g:res)], g:mist_out)
qall!
'''


def vim_links_from_file(rep):
    path = os.path.join(VIMDIR, "syntax", "mist.vim")
    links = dict(re.findall(r"^hi(?:ghlight)? def(?:ault)? link\s+(\w+)\s+(\w+)", read(path), re.M))
    if links == VIM_LINKS:
        rep.ok("syntax/mist.vim links its %d groups to the standard groups" % len(links))
    else:
        rep.fail("syntax/mist.vim links differ: %s" % {
            k: (links.get(k), VIM_LINKS.get(k)) for k in set(links) | set(VIM_LINKS)
            if links.get(k) != VIM_LINKS.get(k)})
    text = read(path)
    if not re.search(r'^let b:current_syntax = "mist"', text, re.M):
        rep.fail("syntax/mist.vim does not set b:current_syntax")
    ft = read(os.path.join(VIMDIR, "ftdetect", "mist.vim"))
    if not re.search(r"^autocmd BufRead,BufNewFile \*\.mist setfiletype mist", ft, re.M):
        rep.fail("ftdetect/mist.vim does not map *.mist to filetype mist")


def run_vim_smoke(rep, vim, tmp):
    """The command style of the brief: -u NONE, compatible mode, rtp+=..., ft set by hand."""
    out = os.path.join(tmp, "smoke.txt")
    cmd = [vim, "-Es", "-u", "NONE", "-i", "NONE",
           "-c", "set rtp+=lang/editors/vim", "-c", "syntax on",
           "-c", "e examples/gpt3-1.3b.mist", "-c", "set ft=mist",
           "-c", "call writefile([v:errmsg, b:current_syntax, "
                 "synIDattr(synID(2, 1, 1), 'name'), synIDattr(synID(3, 1, 1), 'name'), "
                 "synIDattr(synID(7, 15, 1), 'name')], '%s')" % out,
           "-c", "qa!"]
    rep.info("$ cd %s && %s" % (ROOT, " ".join(
        a if re.fullmatch(r"[\w./+=-]+", a) else "'" + a.replace("'", "'\\''") + "'" for a in cmd)))
    p = subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=120)
    try:
        errmsg, cur, g_import, g_model, g_adamw = read(out).split("\n")[:5]
    except (OSError, ValueError):
        rep.fail("vim smoke test wrote no result (rc %d): %s" % (p.returncode, p.stdout + p.stderr))
        return
    rep.info("  rc=%d v:errmsg=%r b:current_syntax=%r line 2 col 1 (import)=%s, "
             "line 3 col 1 (model)=%s, line 7 col 15 (adamw)=%s" % (
                 p.returncode, errmsg, cur, g_import, g_model, g_adamw))
    if p.returncode == 0 and errmsg == "" and cur == "mist" and g_import == "mistInclude" \
            and g_model == "mistKeyword" and g_adamw == "mistOptimizer":
        rep.ok("vim loads syntax/mist.vim without errors; keyword positions are mist groups")
    else:
        rep.fail("vim smoke test")


def run_vim_full(rep, vim, tmp, files):
    out = os.path.join(tmp, "vim.json")
    script = os.path.join(tmp, "dump.vim")
    with open(script, "w", encoding="utf-8") as f:
        f.write("let g:mist_vimdir = %s\n" % json.dumps(VIMDIR))
        f.write("let g:mist_files = %s\n" % json.dumps(files))
        f.write("let g:mist_groups = %s\n" % json.dumps(sorted(VIM_LINKS)))
        f.write("let g:mist_out = %s\n" % json.dumps(out))
        f.write(VIM_SCRIPT)
    cmd = [vim, "-Es", "-N", "-u", "NONE", "-i", "NONE", "-S", script]
    rep.info("$ %s   (%d files)" % (" ".join(cmd), len(files)))
    p = subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=600)
    try:
        res = json.loads(read(out))
    except (OSError, ValueError) as e:
        rep.fail("vim dump produced no result (rc %d, %s): %s" % (p.returncode, e, p.stdout + p.stderr))
        return None
    if p.returncode != 0:
        rep.fail("vim exited with %d" % p.returncode)
    for e in res["errors"]:
        rep.fail("vim error: " + e)
    bad_links = {g: t for g, t in res["links"].items() if not t or t == g}
    if bad_links:
        rep.fail("vim groups that resolve to no highlight: %s" % bad_links)
    bad_ft = [f for f, r in res["files"].items()
              if r["ft"] != "mist" or r["syntax"] != "mist" or r["commentstring"] != "// %s"]
    if bad_ft:
        rep.fail("ftdetect/ftplugin/syntax not applied to: %s" % bad_ft[:5])
    if not res["errors"] and not bad_ft and p.returncode == 0:
        rep.ok("vim: ftdetect sets filetype=mist, ftplugin sets commentstring, syntax loads "
               "without errors in all %d files" % len(res["files"]))
    return res


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-vim", action="store_true", help="skip the vim checks")
    ap.add_argument("--vim", default=None, help="vim binary (default: vim on PATH)")
    ap.add_argument("--no-tests", action="store_true",
                    help="only examples/ and stdlib/models/, not tests/")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every mismatch")
    ap.add_argument("--mistc", default=os.path.join(ROOT, "build", "bin", "mistc"),
                    help="the mistc whose --print-vocabulary the word lists are checked "
                         "against (default: build/bin/mistc)")
    args = ap.parse_args()
    rep = Report(args.verbose)

    print("== word lists against the compiler sources")
    check_word_lists(rep, args.mistc)
    print("== VS Code extension")
    grammar = check_vscode(rep)
    print("== Vim files")
    vim_links_from_file(rep)

    # The corpus.
    required, extra = [], []
    for top, bucket in (("examples", required), (os.path.join("stdlib", "models"), required),
                        ("tests", extra)):
        for d, _, names in sorted(os.walk(os.path.join(ROOT, top))):
            # The adversarial corpus is malformed on purpose (binary bytes,
            # 10^5-deep nesting, 200 KB lines): not text to highlight.
            if os.path.relpath(d, ROOT).startswith(os.path.join("tests", "corpus")):
                continue
            bucket.extend(os.path.relpath(os.path.join(d, n), ROOT)
                          for n in sorted(names) if n.endswith(".mist"))
    if not required:
        rep.fail("no .mist files under examples/ or stdlib/models/")
    if args.no_tests:
        extra = []
    tmp = tempfile.mkdtemp(prefix="mist-editors-")
    edge = os.path.join(tmp, "edge-cases.mist")
    with open(edge, "w", encoding="utf-8") as f:
        f.write(EDGE_CASES)
    edge_tm = os.path.join(tmp, "edge-cases-tm-only.mist")
    with open(edge_tm, "w", encoding="utf-8") as f:
        f.write(TM_ONLY_EDGE_CASES)

    def lines_of(path):
        with open(os.path.join(ROOT, path), "rb") as f:
            return f.read().decode("utf-8", "surrogateescape").split("\n")

    sets = [("examples/ and stdlib/models/", required), ("tests/", extra),
            ("generated edge cases", [edge, edge_tm])]
    expectations = {}
    for _, files in sets:
        for path in files:
            lines = lines_of(path)
            expectations[path] = (lines, classify(lines))

    print("== TextMate grammar over the corpus")
    if grammar is not None and not grammar.skipped and grammar.errors == 0:
        root = grammar.data["scopeName"]
        for label, files in sets:
            if not files:
                continue
            bad = []
            seen = {"kw": set(), "builtin": set()}
            counts = {"kw": 0, "builtin": 0, "tokens": 0}
            for path in files:
                lines, toks = expectations[path]
                try:
                    chars = tokenize(grammar, lines)
                except RuntimeError as e:
                    bad.append("%s: %s" % (path, e))
                    continue
                for ln, st, en, cls, text in toks:
                    counts["tokens"] += 1
                    if cls.startswith("kw.") or cls == "bool":
                        counts["kw"] += 1
                        seen["kw"].add(text)
                    if cls == "builtin":
                        counts["builtin"] += 1
                        seen["builtin"].add(text)
                    for p in range(st, en):
                        if tm_mismatch(cls, chars[ln][p], root):
                            bad.append("%s:%d:%d %r expected %s, got %s" % (
                                os.path.basename(path), ln + 1, p + 1, text,
                                TM_SCOPE[cls], " ".join(chars[ln][p][1:]) or "(no scope)"))
                            break
            if bad:
                rep.fail("TextMate: %d of %d tokens in %s %s" % (
                    len(bad), counts["tokens"], label, "mis-scoped:" if bad else ""))
                for b in bad if args.verbose else bad[:15]:
                    rep.info("  " + b)
            else:
                rep.ok("TextMate: %d files of %s, %d tokens scoped as expected; "
                       "%d keyword occurrences (%s) and %d built-in calls (%s) all scoped" % (
                           len(files), label, counts["tokens"], counts["kw"],
                           " ".join(sorted(seen["kw"])), counts["builtin"],
                           " ".join(sorted(seen["builtin"]))))
            if label.startswith("generated"):
                missing = (set(KEYWORDS) - seen["kw"]) | (set(BUILTINS) - seen["builtin"])
                if missing:
                    rep.fail("edge cases do not exercise %s" % sorted(missing))
    else:
        rep.fail("TextMate corpus check not run: the VS Code files did not load, or the grammar has errors or skipped regexes")

    print("== Vim syntax over the corpus")
    vim = None if args.no_vim else (args.vim or shutil.which("vim"))
    if vim is None:
        print("skip  vim not found (apt-get install -y vim-nox) or --no-vim given")
    else:
        run_vim_smoke(rep, vim, tmp)
        vim_files = required + extra + [edge]
        res = run_vim_full(rep, vim, tmp, [os.path.join(ROOT, f) for f in vim_files])
        if res is not None:
            for label, files in sets:
                files = [f for f in files if f != edge_tm]
                if not files:
                    continue
                bad = []
                ntok = 0
                for path in files:
                    r = res["files"].get(os.path.join(ROOT, path))
                    if r is None:
                        bad.append("%s: not in the vim output" % path)
                        continue
                    lines, toks = expectations[path]
                    for ln, st, en, cls, text in toks:
                        ntok += 1
                        # vim columns are byte offsets
                        line = lines[ln]
                        bcol = len(line[:st].encode("utf-8", "surrogateescape"))
                        blen = len(line[st:en].encode("utf-8", "surrogateescape"))
                        names = r["names"][ln][bcol:bcol + blen] if ln < len(r["names"]) else []
                        wrong = [nm for nm in names if nm not in VIM_GROUPS[cls]]
                        if wrong or len(names) != blen:
                            bad.append("%s:%d:%d %r expected %s, got %s" % (
                                os.path.basename(path), ln + 1, st + 1, text,
                                "/".join(sorted(VIM_GROUPS[cls])) or "(no group)",
                                wrong[0] or "(no group)" if wrong else "short line"))
                if bad:
                    rep.fail("Vim: %d of %d tokens in %s mis-highlighted:" % (len(bad), ntok, label))
                    for b in bad if args.verbose else bad[:15]:
                        rep.info("  " + b)
                else:
                    rep.ok("Vim: %d files of %s, %d tokens highlighted as expected" % (
                        len(files), label, ntok))

    shutil.rmtree(tmp, ignore_errors=True)
    print()
    if rep.failures:
        print("%d check(s) FAILED" % rep.failures)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
