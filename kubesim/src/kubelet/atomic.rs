//! Writing a volume's files the way the kubelet's AtomicWriter does, so a process never sees
//! half an update: the files go into a new hidden folder `..<timestamp>`, the `..data` symlink
//! is switched to it with one rename, and each visible name is a symlink `name -> ..data/name`.
//! A rotated Secret thus reaches a running process as a new file under the same path.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::safe_path::safe_join;

const DATA: &str = "..data";
const DATA_TMP: &str = "..data_tmp";

/// Files of a volume: path relative to the volume → content.
pub type Files = BTreeMap<String, Vec<u8>>;

fn current(dir: &Path) -> Option<Files> {
    let data = dir.join(DATA);
    std::fs::read_link(&data).ok()?;
    let mut out = Files::new();
    let mut stack = vec![(data, String::new())];
    while let Some((d, prefix)) = stack.pop() {
        for entry in std::fs::read_dir(&d).ok()? {
            let entry = entry.ok()?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            if entry.file_type().ok()?.is_dir() {
                stack.push((entry.path(), rel));
            } else {
                out.insert(rel, std::fs::read(entry.path()).ok()?);
            }
        }
    }
    Some(out)
}

fn stamp() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "..{}_{:09}.{}",
        t.as_secs(),
        t.subsec_nanos(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

fn invalid(rel: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("invalid path {rel:?}"))
}

/// Makes `dir` hold exactly `files`; `false` when it already did (nothing was written).
pub fn write(dir: &Path, files: &Files) -> io::Result<bool> {
    std::fs::create_dir_all(dir)?;
    if current(dir).as_ref() == Some(files) {
        return Ok(false);
    }
    let old = std::fs::read_link(dir.join(DATA)).ok();
    let ts = stamp();
    let ts_dir = dir.join(&ts);
    std::fs::create_dir(&ts_dir)?;
    for (rel, bytes) in files {
        let path = safe_join(&ts_dir, rel).ok_or_else(|| invalid(rel))?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, bytes)?;
    }
    let tmp = dir.join(DATA_TMP);
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&ts, &tmp)?;
    std::fs::rename(&tmp, dir.join(DATA))?;
    let visible: std::collections::BTreeSet<&str> = files
        .keys()
        .filter_map(|k| k.split('/').find(|c| !c.is_empty() && *c != "."))
        .collect();
    for name in &visible {
        let link = dir.join(name);
        if link.symlink_metadata().is_err() {
            std::os::unix::fs::symlink(Path::new(DATA).join(name), &link)?;
        }
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("..") || visible.contains(name.as_str()) {
            continue;
        }
        // A key that is gone: its link pointed into `..data`.
        if entry.file_type()?.is_symlink() {
            std::fs::remove_file(entry.path())?;
        }
    }
    if let Some(old) = old {
        let _ = std::fs::remove_dir_all(dir.join(old));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> Files {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn updates_swap_the_data_link_and_keep_paths() {
        let dir = tempfile::tempdir().expect("tempdir");
        let v = dir.path().join("vol");
        assert!(write(&v, &files(&[("tls.crt", "one"), ("sub/x", "1")])).expect("write"));
        let read = |p: &str| std::fs::read_to_string(v.join(p)).expect(p);
        assert_eq!(read("tls.crt"), "one");
        assert_eq!(read("sub/x"), "1");
        assert!(
            std::fs::read_link(v.join("tls.crt"))
                .expect("link")
                .starts_with(DATA)
        );
        // A reader holding the old file keeps reading the old content.
        let held = std::fs::File::open(v.join("tls.crt")).expect("open");
        assert!(!write(&v, &files(&[("tls.crt", "one"), ("sub/x", "1")])).expect("same"));
        assert!(write(&v, &files(&[("tls.crt", "two")])).expect("rotate"));
        assert_eq!(read("tls.crt"), "two");
        assert!(
            v.join("sub").symlink_metadata().is_err(),
            "a removed key disappears"
        );
        let mut old = String::new();
        std::io::Read::read_to_string(&mut &held, &mut old).expect("read held");
        assert_eq!(old, "one");
        let hidden: Vec<String> = std::fs::read_dir(&v)
            .expect("list")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.starts_with("..") && n != DATA)
            .collect();
        assert_eq!(
            hidden.len(),
            1,
            "the previous version is removed: {hidden:?}"
        );
    }
}
