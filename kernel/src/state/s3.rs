//! State in an S3 bucket (AWS or any server that honours conditional writes, e.g. moto, MinIO).
//!
//! Layout under `s3://bucket/prefix/`:
//! - `state.json`: the last snapshot; its `serial` is the journal *generation* it starts;
//! - `journal/<generation>/<seq>.jsonl`: one object per `append` (S3 has no append), written with
//!   `If-None-Match: *` so two writers can never both write segment `seq`;
//! - `lease.json`: the lease, created with `If-None-Match: *` and replaced or deleted only with
//!   `If-Match: <etag>` of the copy that was judged, so acquiring is one atomic compare-and-swap;
//! - `releases/<revision>.json`: history, numbered by creating the next key with
//!   `If-None-Match: *` (a lost race retries with the next number);
//! - `runs/<id>.json`: `kusionctl run` records, numbered the same way; each write is one PUT, so
//!   a run that dies midway leaves its last whole record (status `running`).
//!
//! A checkpoint writes a snapshot whose serial is a new generation (one atomic PUT), then deletes
//! the old generation's segments; a crash in between leaves segments nobody reads. Loading reads
//! the snapshot and only its generation's segments.
//!
//! Limits: lease expiry is judged by the clients' clocks (S3 offers no server-side comparison),
//! so clocks must agree to well within the lease's TTL; and listing must be strongly consistent
//! (it is on AWS since 2020 and on moto/MinIO).
//!
//! Requests are presigned by `rusty-s3` (sans-IO) and sent with the blocking `ureq` client,
//! so the store works from any thread, async or not, without a runtime of its own.

use std::sync::Mutex;
use std::time::Duration;

use rusty_s3::actions::ListObjectsV2;
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::journal::{self, Line};
use super::local::{holder_is_dead, random_token};
use super::{
    JournalRecord, Lease, LeaseHolder, Release, RunRecord, State, StateError, StateStore,
    format_time, now_ms,
};

const SIGNED_FOR: Duration = Duration::from_secs(300);
const RELEASE_RETRIES: usize = 20;
/// Runs do not hold the stack's lease, so many may start together (an alert storm): allow more
/// lost races before giving up.
const RUN_RETRIES: usize = 64;

/// Where the bucket is and how to reach it.
#[derive(Debug, Clone, Default)]
pub struct S3Config {
    /// The bucket.
    pub bucket: String,
    /// Key prefix (without leading or trailing slash; may be empty).
    pub prefix: String,
    /// e.g. `http://127.0.0.1:5000`; `None` means AWS (`https://s3.<region>.amazonaws.com`).
    pub endpoint: Option<String>,
    /// The region (signs requests; names AWS's endpoint).
    pub region: String,
    /// Path-style URLs (`endpoint/bucket/key`); the default for custom endpoints.
    pub path_style: bool,
    /// `None` sends unsigned requests.
    pub credentials: Option<(String, String, Option<String>)>,
}

/// Where the next journal segment goes.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    generation: u64,
    next_seq: u64,
    bytes: u64,
}

/// A stack's state in an S3 bucket (or an S3-compatible store) under a key prefix; the lease through conditional writes.
pub struct S3Store {
    bucket: Bucket,
    credentials: Option<Credentials>,
    prefix: String,
    display: String,
    agent: ureq::Agent,
    cursor: Mutex<Option<Cursor>>,
}

/// An object's bytes and ETag.
type Fetched = (Vec<u8>, Option<String>);

/// One HTTP answer.
struct Answer {
    status: u16,
    etag: Option<String>,
    body: Vec<u8>,
}

