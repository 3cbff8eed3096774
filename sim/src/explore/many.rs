//! Many-source workloads: a primary, the children it owns and objects that name several
//! owners, each fault hitting one source or every source.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::rng::Rng;
use reconcile_core::KeyBy;

use crate::explore::generate::{at, fault, frame};
use crate::explore::profiles::{MANY_SOURCE_PROFILES, PROFILES, fault_kinds};
use crate::trace::{Entry, GoneAs, Header, Record, ScriptedOutcome, Trace};

/// An object of `kind` as the many-source workloads write it; `owners` are
/// `(kind, name, controller)`.
fn object(
    kind: &str,
    name: &str,
    uid: u64,
    app: &str,
    phase: &str,
    owners: &[(&str, String, bool)],
) -> String {
    let owners: Vec<String> = owners
        .iter()
        .map(|(kind, name, controller)| {
            format!(
                "{{\"apiVersion\":\"example.dev/v1\",\"kind\":\"{kind}\",\"name\":\"{name}\",\"uid\":\"uid-{name}\",\"controller\":{controller}}}"
            )
        })
        .collect();
    let owners = if owners.is_empty() {
        String::new()
    } else {
        format!(",\"ownerReferences\":[{}]", owners.join(","))
    };
    format!(
        "{{\"kind\":\"{kind}\",\"metadata\":{{\"name\":\"{name}\",\"namespace\":\"default\",\"uid\":\"u{uid}\",\"labels\":{{\"app\":\"{app}\"}}{owners}}},\"status\":{{\"phase\":\"{phase}\"}}}}"
    )
}

pub(super) fn toggle<'a>(value: &'a str, a: &'a str, b: &'a str) -> &'a str {
    if value == a { b } else { a }
}

