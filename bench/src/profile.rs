//! Where the instructions go: kubesim and `submitter serve` run under valgrind's callgrind for
//! a window of fresh submissions from one client, counted between two dumps (after a warm-up,
//! and after the window's pod events have settled), and each process' count is read by part.
//! Instruction counts do not move with the machine's load, which CPU times here do by tens of
//! percent: this is the profile, before (the baseline build) and after, that the report shows.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use anyhow::{Context, bail};

use crate::load;

/// Fresh submissions in the counted window.
pub const WINDOW: usize = 200;
/// Fresh submissions before it: connections, caches, the allocator's first pages.
const WARM_UP: usize = 20;

/// A part of a process: the sum, over its entry functions, of each one's inclusive count (what
/// it calls included). An entry is named by the start of its function's name; the largest
/// count of the functions so named is taken, which is the outermost one's.
pub struct Part {
    pub label: &'static str,
    pub entries: &'static [&'static str],
}

/// The submitter's parts: each task, and inside a submission's connection what its handler does.
pub const SUBMITTER_PARTS: &[Part] = &[
    Part {
        label: "a client's connection: TLS, HTTP, middleware and the handler",
        entries: &["submitter::tls::Connection::run"],
    },
    Part {
        label: "… of it, the handler (`submit::submit`)",
        entries: &["submitter::submit::submit::"],
    },
    Part {
        label: "… of that, building the objects (`submission::builder`)",
        entries: &["submission::builder::build"],
    },
    Part {
        label: "… of that, API calls: bodies written, sent, answers read (`kube_api`)",
        entries: &[
            "submitter::kube_api::KubeApi::send_text",
            "submitter::kube_api::to_vec",
            "submitter::kube_api::head::read",
        ],
    },
    Part {
        label: "the API connections to the API server (hyper's client side)",
        entries: &["<hyper::client::conn::http1::"],
    },
    Part {
        label: "the watch caches: pod and ConfigMap events read, decoded, stored",
        entries: &["submitter::caches::drive"],
    },
    Part {
        label: "JSON log lines (`json_log`)",
        entries: &["<submitter::json_log::JsonLines<W> as tracing_subscriber::layer::Layer<S>>"],
    },
    Part {
        label: "SHA-256 digests of names",
        entries: &["sha2::"],
    },
];

/// kubesim's parts: each task, and inside the API requests the steps of the largest.
pub const KUBESIM_PARTS: &[Part] = &[
    Part {
        label: "requests on objects (`api::object_request`): body, admission, store, answer",
        entries: &["kubesim::api::object_request"],
    },
    Part {
        label: "… of them, request bodies parsed (`parse_body`)",
        entries: &["kubesim::api::parse_body"],
    },
    Part {
        label: "… of them, admission (defaults, pruning, validation)",
        entries: &[
            "kubesim::admission::admit_create",
            "kubesim::admission::admit_update",
        ],
    },
    Part {
        label: "… of them, answers written with managedFields",
        entries: &["kubesim::api::serialized_response"],
    },
    Part {
        label: "Service controller (Endpoints, EndpointSlices)",
        entries: &["kubesim::services::start::"],
    },
    Part {
        label: "kubelet and scheduler (pod status)",
        entries: &["kubesim::kubelet::Kubelet::start::"],
    },
    Part {
        label: "watch streams (`api::watch`): events rendered",
        entries: &["kubesim::api::watch::start::"],
    },
    Part {
        label: "garbage collector",
        entries: &["kubesim::gc::start::"],
    },
    Part {
        label: "store writes (`Store::create_shared`, `Store::modify_shared`), inside the above",
        entries: &[
            "kubesim::store::Store::create_shared",
            "kubesim::store::Store::modify_shared",
        ],
    },
];

/// Function names (after the file name) that are the allocator's own.
const ALLOCATOR: &[&str] = &[
    "malloc",
    "free",
    "realloc",
    "calloc",
    "_int_malloc",
    "_int_free",
    "_int_realloc",
    "malloc_consolidate",
    "unlink_chunk",
    "sysmalloc",
    "tcache_init",
    "__libc_malloc",
    "__libc_free",
    "__libc_realloc",
    "__libc_calloc",
];

