//! Paged LIST (`limit` and `continue`, issue 16): the pages are gathered and applied as one
//! `Replace` after the last; nothing reaches the store before it.

mod harness;

use harness::{Scenario, pod};
use reconcile_core::pod::PodView;
use reconcile_core::{Config, KeyMap, WatchParams};

const EXPIRED: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.","reason":"Expired","code":410}"#;

fn paged_config(size: u32) -> Config<PodView, String> {
    Config::kubernetes(
        WatchParams::namespaced("ns")
            .labels("app=cell")
            .list_pages(size),
        KeyMap::by_label("cell"),
    )
}

#[test]
fn a_three_page_listing_is_applied_once_after_the_last_page() {
    let mut s = Scenario::new(paged_config(2));
    s.start().list_page(
        10,
        &[pod("a", Some("c1"), 5), pod("b", Some("c1"), 6)],
        Some("tok-1"),
    );
    assert_eq!(
        s.core.store().len(),
        0,
        "nothing is applied before the last page"
    );
    s.list_page(
        10,
        &[pod("c", Some("c2"), 7), pod("d", Some("c2"), 8)],
        Some("tok-2"),
    );
    assert_eq!(
        s.core.store().len(),
        0,
        "nothing is applied before the last page"
    );
    assert!(!s.core.is_synced());
    s.list_page(10, &[pod("e", Some("c3"), 9)], None);
    assert!(s.core.is_synced());
    assert_eq!(s.core.store().len(), 5);
    assert_eq!(s.core.cursor(), Some("10"));
    insta::assert_snapshot!(s.log);
}

#[test]
fn an_expired_continue_token_restarts_the_listing_with_one_full_list() {
    let mut s = Scenario::new(paged_config(2));
    s.start()
        .list_page(
            10,
            &[pod("a", Some("c1"), 5), pod("b", Some("c1"), 6)],
            Some("tok-1"),
        )
        .at(400.0)
        .list_status(410, EXPIRED);
    assert_eq!(
        s.core.store().len(),
        0,
        "the dropped page never reaches the store"
    );
    s.list_page(
        30,
        &[
            pod("a", Some("c1"), 5),
            pod("c", Some("c2"), 25),
            pod("d", Some("c2"), 26),
        ],
        None,
    );
    assert_eq!(s.core.store().len(), 3);
    assert_eq!(s.core.cursor(), Some("30"));
    insta::assert_snapshot!(s.log);
}

#[test]
fn another_failure_on_a_page_retries_from_the_first_page_and_stop_cancels() {
    let mut s = Scenario::new(paged_config(2));
    s.start()
        .list_page(
            10,
            &[pod("a", Some("c1"), 5), pod("b", Some("c1"), 6)],
            Some("tok-1"),
        )
        .list_status(
            500,
            r#"{"kind":"Status","code":500,"reason":"InternalError","message":"etcd down"}"#,
        )
        .next_deadline()
        .list_page(
            11,
            &[pod("a", Some("c1"), 5), pod("b", Some("c1"), 6)],
            Some("tok-9"),
        )
        .list_transport_error()
        .next_deadline()
        .list_page(12, &[pod("a", Some("c1"), 5)], Some("tok-11"))
        .stop();
    assert_eq!(s.core.store().len(), 0);
    assert!(!s.core.is_synced());
    insta::assert_snapshot!(s.log);
}

#[test]
fn a_single_page_listing_reads_as_an_unpaged_one() {
    let mut s = Scenario::new(paged_config(500));
    s.start().list_page(10, &[pod("a", Some("c1"), 5)], None);
    assert!(s.core.is_synced());
    insta::assert_snapshot!(s.log);
}

#[test]
fn pages_past_the_listing_byte_bound_fail_the_listing_and_it_is_retried() {
    // Each page body here is a few hundred bytes: a bound of 600 admits the first page and
    // not the second, so nothing is applied and the listing starts over.
    let mut s = Scenario::new(paged_config(2).max_listing_bytes(600));
    s.start().list_page(
        10,
        &[pod("a", Some("c1"), 5), pod("b", Some("c1"), 6)],
        Some("tok-1"),
    );
    s.list_page(
        10,
        &[pod("c", Some("c2"), 7), pod("d", Some("c2"), 8)],
        Some("tok-2"),
    );
    assert_eq!(s.core.store().len(), 0, "nothing of the listing is applied");
    assert!(!s.core.is_synced());
    assert!(s.log.contains("paged listing too large"), "{}", s.log);
    insta::assert_snapshot!(s.log);
}