impl S3Store {
    /// A store for `config` (nothing is read yet).
    pub fn new(config: &S3Config) -> Result<S3Store, StateError> {
        let display = if config.prefix.is_empty() {
            format!("s3://{}", config.bucket)
        } else {
            format!("s3://{}/{}", config.bucket, config.prefix)
        };
        let bad = |m: String| StateError::Io {
            location: display.clone(),
            message: m,
        };
        let (endpoint, style) = match &config.endpoint {
            Some(e) => (
                e.clone(),
                if config.path_style {
                    UrlStyle::Path
                } else {
                    UrlStyle::VirtualHost
                },
            ),
            None => (
                format!("https://s3.{}.amazonaws.com", config.region),
                UrlStyle::VirtualHost,
            ),
        };
        let endpoint = endpoint
            .parse()
            .map_err(|e| bad(format!("bad S3 endpoint {endpoint:?}: {e}")))?;
        let bucket = Bucket::new(
            endpoint,
            style,
            config.bucket.clone(),
            config.region.clone(),
        )
        .map_err(|e| bad(format!("bad S3 bucket {:?}: {e:?}", config.bucket)))?;
        let credentials = config.credentials.as_ref().map(|(k, s, t)| match t {
            Some(t) => Credentials::new_with_token(k, s, t),
            None => Credentials::new(k, s),
        });
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let prefix = config.prefix.trim_matches('/');
        Ok(S3Store {
            bucket,
            credentials,
            prefix: if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix}/")
            },
            display,
            agent,
            cursor: Mutex::new(None),
        })
    }

    fn io(&self, message: impl std::fmt::Display) -> StateError {
        StateError::Io {
            location: self.display.clone(),
            message: message.to_string(),
        }
    }

    fn corrupt(&self, key: &str, e: impl std::fmt::Display) -> StateError {
        StateError::Corrupt {
            location: format!("s3://{}/{key}", self.bucket.name()),
            message: e.to_string(),
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn segment_dir(&self, generation: u64) -> String {
        self.key(&format!("journal/{generation:020}/"))
    }

    fn send(
        &self,
        what: &str,
        request: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Answer, StateError> {
        let mut response = request.map_err(|e| self.io(format!("{what}: {e}")))?;
        let status = response.status().as_u16();
        let etag = response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response
            .body_mut()
            .with_config()
            .limit(u64::MAX)
            .read_to_vec()
            .map_err(|e| self.io(format!("{what}: {e}")))?;
        let missing_bucket = status == 404 && body.windows(14).any(|w| w == b"NoSuchBucket</");
        if status >= 500 || status == 403 || status == 400 || missing_bucket {
            return Err(self.io(format!(
                "{what}: HTTP {status}: {}",
                String::from_utf8_lossy(&body).trim()
            )));
        }
        Ok(Answer { status, etag, body })
    }

    /// One object of the bucket by its full key (outside this store's own layout): another
    /// tool's file kept in S3, such as a Terraform S3 backend's state. `None` when absent.
    pub fn read_object(&self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self.get(key)?.map(|(body, _)| body))
    }

    fn get(&self, key: &str) -> Result<Option<Fetched>, StateError> {
        let url = self
            .bucket
            .get_object(self.credentials.as_ref(), key)
            .sign(SIGNED_FOR);
        let answer = self.send(&format!("GET {key}"), self.agent.get(url.as_str()).call())?;
        match answer.status {
            200 => Ok(Some((answer.body, answer.etag))),
            404 => Ok(None),
            s => Err(self.io(format!("GET {key}: HTTP {s}"))),
        }
    }

    /// The request for `action` with the precondition's header, which is signed too (S3 checks
    /// the header sent against the signed one).
    fn conditional<'a, A: S3Action<'a>, B>(
        &self,
        mut action: A,
        condition: Condition<'_>,
        request: impl FnOnce(&ureq::Agent, &str) -> ureq::RequestBuilder<B>,
    ) -> ureq::RequestBuilder<B> {
        let header = condition.header();
        if let Some((name, value)) = header {
            action.headers_mut().insert(name, value.to_string());
        }
        let url = action.sign(SIGNED_FOR);
        let mut request = request(&self.agent, url.as_str());
        if let Some((name, value)) = header {
            request = request.header(name, value);
        }
        request
    }

    /// PUT with an optional precondition; `Ok(false)` when the precondition failed.
    fn put(&self, key: &str, body: &[u8], condition: Condition<'_>) -> Result<bool, StateError> {
        let action = self.bucket.put_object(self.credentials.as_ref(), key);
        let request = self.conditional(action, condition, |agent, url| agent.put(url));
        let answer = self.send(&format!("PUT {key}"), request.send(body))?;
        match answer.status {
            200 | 201 | 204 => Ok(true),
            // 409: a concurrent conditional write to the same key is in flight.
            412 | 409 => Ok(false),
            s => Err(self.io(format!(
                "PUT {key}: HTTP {s}: {}",
                String::from_utf8_lossy(&answer.body).trim()
            ))),
        }
    }

    fn delete(&self, key: &str, condition: Condition<'_>) -> Result<bool, StateError> {
        let action = self.bucket.delete_object(self.credentials.as_ref(), key);
        let request = self.conditional(action, condition, |agent, url| agent.delete(url));
        let answer = self.send(&format!("DELETE {key}"), request.call())?;
        match answer.status {
            200 | 204 | 404 => Ok(true),
            412 | 409 => Ok(false),
            s => Err(self.io(format!("DELETE {key}: HTTP {s}"))),
        }
    }

    /// Every key under `prefix` with its size, in key order.
    fn list(&self, prefix: &str) -> Result<Vec<(String, u64)>, StateError> {
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut action = self.bucket.list_objects_v2(self.credentials.as_ref());
            action.with_prefix(prefix.to_string());
            if let Some(t) = &token {
                action.with_continuation_token(t.clone());
            }
            let url = action.sign(SIGNED_FOR);
            let answer = self.send(
                &format!("LIST {prefix}"),
                self.agent.get(url.as_str()).call(),
            )?;
            if answer.status != 200 {
                return Err(self.io(format!("LIST {prefix}: HTTP {}", answer.status)));
            }
            let text = String::from_utf8_lossy(&answer.body);
            let page = ListObjectsV2::parse_response(&text)
                .map_err(|e| self.io(format!("LIST {prefix}: unreadable answer: {e}")))?;
            keys.extend(
                page.contents
                    .into_iter()
                    .map(|c| (c.key, c.size.unwrap_or(0))),
            );
            match page.next_continuation_token {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        keys.sort();
        Ok(keys)
    }

    /// The snapshot and its generation.
    fn snapshot(&self) -> Result<State, StateError> {
        let key = self.key("state.json");
        match self.get(&key)? {
            Some((bytes, _)) => serde_json::from_slice(&bytes).map_err(|e| self.corrupt(&key, e)),
            None => Ok(State::default()),
        }
    }

    /// The current generation's segments, as (seq, key, size).
    fn segments(&self, generation: u64) -> Result<Vec<(u64, String, u64)>, StateError> {
        let dir = self.segment_dir(generation);
        let mut out = Vec::new();
        for (key, size) in self.list(&dir)? {
            let seq = key
                .strip_prefix(&dir)
                .and_then(|n| n.strip_suffix(".jsonl"))
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| self.corrupt(&key, "unexpected object in the journal"))?;
            out.push((seq, key, size));
        }
        out.sort();
        Ok(out)
    }

    fn cursor(&self) -> Result<Cursor, StateError> {
        if let Some(c) = *self.cursor.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(c);
        }
        let generation = self.snapshot()?.serial;
        let segments = self.segments(generation)?;
        let cursor = Cursor {
            generation,
            next_seq: segments.last().map_or(0, |s| s.0 + 1),
            bytes: segments.iter().map(|s| s.2).sum(),
        };
        *self.cursor.lock().unwrap_or_else(|p| p.into_inner()) = Some(cursor);
        Ok(cursor)
    }

    fn read_lease(&self) -> Result<Option<(Lease, String)>, StateError> {
        let key = self.key("lease.json");
        match self.get(&key)? {
            Some((bytes, etag)) => {
                let lease = serde_json::from_slice(&bytes).map_err(|e| self.corrupt(&key, e))?;
                let etag = etag.ok_or_else(|| self.io(format!("GET {key}: no ETag")))?;
                Ok(Some((lease, etag)))
            }
            None => Ok(None),
        }
    }

    /// Refuse a write whose lease is no longer the stack's.
    fn check_lease(&self, lease: &Lease) -> Result<(), StateError> {
        let current = self.read_lease()?.map(|(l, _)| l);
        super::writer::check_current(&self.location(), lease, current.as_ref())
    }

    /// The last fencing number handed out (`fence.json`, which outlives released leases).
    fn read_fence(&self) -> Result<u64, StateError> {
        let key = self.key("fence.json");
        match self.get(&key)? {
            Some((bytes, _)) => Ok(String::from_utf8_lossy(&bytes).trim().parse().unwrap_or(0)),
            None => Ok(0),
        }
    }

    fn release_key(&self, revision: u64) -> String {
        self.numbered_key(&RELEASES, revision)
    }

    fn release_numbers(&self) -> Result<Vec<u64>, StateError> {
        self.numbers(&RELEASES)
    }
}