/// One process' instructions over the window.
#[derive(Debug, Clone, Default)]
pub struct Counted {
    pub total: u64,
    /// Each part's inclusive instructions, in the order of its process' parts; `None` when the
    /// build lacks a function of the part's names (code renamed or reorganised since).
    pub parts: Vec<Option<u64>>,
    /// Instructions in the allocator's own functions (`malloc`, `free` and their helpers).
    pub allocator: u64,
}

/// One figure of a profile.
type Measure = fn(&Profile) -> f64;

/// What one build's profile counted.
#[derive(Debug, Clone)]
pub struct Profile {
    pub submissions: usize,
    /// API requests kubesim served over the window.
    pub requests: u64,
    pub submitter: Counted,
    pub kubesim: Counted,
}

impl Profile {
    fn per_submission(&self, n: u64) -> f64 {
        n as f64 / self.submissions.max(1) as f64
    }
}

/// Whether valgrind's callgrind and its two scripts are here (`callgrind_annotate --version`
/// exits with 255, so only whether each runs at all is asked).
fn tools_present() -> anyhow::Result<()> {
    for tool in ["valgrind", "callgrind_control", "callgrind_annotate"] {
        Command::new(tool)
            .arg("--version")
            .output()
            .with_context(|| format!("`{tool}` is not installed (apt-get install valgrind)"))?;
    }
    Ok(())
}

