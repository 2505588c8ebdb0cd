//! The report of a run: `results.md` (Markdown tables), `latency.svg` (a
//! latency chart) and `results.json` (the results as the suites produced them).
//!
//! This module knows no suite. Each suite describes its own results with the
//! small vocabulary here ([`Section`]s holding a [`Table`] or a list,
//! [`Target`]s, [`LatencyBars`]); `results.rs` collects them into a [`Report`].

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

/// A duration in microseconds, in the largest unit that keeps it ≥ 1.
pub fn fmt_us(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.2} s", us as f64 / 1e6)
    } else if us >= 1_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else {
        format!("{us} µs")
    }
}

/// A size in KiB, as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

// ---------------------------------------------------------------------------
// What the suites hand over.

/// How the cells of a column are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

#[derive(Debug, Clone, Copy)]
pub struct Column {
    heading: &'static str,
    align: Align,
}

/// A column whose cells are aligned left (names, text).
pub fn left(heading: &'static str) -> Column {
    Column {
        heading,
        align: Align::Left,
    }
}

/// A column whose cells are aligned right (figures).
pub fn right(heading: &'static str) -> Column {
    Column {
        heading,
        align: Align::Right,
    }
}

/// A table: its columns and rows of cells, formatted by the suite.
#[derive(Debug, Clone)]
pub struct Table {
    columns: Vec<Column>,
    /// `None`: a blank cell (as opposed to a cell holding an empty text).
    rows: Vec<Vec<Option<String>>>,
}

impl Table {
    pub fn new(columns: impl IntoIterator<Item = Column>) -> Table {
        Table {
            columns: columns.into_iter().collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row of one cell per column.
    pub fn row(&mut self, cells: impl IntoIterator<Item = String>) {
        self.row_with_blanks(cells.into_iter().map(Some));
    }

    /// Appends a row of one cell per column, `None` leaving a cell blank.
    pub fn row_with_blanks(&mut self, cells: impl IntoIterator<Item = Option<String>>) {
        let cells: Vec<Option<String>> = cells.into_iter().collect();
        debug_assert_eq!(cells.len(), self.columns.len(), "one cell per column");
        self.rows.push(cells);
    }

    /// A table with one row per item.
    pub fn of<T>(
        columns: impl IntoIterator<Item = Column>,
        items: impl IntoIterator<Item = T>,
        cells: impl Fn(T) -> Vec<String>,
    ) -> Table {
        let mut table = Table::new(columns);
        for item in items {
            table.row(cells(item));
        }
        table
    }

    fn write_markdown(&self, md: &mut String) {
        let headings: Vec<&str> = self.columns.iter().map(|c| c.heading).collect();
        let _ = writeln!(md, "| {} |", headings.join(" | "));
        let rule: String = self
            .columns
            .iter()
            .map(|c| match c.align {
                Align::Left => "---|",
                Align::Right => "---:|",
            })
            .collect();
        let _ = writeln!(md, "|{rule}");
        for row in &self.rows {
            md.push('|');
            for cell in row {
                match cell {
                    Some(text) => {
                        let _ = write!(md, " {text} |");
                    }
                    None => md.push_str(" |"),
                }
            }
            md.push('\n');
        }
    }
}

#[derive(Debug, Clone)]
enum Body {
    Table(Table),
    List(Vec<String>),
}

/// A part of `results.md`: a heading, maybe a paragraph, then a table or a list.
#[derive(Debug, Clone)]
pub struct Section {
    title: String,
    intro: Option<String>,
    body: Body,
}

impl Section {
    pub fn table(title: impl Into<String>, table: Table) -> Section {
        Section {
            title: title.into(),
            intro: None,
            body: Body::Table(table),
        }
    }

    pub fn list(title: impl Into<String>, items: Vec<String>) -> Section {
        Section {
            title: title.into(),
            intro: None,
            body: Body::List(items),
        }
    }

    /// The paragraph between the heading and the table.
    pub fn with_intro(mut self, intro: impl Into<String>) -> Section {
        self.intro = Some(intro.into());
        self
    }

    fn write_markdown(&self, md: &mut String) {
        let _ = write!(md, "### {}\n\n", self.title);
        if let Some(intro) = &self.intro {
            let _ = write!(md, "{intro}\n\n");
        }
        match &self.body {
            Body::Table(table) => table.write_markdown(md),
            Body::List(items) => {
                for item in items {
                    let _ = writeln!(md, "- {item}");
                }
            }
        }
        md.push('\n');
    }
}

/// A goal of the service, and whether this run met it.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub target: String,
    pub goal: String,
    pub measured: String,
    /// `None`: not measured in this run.
    pub met: Option<bool>,
}

impl Target {
    pub fn not_measured(target: &str, goal: &str) -> Target {
        Target {
            target: target.into(),
            goal: goal.into(),
            measured: "not measured in this run".into(),
            met: None,
        }
    }

    fn met_cell(&self) -> &'static str {
        match self.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "not measured",
        }
    }
}

/// The targets table (none when there are no targets).
pub fn targets_section(targets: &[Target]) -> Option<Section> {
    if targets.is_empty() {
        return None;
    }
    let columns = [left("target"), left("goal"), left("measured"), left("met")];
    let table = Table::of(columns, targets, |t| {
        vec![
            t.target.clone(),
            t.goal.clone(),
            t.measured.clone(),
            t.met_cell().to_owned(),
        ]
    });
    Some(Section::table("Targets", table))
}

/// The problems met during the run (none when there were none).
pub fn problems_section(problems: &[String]) -> Option<Section> {
    if problems.is_empty() {
        return None;
    }
    Some(Section::list("Problems during the run", problems.to_vec()))
}

