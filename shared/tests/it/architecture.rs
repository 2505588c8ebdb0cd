//! The layers of the code, checked on the source. Every module of
//! `shared/src` (each folder, or file at its root), the `webhooks-local`
//! binary (`local/src`) and the Lambda functions (`functions/`) stands in
//! one layer of [`LAYERS`], and:
//!
//! - a module imports only from its own layer and the layers below it;
//! - no two modules, and no two of those folders, import each other,
//!   directly or through others (a cycle between folders, such as
//!   `store/` -> `delivery/` -> `store/`, is one even when no two files are);
//! - the adapters ([`ADAPTERS`]) are named only by themselves and by the
//!   modules that build or wrap them ([`ADAPTER_USERS`]): a runtime reaches
//!   them through `services`;
//! - inside `delivery/`, the pipeline reads top to bottom: a step
//!   ([`DELIVERY_STEPS`], in the order `deliver` calls them) imports no
//!   step above it, what the steps share imports no step, and nothing
//!   imports their orchestrator, `delivery/mod.rs`.
//!
//! The size alarm, over every Rust file of the workspace, is `file_size.rs`.
//!
//! Imports are `use`, `pub use` and qualified paths (`crate::`, `super::`,
//! `self::`, `webhook_core::`, brace lists too); a module's own `mod`
//! declarations, comments (doc links) and `#[cfg(test)]` modules are not.
//! The check runs on an in-memory copy of the sources, so the self-tests
//! below can plant a bad import in it and see it reported.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One layer: its name, what it holds, and its modules (the first
/// component of a module path: a folder or a file of `shared/src`, or
/// `local` / `functions` for the runtimes).
struct Layer {
    name: &'static str,
    holds: &'static str,
    modules: &'static [&'static str],
}

/// The layers, lowest first: a module may import from its own layer (when
/// that makes no cycle) and from every layer before it.
const LAYERS: &[Layer] = &[
    Layer {
        name: "foundation",
        holds: "vocabulary every layer shares: ids, wire types, the clock, the API's error type, \
                why a call failed, secrets and signatures, the filter grammars, paging, call bounds \
                and the request's deadline, notification payloads, metrics and traces (handed labels)",
        modules: &[
            "ids",
            "model",
            "clock",
            "error",
            "failure",
            "secret",
            "signature",
            "filter",
            "payload_filter",
            "custom_headers",
            "page",
            "call_bounds",
            "deadline",
            "notification",
            "telemetry",
        ],
    },
    Layer {
        name: "domain",
        holds: "state and rules with no port: a subscription's health (breaker, failure streak, \
                calls in flight), the typed configuration, callers and their credentials, a \
                subscription's retry schedule",
        modules: &["health", "config", "auth", "retry_schedule"],
    },
    Layer {
        name: "ports",
        holds: "the traits adapters implement and their types (store with its business rules, \
                delivery queue and outbox, delivery history, AWS destinations) and the outbound \
                calls to callbacks",
        modules: &["store", "queue", "history", "destinations", "callback"],
    },
    Layer {
        name: "app",
        holds: "what every handler and worker is given: configuration, ports, callbacks, clock",
        modules: &["app"],
    },
    Layer {
        name: "use cases",
        holds: "what the service does: the API's handlers, ingestion, the delivery pipeline, \
                operational notices and reminders, retention",
        modules: &[
            "api",
            "ingest",
            "delivery",
            "notice",
            "reminders",
            "retention",
        ],
    },
    Layer {
        name: "adapters",
        holds: "the ports on SQLite, and on DynamoDB and SQS",
        modules: &["sqlite", "aws"],
    },
    Layer {
        name: "assembly",
        holds: "builds the adapters of a backend and the App, for every runtime",
        modules: &["services"],
    },
    Layer {
        name: "edges",
        holds: "the service's faces: the endpoint table, HTTP dispatch and rendering, the web \
                console, the Lambda events",
        modules: &["routes", "list_json", "http", "console", "lambda"],
    },
    Layer {
        name: "runtimes",
        holds: "the binaries: webhooks-local and the Lambda functions' (webhooks-lambda)",
        modules: &["local", "functions"],
    },
];

/// The adapters: named only by themselves and by [`ADAPTER_USERS`].
const ADAPTERS: &[&str] = &["sqlite", "aws"];

