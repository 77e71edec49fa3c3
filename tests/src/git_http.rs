//! Git's smart HTTP protocol behind HTTP basic authentication, on 127.0.0.1: a small HTTP/1.1
//! server that checks the `Authorization` header and hands each request to the real
//! `git http-backend` (CGI), as a web server in front of a Git host would. `git daemon` has no
//! authentication, so tests of credentials from a Secret need this.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine;

/// A running server; stops accepting when dropped.
pub struct GitHttp {
    /// `http://127.0.0.1:<port>`; repositories are served under it by their folder name.
    pub base: String,
    stop: Arc<AtomicBool>,
    /// Every `Authorization` header value received (to show what reached the server).
    pub seen: Arc<Mutex<Vec<String>>>,
    /// Requests refused with 401.
    pub refused: Arc<AtomicUsize>,
}

impl GitHttp {
    /// Serve the bare repositories in `root` to `user`:`password` only.
    pub fn start(root: &Path, user: &str, password: &str) -> GitHttp {
        let status = Command::new("git")
            .args(["http-backend", "--help"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        assert!(
            status.is_ok(),
            "git http-backend cannot be run (is git installed with its CGI programs?)"
        );
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
        let port = listener.local_addr().expect("local address").port();
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(AtomicUsize::new(0));
        let (root, s, seen2, refused2) = (
            root.to_path_buf(),
            stop.clone(),
            seen.clone(),
            refused.clone(),
        );
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (root, expected, seen, refused) = (
                    root.clone(),
                    expected.clone(),
                    seen2.clone(),
                    refused2.clone(),
                );
                std::thread::spawn(move || {
                    if let Err(e) = serve(conn, &root, &expected, &seen, &refused) {
                        eprintln!("git-http: {e}");
                    }
                });
            }
        });
        GitHttp {
            base: format!("http://127.0.0.1:{port}"),
            stop,
            seen,
            refused,
        }
    }
}

impl Drop for GitHttp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.base.trim_start_matches("http://"));
    }
}

fn serve(
    conn: TcpStream,
    root: &PathBuf,
    expected: &str,
    seen: &Mutex<Vec<String>>,
    refused: &AtomicUsize,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("GET").to_string();
    let target = parts.next().unwrap_or("/").to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 {
            break;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = header("content-length").and_then(|n| n.parse::<usize>().ok()) {
        body.resize(n, 0);
        reader.read_exact(&mut body)?;
    }
    let mut out = conn;
    let auth = header("authorization");
    if let Some(a) = &auth {
        seen.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(a.clone());
    }
    if auth.as_deref() != Some(expected) {
        refused.fetch_add(1, Ordering::SeqCst);
        let text = "authentication required\n";
        write!(
            out,
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        )?;
        return out.flush();
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut cgi = Command::new("git");
    cgi.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", "git")
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (name, var) in [
        ("content-type", "CONTENT_TYPE"),
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "GIT_PROTOCOL"),
    ] {
        if let Some(v) = header(name) {
            cgi.env(var, v);
        }
    }
    let mut child = cgi.spawn()?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let mut output = Vec::new();
    child
        .stdout
        .take()
        .expect("piped stdout")
        .read_to_end(&mut output)?;
    let _ = writer.join();
    child.wait()?;
    // CGI output: headers, a blank line, the body.
    let split = output
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| output.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let (head, content) = match split {
        Some((i, n)) => (
            String::from_utf8_lossy(&output[..i]).to_string(),
            &output[i + n..],
        ),
        None => (String::new(), &output[..]),
    };
    let mut status = "200 OK".to_string();
    let mut response = String::new();
    for h in head.lines() {
        match h.split_once(':') {
            Some((k, v)) if k.eq_ignore_ascii_case("status") => status = v.trim().to_string(),
            Some(_) => {
                response.push_str(h.trim_end());
                response.push_str("\r\n");
            }
            None => {}
        }
    }
    write!(
        out,
        "HTTP/1.1 {status}\r\n{response}Content-Length: {}\r\nConnection: close\r\n\r\n",
        content.len()
    )?;
    out.write_all(content)?;
    out.flush()
}
