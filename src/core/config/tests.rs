//! The settings' checks and defaults.

use std::time::Duration;

use super::*;
use crate::core::error::ErrorCode;

#[test]
fn whole_number_rejects_bad_values() {
    for bad in [f64::NAN, f64::INFINITY, -1.0, 0.0, 1.5, 2_147_483_648.0] {
        let err = whole_number("ttl", bad, 1).expect_err("must reject");
        assert_eq!(err.code, ErrorCode::OutOfRange, "{bad}");
    }
    assert_eq!(whole_number("ttl", 1.0, 1).ok(), Some(1));
    assert_eq!(whole_number("retryCount", 0.0, 0).ok(), Some(0));
}

#[test]
fn leases_take_every_safe_integer() {
    let max = 9_007_199_254_740_991.0; // Number.MAX_SAFE_INTEGER
    assert_eq!(
        lease_millis("ttl", max, 1).ok(),
        Some(Duration::from_millis(MAX_LEASE_MS))
    );
    assert!(lease_millis("ttl", 2_147_483_648.0, 1).is_ok());
    for bad in [max + 1.0, max * 2.0, f64::INFINITY, 0.0, 0.5] {
        let err = lease_millis("ttl", bad, 1).expect_err("must reject");
        assert_eq!(err.code, ErrorCode::OutOfRange, "{bad}");
    }
    // Waits and timeouts keep the timer limit.
    assert!(millis("waitTimeout", 2_147_483_648.0, 0).is_err());
}

#[test]
fn defaults_resolve() {
    let spec = AcquireOptions::default()
        .resolve()
        .expect("defaults are valid");
    assert_eq!(spec.ttl, DEFAULT_TTL);
    assert_eq!(spec.renew_interval, DEFAULT_TTL / 3);
    assert!(spec.auto_renew);
    assert_eq!(spec.retry_count, None);
}

#[test]
fn renew_interval_must_be_below_ttl() {
    let opts = AcquireOptions {
        ttl: Some(Duration::from_millis(100)),
        renew_interval: Some(Duration::from_millis(100)),
        ..Default::default()
    };
    assert_eq!(
        opts.resolve().expect_err("rejected").code,
        ErrorCode::OutOfRange
    );
}

#[test]
fn members_are_masters_or_clusters() {
    let cluster = |seeds: &[&str]| NodeSpec::Cluster(seeds.iter().map(|s| s.to_string()).collect());
    let mut cfg = ClientConfig::default();
    assert!(!cfg.has_cluster());
    cfg.nodes = vec!["redis://a".into(), cluster(&["redis://b", "redis://c"])];
    assert!(cfg.has_cluster());
    assert_eq!(cfg.node_count(), 2);
    assert!(cfg.validate().is_ok());
    cfg.nodes.push(cluster(&[]));
    let err = cfg.validate().expect_err("a cluster member needs a seed");
    assert_eq!(err.code, ErrorCode::InvalidArgValue);
    // waitReplicas: one plain master only, never a cluster member.
    for nodes in [
        vec![cluster(&["redis://b"])],
        vec!["redis://a".into(), cluster(&["redis://b"])],
    ] {
        cfg.nodes = nodes;
        let spec = AcquireOptions {
            wait_replicas: Some(1),
            ..Default::default()
        }
        .resolve()
        .expect("valid options");
        assert_eq!(
            cfg.check_spec(&spec).expect_err("refused").code,
            ErrorCode::InvalidArgValue
        );
    }
}

#[test]
fn a_sentinel_master_is_one_node_and_stands_alone() {
    let sentinel = SentinelConfig {
        sentinels: vec!["redis://127.0.0.1:26379".into()],
        name: "mymaster".into(),
        ..Default::default()
    };
    let cfg = ClientConfig {
        nodes: Vec::new(),
        sentinel: Some(sentinel.clone()),
        ..ClientConfig::default()
    };
    assert!(cfg.validate().is_ok());
    assert_eq!((cfg.node_count(), cfg.quorum()), (1, 1));
    let with_nodes = ClientConfig {
        sentinel: Some(sentinel.clone()),
        ..ClientConfig::default()
    };
    let err = with_nodes.validate().expect_err("sentinel with nodes");
    assert!(
        err.message.contains("cannot be combined"),
        "{}",
        err.message
    );
    for (bad, name) in [
        (
            SentinelConfig {
                sentinels: Vec::new(),
                ..sentinel.clone()
            },
            "sentinel.sentinels",
        ),
        (
            SentinelConfig {
                sentinels: vec!["rediss://127.0.0.1:26379".into()],
                ..sentinel.clone()
            },
            "sentinel.sentinels",
        ),
        (
            SentinelConfig {
                name: String::new(),
                ..sentinel.clone()
            },
            "sentinel.name",
        ),
    ] {
        let err = bad.validate().expect_err(name);
        assert_eq!(err.code, ErrorCode::InvalidArgValue, "{name}");
        assert!(err.message.contains(name), "{}", err.message);
    }
    let secret = SentinelConfig {
        password: Some("s3cret".into()),
        sentinel_password: Some("s3cret".into()),
        ..sentinel
    };
    assert!(!format!("{secret:?}").contains("s3cret"));
}

