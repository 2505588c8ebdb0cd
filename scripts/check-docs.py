#!/usr/bin/env python3
"""Checks that the documents say what the code does (run by scripts/test.sh).

    scripts/check-docs.py              check the working tree; exit 1 with one line per problem
    scripts/check-docs.py --self-test  prove each check can fail: plant one mismatch per check
                                       in a copy of the tree and expect it reported

The checks:

  links      every relative link and #anchor in every Markdown file resolves (GitHub's
             heading slugs);
  config     every WEBHOOKS_* variable the code reads (string literals in shared/src,
             local/src and functions/src outside tests, and template.yaml's Environment)
             has a row in docs/configuration.md whose Default column holds the code's
             default; every row is read by the code; README.md and docs/ name no other;
  functions  every function of template.yaml is the Lambda binary of functions/ (Binary:)
             with a WEBHOOKS_FUNCTION its table (shared/src/lambda/function.rs) knows, every
             function of the table is in template.yaml, and the binary has a row in the size
             table of BENCHMARKS.md ("### Sizes");
  references every citation of a Markdown document by its file name, in the sources,
             scripts, templates and documents (comments included, a citation may run over
             comment lines), names a file that exists, and its heading when it gives one:
             `FILE.md#anchor` (GitHub's slug), `FILE.md, "Title"` or `FILE.md, *Title*`
             (a heading's exact text). A name resolves beside the citing file, then at the
             root, then as the one tracked file of that name (`results.md`);
  code map   every code name ARCHITECTURE.md gives in backticks exists: a file (`admit.rs`,
             `aws/sqs.rs`) or folder (`delivery/`) of the tree, a module path (`delivery::deliver`,
             `services::aws::{api_app, queue_functions}`: each module a file or folder of a crate's
             src/, the last name defined under it) or a type's item (`Store::record_delivery`:
             the item defined beside the type).

That every error code is in openapi.yaml and docs/api.md is checked once, in Rust, against
the `ErrorCode` enum itself (shared/tests/it/error_codes.rs).

Python 3 standard library only; reads files, compiles nothing.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

CONFIG_DOC = "docs/configuration.md"
API_DOC = "docs/api.md"
SIZES_DOC = "BENCHMARKS.md"
# The functions the one Lambda binary serves, by their WEBHOOKS_FUNCTION.
FUNCTION_TABLE = "shared/src/lambda/function.rs"
SOURCE_DIRS = ["shared/src", "local/src", "functions"]
SKIP_DIRS = {".git", "target", ".tools", "node_modules", "webhooks-data", ".aws-sam"}


# ---------------------------------------------------------------------------
# Reading the tree


def markdown_files(root):
    """Tracked and new (not ignored) Markdown files; every one when not in a git tree."""
    if (root / ".git").exists():
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "*.md"],
            cwd=root, capture_output=True, check=True,
        ).stdout.decode()
        return sorted({root / p for p in out.split("\0") if p and (root / p).exists()})
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        found += [Path(dirpath) / f for f in filenames if f.endswith(".md")]
    return sorted(found)


def without_tests(text):
    """Rust source without its `#[cfg(test)] mod ... { }` (by convention at the end)."""
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod \w+\s*\{", text, re.M)
    return text[: m.start()] if m else text


def rust_sources(root):
    """{relative path: text} of the service's Rust sources, tests left out."""
    sources = {}
    for top in SOURCE_DIRS:
        for path in sorted((root / top).rglob("*.rs")):
            rel = path.relative_to(root).as_posix()
            if "/tests/" in rel or path.name == "tests.rs" or "/target/" in rel:
                continue
            sources[rel] = without_tests(path.read_text())
    return sources


