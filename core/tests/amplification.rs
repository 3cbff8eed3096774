//! Memory held per byte received (issue 17): a decoded LIST holds at most a documented
//! multiple of its body, measured with a counting allocator. One test function, so that no
//! other test's allocations run in parallel with the counts.

use reconcile_core::list::{ListBodyError, ListDecoder, ListLimits, parse_list};
use reconcile_core::pod::PodView;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

fn net(region: &Region<'_, std::alloc::System>) -> i64 {
    let c = region.change();
    c.bytes_allocated as i64 - c.bytes_deallocated as i64
}

fn real(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../testdata/real/k8s-openapi/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn list_of(item: &str, n: usize) -> Vec<u8> {
    let items = vec![item; n].join(",");
    format!(r#"{{"metadata":{{"resourceVersion":"1"}},"items":[{items}]}}"#).into_bytes()
}

/// Decodes `body` in 4 KiB chunks; the most the decoder held after any chunk, and the result.
fn decode<O: reconcile_core::Object>(
    body: &[u8],
    limits: ListLimits,
) -> (i64, Result<usize, ListBodyError>) {
    let region = Region::new(GLOBAL);
    let mut peak = 0;
    let mut decoder = ListDecoder::<O>::with_limits(limits);
    for chunk in body.chunks(4096) {
        let pushed = decoder.push(chunk);
        peak = peak.max(net(&region));
        if let Err(e) = pushed {
            return (peak, Err(e));
        }
    }
    let list = decoder.finish().map(|l| l.items.len());
    (peak.max(net(&region)), list)
}

#[test]
fn a_decoded_list_holds_a_bounded_multiple_of_its_body() {
    // Real pods: far under 4x as the core's partial view.
    for name in ["v1-36_pod-list.body.json", "v1-20_pod-list.body.json"] {
        let body = real(name);
        let (peak, items) = decode::<PodView>(&body, ListLimits::default());
        assert_eq!(items, Ok(8), "{name}");
        assert!(
            (peak as f64) < 0.5 * body.len() as f64,
            "{name}: {peak} B held for {} B",
            body.len()
        );
    }

    // Empty items, which held about 160x their body as PodViews: refused once the charge
    // passes 4x the bytes read + the allowance, and the heap stays within twice that (a
    // vector's growth) plus the chunk at hand.
    let limits = ListLimits {
        multiple: 4,
        allowance: 1 << 20,
        max_items: usize::MAX,
    };
    let body = list_of("{}", 200_000);
    let (peak, result) = decode::<PodView>(&body, limits);
    let Err(ListBodyError::TooLarge {
        index, read, limit, ..
    }) = result
    else {
        panic!("{result:?}")
    };
    assert!(index > 1000 && index < 10_000, "{index}");
    assert!(limit == limits.limit(read));
    assert!(
        peak < 2 * limit as i64 + 8192,
        "{peak} B held, bound {limit}"
    );

    // The same body with no bound holds over 100x.
    let (peak, items) = decode::<PodView>(&body, ListLimits::unbounded());
    assert_eq!(items, Ok(200_000));
    assert!(peak > 100 * body.len() as i64, "{peak}");

    // Nested arrays count too: one item of 10,000 containers, each `{"name":""}` (about 2 KB
    // as a k8s-openapi Container), is refused while it decodes.
    let containers = vec![r#"{"name":""}"#; 10_000].join(",");
    let body = list_of(&format!(r#"{{"spec":{{"containers":[{containers}]}}}}"#), 1);
    let (peak, result) = decode::<k8s_openapi::api::core::v1::Pod>(&body, limits);
    assert!(
        matches!(result, Err(ListBodyError::TooLarge { index: 0, .. })),
        "{result:?}"
    );
    assert!(peak < 4 * limits.limit(body.len() as u64) as i64, "{peak}");

    // The count bound.
    let counted = ListLimits {
        max_items: 3,
        ..ListLimits::default()
    };
    let body = list_of(r#"{"metadata":{"name":"a"}}"#, 4);
    let (_, result) = decode::<PodView>(&body, counted);
    assert!(
        matches!(
            result,
            Err(ListBodyError::TooManyItems {
                limit: 3,
                index: 3,
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(
        parse_list::<PodView>(&body).map(|l| l.items.len()),
        Ok(4),
        "the default bound takes it"
    );
}