/// One group of bars of the latency chart: p50, p90 and p99 in µs.
#[derive(Debug, Clone)]
pub struct LatencyBars {
    pub label: String,
    pub p50_p90_p99_us: [u64; 3],
}

impl LatencyBars {
    pub fn new(label: impl Into<String>, p50_p90_p99_us: [u64; 3]) -> LatencyBars {
        LatencyBars {
            label: label.into(),
            p50_p90_p99_us,
        }
    }
}

// ---------------------------------------------------------------------------
// The report itself.

/// What gets written: the first line of `results.md`, its sections in order,
/// and the rows of the latency chart.
#[derive(Debug, Clone)]
pub struct Report {
    pub preamble: String,
    pub sections: Vec<Section>,
    pub latency: Vec<LatencyBars>,
}

impl Report {
    pub fn markdown(&self) -> String {
        let mut md = format!("{}\n\n", self.preamble);
        for section in &self.sections {
            section.write_markdown(&mut md);
        }
        md
    }

    pub fn svg(&self) -> String {
        latency_svg(&self.latency)
    }

    /// Writes `results.json` (`results` serialized), `results.md` and `latency.svg` into `dir`.
    pub fn write(&self, dir: &Path, results: &impl Serialize) -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
        };
        write(
            "results.json",
            serde_json::to_string_pretty(results).map_err(|e| e.to_string())?,
        )?;
        write("results.md", self.markdown())?;
        write("latency.svg", self.svg())?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// The latency chart: horizontal bars of p50/p90/p99 per row, log scale.

const LABEL_W: f64 = 300.0;
const PLOT_W: f64 = 560.0;
const BAR_H: f64 = 7.0;
const GROUP_H: f64 = 3.0 * BAR_H + 10.0;
const TOP: f64 = 48.0;
const QUANTILES: [&str; 3] = ["p50", "p90", "p99"];
const COLORS: [&str; 3] = ["#4c78a8", "#f58518", "#e45756"];

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The horizontal axis: whole decades of µs, from 10^lo to 10^hi.
struct LogScale {
    lo: f64,
    hi: f64,
}

impl LogScale {
    /// The decades around every value of `rows`.
    fn fitting(rows: &[LatencyBars]) -> LogScale {
        let values = || rows.iter().flat_map(|r| r.p50_p90_p99_us.iter().copied());
        let max = values().max().unwrap_or(1000).max(10);
        let min = values().filter(|v| *v > 0).min().unwrap_or(10);
        let lo = (min as f64).log10().floor().max(0.0);
        let hi = (max as f64).log10().ceil().max(lo + 1.0);
        LogScale { lo, hi }
    }

    fn x(&self, us: u64) -> f64 {
        let (lo, hi) = (self.lo, self.hi);
        LABEL_W + PLOT_W * (((us.max(1) as f64).log10() - lo) / (hi - lo)).clamp(0.0, 1.0)
    }
}

/// A log-scale bar chart: one group of three bars (p50, p90, p99) per row.
pub fn latency_svg(rows: &[LatencyBars]) -> String {
    let scale = LogScale::fitting(rows);
    let axis_y = TOP + GROUP_H * rows.len() as f64;
    let mut svg = String::new();
    svg_start(&mut svg, axis_y + 40.0);
    legend(&mut svg);
    decade_grid(&mut svg, &scale, axis_y);
    for (i, row) in rows.iter().enumerate() {
        bar_group(&mut svg, &scale, TOP + GROUP_H * i as f64, row);
    }
    svg.push_str("</svg>\n");
    svg
}

fn svg_start(svg: &mut String, height: f64) {
    let width = LABEL_W + PLOT_W + 30.0;
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">webhooks-bench: latency (log scale)</text>"#
    );
}

fn legend(svg: &mut String) {
    for (i, name) in QUANTILES.iter().enumerate() {
        let lx = LABEL_W + i as f64 * 70.0;
        let _ = writeln!(
            svg,
            r#"<rect x="{lx}" y="28" width="12" height="10" fill="{}"/><text x="{}" y="37">{name}</text>"#,
            COLORS[i],
            lx + 16.0
        );
    }
}

/// A vertical line and a label at each decade of the scale.
fn decade_grid(svg: &mut String, scale: &LogScale, axis_y: f64) {
    for decade in (scale.lo as i32)..=(scale.hi as i32) {
        let us = 10u64.pow(decade as u32);
        let gx = scale.x(us);
        let _ = writeln!(
            svg,
            r##"<line x1="{gx:.1}" y1="{TOP}" x2="{gx:.1}" y2="{axis_y}" stroke="#ddd"/><text x="{gx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            axis_y + 16.0,
            escape(&fmt_us(us))
        );
    }
}

/// The label, the three bars and the p99 figure of one row, `gy` from the top.
fn bar_group(svg: &mut String, scale: &LogScale, gy: f64, row: &LatencyBars) {
    let label = escape(&row.label);
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"#,
        LABEL_W - 8.0,
        gy + 1.5 * BAR_H + 4.0,
    );
    for (j, v) in row.p50_p90_p99_us.iter().enumerate() {
        let y = gy + j as f64 * BAR_H;
        let w = (scale.x(*v) - LABEL_W).max(1.0);
        let _ = writeln!(
            svg,
            r#"<rect x="{LABEL_W}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{label} {}: {}</title></rect>"#,
            BAR_H - 1.0,
            COLORS[j],
            QUANTILES[j],
            escape(&fmt_us(*v))
        );
    }
    let p99 = row.p50_p90_p99_us[2];
    let _ = writeln!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#555">{}</text>"##,
        scale.x(p99) + 4.0,
        gy + 3.0 * BAR_H - 1.0,
        escape(&fmt_us(p99))
    );
}
