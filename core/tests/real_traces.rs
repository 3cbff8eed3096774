//! The parsers and the loop against real captured apiserver traffic
//! (`testdata/real/` at the repository root; a missing file fails the test).

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use reconcile_core::frame::{WatchEvent, parse_frame};
use reconcile_core::list::{ListDecoder, parse_list};
use reconcile_core::pod::PodView;
use reconcile_core::{
    Command, Config, Event, Input, Instant, KeyMap, ListResponse, Object, Output, ReconcileLoop,
    WatchParams,
};

fn real(path: &str) -> Vec<u8> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/real");
    std::fs::read(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn pod_lists_decode_as_the_partial_view_and_as_k8s_openapi() {
    for (path, rv, n) in [
        ("k8s-openapi/v1-36_pod-list.body.json", "554", 8),
        ("k8s-openapi/v1-20_pod-list.body.json", "621", 8),
    ] {
        let body = real(path);
        let view = parse_list::<PodView>(&body).unwrap();
        assert_eq!(
            (view.resource_version.as_str(), view.items.len()),
            (rv, n),
            "{path}"
        );
        assert!(view.skipped.is_empty());
        assert!(
            view.items
                .iter()
                .all(|p| p.key().is_some() && p.object_resource_version().is_some())
        );
        let full = parse_list::<Pod>(&body).unwrap();
        assert_eq!(full.items.len(), n, "{path}");
        for (a, b) in view.items.iter().zip(&full.items) {
            assert_eq!(a.key(), b.key());
            assert_eq!(
                a.status.phase.as_deref(),
                b.status.as_ref().and_then(|s| s.phase.as_deref())
            );
        }
    }
}

#[test]
fn real_pod_lists_decode_the_same_in_any_chunking() {
    for path in [
        "k8s-openapi/v1-36_pod-list.body.json",
        "k8s-openapi/v1-20_pod-list.body.json",
    ] {
        let body = real(path);
        let whole = parse_list::<Pod>(&body).unwrap();
        // Odd sizes put chunk edges inside strings, escapes and numbers.
        for chunk in [1, 2, 7, 61, 1021, 16 * 1024] {
            let mut decoder = ListDecoder::<Pod>::new();
            for piece in body.chunks(chunk) {
                decoder.push(piece).unwrap();
            }
            assert_eq!(decoder.bytes(), body.len() as u64);
            let streamed = decoder.finish().unwrap();
            assert_eq!(streamed.resource_version, whole.resource_version, "{path}");
            assert_eq!(streamed.items, whole.items, "{path} in chunks of {chunk}");
            assert!(streamed.skipped.is_empty());
        }
    }
}

#[test]
fn v1_36_pods_read_running_ready_and_container_state() {
    let list = parse_list::<PodView>(&real("k8s-openapi/v1-36_pod-list.body.json")).unwrap();
    let coredns = list
        .items
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("coredns-589f44dc88-4fpns"))
        .unwrap();
    assert!(coredns.status.is_running_and_ready());
    assert_eq!(coredns.metadata.labels.get("k8s-app"), Some("kube-dns"));
    assert_eq!(coredns.status.pod_ip.as_deref(), Some("10.244.0.3"));
    let c = &coredns.status.container_statuses[0];
    assert_eq!(c.name, "coredns");
    assert!(c.state.running.as_ref().unwrap().started_at.is_some());
}

#[test]
fn streaming_list_watch_ends_with_a_pod_bookmark_both_decoders_accept() {
    let body = real("k8s-openapi/v1-36_watch_event-watch_pods_without_initial_events.body.ndjson");
    let lines: Vec<&[u8]> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), 9);
    for line in &lines[..8] {
        assert!(matches!(
            parse_frame::<PodView>(line),
            Ok(WatchEvent::Added(_))
        ));
        assert!(matches!(parse_frame::<Pod>(line), Ok(WatchEvent::Added(_))));
    }
    let bookmark = WatchEvent::Bookmark {
        resource_version: "550".into(),
        initial_events_end: true,
    };
    assert_eq!(parse_frame::<PodView>(lines[8]).unwrap(), bookmark);
    // k8s-openapi's Pod rejects `"containers":null`; envelope-first never decodes it as a Pod.
    assert!(matches!(
        parse_frame::<Pod>(lines[8]),
        Ok(WatchEvent::Bookmark { .. })
    ));
}

#[test]
fn legacy_kubeclient_stream_decodes_as_the_view_and_is_skipped_with_cursor_by_k8s_openapi() {
    let body = real("kubeclient/watch_stream.ndjson");
    let lines: Vec<&[u8]> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .collect();
    assert_eq!(lines.len(), 3);
    let rvs: Vec<String> = lines
        .iter()
        .map(|l| match parse_frame::<PodView>(l).unwrap() {
            WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p) => {
                p.metadata.resource_version.unwrap().to_string()
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(rvs, ["1389", "1390", "1398"]);
    for line in &lines {
        if let Err(e) = parse_frame::<Pod>(line) {
            assert!(
                e.resource_version.is_some(),
                "a legacy frame still tells its version: {e}"
            );
        }
    }
}

/// The whole loop over a real LIST then the real watch frames, grouped by namespace.
#[test]
fn loop_syncs_from_a_real_list_and_follows_real_frames() {
    let config = Config::kubernetes(
        WatchParams::namespaced("kube-system"),
        KeyMap::<PodView, String>::by_namespace(),
    );
    let mut core = ReconcileLoop::new(config, Instant::ZERO).unwrap();
    core.handle_input(Instant::ZERO, Input::Start);
    let Output::Command(Command::List { req, .. }) = core.poll_output() else {
        panic!()
    };
    let body = real("k8s-openapi/v1-36_pod-list.body.json");
    let response = ListResponse::Response {
        status: 200,
        body: body.into(),
    };
    core.handle_input(Instant::ZERO, Input::List { req, response });
    let mut stream = None;
    let mut reconciles = Vec::new();
    loop {
        match core.poll_output() {
            Output::Command(Command::Watch {
                stream: s,
                resource_version,
                ..
            }) => {
                assert_eq!(resource_version, "554");
                stream = Some(s);
            }
            Output::Command(Command::Reconcile {
                parent, members, ..
            }) => {
                reconciles.push((parent.to_string(), members.len()));
            }
            Output::Event(Event::Synced { objects }) => assert_eq!(objects, 8),
            Output::Timeout(_) => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(reconciles, [("kube-system".to_owned(), 8)]);
    let frames =
        real("k8s-openapi/v1-36_watch_event-watch_pods_without_initial_events.body.ndjson");
    let stream = stream.unwrap();
    for line in frames.split(|b| *b == b'\n') {
        let line = line.to_vec().into();
        core.handle_input(Instant::ZERO, Input::WatchLine { stream, line });
    }
    assert_eq!(core.cursor(), Some("550"));
    assert_eq!(core.store().len(), 8);
    assert_eq!(core.stats().frames_skipped, 0);
}