/// A folder of JSON objects numbered 1, 2, ... (`releases/00000001.json`, `runs/...`).
struct NumberedFolder {
    folder: &'static str,
    /// What a record is called in errors.
    what: &'static str,
    /// Lost races tolerated before giving up.
    retries: usize,
}

const RELEASES: NumberedFolder = NumberedFolder {
    folder: "releases",
    what: "release",
    retries: RELEASE_RETRIES,
};
const RUNS: NumberedFolder = NumberedFolder {
    folder: "runs",
    what: "run",
    retries: RUN_RETRIES,
};

impl S3Store {
    fn numbered_key(&self, folder: &NumberedFolder, number: u64) -> String {
        self.key(&format!("{}/{number:08}.json", folder.folder))
    }

    fn numbers(&self, folder: &NumberedFolder) -> Result<Vec<u64>, StateError> {
        let dir = self.key(&format!("{}/", folder.folder));
        let mut numbers: Vec<u64> = self
            .list(&dir)?
            .into_iter()
            .filter_map(|(k, _)| k.strip_prefix(&dir)?.strip_suffix(".json")?.parse().ok())
            .collect();
        numbers.sort_unstable();
        Ok(numbers)
    }

    /// Store `record` under the next free number, claimed with a create-if-absent write.
    fn create_numbered<T: Serialize>(
        &self,
        folder: &NumberedFolder,
        record: &mut T,
        set_number: fn(&mut T, u64),
    ) -> Result<u64, StateError> {
        let mut next = self.numbers(folder)?.last().copied().unwrap_or(0) + 1;
        for _ in 0..folder.retries {
            set_number(record, next);
            let bytes = serde_json::to_vec_pretty(record).map_err(|e| self.io(e))?;
            if self.put(&self.numbered_key(folder, next), &bytes, Condition::Absent)? {
                return Ok(next);
            }
            // Someone took `next`; others may have gone further meanwhile, so look again
            // rather than probing one number at a time.
            let last = self.numbers(folder)?.last().copied().unwrap_or(0);
            next = (next + 1).max(last + 1);
        }
        Err(self.io(format!(
            "could not number a new {}: too many concurrent writers",
            folder.what
        )))
    }

