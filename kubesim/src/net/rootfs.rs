//! A container's file system as a container runtime lays it out, over the host's root inside the
//! container's own mount namespace: image layers (host folders at image paths, with a private
//! writable layer on top), volumes at their `mountPath`, the kubelet's files.
//!
//! Mounts need something to mount on, and kubesim must never create it on the host. A missing
//! mount point is made inside the namespace: the nearest folder above it that exists gets an
//! overlay of itself whose upper layer lives in a tmpfs private to the container, and the
//! missing folders (or the empty file) are created there. The overlay shows the folder's own
//! files unchanged; mounts that were below it are bound again on top, so nothing the host or an
//! earlier mount put there disappears. `/` itself is never overlaid (it would hide `/proc` and
//! every other mount): when a mount point's top-level folder is missing on the host (an image's
//! `/prometheus`, a volume at `/data`), the container gets a root of its own instead, as a
//! container runtime gives it: a tmpfs with each of the host's top-level entries bound at its
//! name and the missing folders made in the tmpfs, made the namespace's root with `pivot_root`.

use std::io;
use std::path::{Component, Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};

/// One mount of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// On the host.
    pub source: PathBuf,
    /// The path the container sees.
    pub target: PathBuf,
    /// How.
    pub kind: MountKind,
}

/// How a [`Mount`] shows its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountKind {
    /// An image layer: the source's content with a writable layer of the container's own on
    /// top (a file is bound read-only), so the container's writes never reach the host.
    Layer,
    /// The source itself (volumes, the kubelet's files): writes reach it.
    Bind {
        /// Mounted read-only (`readOnly`, and ConfigMap/Secret/projected volumes).
        read_only: bool,
    },
    /// Like [`MountKind::Bind`], but a mount point that cannot be made is skipped (volumes of
    /// pods that predate mounts at their real paths still find them under the pod root).
    OptionalBind {
        /// Mounted read-only.
        read_only: bool,
    },
}

/// Why a mount could not be laid out.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// There is no folder to create the mount point in without touching the host (the
    /// container's own root was not made, so the top-level folder cannot be).
    #[error("cannot create mount point {target}: the host has no {top}, and / is never overlaid")]
    NoMountPoint {
        /// The mount path.
        target: PathBuf,
        /// Its top-level folder.
        top: PathBuf,
    },
    /// A mount system call or file operation failed.
    #[error("cannot {what} {path}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

impl MountError {
    /// Stable label of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NoMountPoint { .. } => "no_mount_point",
            Self::Io { .. } => "io",
        }
    }
}

impl From<MountError> for io::Error {
    fn from(e: MountError) -> io::Error {
        io::Error::other(chain(&e))
    }
}

/// The error and its causes on one line (the container's start failure message).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cur = c.source();
    }
    out
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> MountError + use<> {
    let path = path.to_path_buf();
    move |source| MountError::Io { what, path, source }
}

fn nix_err(what: &'static str, path: &Path) -> impl FnOnce(nix::Error) -> MountError + use<> {
    let path = path.to_path_buf();
    move |e| MountError::Io {
        what,
        path,
        source: e.into(),
    }
}

/// Number of normal components (mount order: parents before children).
pub fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// What [`lay_out`] made that later steps must know about.
#[derive(Debug, Default)]
pub struct Laid {
    /// With a root of the container's own: the host's top-level entries bound into it that
    /// were part of the host's root file system (each is a mount of its own now, so
    /// [`read_only_root`] remounts them as it remounts `/`; `/proc`, `/dev` and the like were
    /// mounts of their own before and keep their flags).
    pub host_tops: Vec<PathBuf>,
}

/// Lays `mounts` out in the calling thread's mount namespace, which must be private already.
/// `scratch` is an empty host folder on which the container's private tmpfs is mounted (only
/// when a writable layer or a mount point is needed). When a mount point's (or the working
/// directory's) top-level folder is missing on the host, the container first gets a root of its
/// own ([`Layout::own_root`]). Mounts go in the order given; then the working directory is made
/// if it is missing.
pub fn lay_out(
    mounts: &[Mount],
    scratch: &Path,
    working_dir: Option<&Path>,
) -> Result<Laid, MountError> {
    let mut layout = Layout {
        scratch: scratch.to_path_buf(),
        scratch_mounted: false,
        next: 0,
        ours: Vec::new(),
    };
    let missing = missing_tops(mounts.iter().map(|m| m.target.as_path()).chain(working_dir));
    let mut laid = Laid::default();
    if !missing.is_empty() {
        laid.host_tops = layout.own_root(&missing)?;
    }
    for m in mounts {
        let done = match m.kind {
            MountKind::Layer => layout.layer(&m.source, &m.target),
            MountKind::Bind { read_only } => layout.bind(&m.source, &m.target, read_only),
            MountKind::OptionalBind { read_only } => {
                match layout.bind(&m.source, &m.target, read_only) {
                    Err(MountError::NoMountPoint { .. }) => {
                        tracing::debug!(target = %m.target.display(), "no mount point for a volume; it stays under the pod root only");
                        Ok(())
                    }
                    other => other,
                }
            }
        };
        done?;
    }
    if let Some(dir) = working_dir {
        layout.mount_point(dir, true)?;
    }
    Ok(laid)
}

