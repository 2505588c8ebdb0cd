//! Sizes of the Lambda binary (every function's): the native release build
//! (the release profile strips symbols) and, when `cargo lambda build
//! --release --arm64 --output-format zip` has run, its arm64 `bootstrap.zip`.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::report::{left, right, Section, Table, Target};

/// The function binaries: the one every function runs (`functions/`).
pub fn functions() -> Vec<String> {
    vec![crate::lambda::LAMBDA_BINARY.to_owned()]
}

#[derive(Debug, Clone, Serialize)]
pub struct SizeRow {
    pub binary: String,
    pub native_bytes: Option<u64>,
    /// Whether the native binary has no symbol table (`.symtab`).
    pub native_stripped: Option<bool>,
    pub arm64_zip_bytes: Option<u64>,
    pub arm64_zip: Option<String>,
}

/// An ELF file without a `.symtab` section is stripped.
fn stripped(path: &Path) -> Option<bool> {
    let data = std::fs::read(path).ok()?;
    if data.len() < 64 || &data[..4] != b"\x7fELF" || data[4] != 2 {
        return None;
    }
    let u16_at = |o: usize| u16::from_le_bytes([data[o], data[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(data[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(data[o..o + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c));
    let shstrndx = u16_at(0x3e);
    let section = |i: usize| shoff + i * shentsize;
    if section(shnum) > data.len() {
        return None;
    }
    let strtab = u64_at(section(shstrndx) + 0x18);
    for i in 0..shnum {
        let name_off = strtab + u32_at(section(i));
        let name = data.get(name_off..)?.split(|b| *b == 0).next()?;
        if name == b".symtab" {
            return Some(false);
        }
    }
    Some(true)
}

/// Where `cargo lambda build` leaves its zips: `target/lambda/<fn>/bootstrap.zip`
/// (or `$CARGO_TARGET_DIR/lambda`, or the `--lambda-dir` given).
fn zip_for(lambda_dir: &[PathBuf], function: &str) -> Option<PathBuf> {
    lambda_dir
        .iter()
        .map(|d| d.join(function).join("bootstrap.zip"))
        .find(|p| p.exists())
}

/// The Lambda binaries from `lambda_bin_dir` (built as deployed),
/// `webhooks-local` from `bin_dir`.
pub fn run(bin_dir: &Path, lambda_bin_dir: &Path, lambda_dirs: &[PathBuf]) -> Vec<SizeRow> {
    let mut rows = Vec::new();
    let lambda = functions()
        .into_iter()
        .chain([crate::lambda::NOOP.to_owned()])
        .map(|name| (lambda_bin_dir, name));
    for (dir, name) in lambda.chain([(bin_dir, "webhooks-local".to_owned())]) {
        let native = dir.join(&name);
        let zip = zip_for(lambda_dirs, &name);
        rows.push(SizeRow {
            binary: name,
            native_bytes: std::fs::metadata(&native).ok().map(|m| m.len()),
            native_stripped: stripped(&native),
            arm64_zip_bytes: zip
                .as_ref()
                .and_then(|z| std::fs::metadata(z).ok())
                .map(|m| m.len()),
            arm64_zip: zip.map(|z| z.display().to_string()),
        });
    }
    for r in &rows {
        let mib = |b: Option<u64>| {
            b.map_or("-".to_owned(), |b| {
                format!("{:.2} MiB", b as f64 / 1048576.0)
            })
        };
        println!(
            "  {:<26} native {:>10}{}  arm64 zip {:>10}",
            r.binary,
            mib(r.native_bytes),
            match r.native_stripped {
                Some(true) => " (stripped)",
                Some(false) => " (symbols)",
                None => "",
            },
            mib(r.arm64_zip_bytes)
        );
    }
    rows
}

// ---------------------------------------------------------------------------
// Results: the zip target and the table.

/// Every function's arm64 zip within 5 MB (the largest one shown).
pub fn zip_target(rows: &[SizeRow]) -> Target {
    let functions = functions();
    let zips: Vec<&SizeRow> = rows
        .iter()
        .filter(|r| functions.contains(&r.binary))
        .collect();
    let with_zip: Vec<&SizeRow> = zips
        .iter()
        .copied()
        .filter(|r| r.arm64_zip_bytes.is_some())
        .collect();
    let Some(largest) = with_zip.iter().max_by_key(|r| r.arm64_zip_bytes) else {
        return Target::not_measured(
            "arm64 zip of each function",
            "≤ 5 MB (no bootstrap.zip found: run scripts/bench.sh --zips)",
        );
    };
    let missing = if with_zip.len() < zips.len() {
        format!("; {} of {} zips found", with_zip.len(), zips.len())
    } else {
        String::new()
    };
    Target {
        target: "arm64 zip of each function (largest)".into(),
        goal: "≤ 5 MB".into(),
        measured: format!(
            "{:.2} MB ({}){missing}",
            largest.arm64_zip_bytes.unwrap_or(0) as f64 / 1e6,
            largest.binary,
        ),
        met: Some(
            with_zip.len() == zips.len()
                && with_zip
                    .iter()
                    .all(|r| r.arm64_zip_bytes.unwrap_or(0) <= 5_000_000),
        ),
    }
}

/// One row per binary (no section when the suite did not run).
pub fn section(rows: &[SizeRow]) -> Option<Section> {
    if rows.is_empty() {
        return None;
    }
    let columns = [
        left("binary"),
        right("native x86_64 release"),
        right("arm64 bootstrap.zip"),
    ];
    Some(Section::table("Sizes", Table::of(columns, rows, row_cells)))
}

fn row_cells(r: &SizeRow) -> Vec<String> {
    let size = |b: Option<u64>| b.map_or("–".to_owned(), |b| format!("{:.2} MB", b as f64 / 1e6));
    let stripped = if r.native_stripped == Some(true) {
        " (stripped)"
    } else {
        ""
    };
    vec![
        r.binary.clone(),
        format!("{}{stripped}", size(r.native_bytes)),
        size(r.arm64_zip_bytes),
    ]
}