    fn read_numbered<T: DeserializeOwned>(
        &self,
        folder: &NumberedFolder,
        number: u64,
    ) -> Result<Option<T>, StateError> {
        let key = self.numbered_key(folder, number);
        match self.get(&key)? {
            Some((bytes, _)) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| self.corrupt(&key, e)),
            None => Ok(None),
        }
    }
}

#[derive(Clone, Copy)]
enum Condition<'a> {
    None,
    /// The key must not exist.
    Absent,
    /// The key must still have this ETag.
    Matches(&'a str),
}

impl<'a> Condition<'a> {
    fn header(self) -> Option<(&'static str, &'a str)> {
        match self {
            Condition::None => None,
            Condition::Absent => Some(("if-none-match", "*")),
            Condition::Matches(etag) => Some(("if-match", etag)),
        }
    }
}

impl StateStore for S3Store {
    fn location(&self) -> String {
        self.display.clone()
    }

    fn load(&self) -> Result<State, StateError> {
        let mut state = self.snapshot()?;
        let generation = state.serial;
        let segments = self.segments(generation)?;
        let now = now_ms();
        let mut bytes = 0;
        for (_, key, size) in &segments {
            // A segment listed but gone was removed by a concurrent checkpoint: this read raced
            // a writer and must not mix generations.
            let (body, _) = self.get(key)?.ok_or_else(|| {
                self.io(format!(
                    "{key} vanished while loading (a checkpoint ran concurrently); retry"
                ))
            })?;
            // A segment is written whole (one PUT), so its last line is a record too.
            for (n, line) in journal::lines(&body) {
                let (Line::Record(text) | Line::Torn(text)) = line;
                let record =
                    journal::decode(text).map_err(|e| self.corrupt(&format!("{key}:{n}"), e))?;
                state.apply_record(&record, now);
            }
            bytes += size;
        }
        *self.cursor.lock().unwrap_or_else(|p| p.into_inner()) = Some(Cursor {
            generation,
            next_seq: segments.last().map_or(0, |s| s.0 + 1),
            bytes,
        });
        Ok(state)
    }

