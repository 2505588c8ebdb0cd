//! The orders of a subscription list, decided here for every adapter so
//! they sort alike: the sortable properties, the default order (creation
//! time, then id), the comparison of two subscriptions as the client sees
//! them at `now` ([`SortKeys`], [`compare`]) and the sort-and-cut of a
//! page. An adapter orders by its stored values only where no rule applies
//! ([`column_order`], [`creation_order`]); any other order it hands to
//! [`sort_and_page`] with the stored values of the organization.
//!
//! `ignorecase` folds ASCII letters only (`A`–`Z` to `a`–`z`), as SQLite's
//! `lower()` does, so that both backends agree on every string; other
//! letters compare by their UTF-8 bytes, case included.

use std::borrow::Cow;
use std::cmp::Ordering;

use super::rules::status_at;
use super::StoredSubscription;
use crate::model::{Page, SubscriptionStatus};
use crate::page::{Order, PageRequest};

/// The properties a list can be sorted by (`sort=`).
pub const SORTABLE: &[&str] = &[
    "id",
    "uri",
    "status",
    "createdDateTime",
    "lastUpdateDateTime",
    "expirationTime",
];

/// The order when none is asked for, and the tie-break after any asked for.
pub const DEFAULT_ORDER: &[Order] = &[
    Order {
        property: "createdDateTime",
        ascending: true,
        ignore_case: false,
    },
    Order {
        property: "id",
        ascending: true,
        ignore_case: false,
    },
];

/// The stored values a list can be sorted by: all an adapter must load to
/// sort the organization (not the filters, secrets or health).
#[derive(Debug, Clone, Copy)]
pub struct SortKeys<'a> {
    /// The subscription's id (`id`), the last tie-break of every order.
    pub id: &'a str,
    /// The callback URL (`uri`).
    pub uri: &'a str,
    /// As stored; compared as seen at `now` ([`super::rules::visible_status`]).
    pub status: SubscriptionStatus,
    /// `expirationTime`, epoch ms (0: never).
    pub expires_at: i64,
    /// `createdDateTime`, epoch ms.
    pub created_at: i64,
    /// `lastUpdateDateTime`, epoch ms.
    pub updated_at: i64,
}

impl StoredSubscription {
    /// Its values an order compares.
    pub fn sort_keys(&self) -> SortKeys<'_> {
        SortKeys {
            id: self.id.as_str(),
            uri: &self.uri,
            status: self.status,
            expires_at: self.expires_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// ASCII lower case (`ignorecase`): other characters are left as they are.
pub fn fold(text: &str) -> Cow<'_, str> {
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(text.to_ascii_lowercase())
    } else {
        Cow::Borrowed(text)
    }
}

/// Orders by one property, ascending, as the client sees it at `now`.
pub fn compare(
    a: SortKeys<'_>,
    b: SortKeys<'_>,
    property: &str,
    ignore_case: bool,
    now: i64,
) -> Ordering {
    let text = |x: &str, y: &str| {
        if ignore_case {
            // The order of the folded texts ([`fold`]), folding byte by
            // byte as far as they differ: a sort compares each item often.
            x.bytes()
                .map(|b| b.to_ascii_lowercase())
                .cmp(y.bytes().map(|b| b.to_ascii_lowercase()))
        } else {
            x.cmp(y)
        }
    };
    match property {
        "id" => text(a.id, b.id),
        "uri" => text(a.uri, b.uri),
        "status" => text(
            status_at(a.status, a.expires_at, now).as_str(),
            status_at(b.status, b.expires_at, now).as_str(),
        ),
        "createdDateTime" => a.created_at.cmp(&b.created_at),
        "lastUpdateDateTime" => a.updated_at.cmp(&b.updated_at),
        "expirationTime" => a.expires_at.cmp(&b.expires_at),
        _ => Ordering::Equal,
    }
}

/// Every order a list applies that can decide something: the asked-for
/// ones, then the default order as tie-break, without an order whose
/// property an earlier one compared case-sensitively (it would find the
/// values equal again), and nothing after the id (ids are unique).
pub fn chain(page: &PageRequest) -> Vec<&Order> {
    let asked: &[Order] = if page.sort.is_empty() {
        DEFAULT_ORDER
    } else {
        &page.sort
    };
    let mut chain: Vec<&Order> = Vec::new();
    for o in asked.iter().chain(DEFAULT_ORDER) {
        if chain
            .iter()
            .any(|c| c.property == o.property && !(c.ignore_case && is_text(o.property)))
        {
            continue;
        }
        chain.push(o);
        if o.property == "id" && !o.ignore_case {
            break;
        }
    }
    chain
}

fn is_text(property: &str) -> bool {
    matches!(property, "id" | "uri" | "status")
}

/// A stored value a store can order by as it is: no rule of the core
/// applies to it (unlike the status as seen at `now`, or `ignorecase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// `id`.
    Id,
    /// `uri`, compared byte by byte.
    Uri,
    /// `createdDateTime`.
    CreatedAt,
    /// `lastUpdateDateTime`.
    UpdatedAt,
    /// `expirationTime`.
    ExpiresAt,
}

/// The list's order as stored values, each ascending or not, when it
/// needs no rule (no `status`, no `ignorecase` on a text): the store may
/// order by its own columns (and an index of them). `None`: it hands the
/// organization to [`sort_and_page`].
pub fn column_order(page: &PageRequest) -> Option<Vec<(Column, bool)>> {
    chain(page)
        .into_iter()
        .map(|o| {
            let column = match o.property {
                _ if o.ignore_case && is_text(o.property) => return None,
                "id" => Column::Id,
                "uri" => Column::Uri,
                "createdDateTime" => Column::CreatedAt,
                "lastUpdateDateTime" => Column::UpdatedAt,
                "expirationTime" => Column::ExpiresAt,
                _ => return None,
            };
            Some((column, o.ascending))
        })
        .collect()
}