/// Dumps a callgrind process' counts so far into its next numbered file, and zeroes them.
fn dump(pid: u32) -> anyhow::Result<()> {
    let out = Command::new("callgrind_control")
        .arg("--dump")
        .arg(pid.to_string())
        .output()
        .context("cannot run callgrind_control")?;
    if !out.status.success() {
        bail!(
            "callgrind_control --dump {pid} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Profiles the binaries of `bin_dir`: [`WINDOW`] fresh submissions from one client.
pub async fn run(bin_dir: &Path, dir: &Path) -> anyhow::Result<Profile> {
    tools_present()?;
    let kubesim_out = dir.join("callgrind.kubesim");
    let submitter_out = dir.join("callgrind.submitter");
    let load::Stack {
        kubesim,
        pki,
        submitter,
    } = load::Stack::start(
        bin_dir,
        dir,
        100_000,
        64,
        Some((&kubesim_out, &submitter_out)),
    )
    .await?;
    let clients = vec![load::client(&submitter.url, &pki)?];
    let ids =
        |what: &str, n: usize| Arc::new((0..n).map(|i| format!("profile-{what}-{i}")).collect());
    load::drive(&clients, ids("warm", WARM_UP)).await?;
    load::settle(&submitter).await;
    dump(kubesim.proc.pid())?;
    dump(submitter.proc.pid())?;
    let before = kubesim.counts()?;
    let (latencies, errors, _) = load::drive(&clients, ids("window", WINDOW)).await?;
    load::settle(&submitter).await;
    let requests = kubesim.counts()?.since(&before).total();
    dump(kubesim.proc.pid())?;
    dump(submitter.proc.pid())?;
    if errors > 0 {
        bail!("{errors} of the profile's submissions failed");
    }
    // The second dump holds the window alone: counts are zeroed at each dump.
    let second = |out: &Path| PathBuf::from(format!("{}.2", out.display()));
    Ok(Profile {
        submissions: latencies.len(),
        requests,
        submitter: count(&second(&submitter_out), SUBMITTER_PARTS)?,
        kubesim: count(&second(&kubesim_out), KUBESIM_PARTS)?,
    })
}

/// Reads one dump by part.
fn count(file: &Path, parts: &[Part]) -> anyhow::Result<Counted> {
    let (total, inclusive) = annotate(file, true)?;
    let (_, exclusive) = annotate(file, false)?;
    let parts = parts
        .iter()
        .map(|part| {
            let found: Vec<u64> = part
                .entries
                .iter()
                .filter_map(|entry| {
                    inclusive
                        .iter()
                        .filter(|(_, name)| is_entry(name, entry))
                        .map(|(n, _)| *n)
                        .max()
                })
                .collect();
            // A part some of whose functions the build lacks would be counted short.
            (found.len() == part.entries.len()).then(|| found.iter().sum())
        })
        .collect();
    let allocator = exclusive
        .iter()
        .filter(|(_, name)| is_allocator(name))
        .map(|(n, _)| n)
        .sum();
    Ok(Counted {
        total,
        parts,
        allocator,
    })
}

/// The function of an annotation's `file:function [object]` line.
fn function_of(line: &str) -> &str {
    let without_object = line.rsplit_once(" [").map_or(line, |(f, _)| f);
    // The file comes first, up to the first colon (a Rust path's `::` comes after it).
    without_object
        .split_once(':')
        .map_or(without_object, |(_, function)| function)
}

/// Whether an annotation line is the function `entry` names (by its start), and not one of
/// callgrind's copies for a recursion level (`name'2`), whose inclusive counts double count.
fn is_entry(line: &str, entry: &str) -> bool {
    let function = function_of(line);
    let recursion = function
        .rsplit_once('\'')
        .is_some_and(|(_, level)| !level.is_empty() && level.bytes().all(|b| b.is_ascii_digit()));
    function.starts_with(entry) && !recursion
}

/// Whether an annotation line is one of the allocator's own functions.
fn is_allocator(line: &str) -> bool {
    let function = function_of(line).split('@').next().unwrap_or_default();
    let bare = function.trim_start_matches('_');
    ALLOCATOR
        .iter()
        .any(|a| function == *a || bare == a.trim_start_matches('_'))
}

/// `callgrind_annotate`'s program total and its functions (instructions, `file:function
/// [object]`), inclusive or each function's own.
fn annotate(file: &Path, inclusive: bool) -> anyhow::Result<(u64, Vec<(u64, String)>)> {
    let out = Command::new("callgrind_annotate")
        .arg(format!(
            "--inclusive={}",
            if inclusive { "yes" } else { "no" }
        ))
        .args(["--threshold=100", "--auto=no"])
        .arg(file)
        .output()
        .context("cannot run callgrind_annotate")?;
    if !out.status.success() {
        bail!(
            "callgrind_annotate {} failed: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    parse_annotation(&String::from_utf8_lossy(&out.stdout))
        .with_context(|| format!("no program total in the annotation of {}", file.display()))
}

/// The total and the function lines of an annotation: `1,234 (5.6%)  file:function [object]`.
fn parse_annotation(text: &str) -> Option<(u64, Vec<(u64, String)>)> {
    let mut total = None;
    let mut functions = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let Some((count, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(n) = count.replace(',', "").parse::<u64>() else {
            continue;
        };
        // Past the percentage, when there is one.
        let name = match rest.trim_start().strip_prefix('(') {
            Some(after) => after.split_once(')').map_or("", |(_, name)| name),
            None => rest,
        }
        .trim();
        if name == "PROGRAM TOTALS" {
            total = Some(n);
        } else if !name.is_empty() {
            functions.push((n, name.to_owned()));
        }
    }
    Some((total?, functions))
}

/// The report's section: instructions per submission and per part, before and after.
pub fn section(
    this: &Result<Profile, String>,
    baseline: Option<&Result<Profile, String>>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## The profile, before and after\n");
    let _ = writeln!(
        out,
        "kubesim and the submitter under valgrind's callgrind, {WINDOW} fresh submissions from \
         one client after {WARM_UP} of warm-up, each process' instructions counted between two \
         dumps (`callgrind_control --dump`, the second after the window's pod events settled), \
         so that start-up and warm-up are not in them. Instruction counts do not vary with the \
         machine. A part is the inclusive count of its entry functions (what they call \
         included): a part marked … lies inside the one above it, the other parts are tasks of \
         their own, and the allocator is counted in its own functions only (it is inside \
         all of them). n/a: the build lacks one of the part's functions (the code was renamed \
         or reorganised since).\n"
    );
    let this = match this {
        Ok(profile) => profile,
        Err(why) => {
            let _ = writeln!(out, "Not profiled: {why}.\n");
            return out;
        }
    };
    let before = match baseline {
        Some(Ok(profile)) => Some(profile),
        Some(Err(why)) => {
            let _ = writeln!(out, "The baseline build was not profiled: {why}.\n");
            None
        }
        None => None,
    };
    let millions = |n: f64| format!("{:.3} M", n / 1e6);
    let change = |before: f64, after: f64| {
        if before > 0.0 {
            format!("{:+.1}%", (after / before - 1.0) * 100.0)
        } else {
            "n/a".into()
        }
    };
    let row = |label: &str, of: Measure| -> String {
        let after = of(this);
        match before {
            Some(b) => format!(
                "| {label} | {} | {} | {} |",
                millions(of(b)),
                millions(after),
                change(of(b), after)
            ),
            None => format!("| {label} | n/a | {} | n/a |", millions(after)),
        }
    };
    let _ = writeln!(
        out,
        "| instructions | baseline build | this build | change |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|");
    let rows: [(&str, Measure); 3] = [
        ("submitter, per fresh submission", |p| {
            p.per_submission(p.submitter.total)
        }),
        ("kubesim, per submission", |p| {
            p.per_submission(p.kubesim.total)
        }),
        ("kubesim, per API request", |p| {
            p.kubesim.total as f64 / p.requests.max(1) as f64
        }),
    ];
    for (label, of) in rows {
        let _ = writeln!(out, "{}", row(label, of));
    }
    let requests = |p: &Profile| format!("{:.2}", p.per_submission(p.requests));
    let _ = writeln!(
        out,
        "\nAPI requests per submission in the window: {} (baseline build: {}).",
        requests(this),
        before.map_or("n/a".to_owned(), requests)
    );
    let _ = writeln!(out);
    for (process, parts, pick) in [
        (
            "The submitter",
            SUBMITTER_PARTS,
            (|p: &Profile| &p.submitter) as fn(&Profile) -> &Counted,
        ),
        ("kubesim", KUBESIM_PARTS, |p: &Profile| &p.kubesim),
    ] {
        let _ = writeln!(
            out,
            "{process}, by part (instructions per submission, share of its total):\n"
        );
        let _ = writeln!(out, "| part | baseline build | this build |");
        let _ = writeln!(out, "|---|---:|---:|");
        let cell = |p: &Profile, n: Option<u64>| {
            let Some(n) = n else {
                return "n/a".to_owned();
            };
            let total = pick(p).total.max(1) as f64;
            format!(
                "{} ({:.1}%)",
                millions(p.per_submission(n)),
                n as f64 * 100.0 / total
            )
        };
        // Each part, then the allocator.
        let values = |p: &Profile| {
            let counted = pick(p);
            let mut values = counted.parts.clone();
            values.resize(parts.len(), None);
            values.push(Some(counted.allocator));
            values
        };
        let labels = parts
            .iter()
            .map(|part| part.label)
            .chain(["allocator (`malloc`, `free` and helpers, own instructions)"]);
        let (after, base) = (values(this), before.map(values));
        for (i, label) in labels.enumerate() {
            let base = match (before, &base) {
                (Some(b), Some(values)) => cell(b, values[i]),
                _ => "n/a".to_owned(),
            };
            let _ = writeln!(out, "| {label} | {base} | {} |", cell(this, after[i]));
        }
        let _ = writeln!(out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_annotation_gives_its_total_and_each_function() {
        let text = "\
--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
1,234,567 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                file:function
--------------------------------------------------------------------------------
600,000 (48.60%)  ???:submitter::caches::slim::decode [/bin/submitter]
12,345 ( 1.00%)  ./malloc/malloc.c:_int_malloc [/usr/lib/libc.so.6]
";
        let (total, functions) = parse_annotation(text).unwrap();
        assert_eq!(total, 1_234_567);
        assert_eq!(
            functions,
            vec![
                (
                    600_000,
                    "???:submitter::caches::slim::decode [/bin/submitter]".to_owned()
                ),
                (
                    12_345,
                    "./malloc/malloc.c:_int_malloc [/usr/lib/libc.so.6]".to_owned()
                ),
            ]
        );
        assert!(parse_annotation("no totals here").is_none());
    }

    #[test]
    fn the_allocator_is_named_by_its_functions_not_by_its_callers() {
        assert!(is_allocator(
            "./malloc/malloc.c:_int_malloc [/usr/lib/libc.so.6]"
        ));
        assert!(is_allocator(
            "./malloc/malloc.c:free@@GLIBC_2.2.5 [/usr/lib/libc.so.6]"
        ));
        assert!(is_allocator(
            "./malloc/malloc.c:malloc [/usr/lib/libc.so.6]"
        ));
        assert!(!is_allocator(
            "???:alloc::raw_vec::RawVec<T,A>::grow_one [/bin/submitter]"
        ));
        assert!(!is_allocator(
            "???:kubesim::store::Store::free_slot [/bin/kubesim]"
        ));
    }
}
