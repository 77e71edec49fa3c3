//! A TCP proxy that cuts a connection at a chosen byte: what a network failure in the middle
//! of a request (or of its reply) does to a state backend's client.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;

/// Which way the cut bytes flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to server: the request is cut (nothing, or part of it, reaches the server).
    Request,
    /// Server to client: the reply is cut (the server acted; the client does not learn it).
    Reply,
}

#[derive(Default)]
struct Shared {
    /// Bytes forwarded each way since the last `arm` / `count`.
    request_bytes: AtomicU64,
    reply_bytes: AtomicU64,
    /// The byte (1-based, of `direction`) whose connection is cut; 0: none.
    cut_at: AtomicU64,
    cut_reply: AtomicBool,
    cuts: AtomicUsize,
    stop: AtomicBool,
}

/// Forwards 127.0.0.1:`port()` to `upstream`, one pair of threads per connection.
pub struct CuttingProxy {
    port: u16,
    shared: Arc<Shared>,
}

impl CuttingProxy {
    /// Listen on a free port; panics (loudly) when it cannot.
    pub fn start(upstream: SocketAddr) -> CuttingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the proxy");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(upstream) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let pair = || (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (c, sv) = pair();
                let s1 = s.clone();
                thread::spawn(move || pump(c, sv, &s1, Direction::Request));
                let (c, sv) = pair();
                let s2 = s.clone();
                thread::spawn(move || pump(sv, c, &s2, Direction::Reply));
            }
        });
        CuttingProxy { port, shared }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Forward everything, counting bytes from zero.
    pub fn count(&self) {
        self.shared.cut_at.store(0, Ordering::SeqCst);
        self.shared.request_bytes.store(0, Ordering::SeqCst);
        self.shared.reply_bytes.store(0, Ordering::SeqCst);
    }

    /// Bytes forwarded `direction` since the last `count` or `arm`.
    pub fn forwarded(&self, direction: Direction) -> u64 {
        match direction {
            Direction::Request => self.shared.request_bytes.load(Ordering::SeqCst),
            Direction::Reply => self.shared.reply_bytes.load(Ordering::SeqCst),
        }
    }

    /// Count from zero and cut the connection carrying byte `at` (1-based) of `direction`,
    /// once: after the cut, connections work again (the network came back).
    pub fn arm(&self, direction: Direction, at: u64) {
        self.count();
        self.shared
            .cut_reply
            .store(direction == Direction::Reply, Ordering::SeqCst);
        self.shared.cut_at.store(at, Ordering::SeqCst);
    }

    /// How many connections were cut so far.
    pub fn cuts(&self) -> usize {
        self.shared.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, s: &Shared, direction: Direction) {
    let counter = match direction {
        Direction::Request => &s.request_bytes,
        Direction::Reply => &s.reply_bytes,
    };
    let armed_here =
        |s: &Shared| s.cut_reply.load(Ordering::SeqCst) == (direction == Direction::Reply);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let before = counter.fetch_add(n as u64, Ordering::SeqCst);
        let at = s.cut_at.load(Ordering::SeqCst);
        if at > 0
            && armed_here(s)
            && before < at
            && before + n as u64 >= at
            && s.cut_at
                .compare_exchange(at, 0, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            // Forward up to the byte before the cut, then drop both sides.
            let keep = (at - 1 - before) as usize;
            let _ = to.write_all(&buf[..keep]);
            s.cuts.fetch_add(1, Ordering::SeqCst);
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
        if to.write_all(&buf[..n]).is_err() {
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
    }
    // An orderly end of one direction is passed on as such; the other may still carry a reply.
    let _ = to.shutdown(Shutdown::Write);
}
