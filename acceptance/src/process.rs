//! Interrupting Terraform the hard way: the provider killed mid-apply, as a crashed runner
//! or an OOM kill would.

use std::process::{Child, Command};

/// Every process descended from `root`, read from `/proc`.
#[must_use]
pub fn descendants(root: u32) -> Vec<u32> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // The parent pid is the second field after the parenthesised command name.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parents.push((pid, ppid));
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, ppid) in &parents {
            if *ppid == parent {
                out.push(*pid);
                frontier.push(*pid);
            }
        }
    }
    out
}

/// Sends SIGKILL to every `terraform-provider-gpufleet` below `terraform` (the kernel keeps
/// the first 15 characters of a command name); returns their pids.
pub fn kill_providers_of(terraform: &Child) -> Vec<u32> {
    let killed: Vec<u32> = descendants(terraform.id())
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.starts_with("terraform-provi"))
        })
        .collect();
    for pid in &killed {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    killed
}
