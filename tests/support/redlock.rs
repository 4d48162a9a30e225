//! Independent Redis masters for Redlock.

use lockdog::core::Client;
use tokio_util::sync::CancellationToken;

use super::{opts, RedisServer};

/// Three independent masters.
pub fn three() -> [RedisServer; 3] {
    [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ]
}

/// Opens the client's connection to every node (and loads the scripts).
pub async fn warm_up(locks: &Client) {
    let lock = locks
        .acquire(
            vec!["warm-up".into()],
            &opts(5_000),
            CancellationToken::new(),
        )
        .await
        .expect("warm-up lock");
    assert!(lock.release().await.expect("warm-up release"));
}
