//! One error type for every failure, each with a stable code that JS sees as `err.code`.

use std::fmt;
use std::sync::Arc;

/// What a failure can be caused by (kept as `source`, so the chain survives).
pub type Cause = Arc<dyn std::error::Error + Send + Sync>;

/// The stable codes a caller can match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorCode {
    /// Still held by another owner after every allowed attempt.
    Taken,
    /// `waitTimeout` passed before the lock could be taken.
    Timeout,
    /// The lock was lost while held (key gone, foreign, or validity ran out).
    Lost,
    /// The caller cancelled the operation.
    Aborted,
    /// A Redis node could not be reached.
    Connection,
    /// A Redis node answered with an error reply.
    Redis,
    /// Too few nodes answered to decide (Redlock).
    Quorum,
    /// The client was closed.
    Closed,
    /// An argument has the right type but a value that cannot be used.
    InvalidArgValue,
    /// A number outside its allowed range (or not an integer).
    OutOfRange,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Taken => "ERR_LOCK_TAKEN",
            ErrorCode::Timeout => "ERR_LOCK_TIMEOUT",
            ErrorCode::Lost => "ERR_LOCK_LOST",
            ErrorCode::Aborted => "ERR_LOCK_ABORTED",
            ErrorCode::Connection => "ERR_LOCK_CONNECTION",
            ErrorCode::Redis => "ERR_LOCK_REDIS",
            ErrorCode::Quorum => "ERR_LOCK_QUORUM",
            ErrorCode::Closed => "ERR_LOCK_CLOSED",
            ErrorCode::InvalidArgValue => "ERR_INVALID_ARG_VALUE",
            ErrorCode::OutOfRange => "ERR_OUT_OF_RANGE",
        }
    }
}

impl AsRef<str> for ErrorCode {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// What one node answered during an operation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum NodeAnswer {
    /// The operation succeeded on this node.
    Ok,
    /// Another owner holds the key; `pttl_ms` is its remaining TTL when known.
    Held { pttl_ms: Option<u64> },
    /// The key no longer holds our token on this node.
    NotHeld,
    /// The node did not answer within its timeout.
    Timeout,
    /// The node could not be reached.
    Unreachable(Fault),
    /// The node answered with an error reply.
    ErrorReply(Fault),
    /// The outcome was decided before this node answered (a Redlock operation
    /// resolves at quorum); its reply is awaited in the background, and a
    /// fault in it is reported through the client's `'error'` event.
    Pending,
}

/// Why a node failed: the text shown (never with credentials), and the Redis
/// error behind it when there is one. Compared by text. Boxed: a fault is
/// rare, and every node's answer carries room for one.
#[derive(Debug, Clone)]
pub struct Fault(Box<FaultInner>);

#[derive(Debug, Clone)]
struct FaultInner {
    text: String,
    cause: Option<Cause>,
}

impl Fault {
    pub fn caused_by(text: String, cause: redis::RedisError) -> Fault {
        Fault(Box::new(FaultInner {
            text,
            cause: Some(Arc::new(cause)),
        }))
    }

    pub fn text(&self) -> &str {
        &self.0.text
    }

    /// A TLS handshake that failed on a certificate or a protocol mismatch:
    /// configuration, not an outage (the text is rustls's own).
    fn is_tls_refusal(&self) -> bool {
        const TLS: [&str; 4] = [
            "certificate",
            "received fatal alert",
            "peer is incompatible",
            "peer misbehaved",
        ];
        TLS.iter().any(|t| self.0.text.contains(t))
    }

    /// The error reply's code (its first word).
    fn code(&self) -> &str {
        self.0.text.split_whitespace().next().unwrap_or_default()
    }

    /// An error reply that says the node is not, or not yet, the master
    /// that serves the key (a redirection to another, possibly dead, master;
    /// a cluster or a master that is down; a node still loading or turned
    /// replica): the master could not be reached, as a connection failure.
    fn is_not_the_master(&self) -> bool {
        const ELSEWHERE: [&str; 7] = [
            "MOVED",
            "ASK",
            "TRYAGAIN",
            "CLUSTERDOWN",
            "MASTERDOWN",
            "READONLY",
            "LOADING",
        ];
        ELSEWHERE.contains(&self.code())
    }

    /// An error reply that a failover, a restart or a resharding explains,
    /// or a script still running (`BUSY`).
    fn is_transient(&self) -> bool {
        if self.is_not_the_master() || self.code() == "BUSY" {
            return true;
        }
        // Client-side errors with no Redis code of their own (a cluster
        // connection being replaced, a sentinel without a master yet).
        let redis = self
            .0
            .cause
            .as_deref()
            .and_then(|c| c.downcast_ref::<redis::RedisError>());
        redis.is_some_and(|e| {
            e.is_io_error()
                || e.is_cluster_error()
                || matches!(
                    e.kind(),
                    redis::ErrorKind::ClusterConnectionNotFound
                        | redis::ErrorKind::MasterNameNotFoundBySentinel
                        | redis::ErrorKind::NoValidReplicasFoundBySentinel
                )
        })
    }
}