def strip_code(markdown, spans=True):
    """Markdown with fenced code blocks blanked (line count kept) and, with `spans`, code
    spans removed."""
    out, fence = [], None
    for line in markdown.split("\n"):
        m = re.match(r"^\s*(`{3,}|~{3,})", line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append("")
        elif m:
            fence = m.group(1)
            out.append("")
        elif spans:
            out.append(re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", line))
        else:
            out.append(line)
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Check 1: links and anchors


def slug_base(heading):
    """GitHub's anchor for a heading's text (github-slugger): the rendered text, lower case,
    punctuation and symbols dropped, each space a hyphen."""
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "").replace("*", "")
    kept = []
    for ch in text.strip().lower():
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LNM" or cat == "Pc":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors_of(path, cache={}):
    if path not in cache:
        slugs, seen = set(), {}
        for line in strip_code(path.read_text(), spans=False).split("\n"):
            m = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug_base(m.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                slugs.add(base if n == 0 else f"{base}-{n}")
        for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", path.read_text()):
            slugs.add(m.group(1))
        cache[path] = slugs
    return cache[path]


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)


def check_links(root):
    problems = []
    for md in markdown_files(root):
        text = strip_code(md.read_text())
        targets = [(m.group(1), text.count("\n", 0, m.start()) + 1) for m in LINK.finditer(text)]
        targets += [(m.group(1), text.count("\n", 0, m.start()) + 1) for m in REF_DEF.finditer(text)]
        rel = md.relative_to(root).as_posix()
        for target, line in targets:
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            path_part, _, anchor = target.partition("#")
            path_part = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), path_part)
            if path_part.startswith("/"):
                dest = root / path_part.lstrip("/")
            elif path_part:
                dest = (md.parent / path_part)
            else:
                dest = md
            dest = Path(os.path.normpath(dest))
            if not dest.exists():
                problems.append(f"links: {rel}:{line}: {target}: no such file")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors_of(dest):
                problems.append(f"links: {rel}:{line}: {target}: no heading with anchor #{anchor}")
    return problems


# ---------------------------------------------------------------------------
# Check 2: configuration variables and their defaults

DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|y)$")
UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "y": 365 * 86_400_000}


def variables_read(root, sources):
    """{variable: where} for every WEBHOOKS_* string literal and template Environment key."""
    read = {}
    for rel, text in sources.items():
        for m in re.finditer(r"\"(WEBHOOKS_[A-Z0-9_]+)\"", text):
            read.setdefault(m.group(1), f"{rel}:{text.count(chr(10), 0, m.start()) + 1}")
    template = (root / "template.yaml").read_text()
    for m in re.finditer(r"^\s+(WEBHOOKS_[A-Z0-9_]+):", template, re.M):
        read.setdefault(m.group(1), f"template.yaml:{template.count(chr(10), 0, m.start()) + 1}")
    return read


class Code:
    """The constants and Default impls of the sources, for evaluating a default's expression."""

    def __init__(self, sources):
        self.all = "\n".join(sources.values())
        # `const NAME: &str = "VALUE";`, by value: a constant naming a variable stands for it.
        self.str_consts = {}
        for name, value in re.findall(r"const (\w+)\s*:\s*&str\s*=\s*\"([^\"]*)\"", self.all):
            self.str_consts.setdefault(value, []).append(name)

    def const(self, name):
        m = re.search(rf"\bconst {name}\s*:\s*[^=]+=\s*(.+?);", self.all, re.S)
        return m.group(1).strip() if m else None

    def default_field(self, type_name, path):
        """`field: value` inside `impl Default for TYPE`, following nested struct literals."""
        m = re.search(rf"impl Default for {type_name}\b", self.all)
        if not m:
            return None
        block = self.all[m.end():]
        for field in path[:-1]:
            f = re.search(rf"\b{field}\s*:\s*\w+\s*\{{", block)
            if not f:
                return None
            block = block[f.end():]
        f = re.search(rf"\b{path[-1]}\s*:\s*(.+?),\s*\n", block)
        return f.group(1).strip() if f else None

    def value(self, expr, depth=0):
        """A default expression → a normalised value ("ms:N", "int:N", "str:S"), or None."""
        expr = expr.strip()
        if depth > 5:
            return None
        m = re.fullmatch(r"Duration::from_(secs|millis)\((.+)\)", expr, re.S)
        if m:
            n = self.number(m.group(2), depth)
            return None if n is None else f"ms:{n * (1000 if m.group(1) == 'secs' else 1)}"
        m = re.fullmatch(r"\"((?:[^\"\\]|\\.)*)\"(?:\.(?:to_owned|to_string|into)\(\))?", expr)
        if m:
            return f"str:{m.group(1)}"
        n = self.number(expr, depth)
        if n is not None:
            return f"int:{n}"
        if re.fullmatch(r"[A-Z][A-Z0-9_]*", expr) and self.const(expr):
            return self.value(self.const(expr), depth + 1)
        return None

    def number(self, expr, depth=0):
        """`90 * DAY`, `5_000`, `DAY`: an integer, or None."""
        total = 1
        for factor in expr.split("*"):
            factor = factor.strip().replace("_", "")
            if re.fullmatch(r"\d+", factor):
                total *= int(factor)
            elif re.fullmatch(r"[A-Z][A-Z0-9]*", factor) and self.const(factor) and depth < 5:
                n = self.number(self.const(factor), depth + 1)
                if n is None:
                    return None
                total *= n
            else:
                return None
        return total