/// The top-level folders (`/data` of `/data/x`) of `paths` that the host lacks, in order.
fn missing_tops<'a>(paths: impl Iterator<Item = &'a Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in paths {
        let top: PathBuf = path.components().take(2).collect();
        if depth(&top) == 1 && !out.contains(&top) && std::fs::symlink_metadata(&top).is_err() {
            out.push(top);
        }
    }
    out
}

/// Where the host's root stays reachable for a moment after `pivot_root`, inside the new root.
const OLD_ROOT: &str = ".kubesim-host-root";

/// What has been mounted so far in this namespace.
struct Layout {
    scratch: PathBuf,
    scratch_mounted: bool,
    next: u32,
    /// Mount points this layout made, in order, and whether the container may write there
    /// without reaching the host (an overlay of ours).
    ours: Vec<(PathBuf, bool)>,
}

impl Layout {
    /// A fresh folder in the container's private tmpfs.
    fn scratch_dir(&mut self, what: &str) -> Result<PathBuf, MountError> {
        if !self.scratch_mounted {
            std::fs::create_dir_all(&self.scratch).map_err(io_err("create", &self.scratch))?;
            mount::<str, Path, str, str>(
                Some("tmpfs"),
                &self.scratch,
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some("mode=0755"),
            )
            .map_err(nix_err("mount a tmpfs on", &self.scratch))?;
            self.scratch_mounted = true;
        }
        self.next += 1;
        let dir = self.scratch.join(format!("{}-{what}", self.next));
        std::fs::create_dir(&dir).map_err(io_err("create", &dir))?;
        Ok(dir)
    }

    /// Gives the container a root of its own: a tmpfs in the private scratch, with every
    /// top-level entry of the host's `/` there (folders bound recursively, so the mounts below
    /// them come along; links copied; files bound) and the `missing` folders made in the tmpfs,
    /// then made the namespace's root with `pivot_root` and the host's root detached. Nothing
    /// is created on the host. The bound folders are the host's: mount points missing below
    /// them still get overlays ([`Layout::make_writable`]). Returns the bound entries that
    /// were not mount points on the host.
    fn own_root(&mut self, missing: &[PathBuf]) -> Result<Vec<PathBuf>, MountError> {
        let host_mounts =
            submounts(Path::new("/")).map_err(io_err("read the mounts below", Path::new("/")))?;
        let root = self.scratch_dir("root")?;
        // pivot_root needs the new root to be a mount point.
        mount::<str, Path, str, str>(
            Some("tmpfs"),
            &root,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=0755"),
        )
        .map_err(nix_err("mount a tmpfs on", &root))?;
        let mut tops = Vec::new();
        let entries = std::fs::read_dir("/").map_err(io_err("read", Path::new("/")))?;
        for entry in entries {
            let entry = entry.map_err(io_err("read", Path::new("/")))?;
            let host = entry.path();
            let at = root.join(entry.file_name());
            let kind = entry.file_type().map_err(io_err("read", &host))?;
            if kind.is_symlink() {
                let link = std::fs::read_link(&host).map_err(io_err("read", &host))?;
                std::os::unix::fs::symlink(&link, &at).map_err(io_err("create", &at))?;
                continue;
            }
            if kind.is_dir() {
                std::fs::create_dir(&at).map_err(io_err("create", &at))?;
            } else {
                std::fs::File::create(&at).map_err(io_err("create", &at))?;
            }
            mount::<Path, Path, str, str>(
                Some(&host),
                &at,
                None,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None,
            )
            .map_err(nix_err("bind", &host))?;
            tops.push(host);
        }
        for top in missing {
            let at = root.join(top.strip_prefix("/").unwrap_or(top));
            std::fs::create_dir_all(&at).map_err(io_err("create", &at))?;
        }
        let old = root.join(OLD_ROOT);
        std::fs::create_dir(&old).map_err(io_err("create", &old))?;
        nix::unistd::pivot_root(&root, &old).map_err(nix_err("pivot_root to", &root))?;
        std::env::set_current_dir("/").map_err(io_err("enter", Path::new("/")))?;
        let old = Path::new("/").join(OLD_ROOT);
        umount2(&old, MntFlags::MNT_DETACH).map_err(nix_err("detach", &old))?;
        std::fs::remove_dir(&old).map_err(io_err("remove", &old))?;
        // The root is the container's tmpfs; the bound folders are the host's.
        self.ours.push((PathBuf::from("/"), true));
        for top in &tops {
            self.ours.push((top.clone(), false));
        }
        tops.retain(|t| !host_mounts.contains(t));
        Ok(tops)
    }

