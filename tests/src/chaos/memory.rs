//! The soak process's memory as the kernel counts it (`/proc/self/status`): what it holds now
//! (`VmRSS`) and the most it ever held (`VmHWM`). The whole stack lives in this process
//! (kubesim, the submitters, the operators); the agents and drivers are processes of their own
//! and not counted.

/// Resident memory, in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Memory {
    /// Resident now.
    pub rss_kib: u64,
    /// The peak resident since the process started.
    pub peak_kib: u64,
}

impl Memory {
    /// This process's memory now; `None` where `/proc` cannot be read.
    pub fn now() -> Option<Memory> {
        parse(&std::fs::read_to_string("/proc/self/status").ok()?)
    }
}

/// `VmRSS` and `VmHWM` of a `/proc/PID/status` text.
pub fn parse(status: &str) -> Option<Memory> {
    let field = |name: &str| {
        status.lines().find_map(|line| {
            line.strip_prefix(name)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    Some(Memory {
        rss_kib: field("VmRSS:")?,
        peak_kib: field("VmHWM:")?,
    })
}

/// KiB as MiB with one decimal, for the report's text.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_and_peak_memory_are_read_from_proc_status() {
        let status =
            "Name:\tsandbox\nVmPeak:\t 900000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n";
        assert_eq!(
            parse(status),
            Some(Memory {
                rss_kib: 102_400,
                peak_kib: 204_800
            })
        );
        assert_eq!(parse("Name:\tsandbox\n"), None);
        assert_eq!(mib(102_400), "100.0 MiB");
    }

    #[test]
    fn this_process_has_resident_memory() {
        let memory = Memory::now().expect("Linux has /proc/self/status");
        assert!(memory.rss_kib > 0 && memory.peak_kib >= memory.rss_kib);
    }
}