/// What may name an adapter: `services` builds them; `lambda` is the AWS
/// runtime's face, whose events are SQS's and API Gateway's.
const ADAPTER_USERS: &[&str] = &["services", "lambda"];

/// The steps of `delivery::deliver`, each a file of `delivery/`, in the
/// order it calls them (its doc comment numbers them so). A step may import
/// the steps below it and the folder's other files, what the steps share;
/// those import no step; and no file of the folder imports `mod.rs` (the
/// orchestrator: `deliver`, or a name it re-exports).
const DELIVERY_STEPS: &[&str] = &[
    "admit", "prepare", "gate", "post", "record", "decide", "parking", "settle", "tell",
];

/// A module path: `["delivery", "admit"]`, `["local", "serve"]`,
/// `["functions"]` (its `main.rs`); a folder's `mod.rs` is the folder.
type Module = Vec<String>;

/// The sources, in memory: each module with its text.
#[derive(Clone)]
struct Tree {
    files: BTreeMap<Module, String>,
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `sqlite/queue.rs` under `root` → `prefix + ["sqlite", "queue"]`;
/// `mod.rs`, `lib.rs` and `main.rs` stand for their folder.
fn module_of(prefix: &[&str], root: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Module = prefix.iter().map(|p| p.to_string()).collect();
    parts.extend(
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

impl Tree {
    /// Every source of `shared/src`, `local/src` and `functions/src`;
    /// unit-test files (`tests.rs`) are tests, not modules.
    fn read() -> Tree {
        let mut files = BTreeMap::new();
        let mut add = |prefix: &[&str], root: &Path| {
            let mut found = Vec::new();
            rust_files(root, &mut found);
            for file in found {
                if file.file_name().is_some_and(|n| n == "tests.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&file).unwrap();
                files.insert(module_of(prefix, root, &file), text);
            }
        };
        let ws = workspace();
        add(&[], &ws.join("shared/src"));
        add(&["local"], &ws.join("local/src"));
        add(&["functions"], &ws.join("functions/src"));
        Tree { files }
    }

    /// The same tree with `line` added to the module `module`.
    fn with_line(&self, module: &[&str], line: &str) -> Tree {
        let mut tree = self.clone();
        let key: Module = module.iter().map(|m| m.to_string()).collect();
        let text = tree.files.get_mut(&key).expect("a module of the tree");
        text.insert_str(0, &format!("{line}\n"));
        tree
    }
}

/// The crate a module belongs to: `shared` (webhook-core), `local`, or the Lambda binary.
fn crate_of(module: &[String]) -> Module {
    match module.first().map(String::as_str) {
        Some("local") | Some("functions") => module[..1].to_vec(),
        _ => Vec::new(),
    }
}

/// The layer's module a module is part of: its first component.
fn unit_of(module: &[String]) -> &str {
    module.first().map_or("", String::as_str)
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

fn ident_len(s: &str) -> usize {
    s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len())
}

/// The paths of a use tree or qualified path starting at `s` (after its
/// prefix): `a::b::{c, d::{e, f}}` gives `a::b::c`, `a::b::d::e`,
/// `a::b::d::f`; a leading `super::` steps up from `base`.
fn use_paths(s: &str, base: &Module, out: &mut Vec<Module>) -> usize {
    let mut path = base.clone();
    let mut at = 0;
    loop {
        let rest = &s[at..];
        if let Some(r) = rest.strip_prefix("super::") {
            path.pop();
            at += rest.len() - r.len();
            continue;
        }
        if rest.starts_with('{') {
            at += 1;
            loop {
                let inner = s[at..].trim_start();
                at = s.len() - inner.len();
                if let Some(r) = inner.strip_prefix('}') {
                    at = s.len() - r.len();
                    return at;
                }
                if let Some(r) = inner.strip_prefix(',') {
                    at = s.len() - r.len();
                    continue;
                }
                let used = use_paths(&s[at..], &path, out);
                if used == 0 {
                    return at; // not a use tree after all
                }
                at += used;
            }
        }
        if rest.starts_with('*') {
            at += 1; // a glob: the path up to it
            break;
        }
        let len = ident_len(rest);
        if len == 0 {
            if at == 0 {
                return 0; // no path here
            }
            break;
        }
        if &rest[..len] != "self" {
            path.push(rest[..len].to_owned());
        }
        at += len;
        match s[at..].strip_prefix("::") {
            Some(_) => at += 2,
            None => break,
        }
    }
    out.push(path);
    at
}

/// Root re-exports of webhook-core (`pub use config::{Config, Profile};`
/// in lib.rs): the name and the module it comes from.
fn root_exports(tree: &Tree) -> BTreeMap<String, Module> {
    let mut exports = BTreeMap::new();
    let lib = &tree.files[&Module::new()];
    for line in code_without_tests(lib).lines() {
        if let Some(rest) = line.trim().strip_prefix("pub use ") {
            let mut paths = Vec::new();
            use_paths(rest, &Module::new(), &mut paths);
            for path in paths {
                if let (Some(module), Some(name)) = (path.first(), path.last()) {
                    exports.insert(name.clone(), vec![module.clone()]);
                }
            }
        }
    }
    exports
}

/// Every module `module` imports.
fn imports(tree: &Tree, module: &Module, exports: &BTreeMap<String, Module>) -> BTreeSet<Module> {
    let own = crate_of(module);
    named_modules(tree, module, exports)
        .into_iter()
        .filter(|path| !path.is_empty() && *path != own && !module.starts_with(path))
        .collect()
}

/// Every module a path of `module` names, its own folders and crate root
/// too (a name a folder's `mod.rs` defines or re-exports is that folder's).
fn named_modules(tree: &Tree, module: &Module, exports: &BTreeMap<String, Module>) -> Vec<Module> {
    let code = code_without_tests(&tree.files[module]);
    let own = crate_of(module);
    let mut found = Vec::new();
    for prefix in ["crate::", "super::", "self::", "webhook_core::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(prefix) {
            let i = from + i;
            from = i + prefix.len();
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let (base, rest) = match prefix {
                "crate::" => (own.clone(), &code[from..]),
                "webhook_core::" => (Module::new(), &code[from..]),
                "self::" => (module.clone(), &code[from..]),
                _ => (module.clone(), &code[i..]), // `super::` is stepped by use_paths
            };
            let mut paths = Vec::new();
            use_paths(rest, &base, &mut paths);
            for mut path in paths {
                // A root re-export (`webhook_core::Config`) is its module's.
                if path.len() == 1 {
                    if let Some(m) = exports.get(&path[0]) {
                        path = m.clone();
                    }
                }
                while !path.is_empty() && !tree.files.contains_key(&path) {
                    path.pop();
                }
                found.push(path);
            }
        }
    }
    found
}

/// What breaks the order of `delivery/`'s steps ([`DELIVERY_STEPS`]), one
/// line each; and a doc comment of `delivery/mod.rs` that numbers them
/// otherwise.
fn delivery_order(tree: &Tree, exports: &BTreeMap<String, Module>) -> Vec<String> {
    let mut wrong = Vec::new();
    let folder: Module = vec!["delivery".to_owned()];
    let step = |name: &str| DELIVERY_STEPS.iter().position(|s| *s == name);
    for (module, _) in tree.files.range(folder.clone()..) {
        if !module.starts_with(&folder) {
            break;
        }
        let Some(name) = module.get(1) else {
            continue; // mod.rs, the orchestrator
        };
        let named: BTreeSet<Module> = named_modules(tree, module, exports).into_iter().collect();
        for path in named {
            if !path.starts_with(&folder) || path.get(1) == Some(name) {
                continue;
            }
            let Some(to) = path.get(1) else {
                wrong.push(format!(
                    "delivery::{name} imports its orchestrator, delivery/mod.rs"
                ));
                continue;
            };
            match (step(name), step(to)) {
                (Some(a), Some(b)) if b < a => wrong.push(format!(
                    "delivery::{name} (step {}) imports delivery::{to}, a step above it (step {})",
                    a + 1,
                    b + 1
                )),
                (None, Some(b)) => wrong.push(format!(
                    "delivery::{name}, shared by the steps, imports delivery::{to} (step {})",
                    b + 1
                )),
                _ => {}
            }
        }
    }
    // `//! 1. [`admit`]: ...`: the numbered list of mod.rs's doc comment.
    let numbered: Vec<&str> = tree.files[&folder]
        .lines()
        .filter_map(|line| line.strip_prefix("//! "))
        .filter_map(|line| {
            let (number, rest) = line.split_once(". [`")?;
            number.parse::<usize>().ok()?;
            rest.split_once('`').map(|(name, _)| name)
        })
        .collect();
    if numbered != DELIVERY_STEPS {
        wrong.push(format!(
            "delivery/mod.rs numbers its steps {numbered:?}, not {DELIVERY_STEPS:?}"
        ));
    }
    for name in DELIVERY_STEPS {
        if !tree
            .files
            .contains_key(&vec!["delivery".to_owned(), name.to_string()])
        {
            wrong.push(format!("the step delivery::{name} is no file of delivery/"));
        }
    }
    wrong
}

/// A cycle in `graph`, as its nodes in order, if there is one.
fn cycle<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Option<Vec<N>> {
    for start in graph.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((node, trail)) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if next == start {
                    let mut names = trail.clone();
                    names.push(next.clone());
                    return Some(names);
                }
                if seen.insert(next.clone()) {
                    let mut t = trail.clone();
                    t.push(next.clone());
                    stack.push((next.clone(), t));
                }
            }
        }
    }
    None
}

