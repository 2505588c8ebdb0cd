//! The shape ARCHITECTURE.md promises, checked on the source: no module of
//! `shared/src` is over about 500 lines, and no two modules import each
//! other, directly or through others (a module's own `mod` declarations are
//! not imports; `use`, `pub use` and qualified paths are).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 520;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `sqlite/queue.rs` → `["sqlite", "queue"]`; `sqlite/mod.rs`, `lib.rs` → its folder.
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code of a file without comments (doc links are no imports) and
/// without its `#[cfg(test)]` module (tests may reach anywhere).
fn code_without_tests(text: &str) -> String {
    let code = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |i| &text[..i]);
    code.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every module path this file refers to, resolved against the known modules.
fn references(
    module: &[String],
    code: &str,
    known: &BTreeSet<Vec<String>>,
) -> BTreeSet<Vec<String>> {
    let mut found = BTreeSet::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut at = 0;
        while let Some(i) = code[at..].find(start) {
            let i = at + i;
            at = i + start.len();
            if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
                continue;
            }
            // The path: identifiers joined by `::` (a `{` list counts by its prefix).
            let mut path: Vec<String> = match start {
                "crate::" => vec![],
                "super::" => module[..module.len().saturating_sub(1)].to_vec(),
                _ => module.to_vec(),
            };
            let mut rest = &code[at..];
            loop {
                while let Some(r) = rest.strip_prefix("super::") {
                    path.pop();
                    rest = r;
                }
                let len = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                if len == 0 {
                    break;
                }
                path.push(rest[..len].to_owned());
                rest = &rest[len..];
                match rest.strip_prefix("::") {
                    Some(r) => rest = r,
                    None => break,
                }
            }
            // The longest known module on the path.
            while !path.is_empty() && !known.contains(&path) {
                path.pop();
            }
            if !path.is_empty() && path != module && !module.starts_with(&path) {
                found.insert(path);
            }
        }
    }
    found
}

#[test]
fn modules_are_small_and_import_no_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let known: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&root, f)).collect();
    let mut too_long = Vec::new();
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines = text.lines().count();
        if lines > MAX_LINES {
            too_long.push(format!("{} ({lines} lines)", file.display()));
        }
        let module = module_of(&root, file);
        let refs = references(&module, &code_without_tests(&text), &known);
        graph.entry(module).or_default().extend(refs);
    }
    assert!(
        too_long.is_empty(),
        "modules over {MAX_LINES} lines: {too_long:?}"
    );
    assert!(
        graph.len() > 30 && graph.values().map(BTreeSet::len).sum::<usize>() > 60,
        "the scan found too little to mean anything: {graph:?}"
    );
    // A cycle is a path from a module back to itself; report the first found.
    for start in graph.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((node, trail)) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if next == start {
                    let names: Vec<String> =
                        trail.iter().chain([next]).map(|m| m.join("::")).collect();
                    panic!("import cycle: {}", names.join(" -> "));
                }
                if seen.insert(next.clone()) {
                    let mut t = trail.clone();
                    t.push(next.clone());
                    stack.push((next.clone(), t));
                }
            }
        }
    }
}

#[test]
fn the_scanner_sees_a_cycle_when_there_is_one() {
    let known: BTreeSet<Vec<String>> = [vec!["a".to_owned()], vec!["b".to_owned()]].into();
    let a = references(&["a".into()], "use crate::b::Thing;", &known);
    let b = references(&["b".into()], "fn f() { super::a::g() }", &known);
    assert_eq!(a, [vec!["b".to_owned()]].into());
    assert_eq!(b, [vec!["a".to_owned()]].into());
}