    /// Whether writing below `dir` (canonical) stays inside the container: the mount that holds
    /// it is an overlay of ours (the innermost mount of ours over it decides; a folder no mount
    /// of ours covers is the host's).
    fn writable(&self, dir: &Path) -> bool {
        let mut best: Option<(usize, bool)> = None;
        for (point, writable) in &self.ours {
            if dir.starts_with(point) {
                let d = depth(point);
                if best.is_none_or(|(b, _)| d >= b) {
                    best = Some((d, *writable));
                }
            }
        }
        best.is_some_and(|(_, w)| w)
    }

    /// An overlay with `lower` below, mounted on `target`; its upper and work folders live in
    /// the private tmpfs.
    fn overlay(&mut self, lower: &Path, target: &Path) -> Result<(), MountError> {
        for p in [lower, target] {
            let text = p.to_string_lossy();
            if text.contains([',', ':', '\\']) {
                return Err(MountError::Io {
                    what: "overlay",
                    path: p.to_path_buf(),
                    source: io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "a path with ',', ':' or '\\' cannot be an overlay's lower folder",
                    ),
                });
            }
        }
        let upper = self.scratch_dir("upper")?;
        let work = self.scratch_dir("work")?;
        let options = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            upper.display(),
            work.display()
        );
        mount::<str, Path, str, str>(
            Some("overlay"),
            target,
            Some("overlay"),
            MsFlags::empty(),
            Some(&options),
        )
        .map_err(nix_err("mount an overlay on", target))?;
        self.ours.push((target.to_path_buf(), true));
        Ok(())
    }

    /// Makes the existing folder `dir` (canonical) writable inside the container: an overlay of
    /// itself, with the mounts that were below it bound again on top.
    fn make_writable(&mut self, dir: &Path, target: &Path) -> Result<(), MountError> {
        if dir == Path::new("/") {
            let top = target.components().take(2).collect::<PathBuf>();
            return Err(MountError::NoMountPoint {
                target: target.to_path_buf(),
                top,
            });
        }
        let below = submounts(dir).map_err(io_err("read the mounts below", dir))?;
        let keep = if below.is_empty() {
            None
        } else {
            // A recursive bind keeps the mounts below reachable once the overlay hides them.
            let keep = self.scratch_dir("keep")?;
            mount::<Path, Path, str, str>(
                Some(dir),
                &keep,
                None,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None,
            )
            .map_err(nix_err("bind", dir))?;
            // Held open: the scratch tmpfs (and `keep` in it) may itself be below `dir` (the
            // pod's folder under /tmp, a mount point made under /tmp), and then the overlay
            // hides its path. The descriptor still reaches it.
            let held = std::fs::File::open(&keep).map_err(io_err("open", &keep))?;
            Some(held)
        };
        self.overlay(dir, dir)?;
        if let Some(held) = keep {
            use std::os::fd::AsRawFd;
            let keep = PathBuf::from(format!("/proc/thread-self/fd/{}", held.as_raw_fd()));
            for point in below {
                let Ok(rel) = point.strip_prefix(dir) else {
                    continue;
                };
                mount::<Path, Path, str, str>(
                    Some(&keep.join(rel)),
                    &point,
                    None,
                    MsFlags::MS_BIND | MsFlags::MS_REC,
                    None,
                )
                .map_err(nix_err("bind again", &point))?;
                self.ours.push((point, false));
            }
        }
        Ok(())
    }

    /// Makes sure `target` exists (a folder, or an empty file when `dir` is false) without
    /// writing to the host.
    fn mount_point(&mut self, target: &Path, dir: bool) -> Result<(), MountError> {
        if target.exists() {
            return Ok(());
        }
        let mut existing = target;
        while !existing.exists() {
            existing = existing.parent().unwrap_or(Path::new("/"));
        }
        let canonical = existing
            .canonicalize()
            .map_err(io_err("resolve", existing))?;
        let rest = target.strip_prefix(existing).unwrap_or(Path::new(""));
        if !self.writable(&canonical) {
            self.make_writable(&canonical, target)?;
        }
        let point = canonical.join(rest);
        if dir {
            std::fs::create_dir_all(&point).map_err(io_err("create", &point))?;
        } else {
            if let Some(parent) = point.parent() {
                std::fs::create_dir_all(parent).map_err(io_err("create", parent))?;
            }
            std::fs::File::create(&point).map_err(io_err("create", &point))?;
        }
        Ok(())
    }

    fn layer(&mut self, source: &Path, target: &Path) -> Result<(), MountError> {
        let meta = std::fs::metadata(source).map_err(io_err("read", source))?;
        if !meta.is_dir() {
            return self.bind(source, target, true);
        }
        self.mount_point(target, true)?;
        self.overlay(source, target)
    }

    fn bind(&mut self, source: &Path, target: &Path, read_only: bool) -> Result<(), MountError> {
        let is_dir = std::fs::metadata(source)
            .map_err(io_err("read", source))?
            .is_dir();
        self.mount_point(target, is_dir)?;
        mount::<Path, Path, str, str>(Some(source), target, None, MsFlags::MS_BIND, None)
            .map_err(nix_err("bind", target))?;
        if read_only {
            mount::<str, Path, str, str>(
                None,
                target,
                None,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
                None,
            )
            .map_err(nix_err("make read-only", target))?;
        }
        self.ours.push((target.to_path_buf(), false));
        Ok(())
    }
}

