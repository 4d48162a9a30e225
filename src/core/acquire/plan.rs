//! What the acquisition machine is given for a request on this client: its
//! [`Plan`] (nodes, keys, lease, bounds, and what an attempt takes).

use crate::core::config::AcquireSpec;
use crate::core::keys::{self, CHANNEL_PREFIX};
use crate::core::model::{self, Kind, Request};
use crate::core::ops::acquire::LeaseTerms;
use crate::core::ops::acquisition::{Plan, Take};
use crate::core::shared::Inner;
use crate::core::time::ms_of;

/// What the machine is given for `request`.
pub(crate) fn plan_of(inner: &Inner, request: &Request) -> Plan {
    let spec = &request.spec;
    let keys = keys::prefixed(&inner.cfg.key_prefix, &request.names);
    let take = match request.permits {
        None => Take::Lock,
        Some(p) if p.kind == Kind::Fair => Take::Fair {
            fence: inner.cfg.fencing.then(|| keys::fence_key(&keys[0])),
            place_ms: place_ms(spec),
        },
        Some(permits) if permits.kind == Kind::Slots => Take::Slots { permits },
        Some(permits) if permits.kind.is_fair() => Take::FairPermits {
            permits,
            place_ms: place_ms(spec),
        },
        Some(permits) => Take::Permits {
            permits,
            writer: model::writer_key(&keys[0]),
            mark_ms: writer_mark_ms(spec),
        },
    };
    // Permits carry no fence.
    let fencing = inner.cfg.fencing && matches!(take, Take::Lock | Take::Fair { .. });
    // A cluster would broadcast every notice to all its nodes: its waiters
    // keep their retry timers.
    let plain = inner.nodes.iter().any(|n| !n.is_cluster());
    Plan {
        nodes: inner.nodes.iter().map(|n| n.name.clone()).collect(),
        script_keys: keys::script_keys(&keys, fencing && take.permits().is_none()),
        notices: keys.len() == 1 && plain,
        channel: if plain { CHANNEL_PREFIX } else { "" },
        // (Several nodes: a quorum of masters stands for the replicas.)
        wait_replicas: spec
            .wait_replicas
            .filter(|_| inner.nodes.len() == 1 && matches!(take, Take::Lock)),
        take,
        keys,
        label: request.names.join(", "),
        lease: LeaseTerms {
            ttl: spec.ttl,
            drift: inner.cfg.drift_for(spec.ttl),
            min_validity: spec.min_validity,
            fencing,
        },
        node_timeout: inner.cfg.node_timeout_for(spec.ttl),
        retry_delay: spec.retry_delay,
        retry_jitter: spec.retry_jitter,
        retry_count: spec.retry_count,
        wait_timeout: spec.wait_timeout,
    }
}

/// How long a waiting writer's mark lasts: it outlives the writer's pauses
/// between attempts, not much more; a writer that will not wait leaves none.
pub(crate) fn writer_mark_ms(spec: &AcquireSpec) -> u64 {
    if spec.retry_count == Some(0) || spec.wait_timeout.is_zero() {
        0
    } else {
        ms_of(spec.retry_delay + spec.retry_jitter)
            .saturating_mul(2)
            .max(200)
    }
}

/// How long a waiter's place in a fair line lasts unless its next attempt
/// renews it: a waiter pauses at most retryDelay + retryJitter between
/// attempts, and the floor rides out a process that is not scheduled for a
/// while (a loaded machine, a GC pause). A single attempt takes no place.
fn place_ms(spec: &AcquireSpec) -> u64 {
    if spec.retry_count == Some(0) || spec.wait_timeout.is_zero() {
        return 0;
    }
    ms_of(spec.retry_delay + spec.retry_jitter)
        .saturating_mul(4)
        .max(2_000)
}
