//! What crosses to JavaScript about failures and events: typed objects, built
//! here from the core's types (the core knows no JSON and no napi).

use napi_derive::napi;

use crate::core::{LockError, NodeAnswer};

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

/// A lock failure as the JS layer turns it into a `LockError`.
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