impl PartialEq for Fault {
    fn eq(&self, other: &Fault) -> bool {
        self.0.text == other.0.text
    }
}

impl From<String> for Fault {
    fn from(text: String) -> Fault {
        Fault(Box::new(FaultInner { text, cause: None }))
    }
}

impl From<&str> for Fault {
    fn from(text: &str) -> Fault {
        Fault::from(text.to_string())
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.text)
    }
}

impl NodeAnswer {
    pub fn kind(&self) -> &'static str {
        match self {
            NodeAnswer::Ok => "ok",
            NodeAnswer::Held { .. } => "held",
            NodeAnswer::NotHeld => "not-held",
            NodeAnswer::Timeout => "timeout",
            NodeAnswer::Unreachable(_) => "unreachable",
            NodeAnswer::ErrorReply(_) => "error",
            NodeAnswer::Pending => "pending",
        }
    }

    /// The Redis error behind a fault, if any.
    pub fn cause(&self) -> Option<Cause> {
        match self {
            NodeAnswer::Unreachable(f) | NodeAnswer::ErrorReply(f) => f.0.cause.clone(),
            _ => None,
        }
    }

    /// True for a fault that waiting can cure: the node was unreachable or
    /// silent, or said it cannot take writes for now (loading its data set, a
    /// replica after a failover, a slot moving or the cluster down, a busy
    /// script). False for answers that are no fault, for a TLS handshake
    /// refused over a certificate, and for error replies that would come
    /// back the same (ACL, wrong password, wrong type, a script error).
    pub fn is_transient(&self) -> bool {
        match self {
            NodeAnswer::Timeout => true,
            NodeAnswer::Unreachable(f) => !f.is_tls_refusal(),
            NodeAnswer::ErrorReply(f) => f.is_transient(),
            _ => false,
        }
    }

    /// An error reply that only says the master could not be reached (see
    /// `Fault::is_not_the_master`): it counts as a connection failure.
    pub fn is_redirection(&self) -> bool {
        matches!(self, NodeAnswer::ErrorReply(f) if f.is_not_the_master())
    }

    /// True when the node gave no usable answer (a fault rather than a verdict).
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            NodeAnswer::Timeout | NodeAnswer::Unreachable(_) | NodeAnswer::ErrorReply(_)
        )
    }
}

impl fmt::Display for NodeAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeAnswer::Ok => f.write_str("ok"),
            NodeAnswer::Held { pttl_ms: Some(ms) } => write!(f, "held by another for {ms} ms"),
            NodeAnswer::Held { pttl_ms: None } => f.write_str("held by another"),
            NodeAnswer::NotHeld => f.write_str("not held by us"),
            NodeAnswer::Timeout => f.write_str("timed out"),
            NodeAnswer::Unreachable(m) => write!(f, "unreachable: {m}"),
            NodeAnswer::ErrorReply(m) => write!(f, "error reply: {m}"),
            NodeAnswer::Pending => f.write_str("not answered yet when the outcome was decided"),
        }
    }
}

/// One node's answer, named by `host:port` (never with credentials).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeReport {
    pub node: String,
    pub answer: NodeAnswer,
}

/// A lockdog failure: a stable [`ErrorCode`], a message, and what is known about it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct LockError {
    pub code: ErrorCode,
    pub message: String,
    /// The lock key (without the client's prefix) the error is about, when there is one.
    pub key: Option<String>,
    /// Acquisition attempts made before this error.
    pub attempts: u32,
    /// How long the lock stays held by its current owner, when known.
    pub remaining_ms: Option<u64>,
    /// What each node answered in the last attempt.
    pub nodes: Vec<NodeReport>,
    /// The Redis error behind it, when one node's fault is the whole story.
    pub source: Option<Cause>,
}

impl LockError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        LockError {
            code,
            message: message.into(),
            key: None,
            attempts: 0,
            remaining_ms: None,
            nodes: Vec::new(),
            source: None,
        }
    }

    pub fn closed() -> Self {
        Self::new(ErrorCode::Closed, "the lock client is closed")
    }

    pub fn out_of_range(name: &str, expected: &str, got: impl fmt::Display) -> Self {
        Self::new(
            ErrorCode::OutOfRange,
            format!(
                "The value of \"{name}\" is out of range. It must be {expected}. Received {got}"
            ),
        )
    }

    pub fn invalid_value(name: &str, reason: &str) -> Self {
        Self::new(
            ErrorCode::InvalidArgValue,
            format!("The argument '{name}' {reason}"),
        )
    }

    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }

    pub fn with_source(mut self, source: Cause) -> Self {
        self.source = Some(source);
        self
    }

    pub fn with_nodes(mut self, nodes: Vec<NodeReport>) -> Self {
        self.nodes = nodes;
        self
    }
}

pub type Result<T, E = LockError> = std::result::Result<T, E>;