def code_default(var, code):
    """The default the code gives `var`: a set of normalised values (empty: none)."""
    text, q = code.all, re.escape(var)
    # A constant naming the variable stands for it (`OAUTH_SCOPES_VAR`).
    names = [f"\"{var}\""] + code.str_consts.get(var, [])
    alts = "|".join(re.escape(n) for n in names)
    patterns = [
        # duration_var("VAR", EXPR)?  millis_var / count_var("VAR", N, ...)
        (rf"duration_var\(\s*(?:{alts}),\s*(.+?)\s*,?\s*\)\?", "expr"),
        (rf"millis_var\(\s*(?:{alts}),\s*([0-9_]+)\)", "expr"),
        (rf"count_var\(\s*(?:{alts}),\s*([^,]+?),", "expr"),
        # bool_var("VAR", local): true on webhooks-local, false on Lambda
        (rf"bool_var\(\s*(?:{alts}),\s*local\)", "local"),
        # clap: #[arg(..., env = "VAR", ..., default_value = "X")]
        (rf"env\s*=\s*(?:{alts})[^\]]*?default_value(?:_t)?\s*=\s*(\"[^\"]*\"|[0-9_]+)", "expr"),
        # match get("VAR") { None => X, ... }
        (rf"match get\((?:{alts})\)\s*\{{\s*None\s*=>\s*(\"[^\"]*\"|[0-9_]+)", "expr"),
        # get("VAR").unwrap_or_else(|| X)  /  scope_list("VAR", get(..), X)
        (rf"get\((?:{alts})\)\s*\.unwrap_or_else\(\|\|\s*(\"[^\"]*\"|[A-Z][A-Z0-9_]*)", "expr"),
        (rf"scope_list\(\s*(?:{alts}),\s*get\([^)]*\),\s*(\w+),?\s*\)", "expr"),
        # std::env::var("VAR") ... .unwrap_or_else(|| X) within a few lines
        (rf"env::var\((?:{alts})\)[^;]{{0,200}}?\.unwrap_or_else\(\|\|\s*(\"[^\"]*\")", "expr"),
    ]
    for pattern, kind in patterns:
        m = re.search(pattern, text, re.S)
        if not m:
            continue
        if kind == "local":
            return {"str:true", "str:false"}
        expr = m.group(1)
        # breaker_defaults.failures → BreakerRule::default()'s field
        d = re.fullmatch(r"(\w+)_defaults\.(\w+)(?: as \w+)?", expr.strip())
        if d:
            type_name = re.search(rf"let {d.group(1)}_defaults\s*=\s*[\w:]*?(\w+)::default\(\)", text)
            expr = type_name and code.default_field(type_name.group(1), [d.group(2)])
            if not expr:
                continue
        v = code.value(expr)
        if v:
            return {v}
    # The AWS call bounds: bounds("ATTEMPT", "OPERATION", defaults.GROUP) from AwsCalls::default().
    for m in re.finditer(r"bounds\(\s*\"(\w+)\",\s*\"(\w+)\",\s*defaults\.(\w+),?\s*\)", text):
        for name, field in ((m.group(1), "attempt"), (m.group(2), "operation")):
            if name == var:
                v = code.value(code.default_field("AwsCalls", [m.group(3), field]) or "")
                return {v} if v else set()
    m = re.search(rf"match get\(\"{q}\"\)\s*\{{\s*None\s*=>\s*defaults\.(\w+)\.(\w+)", text)
    if m:
        v = code.value(code.default_field("AwsCalls", [m.group(1), m.group(2)]) or "")
        return {v} if v else set()
    # Table names: Option in the configuration, defaulted where webhooks-local names its tables.
    m = re.search(rf"need\(&config\.(\w+),\s*\"{q}\"\)", text)
    if m:
        d = re.search(rf"config\s*\.{m.group(1)}\s*\.clone\(\)\s*\.unwrap_or_else\(\|\|\s*(\w+)\.into\(\)\)", text)
        if d:
            v = code.value(d.group(1))
            return {v} if v else set()
    return set()


