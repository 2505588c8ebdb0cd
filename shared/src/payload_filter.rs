//! A subscription's payload filter (`payloadFilter`): a small JSON language
//! over what an event says, evaluated at fan-out so an event it refuses
//! costs nothing (docs/api.md, "Payload filters";
//! docs/decisions/payload-filter.md).
//!
//! A filter is an object whose members must all hold: `"<path>": <condition>`,
//! `"$and": [filter, ...]`, `"$or": [filter, ...]` or `"$not": filter`. A
//! condition is a scalar (equality) or an object of operators, all of which
//! must hold: `$eq`, `$in`, `$prefix`, `$exists`, `$gt`, `$gte`, `$lt`,
//! `$lte`. Parsing enforces [`MAX_BYTES`], [`MAX_DEPTH`] and
//! [`MAX_OPERANDS`], which bound the evaluation's cost too.

use serde_json::Value;

/// A filter's compact JSON (as stored and returned) is at most this many bytes.
pub const MAX_BYTES: usize = 2048;
/// Filters nest at most this deep: the filter itself is depth 1, each
/// filter inside `$and`, `$or` or `$not` one more.
pub const MAX_DEPTH: usize = 5;
/// At most this many operands in all: every value compared with (an
/// equality's, each of `$in`'s, `$prefix`'s, a comparison's, `$exists`'s).
pub const MAX_OPERANDS: usize = 64;
/// At most this many filters in one `$and` or `$or`.
pub const MAX_BRANCHES: usize = 16;

/// A parsed payload filter and its compact JSON.
#[derive(Debug, Clone)]
pub struct PayloadFilter {
    json: String,
    root: Node,
}

/// Two filters are the same when their stored JSON is.
impl PartialEq for PayloadFilter {
    fn eq(&self, other: &Self) -> bool {
        self.json == other.json
    }
}

impl Eq for PayloadFilter {}

#[derive(Debug, Clone)]
enum Node {
    All(Vec<Node>),
    Any(Vec<Node>),
    Not(Box<Node>),
    Test(Vec<String>, Test),
}

#[derive(Debug, Clone)]
enum Test {
    Eq(Value),
    In(Vec<Value>),
    Prefix(String),
    Exists(bool),
    Compare(Cmp, f64),
}

#[derive(Debug, Clone, Copy)]
enum Cmp {
    Gt,
    Gte,
    Lt,
    Lte,
}

/// Why a filter is refused: where in it (empty: the filter as a whole) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// Where, e.g. `$or[1].message.to` (empty for the whole filter).
    pub at: String,
    /// What is wrong, for a person.
    pub problem: String,
}

impl std::fmt::Display for FilterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at.is_empty() {
            true => f.write_str(&self.problem),
            false => write!(f, "at {}: {}", self.at, self.problem),
        }
    }
}

impl PayloadFilter {
    /// Parses a filter as a client sent it, within every limit.
    pub fn parse(value: &Value) -> Result<Self, FilterError> {
        let json = serde_json::to_string(value).expect("a JSON value serialises");
        if json.len() > MAX_BYTES {
            return Err(FilterError {
                at: String::new(),
                problem: format!(
                    "is {} bytes as compact JSON; at most {MAX_BYTES}",
                    json.len()
                ),
            });
        }
        let mut parser = Parser {
            operands: 0,
            limits: true,
        };
        let root = parser.node(value, "", 1)?;
        Ok(PayloadFilter { json, root })
    }

    /// A filter as stored: parsed without the limits, which bind what a
    /// client may send, so a stored filter stays readable if they change.
    pub fn from_stored(json: &str) -> Result<Self, FilterError> {
        let value: Value = serde_json::from_str(json).map_err(|e| FilterError {
            at: String::new(),
            problem: e.to_string(),
        })?;
        let mut parser = Parser {
            operands: 0,
            limits: false,
        };
        let root = parser.node(&value, "", 1)?;
        Ok(PayloadFilter {
            json: json.to_owned(),
            root,
        })
    }

