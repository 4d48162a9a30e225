//! A core error becomes a JS error whose message is the error as JSON; the JS
//! layer turns it into a `LockError` with a stable `code` (napi async functions
//! cannot set `code` themselves). Events and `loss` carry typed objects instead
//! (see `events.rs`).

use crate::binding::events::LockErrorInfo;
use crate::core::LockError;

/// Marks a message as lockdog's JSON error payload.
pub const MARKER: &str = "lockdog:";

pub fn to_napi(err: LockError) -> napi::Error {
    napi::Error::new(
        napi::Status::GenericFailure,
        format!("{MARKER}{}", to_json(&LockErrorInfo::from(&err))),
    )
}

/// The JSON form of an error (code, message and detail).
fn to_json(e: &LockErrorInfo) -> String {
    let nodes: Vec<serde_json::Value> = e
        .nodes
        .iter()
        .map(|n| serde_json::json!({ "node": n.node, "answer": n.answer, "detail": n.detail }))
        .collect();
    serde_json::json!({
        "code": e.code,
        "message": e.message,
        "key": e.key,
        "attempts": e.attempts,
        "remainingMs": e.remaining_ms,
        "nodes": nodes,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{ErrorCode, NodeAnswer, NodeReport};

    #[test]
    fn json_carries_code_and_nodes() {
        let err = LockError::new(ErrorCode::Quorum, "no quorum")
            .with_key("k")
            .with_attempts(2)
            .with_nodes(vec![NodeReport {
                node: "127.0.0.1:7001".into(),
                answer: NodeAnswer::Timeout,
            }]);
        let json = to_json(&LockErrorInfo::from(&err));
        let v: serde_json::Value = serde_json::from_str(&json).expect("valid json");
        assert_eq!(v["code"], "ERR_LOCK_QUORUM");
        assert_eq!(v["attempts"], 2);
        assert_eq!(v["nodes"][0]["answer"], "timeout");
        assert_eq!(v["nodes"][0]["detail"], "timed out");
        assert_eq!(v["key"], "k");
        assert!(v["remainingMs"].is_null());
    }
}