def doc_default(cell):
    """The backticked values of a Default cell, normalised like code_default's."""
    values = set()
    for token in re.findall(r"`([^`]*)`", cell):
        if DURATION.match(token):
            n, unit = DURATION.match(token).groups()
            values.add(f"ms:{int(n) * UNIT_MS[unit]}")
        elif re.fullmatch(r"\d+", token):
            values.add(f"int:{int(token)}")
        else:
            values.add(f"str:{token}")
    return values


def documented_variables(root):
    """{variable: (default cell, line)} from every table of configuration.md with a Default column."""
    rows, default_col = {}, None
    for n, line in enumerate((root / CONFIG_DOC).read_text().split("\n"), 1):
        if not line.startswith("|"):
            default_col = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if default_col is None:
            default_col = next((i for i, c in enumerate(cells) if c == "Default"), -1)
            continue
        if default_col < 0 or set("".join(cells)) <= set("-: "):
            continue
        for var in re.findall(r"`(WEBHOOKS_[A-Z0-9_]+)`", cells[0]):
            rows[var] = (cells[default_col] if default_col < len(cells) else "", n)
    return rows


def check_config(root, sources):
    problems = []
    code = Code(sources)
    read = variables_read(root, sources)
    documented = documented_variables(root)
    for var, where in sorted(read.items()):
        if var not in documented:
            problems.append(f"config: {var} is read ({where}) but not in {CONFIG_DOC}")
            continue
        cell, line = documented[var]
        expected, stated = code_default(var, code), doc_default(cell)
        if expected != stated:
            show = lambda vals: ", ".join(sorted(vals)) or "none"
            problems.append(
                f"config: {CONFIG_DOC}:{line}: {var}: documented default {show(stated)},"
                f" the code's is {show(expected)}"
            )
    for var, (_, line) in sorted(documented.items()):
        if var not in read:
            problems.append(f"config: {CONFIG_DOC}:{line}: {var} is documented but nothing reads it")
    user_docs = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    for doc in user_docs:
        for var in sorted(set(re.findall(r"\bWEBHOOKS_[A-Z0-9_]*[A-Z0-9]\b", doc.read_text()))):
            if var not in read:
                problems.append(
                    f"config: {doc.relative_to(root).as_posix()} names {var}, which nothing reads"
                )
    return problems


# ---------------------------------------------------------------------------
# Check 3: functions


def size_table_rows(root):
    text = (root / SIZES_DOC).read_text()
    m = re.search(r"^### Sizes\s*$(.*?)(?=^#{1,3} )", text, re.M | re.S)
    if not m:
        return None
    return {
        re.sub(r"[`*]", "", row.split("|")[1]).strip()
        for row in m.group(1).split("\n")
        if row.startswith("|")
    }