    /// The filter's compact JSON: what is stored and returned.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The filter as a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.json).expect("stored JSON parses")
    }

    /// Whether the event `document` ([`crate::ingest`] builds it) passes.
    pub fn matches(&self, document: &Value) -> bool {
        self.root.matches(document)
    }
}

struct Parser {
    operands: usize,
    limits: bool,
}

fn error(at: &str, problem: impl Into<String>) -> FilterError {
    FilterError {
        at: at.to_owned(),
        problem: problem.into(),
    }
}

fn join(at: &str, part: &str) -> String {
    match at.is_empty() {
        true => part.to_owned(),
        false => format!("{at}.{part}"),
    }
}

impl Parser {
    fn node(&mut self, value: &Value, at: &str, depth: usize) -> Result<Node, FilterError> {
        if self.limits && depth > MAX_DEPTH {
            return Err(error(at, format!("filters nest at most {MAX_DEPTH} deep")));
        }
        let Value::Object(members) = value else {
            return Err(error(at, "must be an object"));
        };
        if members.is_empty() {
            return Err(error(at, "must hold at least one condition"));
        }
        let mut all = Vec::with_capacity(members.len());
        for (key, value) in members {
            let here = join(at, key);
            match key.as_str() {
                "$and" | "$or" => {
                    let branches = self.branches(value, &here, depth)?;
                    all.push(match key.as_str() {
                        "$and" => Node::All(branches),
                        _ => Node::Any(branches),
                    });
                }
                "$not" => all.push(Node::Not(Box::new(self.node(value, &here, depth + 1)?))),
                _ if key.starts_with('$') => {
                    return Err(error(
                        &here,
                        "is not an operator here: $and, $or or $not (a path does not start with $)",
                    ))
                }
                _ => {
                    let path = path(key, &here)?;
                    self.condition(path, value, &here, &mut all)?;
                }
            }
        }
        Ok(match all.len() {
            1 => all.pop().expect("one"),
            _ => Node::All(all),
        })
    }

    fn branches(
        &mut self,
        value: &Value,
        at: &str,
        depth: usize,
    ) -> Result<Vec<Node>, FilterError> {
        let Value::Array(items) = value else {
            return Err(error(at, "must be a list of filters"));
        };
        if items.is_empty() || (self.limits && items.len() > MAX_BRANCHES) {
            return Err(error(at, format!("must hold 1 to {MAX_BRANCHES} filters")));
        }
        items
            .iter()
            .enumerate()
            .map(|(i, item)| self.node(item, &format!("{at}[{i}]"), depth + 1))
            .collect()
    }

    fn operand(&mut self, at: &str) -> Result<(), FilterError> {
        self.operands += 1;
        if self.limits && self.operands > MAX_OPERANDS {
            return Err(error(
                at,
                format!("a filter compares with at most {MAX_OPERANDS} values in all"),
            ));
        }
        Ok(())
    }

    fn condition(
        &mut self,
        path: Vec<String>,
        value: &Value,
        at: &str,
        out: &mut Vec<Node>,
    ) -> Result<(), FilterError> {
        let operators = match value {
            Value::Object(operators) => operators,
            Value::Array(_) => {
                return Err(error(at, "a list is not a condition: use {\"$in\": [...]}"))
            }
            scalar => {
                self.operand(at)?;
                out.push(Node::Test(path, Test::Eq(scalar.clone())));
                return Ok(());
            }
        };
        if operators.is_empty() {
            return Err(error(at, "must hold at least one operator"));
        }
        for (op, operand) in operators {
            let here = join(at, op);
            let test = self.test(op, operand, &here)?;
            out.push(Node::Test(path.clone(), test));
        }
        Ok(())
    }

