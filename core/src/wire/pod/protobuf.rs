//! The Pod view from Kubernetes protobuf: a core/v1 `Pod` message walked straight into
//! [`PodView`], strings inline when short as on the JSON path (see
//! [`protobuf`](crate::protobuf) for what the apiserver sends).

use compact_str::CompactString;

use super::view::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    ControllerRef, PodCondition, PodMetadata, PodSpec, PodStatus, PodView, SchedulingGate,
};
use crate::string_map::StringMap;
use crate::wire::protobuf::codec::{ProtobufCodec, ProtobufError};
use crate::wire::protobuf::reader::{Budget, Reader, map_entry, time};

/// How [`PodView`] decodes from protobuf.
pub(crate) const POD_VIEW: ProtobufCodec<PodView> = ProtobufCodec {
    kind: "Pod",
    list_kind: "PodList",
    decode: pod_view,
};

/// Decodes a core/v1 `Pod` message into the view (core/v1 `generated.proto`: Pod metadata 1,
/// spec 2, status 3), holding at most `limit` bytes beyond the view itself (as charged, see
/// [`ProtobufCodec::decode`]); returns the view and its charge. A field that occurs twice
/// merges, as protobuf says.
///
/// # Errors
/// The message is not a well-formed `Pod`, or would hold more than `limit`.
pub fn pod_view(message: &[u8], base: usize, limit: u64) -> Result<(PodView, u64), ProtobufError> {
    let budget = Budget::new(limit);
    let mut pod = PodView::default();
    let mut r = Reader::new(message, base, "Pod", &budget);
    while let Some((field, value)) = r.next()? {
        match field {
            1 => object_meta(
                &mut pod.metadata,
                r.child(r.bytes(field, value)?, "Pod.metadata"),
            )?,
            2 => pod_spec(&mut pod.spec, r.child(r.bytes(field, value)?, "Pod.spec"))?,
            3 => pod_status(
                &mut pod.status,
                r.child(r.bytes(field, value)?, "Pod.status"),
            )?,
            _ => {}
        }
    }
    Ok((pod, budget.used()))
}

/// meta/v1 `ObjectMeta`: name 1, namespace 3, uid 5, resourceVersion 6, deletionTimestamp 9,
/// labels 11, annotations 12, ownerReferences 13.
fn object_meta(meta: &mut PodMetadata, mut r: Reader<'_, '_>) -> Result<(), ProtobufError> {
    let mut labels: Vec<(&str, &str)> = Vec::new();
    let mut annotations: Vec<(&str, &str)> = Vec::new();
    while let Some((field, value)) = r.next()? {
        match field {
            1 => meta.name = r.opt_str(field, value)?,
            3 => meta.namespace = r.opt_str(field, value)?,
            5 => meta.uid = r.opt_str(field, value)?,
            6 => meta.resource_version = r.opt_str(field, value)?,
            9 => {
                let time_at = r.bytes(field, value)?;
                meta.deletion_timestamp = time(r.child(time_at, "Pod.metadata.deletionTimestamp"))?;
            }
            11 => labels.push(map_entry(
                r.child(r.bytes(field, value)?, "Pod.metadata.labels"),
            )?),
            12 => annotations.push(map_entry(
                r.child(r.bytes(field, value)?, "Pod.metadata.annotations"),
            )?),
            13 => {
                let owner = owner_reference(
                    r.child(r.bytes(field, value)?, "Pod.metadata.ownerReferences"),
                )?;
                if meta.controller.is_none() {
                    meta.controller = owner;
                }
            }
            _ => {}
        }
    }
    merge_map(&r, &mut meta.labels, labels)?;
    merge_map(&r, &mut meta.annotations, annotations)
}

/// Sets `map` to its entries followed by `more` (a later entry of a key wins, as in protobuf
/// and JSON), charging its text and offsets; leaves it untouched when there is nothing more.
fn merge_map(
    r: &Reader<'_, '_>,
    map: &mut StringMap,
    more: Vec<(&str, &str)>,
) -> Result<(), ProtobufError> {
    if more.is_empty() {
        return Ok(());
    }
    let text: usize = more.iter().map(|(k, v)| k.len() + v.len()).sum();
    r.charge(text + 8 * more.len())?;
    *map = if map.is_empty() {
        more.into_iter().collect()
    } else {
        map.iter().chain(more).collect()
    };
    Ok(())
}

/// meta/v1 `OwnerReference`: kind 1, name 3, controller 6; `Some` only for the controller.
fn owner_reference(mut r: Reader<'_, '_>) -> Result<Option<ControllerRef>, ProtobufError> {
    let (mut kind, mut name, mut controller) =
        (CompactString::default(), CompactString::default(), false);
    while let Some((field, value)) = r.next()? {
        match field {
            1 => kind = r.compact(field, value)?,
            3 => name = r.compact(field, value)?,
            6 => controller = r.varint(field, value)? != 0,
            _ => {}
        }
    }
    Ok(controller.then_some(ControllerRef { kind, name }))
}