def check_functions(root):
    problems = []
    template = (root / "template.yaml").read_text()
    binaries = set(re.findall(r"^\s+Binary:\s*(\S+)\s*$", template, re.M))
    deployed = set(re.findall(r"^\s+WEBHOOKS_FUNCTION:\s*(\S+)\s*$", template, re.M))
    known = set(re.findall(r'^\s+[A-Za-z]+ = "([a-z-]+)",$', (root / FUNCTION_TABLE).read_text(), re.M))
    binary = re.search(r'^name\s*=\s*"([^"]+)"', (root / "functions/Cargo.toml").read_text(), re.M).group(1)
    sizes = size_table_rows(root)
    if sizes is None:
        return [f"functions: {SIZES_DOC} has no \"### Sizes\" section"]
    for other in sorted(binaries - {binary}):
        problems.append(f"functions: template.yaml builds {other}, not the Lambda binary {binary} (functions/)")
    for name in sorted(known - deployed):
        problems.append(f"functions: {name} of {FUNCTION_TABLE} is no function of template.yaml (WEBHOOKS_FUNCTION: {name})")
    for name in sorted(deployed - known):
        problems.append(f"functions: template.yaml's WEBHOOKS_FUNCTION: {name} is no function of {FUNCTION_TABLE}")
    if binary not in sizes:
        problems.append(f"functions: {binary} has no row in the size table of {SIZES_DOC}")
    return problems


# ---------------------------------------------------------------------------
# Check 4: citations of documents, with their headings


REFERENCE_SUFFIXES = (".rs", ".sh", ".py", ".toml", ".yaml", ".yml", ".md", ".java", ".js", ".mjs",
                      ".html", ".css")
# Generated or not a citation: the benchmark's output, and this checker (its self-test plants
# bad references as strings).
REFERENCE_SKIP = ("bench/results/", "scripts/check-docs.py")
# Comment markers a citation may run across: `//!`, `///`, `//`, `#`, `*`, `--`.
COMMENT_MARK = re.compile(r"^\s*(?://[/!]?|#+|\*+|--)?\s?")
CITATION = re.compile(
    r"(?<![\w./-])((?:\.{1,2}/)*(?:[\w.-]+/)*[\w-][\w.-]*\.md)(?![\w/-]|\.\w)"
    r"(?:#([\w-]+))?"
    r"(?:,?\s+(?:\"([^\"]+)\"|\u201c([^\u201d]+)\u201d|\*([^*\s][^*]*)\*(?!\*)))?"
)


def reference_files(root):
    """The text files whose citations are checked: tracked and new ones (every one outside a
    git tree), by suffix."""
    return sorted(
        r for r in tree_files(root)
        if r.endswith(REFERENCE_SUFFIXES) and not r.startswith(REFERENCE_SKIP)
    )


def tree_files(root):
    """The tree's files: tracked and new ones in a git tree, every one outside it."""
    if (root / ".git").exists():
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=root, capture_output=True, check=True,
        ).stdout.decode()
        return [p for p in out.split("\0") if p and (root / p).is_file()]
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        found += [(Path(dirpath) / f).relative_to(root).as_posix() for f in filenames]
    return found


def flattened(text, markdown):
    """The text as one line, comment markers at the start of each line dropped, so that a
    citation broken over comment lines reads whole; and the line each offset comes from.
    Markdown loses its link targets (check 1 resolves those)."""
    if markdown:
        text = re.sub(r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)", "]", text)
        text = REF_DEF.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    parts, starts, offset = [], [], 0
    for n, line in enumerate(text.split("\n"), 1):
        body = COMMENT_MARK.sub("", line, count=1).rstrip()
        starts.append((offset, n))
        parts.append(body)
        offset += len(body) + 1
    return " ".join(parts), starts


def line_of(starts, pos):
    line = 1
    for offset, n in starts:
        if offset > pos:
            break
        line = n
    return line


def heading_titles(path, cache={}):
    """The normalised text of every heading of a Markdown file."""
    if path not in cache:
        titles = set()
        for line in strip_code(path.read_text(), spans=False).split("\n"):
            m = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                titles.add(normal_title(m.group(1)))
        cache[path] = titles
    return cache[path]


