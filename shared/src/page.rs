//! Spring Data paging: `page` (0-based), `size` (default 20, at most 2000)
//! and repeatable `sort=property(,property)*(,asc|desc)(,ignorecase)`.

use std::cmp::Ordering;

use crate::error::{ApiError, FieldError};
use crate::model::{Page, Pageable, SortOrder};

/// Items per page when the request has no `size`.
pub const DEFAULT_SIZE: u64 = 20;
/// The largest `size` a request may ask for.
pub const MAX_SIZE: u64 = 2000;
/// More sort orders than this is not a real query.
const MAX_ORDERS: usize = 16;

/// One `sort` order of a list request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Order {
    /// The property sorted on, as the API names it (e.g. `createdDateTime`).
    pub property: &'static str,
    /// `asc` (the default) rather than `desc`.
    pub ascending: bool,
    /// `ignorecase` was given: text compares without case.
    pub ignore_case: bool,
}

impl Order {
    fn to_sort_order(&self) -> SortOrder {
        SortOrder {
            direction: if self.ascending { "ASC" } else { "DESC" }.to_owned(),
            null_handling: "NATIVE".to_owned(),
            ascending: self.ascending,
            property: self.property.to_owned(),
            ignore_case: self.ignore_case,
        }
    }
}

/// A list request's paging: `page`, `size` and `sort`, checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PageRequest {
    /// The page wanted, 0-based.
    pub page: u64,
    /// Items per page, 1 to [`MAX_SIZE`].
    pub size: u64,
    /// Empty when the caller asked for no order (or a bare `sort`).
    pub sort: Vec<Order>,
}

impl PageRequest {
    /// Parses the query string; `properties` are the sortable ones.
    pub fn from_query(query: Option<&str>, properties: &[&'static str]) -> Result<Self, ApiError> {
        let mut errors = Vec::new();
        let mut page = 0;
        let mut size = DEFAULT_SIZE;
        let mut sort = Vec::new();
        for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let value = value.trim();
            match key.as_ref() {
                "page" if !value.is_empty() => match value.parse::<u64>() {
                    Ok(p) => page = p,
                    Err(_) => errors.push(FieldError::new(
                        "page",
                        format!("must be a number ≥ 0, got '{value}'"),
                    )),
                },
                "size" if !value.is_empty() => match value.parse::<u64>() {
                    Ok(0) => errors.push(FieldError::new("size", "must be at least 1")),
                    Ok(s) => size = s.min(MAX_SIZE),
                    Err(_) => errors.push(FieldError::new(
                        "size",
                        format!("must be a number ≥ 1, got '{value}'"),
                    )),
                },
                "sort" => match parse_sort(value, properties) {
                    // A property named again adds nothing: its first mention decides.
                    Ok(orders) => {
                        for order in orders {
                            if !sort.iter().any(|o: &Order| o.property == order.property) {
                                sort.push(order);
                            }
                        }
                    }
                    Err(message) => errors.push(FieldError::new("sort", message)),
                },
                _ => {}
            }
        }
        if sort.len() > MAX_ORDERS {
            errors.push(FieldError::new(
                "sort",
                format!("at most {MAX_ORDERS} sort properties"),
            ));
        }
        // One error per parameter: repeating a bad value must not multiply the answer.
        let mut reported = std::collections::HashSet::new();
        errors.retain(|e| reported.insert(e.field.clone()));
        if errors.is_empty() {
            Ok(PageRequest { page, size, sort })
        } else {
            Err(ApiError::validation(errors))
        }
    }

    /// The first page of `size` (at most [`MAX_SIZE`]) in the default order.
    pub fn first(size: u64) -> Self {
        PageRequest {
            page: 0,
            size: size.clamp(1, MAX_SIZE),
            sort: Vec::new(),
        }
    }

    /// How many items come before the page (`page × size`, saturating).
    pub fn offset(&self) -> u64 {
        self.page.saturating_mul(self.size)
    }

    /// Sorts `items` with `compare(a, b, property, ignore_case)`, falling back
    /// to `default` when unsorted, and cuts out the requested page.
    pub fn apply<T>(
        &self,
        mut items: Vec<T>,
        default: &[Order],
        compare: impl Fn(&T, &T, &str, bool) -> Ordering,
    ) -> Page<T> {
        let orders = if self.sort.is_empty() {
            default
        } else {
            &self.sort
        };
        items.sort_by(|a, b| {
            for o in orders.iter().chain(default) {
                let ord = compare(a, b, o.property, o.ignore_case);
                let ord = if o.ascending { ord } else { ord.reverse() };
                if ord != Ordering::Equal {
                    return ord;
                }
            }
            Ordering::Equal
        });
        let total = items.len() as u64;
        let content: Vec<T> = items
            .into_iter()
            .skip(usize::try_from(self.offset()).unwrap_or(usize::MAX))
            .take(self.size as usize)
            .collect();
        self.page_of(content, total)
    }

