//! One real `redis-server` process on a free loopback port with its own
//! temporary directory, no persistence, killed by its PID on drop. It can be
//! paused (SIGSTOP), resumed, killed and restarted on the same port. Every
//! topology (Redlock, cluster, replicas) is made of these.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

/// How long a fresh server gets to answer PING.
const START_DEADLINE: Duration = Duration::from_secs(10);

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

fn server_bin() -> PathBuf {
    std::env::var_os("REDIS_SERVER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("redis-server"))
}

/// A port that was free a moment ago (the listener is dropped before returning).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral loopback port");
    listener
        .local_addr()
        .expect("ephemeral listener has an address")
        .port()
}

/// Sends a raw `PING` and expects `+PONG`, within a short timeout.
fn ping(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let timeout = Some(Duration::from_millis(500));
    if stream.set_read_timeout(timeout).is_err() || stream.set_write_timeout(timeout).is_err() {
        return false;
    }
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    stream.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill(1)");
    assert!(status.success(), "kill -{sig} {pid} failed: {status}");
}

pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    paused: bool,
    /// Extra `redis-server` arguments (e.g. cluster mode).
    extra: Vec<String>,
    /// A configuration file passed first (a sentinel needs one it can rewrite).
    config: Option<PathBuf>,
}

impl RedisServer {
    /// Starts a server on a free port; retries with another port if one was taken
    /// between picking it and the server binding it.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// [`RedisServer::start`] with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> RedisServer {
        Self::start_configured(extra, None)
    }

    /// A Redis Sentinel whose configuration file starts as `config`.
    pub fn start_sentinel(config: &str) -> RedisServer {
        Self::start_configured(&["--sentinel"], Some(config))
    }

    fn start_configured(extra: &[&str], config: Option<&str>) -> RedisServer {
        let dir = std::env::temp_dir().join(format!(
            "lockdog-it-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create the server's temp dir");
        let config = config.map(|text| {
            let path = dir.join("redis.conf");
            std::fs::write(&path, text).expect("write the server's config file");
            path
        });
        let mut server = RedisServer {
            port: 0,
            dir,
            child: None,
            paused: false,
            extra: extra.iter().map(|a| a.to_string()).collect(),
            config,
        };
        let mut last_error = String::new();
        for _ in 0..5 {
            server.port = free_port();
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("could not start redis-server: {last_error}");
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    /// The server log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path())
            .unwrap_or_else(|e| format!("(no log at {}: {e})", self.log_path().display()))
    }

    /// Spawns the process on `self.port` and waits for PING.
    fn spawn(&mut self) -> Result<(), String> {
        let mut cmd = Command::new(server_bin());
        if let Some(config) = &self.config {
            cmd.arg(config);
        }
        let child = cmd
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--save")
            .arg("")
            .arg("--appendonly")
            .arg("no")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.log_path())
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", server_bin().display()))?;
        self.child = Some(child);
        self.paused = false;
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if ping(self.port) {
                return Ok(());
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.child = None;
                return Err(format!(
                    "redis-server on port {} exited with {status}; log:\n{}",
                    self.port,
                    self.log()
                ));
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(format!(
                    "redis-server on port {} did not answer PING within {:?}; log:\n{}",
                    self.port,
                    START_DEADLINE,
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `host:port`, as the core names nodes.
    pub fn name(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is running").id()
    }

    /// Freezes the process (SIGSTOP): connections stay open, nothing is answered.
    pub fn pause(&mut self) {
        signal(self.pid(), "STOP");
        self.paused = true;
    }

    pub fn resume(&mut self) {
        signal(self.pid(), "CONT");
        self.paused = false;
    }

    /// SIGKILL and reap; a no-op when not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
    }

    /// Kills the server (all data is lost: no persistence) and starts a new one
    /// on the same port.
    pub fn restart(&mut self) {
        self.kill();
        let mut last_error = String::new();
        for _ in 0..20 {
            match self.spawn() {
                Ok(()) => return,
                Err(e) => last_error = e,
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("could not restart redis-server: {last_error}");
    }

    /// A fresh connection for inspecting the server from the test.
    pub async fn con(&self) -> MultiplexedConnection {
        let client = redis::Client::open(self.url()).expect("valid test URL");
        tokio::time::timeout(
            Duration::from_secs(5),
            client.get_multiplexed_async_connection(),
        )
        .await
        .unwrap_or_else(|_| panic!("connect to {} timed out; log:\n{}", self.url(), self.log()))
        .unwrap_or_else(|e| panic!("connect to {}: {e}; log:\n{}", self.url(), self.log()))
    }

    /// Runs one command on a fresh connection.
    pub async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        let mut con = self.con().await;
        tokio::time::timeout(Duration::from_secs(5), cmd.query_async::<T>(&mut con))
            .await
            .unwrap_or_else(|_| panic!("command on {} timed out", self.url()))
            .unwrap_or_else(|e| panic!("command on {}: {e}; log:\n{}", self.url(), self.log()))
    }

    pub async fn get(&self, key: &str) -> Option<String> {
        self.query(redis::cmd("GET").arg(key)).await
    }

    /// PTTL in ms: -2 when the key is missing, -1 when it has no TTL.
    pub async fn pttl(&self, key: &str) -> i64 {
        self.query(redis::cmd("PTTL").arg(key)).await
    }

    pub async fn set(&self, key: &str, value: &str) {
        self.query::<()>(redis::cmd("SET").arg(key).arg(value))
            .await;
    }

    pub async fn del(&self, key: &str) -> i64 {
        self.query(redis::cmd("DEL").arg(key)).await
    }

    /// One `field:value` line of `INFO <section>`.
    pub async fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let info: String = self.query(redis::cmd("INFO").arg(section)).await;
        info_line(&info, field)
    }

    /// [`RedisServer::info_field`], `None` when the server does not answer
    /// in time (a replica busy with its first sync on a loaded machine): for
    /// a condition waited on with a deadline, which asks again.
    pub async fn try_info_field(&self, section: &str, field: &str) -> Option<String> {
        let client = redis::Client::open(self.url()).ok()?;
        let asked = async {
            let mut con = client.get_multiplexed_async_connection().await.ok()?;
            let info: String = redis::cmd("INFO")
                .arg(section)
                .query_async(&mut con)
                .await
                .ok()?;
            info_line(&info, field)
        };
        tokio::time::timeout(Duration::from_secs(5), asked)
            .await
            .ok()
            .flatten()
    }

    /// CPU seconds the server has used (`used_cpu_sys` + `used_cpu_user`).
    pub async fn cpu_seconds(&self) -> f64 {
        let mut total = 0.0;
        for field in ["used_cpu_sys", "used_cpu_user"] {
            let v = self.info_field("cpu", field).await.unwrap_or_default();
            total += v.parse::<f64>().unwrap_or(0.0);
        }
        total
    }

    /// How many EVALSHA calls the server has processed (`INFO commandstats`).
    pub async fn evalsha_calls(&self) -> u64 {
        let stats = self
            .info_field("commandstats", "cmdstat_evalsha")
            .await
            .unwrap_or_default();
        stat_value(&stats, "calls")
    }

    /// How many times a command failed with `code` (`INFO errorstats`).
    pub async fn error_count(&self, code: &str) -> u64 {
        let stats = self
            .info_field("errorstats", &format!("errorstat_{code}"))
            .await
            .unwrap_or_default();
        stat_value(&stats, "count")
    }
}

/// Reads `name=N` out of a `a=1,b=2` stats value; 0 when absent.
fn stat_value(stats: &str, name: &str) -> u64 {
    stats
        .split(',')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The value of `field` in an INFO reply.
fn info_line(info: &str, field: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}