#[test]
fn node_timeout_is_a_share_of_ttl_with_several_nodes() {
    let mut cfg = ClientConfig::default();
    assert_eq!(
        cfg.node_timeout_for(Duration::from_secs(10)),
        DEFAULT_COMMAND_TIMEOUT
    );
    cfg.nodes = vec!["redis://a".into(), "redis://b".into(), "redis://c".into()];
    assert_eq!(cfg.quorum(), 2);
    assert_eq!(
        cfg.node_timeout_for(Duration::from_secs(10)),
        Duration::from_millis(500)
    );
    assert_eq!(
        cfg.drift_for(Duration::from_secs(10)),
        Duration::from_millis(102)
    );
    // Short leases: at least 50 ms, but never over a third of the TTL.
    assert_eq!(
        cfg.node_timeout_for(Duration::from_millis(150)),
        Duration::from_millis(50)
    );
    assert_eq!(
        cfg.node_timeout_for(Duration::from_millis(90)),
        Duration::from_millis(30)
    );
    // A cluster's seeds are one lock node.
    cfg.nodes = vec![NodeSpec::Cluster(vec![
        "redis://a".into(),
        "redis://b".into(),
    ])];
    assert_eq!(cfg.quorum(), 1);
    assert_eq!(
        cfg.node_timeout_for(Duration::from_secs(10)),
        DEFAULT_COMMAND_TIMEOUT
    );
}

#[test]
fn the_default_client_is_one_local_master() {
    let cfg = ClientConfig::default();
    assert_eq!(cfg.nodes, [NodeSpec::Master(DEFAULT_URL.to_string())]);
    assert_eq!((cfg.node_count(), cfg.quorum()), (1, 1));
    assert!(cfg.validate().is_ok());
    assert_eq!(
        NodeSpec::from("redis://x"),
        NodeSpec::Master("redis://x".into())
    );
    assert!(!NodeSpec::from(String::from("redis://x")).is_cluster());
}

#[test]
fn a_client_needs_a_node() {
    let cfg = ClientConfig {
        nodes: Vec::new(),
        ..ClientConfig::default()
    };
    let err = cfg.validate().expect_err("no node");
    assert_eq!(err.code, ErrorCode::InvalidArgValue);
    assert!(err.message.contains("nodes"), "{}", err.message);
}

#[test]
fn drift_factor_stays_below_one_half() {
    for bad in [-0.1, 0.5, 1.0, f64::NAN, f64::INFINITY] {
        let cfg = ClientConfig {
            drift_factor: bad,
            ..ClientConfig::default()
        };
        let err = cfg.validate().expect_err("out of range");
        assert_eq!(err.code, ErrorCode::OutOfRange, "{bad}");
    }
    for good in [0.0, 0.01, 0.49] {
        let cfg = ClientConfig {
            drift_factor: good,
            ..ClientConfig::default()
        };
        assert!(cfg.validate().is_ok(), "{good}");
    }
}

#[test]
fn the_client_checks_its_default_options() {
    let cfg = ClientConfig {
        defaults: AcquireOptions {
            ttl: Some(Duration::from_millis(50)),
            renew_interval: Some(Duration::from_millis(60)),
            ..Default::default()
        },
        ..ClientConfig::default()
    };
    assert_eq!(
        cfg.validate().expect_err("renewInterval").code,
        ErrorCode::OutOfRange
    );
}

#[test]
fn waiting_for_replicas_must_end_within_the_ttl() {
    let cfg = ClientConfig::default();
    let spec = |wait: u64| {
        AcquireOptions {
            ttl: Some(Duration::from_millis(100)),
            wait_replicas: Some(2),
            wait_replicas_timeout: Some(Duration::from_millis(wait)),
            ..Default::default()
        }
        .resolve()
        .expect("valid options")
    };
    assert!(cfg.check_spec(&spec(99)).is_ok());
    let err = cfg.check_spec(&spec(100)).expect_err("too long");
    assert_eq!(err.code, ErrorCode::OutOfRange);
    assert!(
        err.message.contains("waitReplicasTimeout"),
        "{}",
        err.message
    );
}