    /// The page holding `content`, out of `total` elements (for stores that
    /// sort and cut pages themselves).
    pub fn page_of<T>(&self, content: Vec<T>, total: u64) -> Page<T> {
        let total_pages = total.div_ceil(self.size);
        let sort: Vec<SortOrder> = self.sort.iter().map(Order::to_sort_order).collect();
        Page {
            total_elements: total,
            total_pages,
            pageable: Pageable {
                unpaged: false,
                paged: true,
                page_size: self.size,
                page_number: self.page,
                offset: self.offset(),
                sort: sort.clone(),
            },
            first: self.page == 0,
            last: self.page.saturating_add(1) >= total_pages,
            size: self.size,
            number: self.page,
            sort,
            number_of_elements: content.len() as u64,
            empty: content.is_empty(),
            content,
        }
    }
}

fn parse_sort(value: &str, properties: &[&'static str]) -> Result<Vec<Order>, String> {
    let mut tokens: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if tokens.is_empty() {
        return Ok(Vec::new()); // a bare `sort`: the default order
    }
    let mut ignore_case = false;
    if tokens
        .last()
        .is_some_and(|t| t.eq_ignore_ascii_case("ignorecase"))
    {
        ignore_case = true;
        tokens.pop();
    }
    let mut ascending = true;
    if let Some(last) = tokens.last() {
        if last.eq_ignore_ascii_case("asc") {
            tokens.pop();
        } else if last.eq_ignore_ascii_case("desc") {
            ascending = false;
            tokens.pop();
        }
    }
    if tokens.is_empty() {
        return Err(format!(
            "'{value}' names no property; sortable: {}",
            properties.join(", ")
        ));
    }
    tokens
        .into_iter()
        .map(|t| {
            let property = properties.iter().find(|p| **p == t).ok_or_else(|| {
                format!("cannot sort by '{t}'; sortable: {}", properties.join(", "))
            })?;
            Ok(Order {
                property,
                ascending,
                ignore_case,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PROPS: &[&str] = &["id", "uri", "createdDateTime"];

    fn parse(q: &str) -> Result<PageRequest, ApiError> {
        PageRequest::from_query(Some(q), PROPS)
    }

    #[test]
    fn defaults_and_clamping() {
        assert_eq!(
            parse("").unwrap(),
            PageRequest {
                page: 0,
                size: 20,
                sort: vec![]
            }
        );
        assert_eq!(parse("size=5000").unwrap().size, 2000);
        assert_eq!(parse("page=&size=").unwrap().size, 20);
    }

    #[test]
    fn spring_sort_syntax() {
        let r = parse("sort=uri,desc&sort=id,createdDateTime,asc,ignorecase").unwrap();
        assert_eq!(r.sort.len(), 3);
        assert_eq!(
            r.sort[0],
            Order {
                property: "uri",
                ascending: false,
                ignore_case: false
            }
        );
        assert_eq!(
            r.sort[2],
            Order {
                property: "createdDateTime",
                ascending: true,
                ignore_case: true
            }
        );
        assert!(parse("sort").unwrap().sort.is_empty());
        assert!(parse("sort=").unwrap().sort.is_empty());
    }

    #[test]
    fn rejects_bad_values() {
        for q in [
            "page=-1",
            "page=x",
            "size=0",
            "size=-3",
            "sort=secret",
            "sort=desc",
            "sort=uri,sideways",
        ] {
            let e = parse(q).unwrap_err();
            assert_eq!(e.code, "VALIDATION_FAILED", "{q}");
        }
    }

    #[test]
    fn page_arithmetic() {
        let items: Vec<u32> = (0..45).collect();
        let cmp = |a: &u32, b: &u32, _: &str, _: bool| a.cmp(b);
        let default = [Order {
            property: "id",
            ascending: true,
            ignore_case: false,
        }];
        let p = |page| {
            PageRequest {
                page,
                size: 20,
                sort: vec![],
            }
            .apply(items.clone(), &default, cmp)
        };
        let (p0, p1, p2, p3) = (p(0), p(1), p(2), p(3));
        assert_eq!(
            (
                p0.number_of_elements,
                p1.number_of_elements,
                p2.number_of_elements
            ),
            (20, 20, 5)
        );
        assert!(p0.first && !p0.last && !p1.first && !p1.last && p2.last);
        assert_eq!(p2.pageable.offset, 40);
        assert_eq!(p2.content, (40..45).collect::<Vec<_>>());
        assert!(p3.empty && p3.last && p3.total_pages == 3 && p3.total_elements == 45);
    }

    proptest! {
        #[test]
        fn never_panics_on_any_query(q in ".{0,80}") {
            let _ = parse(&q);
        }

        #[test]
        fn pages_partition_the_items(n in 0u64..200, size in 1u64..50) {
            let items: Vec<u64> = (0..n).collect();
            let cmp = |a: &u64, b: &u64, _: &str, _: bool| a.cmp(b);
            let mut seen = Vec::new();
            let pages = n.div_ceil(size).max(1);
            for page in 0..pages {
                let p = PageRequest { page, size, sort: vec![] }.apply(items.clone(), &[], cmp);
                prop_assert_eq!(p.total_pages, n.div_ceil(size));
                seen.extend(p.content);
            }
            prop_assert_eq!(seen, items);
        }
    }
}