    fn test(&mut self, op: &str, operand: &Value, at: &str) -> Result<Test, FilterError> {
        Ok(match op {
            "$eq" => {
                scalar(operand, at)?;
                self.operand(at)?;
                Test::Eq(operand.clone())
            }
            "$in" => {
                let Value::Array(values) = operand else {
                    return Err(error(at, "must be a list of values"));
                };
                if values.is_empty() {
                    return Err(error(at, "must hold at least one value"));
                }
                for value in values {
                    scalar(value, at)?;
                    self.operand(at)?;
                }
                Test::In(values.clone())
            }
            "$prefix" => match operand {
                Value::String(prefix) => {
                    self.operand(at)?;
                    Test::Prefix(prefix.clone())
                }
                _ => return Err(error(at, "must be a string")),
            },
            "$exists" => match operand {
                Value::Bool(exists) => {
                    self.operand(at)?;
                    Test::Exists(*exists)
                }
                _ => return Err(error(at, "must be true or false")),
            },
            "$gt" | "$gte" | "$lt" | "$lte" => {
                let Some(number) = operand.as_f64() else {
                    return Err(error(at, "must be a number"));
                };
                self.operand(at)?;
                let cmp = match op {
                    "$gt" => Cmp::Gt,
                    "$gte" => Cmp::Gte,
                    "$lt" => Cmp::Lt,
                    _ => Cmp::Lte,
                };
                Test::Compare(cmp, number)
            }
            _ => {
                return Err(error(
                    at,
                    "is not an operator: $eq, $in, $prefix, $exists, $gt, $gte, $lt or $lte",
                ))
            }
        })
    }
}

fn scalar(value: &Value, at: &str) -> Result<(), FilterError> {
    match value {
        Value::Array(_) | Value::Object(_) => {
            Err(error(at, "must be a string, a number, true, false or null"))
        }
        _ => Ok(()),
    }
}

/// A path: member names joined by `.`, none empty.
fn path(key: &str, at: &str) -> Result<Vec<String>, FilterError> {
    let segments: Vec<String> = key.split('.').map(str::to_owned).collect();
    if segments.iter().any(String::is_empty) {
        return Err(error(
            at,
            "is not a path: member names joined by '.', none empty",
        ));
    }
    Ok(segments)
}

impl Node {
    fn matches(&self, document: &Value) -> bool {
        match self {
            Node::All(nodes) => nodes.iter().all(|n| n.matches(document)),
            Node::Any(nodes) => nodes.iter().any(|n| n.matches(document)),
            Node::Not(node) => !node.matches(document),
            Node::Test(path, test) => test.holds(lookup(document, path)),
        }
    }
}

/// The value at `path`, through objects only; None where a member is missing.
fn lookup<'a>(document: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(document, |value, name| {
        value.as_object().and_then(|o| o.get(name))
    })
}

impl Test {
    /// Whether the test holds of `value`; of a list, whether it holds of
    /// one of its items (`$exists` looks at the list itself).
    fn holds(&self, value: Option<&Value>) -> bool {
        match (self, value) {
            (Test::Exists(wanted), value) => *wanted == exists(value),
            (_, None) => false,
            (_, Some(Value::Array(items))) => items.iter().any(|item| self.holds_of(item)),
            (_, Some(value)) => self.holds_of(value),
        }
    }

    fn holds_of(&self, value: &Value) -> bool {
        match self {
            Test::Eq(wanted) => same(wanted, value),
            Test::In(wanted) => wanted.iter().any(|w| same(w, value)),
            Test::Prefix(prefix) => value
                .as_str()
                .is_some_and(|s| s.starts_with(prefix.as_str())),
            Test::Exists(_) => unreachable!("held of the value itself"),
            Test::Compare(cmp, bound) => value.as_f64().is_some_and(|v| match cmp {
                Cmp::Gt => v > *bound,
                Cmp::Gte => v >= *bound,
                Cmp::Lt => v < *bound,
                Cmp::Lte => v <= *bound,
            }),
        }
    }
}

/// Present, not null, and not an empty list.
fn exists(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Array(items)) => !items.is_empty(),
        Some(_) => true,
    }
}

/// Equality of scalars; numbers by value (`1` equals `1.0`).
fn same(wanted: &Value, value: &Value) -> bool {
    match (wanted, value) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

#[cfg(test)]
mod tests;