/// Makes `/` and the image's layers read-only, as a container runtime mounts the root file
/// system of a container with `readOnlyRootFilesystem`, and with a root of the container's own
/// the host's folders bound into it (`laid`). Volumes and the kubelet's files are mounts of
/// their own and keep their flags. (The writable overlays kubesim makes for mount points the
/// host lacks stay writable: a container could write next to such a mount point.)
pub fn read_only_root(mounts: &[Mount], laid: &Laid) -> Result<(), MountError> {
    let read_only = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY;
    let layers = mounts
        .iter()
        .filter(|m| m.kind == MountKind::Layer)
        .map(|m| m.target.as_path());
    let tops = laid.host_tops.iter().map(PathBuf::as_path);
    for target in std::iter::once(Path::new("/")).chain(tops).chain(layers) {
        mount::<str, Path, str, str>(None, target, None, read_only, None)
            .map_err(nix_err("remount read-only", target))?;
    }
    Ok(())
}

/// The top-most mount points strictly below `dir`, from the calling thread's mount table.
fn submounts(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let table = std::fs::read_to_string("/proc/thread-self/mountinfo")?;
    let mut points: Vec<PathBuf> = table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape(p)))
        .filter(|p| p != dir && p.starts_with(dir))
        .collect();
    points.sort_by_key(|p| depth(p));
    points.dedup();
    let mut top: Vec<PathBuf> = Vec::new();
    for p in points {
        if !top.iter().any(|t| p.starts_with(t)) {
            top.push(p);
        }
    }
    Ok(top)
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let code = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(u8::try_from(code).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape(r"/x\134y"), r"/x\y");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape(r"/trailing\04"), r"/trailing\04");
    }

    #[test]
    fn the_innermost_mount_of_ours_decides_writability() {
        let layout = Layout {
            scratch: PathBuf::from("/s"),
            scratch_mounted: false,
            next: 0,
            ours: vec![
                (PathBuf::from("/opt"), true),
                (PathBuf::from("/opt/spark/conf"), false),
                (PathBuf::from("/opt/spark"), true),
            ],
        };
        assert!(layout.writable(Path::new("/opt/x")));
        assert!(layout.writable(Path::new("/opt/spark/work-dir")));
        assert!(!layout.writable(Path::new("/opt/spark/conf/sub")));
        assert!(
            !layout.writable(Path::new("/var")),
            "the host's own folders"
        );
        assert!(
            !layout.writable(Path::new("/optional")),
            "a prefix is not a parent"
        );
    }
}