/// A list in creation order: creation time, then id, each in its own
/// direction. The only order a store keeps an index in (stored values as
/// they are, no rule of this module applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreationOrder {
    /// Oldest first.
    pub created_ascending: bool,
    /// Ties of the same millisecond by id ascending.
    pub id_ascending: bool,
}

/// `Some` when the list is in creation order ([`CreationOrder`]); any
/// other order is `None`.
pub fn creation_order(page: &PageRequest) -> Option<CreationOrder> {
    match chain(page)[..] {
        [first, tie]
            if first.property == "createdDateTime" && tie.property == "id" && !tie.ignore_case =>
        {
            Some(CreationOrder {
                created_ascending: first.ascending,
                id_ascending: tie.ascending,
            })
        }
        _ => None,
    }
}

/// Sorts `items` (the whole organization, as stored) in the asked-for
/// order as seen at `now` and cuts out the page.
pub fn sort_and_page(
    items: Vec<StoredSubscription>,
    page: &PageRequest,
    now: i64,
) -> Page<StoredSubscription> {
    sort_and_page_by(items, page, now, StoredSubscription::sort_keys)
}

/// [`sort_and_page`] of anything that has [`SortKeys`] (an adapter's
/// projection of the sortable columns), given by `keys`.
pub fn sort_and_page_by<T>(
    items: Vec<T>,
    page: &PageRequest,
    now: i64,
    keys: impl Fn(&T) -> SortKeys<'_>,
) -> Page<T> {
    page.apply(items, DEFAULT_ORDER, |a, b, property, ignore_case| {
        compare(keys(a), keys(b), property, ignore_case, now)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(query: &str) -> PageRequest {
        PageRequest::from_query(Some(query), SORTABLE).unwrap()
    }

    #[test]
    fn creation_order_is_recognised() {
        let order = |created_ascending, id_ascending| {
            Some(CreationOrder {
                created_ascending,
                id_ascending,
            })
        };
        assert_eq!(creation_order(&page("")), order(true, true));
        assert_eq!(
            creation_order(&page("sort=createdDateTime")),
            order(true, true)
        );
        assert_eq!(
            creation_order(&page("sort=createdDateTime,id,asc")),
            order(true, true)
        );
        assert_eq!(
            creation_order(&page("sort=createdDateTime,id,desc")),
            order(false, false)
        );
        // Creation time descending breaks ties by id ascending.
        assert_eq!(
            creation_order(&page("sort=createdDateTime,desc")),
            order(false, true)
        );
        assert_eq!(creation_order(&page("sort=id")), None);
        assert_eq!(creation_order(&page("sort=uri&sort=createdDateTime")), None);
        assert_eq!(
            creation_order(&page("sort=createdDateTime,id,asc,ignorecase")),
            None
        );
    }

    #[test]
    fn only_orders_without_a_rule_are_column_orders() {
        use Column::*;
        assert_eq!(
            column_order(&page("")),
            Some(vec![(CreatedAt, true), (Id, true)])
        );
        assert_eq!(
            column_order(&page("sort=uri,desc")),
            Some(vec![(Uri, false), (CreatedAt, true), (Id, true)])
        );
        assert_eq!(
            column_order(&page("sort=createdDateTime,desc,ignorecase")),
            Some(vec![(CreatedAt, false), (Id, true)])
        );
        assert_eq!(column_order(&page("sort=status")), None);
        assert_eq!(column_order(&page("sort=expirationTime&sort=status")), None);
        assert_eq!(column_order(&page("sort=uri,ignorecase")), None);
        assert_eq!(column_order(&page("sort=id,ignorecase")), None);
    }

    #[test]
    fn the_chain_leaves_out_what_cannot_decide() {
        let properties = |q: &str| -> Vec<(&str, bool, bool)> {
            chain(&page(q))
                .iter()
                .map(|o| (o.property, o.ascending, o.ignore_case))
                .collect()
        };
        let default = vec![("createdDateTime", true, false), ("id", true, false)];
        assert_eq!(properties(""), default);
        assert_eq!(properties("sort=createdDateTime"), default);
        assert_eq!(
            properties("sort=id,desc&sort=uri"),
            vec![("id", false, false)]
        );
        assert_eq!(
            properties("sort=id,ignorecase"),
            vec![
                ("id", true, true),
                ("createdDateTime", true, false),
                ("id", true, false)
            ]
        );
        assert_eq!(
            properties("sort=expirationTime,createdDateTime,desc"),
            vec![
                ("expirationTime", false, false),
                ("createdDateTime", false, false),
                ("id", true, false)
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn ignorecase_compares_as_the_folded_texts(a in "[a-zA-Z_Ä ]{0,6}", b in "[a-zA-Z_Ä ]{0,6}") {
            fn keys(text: &str) -> SortKeys<'_> {
                SortKeys {
                    id: text,
                    uri: text,
                    status: SubscriptionStatus::Active,
                    expires_at: 0,
                    created_at: 0,
                    updated_at: 0,
                }
            }
            proptest::prop_assert_eq!(
                compare(keys(&a), keys(&b), "uri", true, 0),
                fold(&a).cmp(&fold(&b))
            );
        }
    }

    #[test]
    fn ignorecase_folds_ascii_only() {
        assert_eq!(fold("AbC_z"), "abc_z");
        assert_eq!(fold("ÄÖ"), "ÄÖ");
        assert!(matches!(fold("already"), Cow::Borrowed(_)));
        // '_' sorts after the folded letters, as in SQLite's lower().
        assert!(fold("A") > fold("_"));
    }
}