/// The table as markdown (ARCHITECTURE.md shows the same), lowest layer last.
fn table() -> String {
    let mut out = String::from("| layer | modules | holds |\n|---|---|---|\n");
    for layer in LAYERS.iter().rev() {
        let modules: Vec<String> = layer.modules.iter().map(|m| format!("`{m}`")).collect();
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            layer.name,
            modules.join(", "),
            layer.holds
        ));
    }
    out
}

fn layer_of(unit: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.modules.contains(&unit))
}

/// What is wrong with `tree`, one line each; empty when it keeps the table.
fn check(tree: &Tree) -> Vec<String> {
    let mut wrong = Vec::new();
    let exports = root_exports(tree);
    // Every module in one layer, and the table naming only modules there are.
    let units: BTreeSet<&str> = tree
        .files
        .keys()
        .filter(|m| !m.is_empty())
        .map(|m| unit_of(m))
        .collect();
    for unit in &units {
        let placed = LAYERS.iter().filter(|l| l.modules.contains(unit)).count();
        if placed != 1 {
            wrong.push(format!(
                "`{unit}` is in {placed} layers of the table, not one; the layers:\n{}",
                table()
            ));
        }
    }
    for layer in LAYERS {
        for unit in layer.modules {
            if !units.contains(unit) {
                wrong.push(format!(
                    "the table's `{unit}` ({}) is no module",
                    layer.name
                ));
            }
        }
    }
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    let mut folders: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for module in tree.files.keys() {
        let from = unit_of(module);
        for to in imports(tree, module, &exports) {
            let into = unit_of(&to).to_owned();
            if into != from && !module.is_empty() {
                folders
                    .entry(from.to_owned())
                    .or_default()
                    .insert(into.clone());
                if let (Some(a), Some(b)) = (layer_of(from), layer_of(&into)) {
                    if b > a {
                        wrong.push(format!(
                            "upward import: {} ({}) -> {} ({})",
                            module.join("::"),
                            LAYERS[a].name,
                            to.join("::"),
                            LAYERS[b].name
                        ));
                    }
                }
                if ADAPTERS.contains(&into.as_str()) && !ADAPTER_USERS.contains(&from) {
                    wrong.push(format!(
                        "{} names the adapter {}: only {ADAPTER_USERS:?} may",
                        module.join("::"),
                        to.join("::")
                    ));
                }
            }
            graph.entry(module.clone()).or_default().insert(to);
        }
    }
    if let Some(c) = cycle(&graph) {
        let names: Vec<String> = c.iter().map(|m| m.join("::")).collect();
        wrong.push(format!(
            "import cycle between modules: {}",
            names.join(" -> ")
        ));
    }
    if let Some(c) = cycle(&folders) {
        wrong.push(format!("import cycle between folders: {}", c.join(" -> ")));
    }
    wrong.extend(delivery_order(tree, &exports));
    let edges: usize = graph.values().map(BTreeSet::len).sum();
    if graph.len() < 60 || edges < 200 {
        wrong.push(format!(
            "the scan found too little to mean anything: {} modules, {edges} imports",
            graph.len()
        ));
    }
    wrong
}