def normal_title(text):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[`*_]", "", text)
    return re.sub(r"\s+", " ", text).strip().lower()


def resolve_citation(root, citing, name, tracked):
    """The files a cited name can mean: beside the citing file, at the root, else every
    tracked file of that name."""
    candidates = [citing.parent / name]
    if not name.startswith("."):
        candidates.append(root / name)
    found = [Path(os.path.normpath(c)) for c in candidates if Path(os.path.normpath(c)).is_file()]
    if found or name.startswith("."):
        return found[:1]
    return [root / r for r in tracked if r == name or r.endswith("/" + name)]


def check_references(root):
    problems = []
    files = reference_files(root)
    tracked = [r for r in files if r.endswith(".md")] + [
        r for r in (p.relative_to(root).as_posix() for p in markdown_files(root)) if r not in files
    ]
    for rel in files:
        path = root / rel
        text, starts = flattened(path.read_text(errors="replace"), rel.endswith(".md"))
        for m in CITATION.finditer(text):
            name, anchor = m.group(1), m.group(2)
            title = m.group(3) or m.group(4) or m.group(5)
            where = f"references: {rel}:{line_of(starts, m.start())}: {m.group(0).strip()}"
            dests = resolve_citation(root, path, name, tracked)
            if not dests:
                problems.append(f"{where}: no such file")
                continue
            if anchor and not any(anchor in anchors_of(d) for d in dests):
                problems.append(f"{where}: no heading with anchor #{anchor}")
            if title:
                wanted = normal_title(title)
                if not any(wanted in heading_titles(d) for d in dests):
                    problems.append(f"{where}: no heading \"{title.strip()}\"")
    return problems


# ---------------------------------------------------------------------------
# Check 5: the names of ARCHITECTURE.md's code map


CODE_MAP_DOC = "ARCHITECTURE.md"
# Where a module path starts: the crates' source folders, webhook-core's first.
CRATE_SOURCES = ["shared/src", "local/src", "receiver/src", "testkit/src", "bench/src"]
DEFINITION = r"(?:\bfn|\bstruct|\benum|\btrait|\bconst|\bstatic|\btype|\bmod|\bmacro_rules!)\s+{name}\b|^\s*(?:pub(?:\([^)]*\))?\s+)?{name}\s*(?:[,({{:]|$)"
CODE_NAME = re.compile(r"^[A-Za-z_][\w]*(?:::(?:[A-Za-z_]\w*|\{[\w\s,]+\}))+(?:\(.*\))?$")
FILE_NAME = re.compile(r"^(?:[\w.-]+/)*[\w-]+\.rs$|^(?:[\w.-]+/)+$")


def tracked_paths(root):
    """Every tracked (or new) file of the tree, and every folder holding one."""
    files = tree_files(root)
    folders = {str(Path(f).parent) + "/" for f in files}
    for f in list(folders):
        parts = f.rstrip("/").split("/")
        folders.update("/".join(parts[:i]) + "/" for i in range(1, len(parts)))
    return files, folders


def rust_files_under(root, module):
    """A module's files: `x.rs` and everything under `x/` (its submodules, re-exported names)."""
    files = []
    if module.suffix == ".rs" and module.is_file():
        files.append(module)
        folder = module.with_suffix("")
    else:
        folder = module
    if folder.is_dir():
        files += sorted(folder.rglob("*.rs"))
    return files


def defines(files, name, cache={}):
    pattern = re.compile(DEFINITION.format(name=re.escape(name)), re.M)
    for f in files:
        if f not in cache:
            cache[f] = f.read_text(errors="replace")
        # The substring test first: most files do not name it, and the pattern is slow.
        if name in cache[f] and pattern.search(cache[f]):
            return True
    return False


def resolve_module_path(root, segments):
    """None when `a::b::c` names something that exists, else why not."""
    *path, last = segments
    names = [n.strip() for n in last.strip("{}").split(",")] if last.startswith("{") else [last]
    if not path:
        return None
    for src in CRATE_SOURCES:
        module = None
        base = root / src
        for i, seg in enumerate(path):
            for candidate in (base / f"{seg}.rs", base / seg):
                if candidate.exists():
                    module, base = candidate, base / seg
                    break
            else:
                break
        else:
            i = len(path)
        if module is None:
            continue
        # The rest of the path names items (a type, then its item) inside the module.
        files = rust_files_under(root, module)
        missing = [n for n in path[i:] + names if not defines(files, n)]
        if not missing:
            return None
        return f"{', '.join(missing)} is not defined under {module.relative_to(root).as_posix()}"
    head = path[0]
    if head[:1].isupper():
        # A type: its item is defined beside it (in its file or folder).
        homes = [f for src in CRATE_SOURCES for f in sorted((root / src).rglob("*.rs"))
                 if defines([f], head)]
        if not homes:
            return f"no type {head}"
        for home in homes:
            files = rust_files_under(root, home.parent)
            if all(defines(files, n) for n in path[1:] + names):
                return None
        return f"{', '.join(path[1:] + names)} is not defined beside {head}"
    return f"no module {head} in {', '.join(CRATE_SOURCES)}"


def check_code_map(root):
    problems = []
    doc = root / CODE_MAP_DOC
    files, folders = tracked_paths(root)
    text = strip_code(doc.read_text(), spans=False)
    for n, line in enumerate(text.split("\n"), 1):
        for name in re.findall(r"`([^`]+)`", line):
            where = f"code map: {CODE_MAP_DOC}:{n}: `{name}`"
            if FILE_NAME.match(name):
                suffix = name if name.endswith("/") else name
                pool = folders if name.endswith("/") else files
                if not any(p == suffix or p.endswith("/" + suffix) for p in pool):
                    problems.append(f"{where}: no such file or folder")
            elif CODE_NAME.match(name):
                segments = re.split(r"::(?![^{]*\})", re.sub(r"\(.*\)$", "", name))
                why = resolve_module_path(root, segments)
                if why:
                    problems.append(f"{where}: {why}")
    return problems


# ---------------------------------------------------------------------------


def check(root):
    root = Path(root).resolve()
    sources = rust_sources(root)
    return (
        check_links(root)
        + check_config(root, sources)
        + check_functions(root)
        + check_references(root)
        + check_code_map(root)
    )


def self_test(root):
    """Every check must report a mismatch planted in a copy of the tree."""
    root = Path(root).resolve()
    work = Path(tempfile.mkdtemp(prefix="check-docs-"))
    pristine = work / "pristine"
    try:
        files = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=root, capture_output=True, check=True,
        ).stdout.decode().split("\0")
        for rel in filter(None, files):
            if (root / rel).is_file():
                (pristine / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / rel, pristine / rel)
        baseline = check(pristine)
        if baseline:
            print("self-test: the unchanged copy already has problems:", *baseline, sep="\n  ")
            return 1

        def edit(rel, change):
            return lambda tree: (tree / rel).write_text(change((tree / rel).read_text()))

        def add_file(rel, text):
            def plant(tree):
                (tree / rel).parent.mkdir(parents=True, exist_ok=True)
                (tree / rel).write_text(text)
            return plant

        wrong_default = re.compile(r"(\|\s*`WEBHOOKS_DELIVERY_CONCURRENCY`\s*\|\s*)`512`")
        cases = [
            ("a broken link", edit("README.md", lambda t: t + "\n[gone](docs/no-such-page.md)\n"),
             "links: README.md:", "no such file"),
            ("a broken anchor",
             edit("docs/api.md", lambda t: t + "\n[gone](configuration.md#no-such-heading)\n"),
             "links: docs/api.md:", "no heading with anchor #no-such-heading"),
            ("an undocumented variable",
             edit("shared/src/config.rs", lambda t: t.replace(
                 "impl Config {",
                 "const _PLANTED: &str = \"WEBHOOKS_PLANTED_UNDOCUMENTED\";\nimpl Config {", 1)),
             "config: WEBHOOKS_PLANTED_UNDOCUMENTED is read", "but not in docs/configuration.md"),
            ("a documented variable nothing reads",
             edit(CONFIG_DOC, lambda t: t.replace(
                 "| `WEBHOOKS_DELIVERY_CONCURRENCY` |",
                 "| `WEBHOOKS_PLANTED_UNREAD` | `1` | planted |\n| `WEBHOOKS_DELIVERY_CONCURRENCY` |", 1)),
             "WEBHOOKS_PLANTED_UNREAD is documented", "but nothing reads it"),
            ("a wrong default",
             edit(CONFIG_DOC, lambda t: wrong_default.sub(r"\g<1>`513`", t, 1)),
             "WEBHOOKS_DELIVERY_CONCURRENCY: documented default int:513", "the code's is int:512"),
            ("a function missing from the template",
             edit(FUNCTION_TABLE, lambda t: t.replace(
                 '    Console = "console",', '    Console = "console",\n    Planted = "planted-function",', 1)),
             "functions: planted-function of", "is no function of template.yaml"),
            ("a function of the template the binary does not know",
             edit("template.yaml", lambda t: t.replace(
                 "WEBHOOKS_FUNCTION: remind-expiring", "WEBHOOKS_FUNCTION: remind-expiring-planted", 1)),
             "functions: template.yaml's WEBHOOKS_FUNCTION: remind-expiring-planted", ""),
            ("a function built from another binary",
             edit("template.yaml", lambda t: t.replace("Binary: webhooks-lambda", "Binary: planted-bin", 1)),
             "functions: template.yaml builds planted-bin", ""),
            ("the binary missing from the size table",
             edit(SIZES_DOC, lambda t: re.sub(r"^\| `?webhooks-lambda`? \|.*\n", "", t, count=1, flags=re.M)),
             "functions: webhooks-lambda has no row in the size table", ""),
            ("a code comment citing a heading that does not exist, over two lines",
             edit("shared/src/clock.rs", lambda t: "//! Planted (ARCHITECTURE.md, \"No such\n//! heading\").\n" + t),
             "references: shared/src/clock.rs:1: ARCHITECTURE.md", "no heading \"No such heading\""),
            ("a script citing a document that does not exist",
             edit("scripts/bench.sh", lambda t: t + "# planted: see docs/no-such-page.md\n"),
             "references: scripts/bench.sh:", "docs/no-such-page.md: no such file"),
            ("a template comment citing an anchor that does not exist",
             edit("template.yaml", lambda t: t + "# planted: docs/cost.md#no-such-anchor\n"),
             "references: template.yaml:", "no heading with anchor #no-such-anchor"),
            ("a code map naming a module that does not exist",
             edit(CODE_MAP_DOC, lambda t: t.replace("`delivery::deliver`", "`deliveries::deliver`", 1)),
             "code map: ARCHITECTURE.md:", "`deliveries::deliver`: no module deliveries"),
            ("a code map naming a function its module does not define",
             edit(CODE_MAP_DOC, lambda t: t.replace("`delivery::deliver`", "`delivery::deliver_all`", 1)),
             "code map: ARCHITECTURE.md:", "deliver_all is not defined under shared/src/delivery"),
            ("a code map naming a file that does not exist",
             edit(CODE_MAP_DOC, lambda t: t.replace("`admit.rs`", "`admission.rs`", 1)),
             "code map: ARCHITECTURE.md:", "`admission.rs`: no such file or folder"),
            ("a document citing another's section that does not exist",
             edit(API_DOC, lambda t: t + "\nPlanted: BENCHMARKS.md, *Nothing here*.\n"),
             "references: docs/api.md:", "no heading \"Nothing here\""),
        ]
        trees = []
        for i, (_, plant, *_) in enumerate(cases):
            tree = work / f"case{i}"
            shutil.copytree(pristine, tree)
            plant(tree)
            trees.append(tree)
        # The planted copies are checked side by side, one per core.
        with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            found = list(pool.map(check, trees))
        failed = 0
        for (name, _, *expected), problems in zip(cases, found):
            hit = [p for p in problems if all(e in p for e in expected)]
            if hit:
                print(f"self-test: {name}: reported ({hit[0]})")
            else:
                failed += 1
                print(f"self-test: {name}: NOT reported; the check said:", *problems or ["nothing"], sep="\n  ")
        if failed:
            return 1
        print(f"self-test: all {len(cases)} planted mismatches reported")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv):
    root = Path(__file__).resolve().parent.parent
    if argv[1:] == ["--self-test"]:
        return self_test(root)
    if argv[1:]:
        print(__doc__)
        return 2
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check-docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("check-docs: links, configuration, functions, references and the code map agree with the code")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
