//! Arbitrary bytes from the network never panic the core, and bounds hold.

mod harness;

use harness::{Scenario, kube_config, pod};
use proptest::prelude::*;
use reconcile_core::frame::{parse_frame, parse_status};
use reconcile_core::list::parse_list;
use reconcile_core::pod::PodView;
use reconcile_core::{Input, ListResponse, Output, StreamEnd};

fn json_fragments() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"type\"",
        "\"object\"",
        "\"ADDED\"",
        "\"BOOKMARK\"",
        "\"ERROR\"",
        "\"metadata\"",
        "\"resourceVersion\"",
        "\"12\"",
        "null",
        "7",
        "\"code\"",
        "410",
        "\"items\"",
        "\"labels\"",
        "\"name\"",
        "\"a\"",
        "\\u0000",
        "\"\\ud800\"",
    ]);
    prop::collection::vec(atoms, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn parsers_never_panic_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_frame::<PodView>(&bytes);
        let _ = parse_frame::<k8s_openapi::api::core::v1::Pod>(&bytes);
        let _ = parse_list::<PodView>(&bytes);
        let _ = parse_status(&bytes);
    }

    #[test]
    fn parsers_never_panic_on_json_shaped_input(text in json_fragments()) {
        let _ = parse_frame::<PodView>(text.as_bytes());
        let _ = parse_list::<PodView>(text.as_bytes());
    }

    #[test]
    fn loop_never_panics_and_stays_bounded(
        frames in prop::collection::vec(prop_oneof![
            json_fragments(),
            (0u64..50, prop::option::of(0u8..4)).prop_map(|(rv, cell)| {
                let cell = cell.map(|c| format!("c{c}"));
                format!(r#"{{"type":"MODIFIED","object":{}}}"#, pod(&format!("p{}", rv % 7), cell.as_deref(), rv))
            }),
        ], 0..60),
        list_body in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut s = Scenario::new(kube_config().concurrency(2));
        s.start();
        let req = s.list.unwrap();
        s.core.handle_input(s.now, Input::List { req, response: ListResponse::Response { status: 200, body: list_body.clone().into() } });
        s.list_ok(1, &[pod("p0", Some("c0"), 1)]);
        for frame in &frames {
            if let Some(stream) = s.stream {
                s.core.handle_input(s.now, Input::WatchLine { stream, line: frame.clone().into() });
            }
            // Drain, completing reconciles, and follow reopened streams.
            let mut budget = 100;
            while budget > 0 {
                budget -= 1;
                match s.core.poll_output() {
                    Output::Command(reconcile_core::Command::Reconcile { ticket, .. }) => {
                        s.core.handle_input(s.now, Input::Reconciled { ticket, outcome: reconcile_core::Outcome::Success });
                    }
                    Output::Command(reconcile_core::Command::Watch { stream, .. }) => s.stream = Some(stream),
                    Output::Command(reconcile_core::Command::List { req, .. }) => {
                        s.core.handle_input(s.now, Input::List { req, response: ListResponse::Response {
                            status: 200,
                            body: bytes::Bytes::from_static(br#"{"metadata":{"resourceVersion":"1"},"items":[]}"#),
                        }});
                    }
                    Output::Command(_) | Output::Event(_) => {}
                    Output::Timeout(Some(d)) if s.stream.is_none() || d.at <= s.now => {
                        s.now = d.at;
                        s.core.handle_input(s.now, Input::Timeout);
                    }
                    Output::Timeout(_) => break,
                }
            }
            prop_assert!(budget > 0, "outputs never drained");
            prop_assert!(s.core.in_flight() <= 2);
            prop_assert!(s.core.store().len() <= 7);
        }
        if let Some(stream) = s.stream {
            s.core.handle_input(s.now, Input::WatchEnd { stream, end: StreamEnd::Clean });
        }
    }
}