/// core/v1 `PodSpec`: nodeSelector 7, nodeName 10, subdomain 17, schedulingGates 38
/// (PodSchedulingGate: name 1).
fn pod_spec(spec: &mut PodSpec, mut r: Reader<'_, '_>) -> Result<(), ProtobufError> {
    let mut selector: Vec<(&str, &str)> = Vec::new();
    let mut gates = std::mem::take(&mut spec.scheduling_gates).into_vec();
    while let Some((field, value)) = r.next()? {
        match field {
            7 => selector.push(map_entry(
                r.child(r.bytes(field, value)?, "Pod.spec.nodeSelector"),
            )?),
            10 => spec.node_name = r.opt_str(field, value)?,
            17 => spec.subdomain = r.opt_str(field, value)?,
            38 => {
                r.charge(size_of::<SchedulingGate>())?;
                let mut g = r.child(r.bytes(field, value)?, "Pod.spec.schedulingGates");
                let mut gate = SchedulingGate::default();
                while let Some((field, value)) = g.next()? {
                    if field == 1 {
                        gate.name = g.compact(field, value)?;
                    }
                }
                gates.push(gate);
            }
            _ => {}
        }
    }
    merge_map(&r, &mut spec.node_selector, selector)?;
    spec.scheduling_gates = gates.into_boxed_slice();
    Ok(())
}

/// core/v1 `PodStatus`: phase 1, conditions 2, podIP 6, containerStatuses 8.
fn pod_status(status: &mut PodStatus, mut r: Reader<'_, '_>) -> Result<(), ProtobufError> {
    let mut conditions = std::mem::take(&mut status.conditions).into_vec();
    let mut containers = std::mem::take(&mut status.container_statuses).into_vec();
    while let Some((field, value)) = r.next()? {
        match field {
            1 => status.phase = r.opt_str(field, value)?,
            6 => status.pod_ip = r.opt_str(field, value)?,
            2 => {
                r.charge(size_of::<PodCondition>())?;
                conditions.push(pod_condition(
                    r.child(r.bytes(field, value)?, "Pod.status.conditions"),
                )?);
            }
            8 => {
                r.charge(size_of::<ContainerStatus>())?;
                containers.push(container_status(
                    r.child(r.bytes(field, value)?, "Pod.status.containerStatuses"),
                )?);
            }
            _ => {}
        }
    }
    status.conditions = conditions.into_boxed_slice();
    status.container_statuses = containers.into_boxed_slice();
    Ok(())
}

/// core/v1 `PodCondition`: type 1, status 2, reason 5.
fn pod_condition(mut r: Reader<'_, '_>) -> Result<PodCondition, ProtobufError> {
    let mut condition = PodCondition::default();
    while let Some((field, value)) = r.next()? {
        match field {
            1 => condition.type_ = r.compact(field, value)?,
            2 => condition.status = r.compact(field, value)?,
            5 => condition.reason = r.opt_str(field, value)?.map(|text| text.as_str().into()),
            _ => {}
        }
    }
    Ok(condition)
}

/// core/v1 `ContainerStatus`: name 1, state 2, lastState 3, restartCount 5, containerID 8.
fn container_status(mut r: Reader<'_, '_>) -> Result<ContainerStatus, ProtobufError> {
    let mut c = ContainerStatus::default();
    while let Some((field, value)) = r.next()? {
        match field {
            1 => c.name = r.compact(field, value)?,
            2 => container_state(
                &mut c.state,
                r.child(r.bytes(field, value)?, "ContainerStatus.state"),
            )?,
            3 => container_state(
                &mut c.last_state,
                r.child(r.bytes(field, value)?, "ContainerStatus.lastState"),
            )?,
            // int32: Go truncates the varint to 32 bits.
            5 => c.restart_count = r.varint(field, value)? as i32,
            8 => c.container_id = r.opt_str(field, value)?,
            _ => {}
        }
    }
    Ok(c)
}

/// core/v1 `ContainerState`: running 2 (ContainerStateRunning: startedAt 1), terminated 3
/// (ContainerStateTerminated: containerID 7).
fn container_state(state: &mut ContainerState, mut r: Reader<'_, '_>) -> Result<(), ProtobufError> {
    while let Some((field, value)) = r.next()? {
        match field {
            2 => {
                let running = state
                    .running
                    .get_or_insert_with(ContainerStateRunning::default);
                let mut s = r.child(r.bytes(field, value)?, "ContainerState.running");
                while let Some((field, value)) = s.next()? {
                    if field == 1 {
                        let at = s.bytes(field, value)?;
                        running.started_at = time(s.child(at, "ContainerState.running.startedAt"))?;
                    }
                }
            }
            3 => {
                let terminated = state
                    .terminated
                    .get_or_insert_with(ContainerStateTerminated::default);
                let mut t = r.child(r.bytes(field, value)?, "ContainerState.terminated");
                while let Some((field, value)) = t.next()? {
                    if field == 7 {
                        terminated.container_id = t.opt_str(field, value)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}
