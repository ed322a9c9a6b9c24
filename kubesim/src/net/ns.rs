//! Linux namespaces without `unsafe`: network namespaces held by open file descriptors (no
//! names under /var/run/netns, so nothing outlives kubesim's process), threads that enter them
//! to create sockets or start processes there, and the `ip` program to configure devices.
//!
//! A socket belongs to the network namespace of the thread that created it, and a child process
//! starts in the namespaces of the thread that spawned it; both stay there wherever they are used
//! afterwards. So a thread that has entered a namespace is all kubesim needs to act inside it.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, setns, unshare};

use super::rootfs::{self, Mount};

/// A network namespace, alive as long as this handle (or a process inside it) is.
#[derive(Debug)]
pub struct Netns(File);

impl Netns {
    /// Creates a new, empty network namespace (only a loopback device, down).
    pub fn create() -> io::Result<Netns> {
        on_thread(|| {
            unshare(CloneFlags::CLONE_NEWNET)?;
            Ok(Netns(File::open("/proc/thread-self/ns/net")?))
        })
    }

    /// The namespace of the process `pid` (or thread).
    pub fn of_process(pid: u32) -> io::Result<Netns> {
        Ok(Netns(File::open(format!("/proc/{pid}/ns/net"))?))
    }

    /// Moves the calling thread into this namespace.
    pub fn enter(&self) -> io::Result<()> {
        setns(self.0.as_fd(), CloneFlags::CLONE_NEWNET)?;
        Ok(())
    }

    /// Runs `f` on a new thread inside this namespace.
    pub fn run<R: Send>(&self, f: impl FnOnce() -> io::Result<R> + Send) -> io::Result<R> {
        on_thread(|| {
            self.enter()?;
            f()
        })
    }
}

/// Runs `f` on a fresh thread, so whatever namespace it enters dies with the thread and never
/// touches the caller's (tokio's) threads.
pub fn on_thread<R: Send>(f: impl FnOnce() -> io::Result<R> + Send) -> io::Result<R> {
    std::thread::scope(|s| {
        s.spawn(f)
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
    })
}

type Job = Box<dyn FnOnce() + Send>;

/// A thread that lives inside one network namespace and runs jobs there: creating sockets of
/// that namespace, and running `ip`. Its thread id names the namespace to `ip link ... netns`.
#[derive(Debug)]
pub struct NsThread {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    tid: u32,
}

impl NsThread {
    /// Starts the thread inside `ns`.
    pub fn start(ns: &Netns, name: &str) -> io::Result<NsThread> {
        let fd = ns.0.try_clone()?;
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::sync_channel::<io::Result<u32>>(1);
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let entered = Netns(fd).enter().and_then(|()| thread_id());
                let ok = entered.is_ok();
                let _ = ready_tx.send(entered);
                if ok {
                    // Ends when the last sender goes (the handle is dropped).
                    for job in job_rx {
                        job();
                    }
                }
            })?;
        let tid = ready_rx
            .recv()
            .map_err(|_| io::Error::other("namespace thread died while starting"))??;
        Ok(NsThread {
            jobs: Mutex::new(Some(job_tx)),
            tid,
        })
    }

    /// The thread's id (a "pid" for `ip link ... netns`).
    pub fn tid(&self) -> u32 {
        self.tid
    }

    /// Runs `f` on the thread and waits for its answer. Jobs are short (a socket, an `ip` run).
    pub fn call<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> io::Result<R> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        let sent = self
            .jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|jobs| jobs.send(job).is_ok())
            .unwrap_or(false);
        if !sent {
            return Err(io::Error::other("the namespace thread has stopped"));
        }
        rx.recv()
            .map_err(|_| io::Error::other("the namespace thread dropped a job"))
    }

    /// Runs `f` on the thread and awaits its answer without holding the caller's thread: an
    /// async task waiting here leaves its runtime worker free for other tasks.
    pub async fn call_async<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> io::Result<R> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        let sent = self
            .jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|jobs| jobs.send(job).is_ok())
            .unwrap_or(false);
        if !sent {
            return Err(io::Error::other("the namespace thread has stopped"));
        }
        rx.await
            .map_err(|_| io::Error::other("the namespace thread dropped a job"))
    }

    /// Stops the thread once its queued jobs are done.
    pub fn stop(&self) {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// The calling thread's id, from `/proc/thread-self` (`<pid>/task/<tid>`).
fn thread_id() -> io::Result<u32> {
    let link = std::fs::read_link("/proc/thread-self")?;
    link.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| io::Error::other("cannot read the thread id"))
}

/// Runs `ip -batch -` with `commands` (one per line) in the calling thread's namespaces; an
/// error carries what `ip` printed.
pub fn ip_batch(commands: &str) -> io::Result<()> {
    let started = std::time::Instant::now();
    let ran = run_ip_batch(commands);
    let took = started.elapsed();
    if took > std::time::Duration::from_secs(1) {
        // Worth knowing when pods start slowly: `ip` waits for the kernel's network lock while
        // namespaces anywhere on the host are being torn down.
        tracing::warn!(millis = took.as_millis() as u64, "ip took long");
    }
    ran
}

fn run_ip_batch(commands: &str) -> io::Result<()> {
    let mut child = Command::new("ip")
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(commands.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// What a container's processes see of the file system besides the host's: its image's layers,
/// its volumes at their mount paths and the files the kubelet manages, in a mount namespace of
/// its own ([`super::rootfs`]).
#[derive(Debug, Clone)]
pub struct FileView {
    /// The mounts, in order (parents before children).
    pub mounts: Vec<Mount>,
    /// An empty host folder the container's private tmpfs is mounted on (writable layers and
    /// mount points the host lacks live there).
    pub scratch: PathBuf,
    /// The working directory; made (without touching the host) when the view lacks it, as a
    /// container runtime does.
    pub working_dir: Option<PathBuf>,
    /// The host name (UTS namespace of its own).
    pub hostname: String,
    /// `securityContext.readOnlyRootFilesystem`: the root file system and the image's layers are
    /// read-only; volumes and the kubelet's files stay as they are mounted.
    pub read_only_root: bool,
}

/// Moves the calling thread into a new mount and UTS namespace laid out as `view`: mounts are
/// made private first so nothing propagates back to the host.
pub fn enter_file_view(view: &FileView) -> io::Result<()> {
    unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWUTS)?;
    mount::<str, str, str, str>(None, "/", None, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None)?;
    nix::unistd::sethostname(&view.hostname)?;
    let laid = rootfs::lay_out(&view.mounts, &view.scratch, view.working_dir.as_deref())?;
    if view.read_only_root {
        rootfs::read_only_root(&view.mounts, &laid)?;
    }
    Ok(())
}

/// Moves the calling thread into the network, mount and UTS namespaces of process `pid` (an
/// `exec` probe runs where the container runs).
pub fn enter_process(pid: u32) -> io::Result<()> {
    // Joining a mount namespace needs a file-system context of one's own.
    unshare(CloneFlags::CLONE_FS)?;
    for (ns, flag) in [
        ("net", CloneFlags::CLONE_NEWNET),
        ("uts", CloneFlags::CLONE_NEWUTS),
        ("mnt", CloneFlags::CLONE_NEWNS),
    ] {
        let f = File::open(format!("/proc/{pid}/ns/{ns}"))?;
        setns(f.as_fd(), flag)?;
    }
    Ok(())
}
