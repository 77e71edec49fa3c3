//! `kusionctl` on a terminal (a pseudo-terminal opened here): the confirmation prompt stays
//! visible while it waits (nothing redraws over it), `n` cancels with a non-zero exit and
//! changes nothing, `yes` applies with progress shown.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");

/// A pseudo-terminal: the master side for the test, the slave side for the child.
struct Pty {
    master: File,
    slave: OwnedFd,
}

fn open_pty() -> Pty {
    // SAFETY: plain libc calls on descriptors this function owns; every result is checked.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(master >= 0, "posix_openpt failed");
        assert_eq!(libc::grantpt(master), 0, "grantpt");
        assert_eq!(libc::unlockpt(master), 0, "unlockpt");
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(master, name.as_mut_ptr(), name.len()),
            0,
            "ptsname_r"
        );
        let slave = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        assert!(slave >= 0, "opening the pty slave");
        let size = libc::winsize {
            ws_row: 40,
            ws_col: 160,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        libc::ioctl(slave, libc::TIOCSWINSZ, &size);
        Pty {
            master: File::from_raw_fd(master),
            slave: OwnedFd::from_raw_fd(slave),
        }
    }
}

/// The child's terminal output so far, collected by a reader thread.
struct Screen {
    text: Arc<Mutex<Vec<u8>>>,
    /// Set once the reader has seen the terminal close.
    closed: Arc<AtomicBool>,
}

impl Screen {
    fn now(&self) -> String {
        String::from_utf8_lossy(&self.text.lock().unwrap()).into_owned()
    }
    fn wait_for(&self, needle: &str, child: &mut Child) -> String {
        let give_up = Instant::now() + Duration::from_secs(60);
        loop {
            let text = self.now();
            if text.contains(needle) {
                return text;
            }
            if let Ok(Some(status)) = child.try_wait() {
                // The reader thread may not have drained the terminal yet: give it until it
                // sees the end before deciding the text never came.
                let drained = Instant::now() + Duration::from_secs(5);
                while !self.closed.load(Ordering::SeqCst) && Instant::now() < drained {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let text = self.now();
                if text.contains(needle) {
                    return text;
                }
                panic!("exited ({status}) before showing {needle:?}:\n{text}");
            }
            assert!(
                Instant::now() < give_up,
                "no {needle:?} within 60 s:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `kusionctl-testbed args...` in `dir` on a fresh pty; returns the child, its screen and the
/// master side to type into.
fn spawn(dir: &std::path::Path, args: &[&str]) -> (Child, Screen, File) {
    let pty = open_pty();
    let out = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup"));
    let child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env("KUSION_TEST_CLOUD", dir.join("cloud"))
        .env("KUSION_STATE_DIR", dir.join("state"))
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .stdin(out(&pty.slave))
        .stdout(out(&pty.slave))
        .stderr(out(&pty.slave))
        .spawn()
        .expect("spawning kusionctl-testbed");
    drop(pty.slave);
    let text = Arc::new(Mutex::new(Vec::new()));
    let mut reader = pty.master.try_clone().expect("dup master");
    let sink = text.clone();
    let closed = Arc::new(AtomicBool::new(false));
    let seen_end = closed.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // Ends with EIO once the child has closed the terminal.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        seen_end.store(true, Ordering::SeqCst);
    });
    (child, Screen { text, closed }, pty.master)
}

const SPEC: &str = "resources:\n- id: t:one\n  type: Test\n  attributes:\n    size: 1\n";
const PROMPT: &str = "Do you want to apply these changes?";

#[test]
fn the_prompt_stays_visible_and_no_cancels_with_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spec.yaml"), SPEC).unwrap();
    let (mut child, screen, mut keys) = spawn(dir.path(), &["apply", "-f", "spec.yaml"]);
    let shown = screen.wait_for(PROMPT, &mut child);
    // Nothing draws while the question waits: no progress bar, no spinner, no `0/0`.
    std::thread::sleep(Duration::from_millis(1500));
    let later = screen.now();
    assert_eq!(
        later, shown,
        "the terminal changed while the prompt waited:\n{later:?}"
    );
    assert!(!shown.contains("0/0"), "{shown}");
    let after_prompt = &shown[shown.find(PROMPT).unwrap()..];
    assert!(
        !after_prompt.contains('\r') && !after_prompt.contains("\x1b["),
        "the prompt line was redrawn: {after_prompt:?}"
    );
    keys.write_all(b"n\n").unwrap();
    let status = child.wait().unwrap();
    let text = screen.wait_for("cancelled", &mut child);
    assert!(
        !status.success(),
        "declining must fail the command:\n{text}"
    );
    let created = std::fs::read_dir(dir.path().join("cloud"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(created, 0, "nothing may be applied");
}

#[test]
fn yes_on_the_prompt_applies_with_progress() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spec.yaml"), SPEC).unwrap();
    let (mut child, screen, mut keys) = spawn(dir.path(), &["apply", "-f", "spec.yaml"]);
    screen.wait_for(PROMPT, &mut child);
    keys.write_all(b"yes\n").unwrap();
    let status = child.wait().unwrap();
    let text = screen.wait_for("Apply complete!", &mut child);
    assert!(status.success(), "{text}");
    assert!(text.contains("Create t:one"), "{text}");
}
