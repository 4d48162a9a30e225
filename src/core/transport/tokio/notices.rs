//! Release notices: a second connection per node, opened when a caller first
//! waits for a key held there, that only subscribes (RESP3 push messages).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, ProtocolVersion, PushInfo, PushKind, Value};

use super::sentinel::Sentinel;
use super::{Node, Target};

pub(super) enum Notices {
    Unused,
    Open(ConnectionManager),
    /// On the master Sentinel names: reopened on the next master (with the
    /// same channels) once that one changes or the connection breaks.
    Following {
        con: MultiplexedConnection,
        epoch: u64,
        broken: Arc<AtomicBool>,
        channels: HashSet<String>,
    },
    /// A cluster, or a server that cannot push (no RESP3 before Redis 6):
    /// its waiters retry on their timers alone.
    Unsupported,
}

/// Where notices go: called with (channel, message) for every one received.
pub type NoticeSink = Arc<dyn Fn(&[u8], &[u8]) + Send + Sync>;

/// Subscribes to release notices for `channel`, opening the notice
/// connection on first use; notices go to `sink`. False when this node
/// cannot deliver them (the caller then relies on its retry timer).
pub(super) async fn subscribe(
    node: &Node,
    channel: &str,
    sink: &NoticeSink,
    timeout: Duration,
) -> bool {
    let (client, config) = match &node.target {
        Target::Single(client, config) => (client, config),
        Target::Sentinel(s) => return subscribe_following(node, s, channel, sink, timeout).await,
        Target::Cluster(_) => return false,
    };
    let mut notices = node.notices.lock().await;
    if node.is_closed() {
        return false;
    }
    if matches!(*notices, Notices::Unused) {
        let info = client.get_connection_info().clone();
        let redis = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let Ok(resp3) = Client::open(info.set_redis_settings(redis)) else {
            *notices = Notices::Unsupported;
            return false;
        };
        let config = config
            .clone()
            .set_automatic_resubscription()
            .set_push_sender(deliver(sink.clone(), None));
        match tokio::time::timeout(timeout, resp3.get_connection_manager_with_config(config)).await
        {
            // close() ran meanwhile: drop the new connection at once.
            Ok(Ok(_)) if node.is_closed() => return false,
            Ok(Ok(con)) => *notices = Notices::Open(con),
            // A server without HELLO 3 will not learn it on a retry.
            Ok(Err(e))
                if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError) =>
            {
                *notices = Notices::Unsupported;
                return false;
            }
            _ => return false,
        }
    }
    let Notices::Open(con) = &mut *notices else {
        return false;
    };
    let subscribed = matches!(
        tokio::time::timeout(timeout, con.subscribe(channel)).await,
        Ok(Ok(()))
    );
    if node.is_closed() {
        // close() ran meanwhile and could not take the connection: it goes now.
        *notices = Notices::Unsupported;
        return false;
    }
    subscribed
}

/// [`Node::subscribe`] on the master the sentinels name.
async fn subscribe_following(
    node: &Node,
    sentinel: &Sentinel,
    channel: &str,
    sink: &NoticeSink,
    timeout: Duration,
) -> bool {
    let mut notices = node.notices.lock().await;
    if node.is_closed() {
        return false;
    }
    let reopen = match &*notices {
        Notices::Following { epoch, broken, .. } => {
            *epoch != sentinel.epoch() || broken.load(Ordering::Acquire)
        }
        Notices::Unused => true,
        Notices::Open(_) | Notices::Unsupported => return false,
    };
    if reopen {
        let channels = match std::mem::replace(&mut *notices, Notices::Unused) {
            Notices::Following { channels, .. } => channels,
            _ => HashSet::new(),
        };
        let broken = Arc::new(AtomicBool::new(false));
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(None)
            .set_push_sender(deliver(sink.clone(), Some(broken.clone())));
        let opening = sentinel.open_with(ProtocolVersion::RESP3, config);
        match tokio::time::timeout(timeout, opening).await {
            Ok(Ok(_)) if node.is_closed() => return false,
            Ok(Ok((mut con, epoch))) => {
                // The waiters of these channels still wait: subscribe them here.
                for ch in &channels {
                    let _ = tokio::time::timeout(timeout, con.subscribe(ch)).await;
                }
                *notices = Notices::Following {
                    con,
                    epoch,
                    broken,
                    channels,
                };
            }
            Ok(Err(e))
                if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError) =>
            {
                *notices = Notices::Unsupported;
                return false;
            }
            _ => return false,
        }
    }
    let Notices::Following { con, channels, .. } = &mut *notices else {
        return false;
    };
    let subscribed = matches!(
        tokio::time::timeout(timeout, con.subscribe(channel)).await,
        Ok(Ok(()))
    );
    if subscribed {
        channels.insert(channel.to_string());
    }
    if node.is_closed() {
        *notices = Notices::Unsupported;
        return false;
    }
    subscribed
}

/// Ends the subscription to `channel` unless `still_wanted()` says a new
/// waiter came meanwhile (checked under the same lock a subscribe takes).
pub(super) async fn unsubscribe(
    node: &Node,
    channel: &str,
    still_wanted: impl Fn() -> bool,
    timeout: Duration,
) {
    let mut notices = node.notices.lock().await;
    if still_wanted() {
        return;
    }
    match &mut *notices {
        Notices::Open(con) => {
            let _ = tokio::time::timeout(timeout, con.unsubscribe(channel)).await;
        }
        Notices::Following { con, channels, .. } => {
            channels.remove(channel);
            let _ = tokio::time::timeout(timeout, con.unsubscribe(channel)).await;
        }
        _ => {}
    }
    if node.is_closed() {
        *notices = Notices::Unsupported;
    }
}

/// A push-message handler that hands release notices to `sink` and, when
/// given `broken`, marks it when the connection goes away.
fn deliver(
    sink: NoticeSink,
    broken: Option<Arc<AtomicBool>>,
) -> impl Fn(PushInfo) -> Result<(), redis::aio::SendError> + Send + Sync + 'static {
    move |push: PushInfo| {
        match push.kind {
            PushKind::Message => {
                if let (Some(Value::BulkString(ch)), Some(Value::BulkString(msg))) =
                    (push.data.first(), push.data.get(1))
                {
                    sink(ch, msg);
                }
            }
            PushKind::Disconnection => {
                if let Some(broken) = &broken {
                    broken.store(true, Ordering::Release);
                }
            }
            _ => {}
        }
        Ok(())
    }
}
