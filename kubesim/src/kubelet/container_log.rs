//! A container's log as the container runtime writes it and the kubelet reads it back.
//!
//! The file format is the CRI one (`2016-10-06T00:17:09.669794202Z stdout F content`, one record
//! per line, `P` for the parts of a line cut at the runtime's buffer size), and reading follows
//! the kubelet's `ReadLogs`: `tailLines` picks the start, then records older than `since` are
//! skipped, each is prefixed with its timestamp (RFC 3339 with nine fixed fraction digits) when
//! asked, and the output is cut at `limitBytes`. Scripted containers write no file: their log is
//! a function of the instance's start and end, computed line by line so that neither memory nor a
//! follower grows with the time a container runs.

use std::io::{self, Read, Seek, SeekFrom};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::meta;

/// Longest record the runtime writes before cutting a line into partial (`P`) records: the
/// containerd and CRI-O default.
pub const MAX_RECORD: usize = 16 * 1024;

/// Which of the container's outputs a record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// A time as the kubelet writes it before a line (`RFC3339NanoFixed`: nine fraction digits).
pub fn timestamp(at: SystemTime) -> String {
    let d = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let whole = meta::rfc3339(at);
    format!("{}.{:09}Z", whole.trim_end_matches('Z'), d.subsec_nanos())
}

/// One record of the log file for `content` (a whole line with its newline, or a part of one
/// without: then it is written as partial).
pub fn record(at: SystemTime, stream: Stream, content: &[u8]) -> Vec<u8> {
    let full = content.last() == Some(&b'\n');
    let stamp = timestamp(at);
    let mut out = Vec::with_capacity(stamp.len() + content.len() + 12);
    out.extend_from_slice(stamp.as_bytes());
    out.push(b' ');
    out.extend_from_slice(stream.as_str().as_bytes());
    out.extend_from_slice(if full { b" F " } else { b" P " });
    out.extend_from_slice(content);
    if !full {
        out.push(b'\n');
    }
    out
}

/// A record read back: its time and what the container wrote (a full line keeps its newline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    /// When the runtime read it from the container.
    pub at: SystemTime,
    /// The bytes as written.
    pub content: &'a [u8],
}

/// Parses one line of the log file (with its newline); `None` for a line that is not a record.
pub fn parse(line: &[u8]) -> Option<Entry<'_>> {
    let mut parts = line.splitn(4, |b| *b == b' ');
    let stamp = std::str::from_utf8(parts.next()?).ok()?;
    let stream = parts.next()?;
    if stream != b"stdout" && stream != b"stderr" {
        return None;
    }
    let tag = parts.next()?;
    let mut content = parts.next()?;
    // Tags may carry more after a colon (`F:x`); only the first says whether it is partial.
    if tag.split(|b| *b == b':').next() == Some(b"P") {
        content = content.strip_suffix(b"\n").unwrap_or(content);
    }
    let (secs, nanos) = meta::parse_rfc3339(stamp)?;
    let at = UNIX_EPOCH + Duration::new(u64::try_from(secs).ok()?, nanos);
    Some(Entry { at, content })
}

/// What a reader asked for, in the kubelet's terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// The last N lines only (`tailLines`).
    pub tail: Option<u64>,
    /// Lines written at or after this time only (`sinceSeconds`, `sinceTime`).
    pub since: Option<SystemTime>,
    /// At most this many bytes of output (`limitBytes`).
    pub limit_bytes: Option<u64>,
    /// Each line prefixed with its timestamp and a space (`timestamps`).
    pub timestamps: bool,
}

/// Whether more may be written after an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep going.
    More,
    /// `limitBytes` is reached: the output ends here.
    Full,
}

/// Turns entries into output as the kubelet's log writer does: `since`, timestamps, then the
/// byte limit.
#[derive(Debug, Clone)]
pub struct Writer {
    since: Option<SystemTime>,
    timestamps: bool,
    remaining: u64,
}