    fn append(&self, lease: &Lease, records: &[JournalRecord]) -> Result<(), StateError> {
        if records.is_empty() {
            return Ok(());
        }
        let body = journal::encode(records).map_err(|e| self.io(e))?;
        // S3 cannot make a write depend on another object, so the lease is checked before the
        // segment is written and again after: a writer taken over meanwhile learns it at once.
        // Segments are create-if-absent, so a takeover and a late write can never both land
        // under one number.
        self.check_lease(lease)?;
        let cursor = self.cursor()?;
        let key = format!(
            "{}{:020}.jsonl",
            self.segment_dir(cursor.generation),
            cursor.next_seq
        );
        if !self.put(&key, &body, Condition::Absent)? {
            self.check_lease(lease)?;
            return Err(self.io(format!(
                "{key} was written by another process after this one read the state (a late write of the stack's previous holder); nothing was written: run the command again"
            )));
        }
        *self.cursor.lock().unwrap_or_else(|p| p.into_inner()) = Some(Cursor {
            next_seq: cursor.next_seq + 1,
            bytes: cursor.bytes + body.len() as u64,
            ..cursor
        });
        self.check_lease(lease)
    }

    fn checkpoint(&self, lease: &Lease, state: &State) -> Result<(), StateError> {
        self.check_lease(lease)?;
        let cursor = self.cursor()?;
        let mut snapshot = state.clone();
        // The new snapshot must start a fresh generation so the old segments stop counting.
        snapshot.serial = snapshot.serial.max(cursor.generation + 1);
        let bytes = serde_json::to_vec(&snapshot).map_err(|e| self.io(e))?;
        self.put(&self.key("state.json"), &bytes, Condition::None)?;
        *self.cursor.lock().unwrap_or_else(|p| p.into_inner()) = Some(Cursor {
            generation: snapshot.serial,
            next_seq: 0,
            bytes: 0,
        });
        // Older generations are unreachable now; removing them only saves space.
        let journal = self.key("journal/");
        for (key, _) in self.list(&journal)? {
            let generation = key
                .strip_prefix(&journal)
                .and_then(|rest| rest.split('/').next())
                .and_then(|g| g.parse::<u64>().ok());
            if generation.is_some_and(|g| g < snapshot.serial) {
                self.delete(&key, Condition::None)?;
            }
        }
        Ok(())
    }

    fn journal_len(&self) -> Result<u64, StateError> {
        Ok(self.cursor()?.bytes)
    }

    fn acquire_lease(&self, holder: &LeaseHolder, ttl_ms: u64) -> Result<Lease, StateError> {
        let key = self.key("lease.json");
        let existing = self.read_lease()?;
        let now = now_ms();
        if let Some((lease, _)) = &existing
            && lease.expires_at > now
            && !holder_is_dead(&lease.holder)
        {
            return Err(StateError::Locked {
                holder: lease.holder.clone(),
                expires: format_time(lease.expires_at),
            });
        }
        let previous = existing.as_ref().map_or(0, |(l, _)| l.fence);
        let lease = Lease {
            holder: holder.clone(),
            token: random_token(),
            acquired_at: now,
            expires_at: now + ttl_ms,
            fence: previous.max(self.read_fence()?) + 1,
        };
        let bytes = serde_json::to_vec_pretty(&lease).map_err(|e| self.io(e))?;
        let condition = match &existing {
            Some((_, etag)) => Condition::Matches(etag),
            None => Condition::Absent,
        };
        if self.put(&key, &bytes, condition)? {
            // Only the winner of the lease writes the counter, so it only grows.
            self.put(
                &self.key("fence.json"),
                lease.fence.to_string().as_bytes(),
                Condition::None,
            )?;
            return Ok(lease);
        }
        // Someone else changed the lease between our read and write: they won.
        match self.read_lease()? {
            Some((winner, _)) => Err(StateError::Locked {
                holder: winner.holder,
                expires: format_time(winner.expires_at),
            }),
            None => Err(self.io("the lease changed while acquiring it; retry")),
        }
    }

