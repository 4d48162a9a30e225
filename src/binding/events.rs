//! What crosses to JavaScript about nodes and failures, built here from the
//! core's types (the core knows no JSON and no napi): node reports, the
//! detail a `LockError` is constructed with, and the error a node's fault is
//! reported as.

use napi_derive::napi;

use crate::core::quorum::no_quorum;
use crate::core::{self as core, LockError, NodeAnswer};

/// One node's answer: `answer` is `ok`, `held`, `not-held`, `timeout`,
/// `unreachable` or `error`; `detail` says it in words (never with credentials).
#[napi(object)]
#[derive(Clone)]
pub struct NodeReport {
    /// `host:port` (or the socket path) of the node.
    pub node: String,
    pub answer: String,
    pub detail: String,
}

impl NodeReport {
    pub fn new(node: &str, answer: &NodeAnswer) -> NodeReport {
        NodeReport {
            node: node.to_string(),
            answer: answer.kind().to_string(),
            detail: answer.to_string(),
        }
    }
}

/// The detail a native failure is constructed with on the JS thread:
/// `new errorClass(code, message, detail)` (see `setErrorClass`).
#[napi(object)]
#[derive(Clone)]
pub struct LockErrorInfo {
    /// The stable code, e.g. `ERR_LOCK_LOST`.
    pub code: String,
    pub message: String,
    /// The lock key (without the client's `keyPrefix`), when there is one.
    pub key: Option<String>,
    /// Acquisition attempts made before the failure.
    pub attempts: u32,
    /// How long the current owner still holds the lock, in ms, when known.
    pub remaining_ms: Option<f64>,
    /// What each node answered.
    pub nodes: Vec<NodeReport>,
}

impl From<&LockError> for LockErrorInfo {
    fn from(e: &LockError) -> LockErrorInfo {
        LockErrorInfo {
            code: e.code.as_str().to_string(),
            message: e.message.clone(),
            key: e.key.clone(),
            attempts: e.attempts,
            remaining_ms: e.remaining_ms.map(|ms| ms as f64),
            nodes: e
                .nodes
                .iter()
                .map(|n| NodeReport::new(&n.node, &n.answer))
                .collect(),
        }
    }
}

/// The error the client's `'error'` event carries for a node's fault outside
/// any result (a renewal, a node a quorum did not wait for): the error a
/// single-node operation fails with on that answer (`ERR_LOCK_REDIS` for an
/// error reply, else `ERR_LOCK_CONNECTION`, its cause kept), naming the node.
pub fn node_fault(node: &str, answer: &NodeAnswer) -> LockError {
    let report = core::NodeReport {
        node: node.to_string(),
        answer: answer.clone(),
    };
    // With one report the verdict is that node's own fault; the quorum message is never built.
    no_quorum(vec![report], String::new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ErrorCode;

    #[test]
    fn an_error_reply_is_a_redis_error() {
        let answer = NodeAnswer::ErrorReply("NOPERM no permissions".into());
        let err = node_fault("127.0.0.1:7001", &answer);
        assert_eq!(err.code, ErrorCode::Redis);
        assert_eq!(
            err.message,
            "Redis at 127.0.0.1:7001: error reply: NOPERM no permissions"
        );
        assert_eq!(err.key, None);
        assert_eq!(err.attempts, 0);
        assert_eq!(err.nodes.len(), 1);
        assert_eq!(err.nodes[0].node, "127.0.0.1:7001");
        assert_eq!(err.nodes[0].answer, answer);
    }

    #[test]
    fn no_answer_is_a_connection_error() {
        for answer in [
            NodeAnswer::Timeout,
            NodeAnswer::Unreachable("connection refused".into()),
        ] {
            let err = node_fault("[::1]:7002", &answer);
            assert_eq!(err.code, ErrorCode::Connection, "{answer}");
            assert_eq!(err.message, format!("Redis at [::1]:7002: {answer}"));
            assert_eq!(err.nodes[0].answer, answer);
        }
    }

    #[test]
    fn the_node_report_reads_as_the_message_says() {
        let err = node_fault("/tmp/redis.sock", &NodeAnswer::Timeout);
        let info = LockErrorInfo::from(&err);
        assert_eq!(info.code, "ERR_LOCK_CONNECTION");
        assert_eq!(info.nodes.len(), 1);
        assert_eq!(info.nodes[0].node, "/tmp/redis.sock");
        assert_eq!(info.nodes[0].answer, "timeout");
        assert_eq!(
            info.message,
            format!("Redis at /tmp/redis.sock: {}", info.nodes[0].detail)
        );
    }
}