/// One object of a many-source workload, as the generator last wrote it.
#[derive(Clone)]
struct Written {
    uid: u64,
    app: &'static str,
    phase: &'static str,
    /// `(kind, owner name, controller)`.
    owners: Vec<(&'static str, String, bool)>,
}

impl Written {
    fn json(&self, kind: &str, name: &str) -> String {
        object(kind, name, self.uid, self.app, self.phase, &self.owners)
    }
}

/// A many-source seed: `Cell`s (the primary, one parent each), the `Part`s they own as
/// controller (S1: created, edited, deleted behind the controller's back, re-owned, orphaned,
/// moved out of and into the selector), and, on half the seeds, `Link`s that name one to
/// three cells as owners (S2, any owner: one object waking several parents). A deleted cell
/// has its parts and links collected later, as the garbage collector would. Reconcile-all
/// triggers come at random times, and each fault hits one source or all.
#[must_use]
pub fn generate_many(seed: u64, long: bool) -> (Trace, &'static str) {
    let mut rng = Rng::new(seed);
    let i = usize::try_from(rng.below(MANY_SOURCE_PROFILES.len() as u64)).unwrap_or(0);
    let profile = MANY_SOURCE_PROFILES[i];
    let base = PROFILES[i];
    let window = if long { 3600 } else { 300 };
    let links = rng.chance(50);
    let timeout = |rng: &mut Rng| *rng.pick(&[30, 60, 300]);
    let mut secondaries = vec![reconcile_core::SecondaryConfig {
        params: reconcile_core::WatchParams {
            namespace: Some("default".into()),
            label_selector: Some("app=cell".into()),
            ..reconcile_core::WatchParams::default().timeout(timeout(&mut rng))
        },
        parents_by: reconcile_core::ParentsBy::ControllerOwner("Cell".into()),
    }];
    if links {
        secondaries.push(reconcile_core::SecondaryConfig {
            params: reconcile_core::WatchParams {
                namespace: Some("default".into()),
                ..reconcile_core::WatchParams::default().timeout(timeout(&mut rng))
            },
            parents_by: reconcile_core::ParentsBy::AnyOwner("Cell".into()),
        });
    }
    let sources = 1 + secondaries.len() as u64;
    let mut header = Header {
        description: Some(format!("explore seed {seed}, profile {profile}")),
        namespace: Some("default".into()),
        label_selector: Some("app=cell".into()),
        parent: KeyBy::Name,
        concurrency: usize::try_from(rng.range(1, 4)).unwrap_or(1),
        timeout_seconds: timeout(&mut rng),
        bookmark_interval: if rng.chance(70) {
            Some(Duration::from_secs(rng.range(5, 60)))
        } else {
            None
        },
        gone_as: if base == "gone-status" || (base == "chaos" && rng.chance(50)) {
            GoneAs::Status
        } else {
            GoneAs::Frame
        },
        secondaries,
        ..Header::default()
    };
    if base == "compaction" {
        header.compaction_window = Duration::from_secs(rng.range(5, 30));
    }
    let max_cells = if long { 8 } else { 4 };
    let max_parts = if long { 24 } else { 10 };
    let max_links = if long { 8 } else { 4 };
    let ops = if long {
        rng.range(60, 300)
    } else {
        rng.range(10, 40)
    };
    let mut times: Vec<u64> = (0..ops).map(|_| rng.range(0, window)).collect();
    times.sort_unstable();
    let cell_name = |rng: &mut Rng| format!("c{}", rng.below(max_cells));
    let mut cells: BTreeMap<String, Written> = BTreeMap::new();
    let mut parts: BTreeMap<String, Written> = BTreeMap::new();
    let mut linked: BTreeMap<String, Written> = BTreeMap::new();
    let mut uid = 0;
    let mut events: Vec<(u64, u64, Record)> = Vec::new();
    let mut push = |t: u64, source: u64, record: Record| events.push((t, source, record));
    for t in times {
        let roll = rng.below(100);
        if roll < 35 {
            // A cell.
            let name = cell_name(&mut rng);
            let Some(mut cell) = cells.get(&name).cloned() else {
                uid += 1;
                let cell = Written {
                    uid,
                    app: "cell",
                    phase: "Pending",
                    owners: Vec::new(),
                };
                push(t, 0, frame("ADDED", &cell.json("Cell", &name)));
                cells.insert(name, cell);
                continue;
            };
            match rng.below(5) {
                0 => {
                    push(t, 0, frame("DELETED", &cell.json("Cell", &name)));
                    cells.remove(&name);
                    // The garbage collector, a little later: the parts it controlled go,
                    // and links drop it from their owners (or go, when it was the last).
                    let later = t + rng.range(1, 30);
                    let owned: Vec<String> = parts
                        .iter()
                        .filter(|(_, p)| p.owners.iter().any(|(_, n, c)| *c && *n == name))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for key in owned {
                        if let Some(part) = parts.remove(&key) {
                            push(later, 1, frame("DELETED", &part.json("Part", &key)));
                        }
                    }
                    let named: Vec<String> = linked
                        .iter()
                        .filter(|(_, l)| l.owners.iter().any(|(_, n, _)| *n == name))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for key in named {
                        let Some(mut link) = linked.remove(&key) else {
                            continue;
                        };
                        link.owners.retain(|(_, n, _)| *n != name);
                        if link.owners.is_empty() {
                            push(later, 2, frame("DELETED", &link.json("Link", &key)));
                        } else {
                            push(later, 2, frame("MODIFIED", &link.json("Link", &key)));
                            linked.insert(key, link);
                        }
                    }
                    continue;
                }
                1 => cell.app = toggle(cell.app, "cell", "other"),
                _ => cell.phase = toggle(cell.phase, "Running", "Pending"),
            }
            push(t, 0, frame("MODIFIED", &cell.json("Cell", &name)));
            cells.insert(name, cell);
        } else if roll < 80 || !links {
            // A part.
            let name = format!("part-{}", rng.below(max_parts));
            let Some(mut part) = parts.get(&name).cloned() else {
                uid += 1;
                let part = Written {
                    uid,
                    app: "cell",
                    phase: "Pending",
                    owners: vec![("Cell", cell_name(&mut rng), true)],
                };
                push(t, 1, frame("ADDED", &part.json("Part", &name)));
                parts.insert(name, part);
                continue;
            };
            match rng.below(8) {
                // Deleted behind the controller's back.
                0 => {
                    push(t, 1, frame("DELETED", &part.json("Part", &name)));
                    parts.remove(&name);
                    continue;
                }
                // Re-owned by another cell.
                1 | 2 => part.owners = vec![("Cell", cell_name(&mut rng), true)],
                // Orphaned (no longer a controller reference), or adopted again.
                3 => {
                    if let Some(owner) = part.owners.first_mut() {
                        owner.2 = !owner.2;
                    }
                }
                // Owned by a kind the controller does not own.
                4 => {
                    if let Some(owner) = part.owners.first_mut() {
                        owner.0 = toggle(owner.0, "Cell", "Other");
                    }
                }
                5 => part.app = toggle(part.app, "cell", "other"),
                _ => part.phase = toggle(part.phase, "Running", "Pending"),
            }
            push(t, 1, frame("MODIFIED", &part.json("Part", &name)));
            parts.insert(name, part);
        } else {
            // A link.
            let name = format!("link-{}", rng.below(max_links));
            let Some(mut link) = linked.get(&name).cloned() else {
                uid += 1;
                let mut owners = vec![("Cell", cell_name(&mut rng), false)];
                for _ in 0..rng.below(3) {
                    owners.push(("Cell", cell_name(&mut rng), false));
                }
                let link = Written {
                    uid,
                    app: "cell",
                    phase: "Pending",
                    owners,
                };
                push(t, 2, frame("ADDED", &link.json("Link", &name)));
                linked.insert(name, link);
                continue;
            };
            match rng.below(5) {
                0 => {
                    push(t, 2, frame("DELETED", &link.json("Link", &name)));
                    linked.remove(&name);
                    continue;
                }
                1 => link.owners.push(("Cell", cell_name(&mut rng), false)),
                2 if link.owners.len() > 1 => {
                    let drop = usize::try_from(rng.below(link.owners.len() as u64)).unwrap_or(0);
                    link.owners.remove(drop);
                }
                _ => link.phase = toggle(link.phase, "Running", "Pending"),
            }
            push(t, 2, frame("MODIFIED", &link.json("Link", &name)));
            linked.insert(name, link);
        }
    }
    // Reconcile-all triggers, as `reconcile_all_on` would send them.
    for _ in 0..rng.below(3) {
        push(rng.range(1, window), 0, Record::ReconcileAll);
    }
    // Scripted outcomes, as in the one-source workloads.
    for _ in 0..rng.below(4) {
        let t = rng.range(0, window);
        let parent = Some(format!("default/{}", cell_name(&mut rng)));
        let outcome = match rng.below(4) {
            0 => ScriptedOutcome::RequeueAfter(Duration::from_secs(rng.range(1, 120))),
            1 => ScriptedOutcome::ErrorHandled {
                error: "scripted conflict".into(),
                requeue_after: rng
                    .chance(50)
                    .then(|| Duration::from_secs(rng.range(1, 120))),
            },
            _ => ScriptedOutcome::Error("scripted failure".into()),
        };
        push(
            t,
            0,
            Record::Reconcile {
                parent,
                outcome,
                duration: Duration::ZERO,
                writes: Vec::new(),
            },
        );
    }
    // Faults, each on one source (a 410 on the children while the cells stream, say) or on
    // every source.
    let kinds = fault_kinds(profile);
    let mut faults: Vec<(u64, Option<u64>, Record)> = Vec::new();
    if !kinds.is_empty() {
        let n = if base == "chaos" {
            rng.range(3, 10)
        } else {
            rng.range(1, 5)
        };
        for _ in 0..n {
            let kind = *rng.pick(kinds);
            let t = rng.range(1, window);
            let target = rng.chance(60).then(|| rng.below(sources));
            faults.push((t, target, Record::Fault(fault(&mut rng, kind))));
        }
    }
    let mut entries: Vec<(u64, Entry)> = events
        .into_iter()
        .map(|(t, source, record)| {
            let mut entry = Entry::new(at(t), record);
            entry.source = (source != 0).then_some(source);
            (t, entry)
        })
        .chain(faults.into_iter().map(|(t, target, record)| {
            let mut entry = Entry::new(at(t), record);
            entry.source = target;
            (t, entry)
        }))
        .collect();
    // Stable by time: same-time events keep generation order.
    entries.sort_by_key(|(t, _)| *t);
    (
        Trace {
            name: format!("seed-{seed}"),
            header,
            entries: entries.into_iter().map(|(_, e)| e).collect(),
        },
        profile,
    )
}