    fn renew_lease(&self, lease: &Lease, ttl_ms: u64) -> Result<Lease, StateError> {
        let etag = match self.read_lease()? {
            Some((current, etag)) if current.token == lease.token => etag,
            _ => return Err(StateError::LeaseLost),
        };
        let renewed = Lease {
            expires_at: now_ms() + ttl_ms,
            ..lease.clone()
        };
        let bytes = serde_json::to_vec_pretty(&renewed).map_err(|e| self.io(e))?;
        if self.put(&self.key("lease.json"), &bytes, Condition::Matches(&etag))? {
            Ok(renewed)
        } else {
            Err(StateError::LeaseLost)
        }
    }

    fn release_lease(&self, lease: &Lease) -> Result<(), StateError> {
        if let Some((current, etag)) = self.read_lease()?
            && current.token == lease.token
        {
            // If it changed meanwhile it is someone else's now: leave it.
            self.delete(&self.key("lease.json"), Condition::Matches(&etag))?;
        }
        Ok(())
    }

    fn force_unlock(&self) -> Result<Option<Lease>, StateError> {
        // An unreadable lease is removed all the same: it must never lock a stack for good.
        let current = match self.read_lease() {
            Ok(lease) => lease.map(|(l, _)| l),
            Err(StateError::Corrupt { .. }) => None,
            Err(e) => return Err(e),
        };
        self.delete(&self.key("lease.json"), Condition::None)?;
        Ok(current)
    }

    fn current_lease(&self) -> Result<Option<Lease>, StateError> {
        Ok(self.read_lease()?.map(|(l, _)| l))
    }

    fn create_release(&self, release: &mut Release) -> Result<u64, StateError> {
        self.create_numbered(&RELEASES, release, |r, n| r.revision = n)
    }

    fn update_release(&self, release: &Release) -> Result<(), StateError> {
        let bytes = serde_json::to_vec_pretty(release).map_err(|e| self.io(e))?;
        self.put(&self.release_key(release.revision), &bytes, Condition::None)?;
        Ok(())
    }

    fn latest_revision(&self) -> Result<Option<u64>, StateError> {
        Ok(self.release_numbers()?.last().copied())
    }

    fn releases(&self) -> Result<Vec<Release>, StateError> {
        self.release_numbers()?
            .into_iter()
            .map(|r| self.release(r))
            .collect()
    }

    fn release(&self, revision: u64) -> Result<Release, StateError> {
        self.read_numbered(&RELEASES, revision)?
            .ok_or(StateError::NoSuchRelease(revision))
    }

    fn create_run(&self, run: &mut RunRecord) -> Result<u64, StateError> {
        self.create_numbered(&RUNS, run, |r, n| r.id = n)
    }

    fn update_run(&self, run: &RunRecord) -> Result<(), StateError> {
        let key = self.numbered_key(&RUNS, run.id);
        // Only a run that was created can be updated (as on the other backends); the check and
        // the write are not one step, but ids are never deleted, so it cannot go stale.
        if self.get(&key)?.is_none() {
            return Err(StateError::NoSuchRun(run.id));
        }
        let bytes = serde_json::to_vec_pretty(run).map_err(|e| self.io(e))?;
        self.put(&key, &bytes, Condition::None)?;
        Ok(())
    }

    fn runs(&self) -> Result<Vec<RunRecord>, StateError> {
        self.numbers(&RUNS)?
            .into_iter()
            .map(|id| {
                self.read_numbered(&RUNS, id)?
                    .ok_or(StateError::NoSuchRun(id))
            })
            .collect()
    }
}