#[test]
fn replicas_are_waited_for_only_when_asked() {
    let none = AcquireOptions::default().resolve().expect("defaults");
    assert_eq!(none.wait_replicas, None);
    let zero = AcquireOptions {
        wait_replicas: Some(0),
        ..Default::default()
    };
    assert_eq!(zero.resolve().expect("valid").wait_replicas, None);
    let two = AcquireOptions {
        wait_replicas: Some(2),
        ..Default::default()
    };
    assert_eq!(
        two.resolve().expect("valid").wait_replicas,
        Some((2, DEFAULT_WAIT_REPLICAS_TIMEOUT))
    );
}

#[test]
fn a_request_fills_its_unset_options_from_the_clients() {
    let base = AcquireOptions {
        ttl: Some(Duration::from_millis(5_000)),
        retry_count: Some(Some(3)),
        auto_renew: Some(false),
        ..Default::default()
    };
    let mine = AcquireOptions {
        ttl: Some(Duration::from_millis(800)),
        retry_count: Some(None),
        ..Default::default()
    };
    let both = mine.or(&base);
    assert_eq!(both.ttl, Some(Duration::from_millis(800)));
    assert_eq!(both.retry_count, Some(None), "no limit overrides a limit");
    assert_eq!(both.auto_renew, Some(false));
    assert_eq!(AcquireOptions::default().or(&base), base);
}

#[test]
fn max_hold_must_be_positive() {
    let zero = AcquireOptions {
        max_hold: Some(Some(Duration::ZERO)),
        ..Default::default()
    };
    assert_eq!(
        zero.validate().expect_err("zero").code,
        ErrorCode::OutOfRange
    );
    let unbounded = AcquireOptions {
        max_hold: Some(None),
        ..Default::default()
    };
    assert_eq!(unbounded.resolve().expect("valid").max_hold, None);
}

#[test]
fn defaults_fill_every_resolved_field() {
    let spec = AcquireOptions::default().resolve().expect("defaults");
    assert_eq!(spec.retry_delay, DEFAULT_RETRY_DELAY);
    assert_eq!(spec.retry_jitter, DEFAULT_RETRY_JITTER);
    assert_eq!(spec.wait_timeout, DEFAULT_WAIT_TIMEOUT);
    assert_eq!(spec.min_validity, Duration::from_millis(1));
    assert_eq!(spec.max_hold, None);
    // A tiny ttl still renews at least every millisecond.
    let tiny = AcquireOptions {
        ttl: Some(Duration::from_millis(2)),
        ..Default::default()
    };
    assert_eq!(
        tiny.resolve().expect("valid").renew_interval,
        Duration::from_millis(1)
    );
}

#[test]
fn sentinels_refuse_tls() {
    let cfg = ClientConfig {
        nodes: Vec::new(),
        sentinel: Some(SentinelConfig {
            sentinels: vec!["redis://127.0.0.1:26379".into()],
            name: "m".into(),
            ..Default::default()
        }),
        tls: Some(TlsConfig::default()),
        ..ClientConfig::default()
    };
    let err = cfg.validate().expect_err("tls with sentinel");
    assert!(err.message.contains("sentinel"), "{}", err.message);
}

#[test]
fn with_several_nodes_a_node_timeout_must_leave_a_validity() {
    let mut cfg = ClientConfig {
        nodes: vec!["redis://a".into(), "redis://b".into(), "redis://c".into()],
        node_timeout: Some(Duration::from_millis(1_868)),
        ..ClientConfig::default()
    };
    let spec = |ttl: u64| {
        AcquireOptions {
            ttl: Some(Duration::from_millis(ttl)),
            ..Default::default()
        }
        .resolve()
        .expect("valid options")
    };
    // ttl 1,500 ms: 1,500 − 17 ms of drift is all a lock may have.
    let err = cfg.check_spec(&spec(1_500)).expect_err("refused");
    assert_eq!(err.code, ErrorCode::OutOfRange);
    assert!(
        err.message.contains("nodeTimeout") && err.message.contains("1483 ms"),
        "{}",
        err.message
    );
    assert!(cfg.check_spec(&spec(1_900)).is_ok());
    cfg.node_timeout = Some(Duration::from_millis(1_483));
    assert!(cfg.check_spec(&spec(1_500)).is_err());
    cfg.node_timeout = Some(Duration::from_millis(1_482));
    assert!(cfg.check_spec(&spec(1_500)).is_ok());
    // One node: its command may take as long as it likes.
    cfg.nodes.truncate(1);
    cfg.node_timeout = Some(Duration::from_secs(60));
    assert!(cfg.check_spec(&spec(1_500)).is_ok());
}