impl Writer {
    /// A writer for `opts`.
    pub fn new(opts: &ReadOptions) -> Self {
        Self {
            since: opts.since,
            timestamps: opts.timestamps,
            remaining: opts.limit_bytes.unwrap_or(u64::MAX),
        }
    }

    /// Appends what `entry` contributes to `out`.
    pub fn write(&mut self, entry: &Entry<'_>, out: &mut Vec<u8>) -> Flow {
        if self.remaining == 0 {
            return Flow::Full;
        }
        if self.since.is_some_and(|s| entry.at < s) {
            return Flow::More;
        }
        let start = out.len();
        if self.timestamps {
            out.extend_from_slice(timestamp(entry.at).as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(entry.content);
        let written = (out.len() - start) as u64;
        if written >= self.remaining {
            out.truncate(start + usize::try_from(self.remaining).unwrap_or(usize::MAX));
            self.remaining = 0;
            return Flow::Full;
        }
        self.remaining -= written;
        Flow::More
    }
}

/// The offset where the last `lines` lines of `f` start (the kubelet's
/// `FindTailLineStartIndex`), read backwards in blocks so a long log is never held whole. A
/// last line without its newline counts as a line.
pub fn tail_start(f: &mut (impl Read + Seek), lines: u64) -> io::Result<u64> {
    const BLOCK: u64 = 64 * 1024;
    let size = f.seek(SeekFrom::End(0))?;
    if lines == 0 {
        return Ok(size);
    }
    let mut end = size;
    let mut found = 0u64;
    let mut buf = vec![0u8; BLOCK as usize];
    // A newline at the very end closes the last line; it does not start one after it.
    let mut skip_last = true;
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        let len = usize::try_from(end - start).expect("a block fits in memory");
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut buf[..len])?;
        for i in (0..len).rev() {
            if buf[i] != b'\n' {
                skip_last = false;
                continue;
            }
            if std::mem::take(&mut skip_last) {
                continue;
            }
            found += 1;
            if found == lines {
                return Ok(start + i as u64 + 1);
            }
        }
        end = start;
    }
    Ok(0)
}

/// The log of one instance of a scripted container: a start line, a progress line for every
/// second it runs, and an exit line, all on standard output. Line `i` is known without the lines
/// before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedLog {
    /// The container's name.
    pub container: String,
    /// When the instance started.
    pub started_at: SystemTime,
    /// When it ended and with which code, once it has.
    pub ended: Option<(SystemTime, i32)>,
}

impl ScriptedLog {
    /// How many progress lines there are at `now`: one per whole second run so far, and once
    /// the instance has ended, one per second strictly before its end.
    fn progress_lines(&self, now: SystemTime) -> u64 {
        match self.ended {
            Some((end, _)) => {
                let run = end.duration_since(self.started_at).unwrap_or_default();
                u64::try_from(run.as_nanos().saturating_sub(1) / 1_000_000_000).unwrap_or(u64::MAX)
            }
            None => now
                .duration_since(self.started_at)
                .unwrap_or_default()
                .as_secs(),
        }
    }

    /// How many lines exist at `now`.
    pub fn len_at(&self, now: SystemTime) -> u64 {
        1 + self.progress_lines(now) + u64::from(self.ended.is_some())
    }

    /// When the line after the last one at `now` appears; `None` once the log is complete.
    pub fn next_at(&self, now: SystemTime) -> Option<SystemTime> {
        match self.ended {
            Some(_) => None,
            None => Some(self.started_at + Duration::from_secs(self.len_at(now))),
        }
    }

    /// Line `i` (below `len_at`): its time and its text with the newline.
    pub fn line(&self, i: u64) -> (SystemTime, String) {
        let name = &self.container;
        match self.ended {
            _ if i == 0 => (
                self.started_at,
                format!("kubesim: container {name} started\n"),
            ),
            Some((end, code)) if i > self.progress_lines(end) => (
                end,
                format!("kubesim: container {name} exited with code {code}\n"),
            ),
            _ => (
                self.started_at + Duration::from_secs(i),
                format!("kubesim: container {name} running for {i}s\n"),
            ),
        }
    }
}

#[cfg(test)]
mod tests;