#[test]
fn every_import_runs_down_the_layer_table_and_none_makes_a_cycle() {
    let wrong = check(&Tree::read());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_planted_upward_import_is_reported() {
    let tree = Tree::read();
    let wrong = check(&tree.with_line(&["store"], "use crate::http::serve;"));
    assert!(
        wrong
            .iter()
            .any(|w| w == "upward import: store (ports) -> http (edges)"),
        "{wrong:?}"
    );
    // In a brace list, through `super::`, and from a runtime, too.
    let wrong = check(&tree.with_line(&["health", "cache"], "use super::super::{ids, app::App};"));
    assert!(
        wrong
            .iter()
            .any(|w| w == "upward import: health::cache (domain) -> app (app)"),
        "{wrong:?}"
    );
    let wrong = check(&tree.with_line(&["queue"], "fn f(v: crate::delivery::Verdict) {}"));
    assert!(
        wrong
            .iter()
            .any(|w| w == "upward import: queue (ports) -> delivery (use cases)"),
        "{wrong:?}"
    );
}

#[test]
fn a_planted_cycle_between_folders_is_reported() {
    // `queue` imports `store`; `store/order.rs` importing `queue` makes no
    // cycle between two files, but one between the two folders.
    let tree = Tree::read().with_line(&["store", "order"], "use crate::queue::Lease;");
    let wrong = check(&tree);
    assert!(
        wrong
            .iter()
            .any(|w| w.starts_with("import cycle between folders:")
                && w.contains("queue")
                && w.contains("store")),
        "{wrong:?}"
    );
}

#[test]
fn a_delivery_step_importing_its_orchestrator_or_a_step_above_it_is_reported() {
    let tree = Tree::read();
    let has = |wrong: &[String], line: &str| wrong.iter().any(|w| w == line);
    // `deliver` itself, or a name mod.rs re-exports, is the orchestrator.
    let wrong = check(&tree.with_line(&["delivery", "settle"], "use super::deliver;"));
    let line = "delivery::settle imports its orchestrator, delivery/mod.rs";
    assert!(has(&wrong, line), "{wrong:?}");
    let wrong = check(&tree.with_line(
        &["delivery", "gate"],
        "fn f(v: crate::delivery::Verdict) {}",
    ));
    let line = "delivery::gate imports its orchestrator, delivery/mod.rs";
    assert!(has(&wrong, line), "{wrong:?}");
    let wrong = check(&tree.with_line(&["delivery", "tell"], "use super::admit::admit;"));
    let line = "delivery::tell (step 9) imports delivery::admit, a step above it (step 1)";
    assert!(has(&wrong, line), "{wrong:?}");
    let wrong = check(&tree.with_line(&["delivery", "run"], "use super::{gate::Gated, found};"));
    let line = "delivery::run, shared by the steps, imports delivery::gate (step 3)";
    assert!(has(&wrong, line), "{wrong:?}");
    // A step below, or what the steps share, is fine.
    let wrong = check(&tree.with_line(&["delivery", "admit"], "use super::{settle, run::Run};"));
    assert!(wrong.is_empty(), "{wrong:?}");
    // The doc comment's numbering is the rule's.
    let mut swapped = tree.clone();
    let text = swapped.files.get_mut(&vec!["delivery".to_owned()]).unwrap();
    *text = text.replacen("//! 1. [`admit`]", "//! 1. [`prepare`]", 1);
    let wrong = check(&swapped);
    assert!(
        wrong
            .iter()
            .any(|w| w.starts_with("delivery/mod.rs numbers its steps")),
        "{wrong:?}"
    );
}

#[test]
fn a_runtime_naming_an_adapter_is_reported() {
    let tree = Tree::read().with_line(
        &["local", "serve"],
        "use webhook_core::aws::dynamodb::Tables;",
    );
    let wrong = check(&tree);
    assert!(
        wrong
            .iter()
            .any(|w| w.starts_with("local::serve names the adapter aws::dynamodb")),
        "{wrong:?}"
    );
}

#[test]
fn use_trees_are_read_whole() {
    let mut paths = Vec::new();
    let base = vec!["m".to_owned(), "n".to_owned()];
    use_paths("a::{b, c::{d, self}, e::*};", &base, &mut paths);
    use_paths("super::super::x::y(1)", &base, &mut paths);
    let paths: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        paths,
        [
            "m::n::a::b",
            "m::n::a::c::d",
            "m::n::a::c",
            "m::n::a::e",
            "x::y"
        ]
    );
}
