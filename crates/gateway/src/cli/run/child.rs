//! The command `run` starts: a process group of its own, so a signal
//! reaches every process the command started, and its exit status as a
//! shell reports it.

use std::io::ErrorKind;
use std::process::ExitStatus;

use tokio::process::{Child, Command};

/// A shell's status for a command it could not find.
pub(super) const NOT_FOUND: u8 = 127;
/// A shell's status for a command it found but could not execute.
pub(super) const NOT_EXECUTABLE: u8 = 126;

/// The running command.
pub(super) struct Running {
    child: Child,
    /// Its process group's id: the command's own pid.
    group: i32,
}

impl Running {
    /// Starts `argv` with `env` added to this process's environment, in a
    /// new process group; or the status a shell would give a command that
    /// cannot be started.
    pub(super) fn start(argv: &[String], env: &[(&str, String)]) -> Result<Running, (u8, String)> {
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .envs(env.iter().map(|(name, value)| (*name, value)))
            .process_group(0)
            .kill_on_drop(true);
        match command.spawn() {
            Ok(child) => {
                let pid = child.id().expect("a child just started has a pid");
                let group = i32::try_from(pid).expect("pids fit in an i32");
                Ok(Running { child, group })
            }
            Err(err) if err.kind() == ErrorKind::NotFound => Err((NOT_FOUND, err.to_string())),
            Err(err) => Err((NOT_EXECUTABLE, err.to_string())),
        }
    }

    /// Sends `signal` to every process of the command's group.
    pub(super) fn signal(&self, signal: i32) {
        // SAFETY: kill(2) with a negative pid signals that process group;
        // it reads no memory of ours.
        let sent = unsafe { libc::kill(-self.group, signal) };
        if sent != 0 {
            let err = std::io::Error::last_os_error();
            // ESRCH: the group has already gone; nothing left to signal.
            if err.raw_os_error() != Some(libc::ESRCH) {
                tracing::warn!(%err, signal, "could not signal the command's process group");
            }
        }
    }

    /// Waits for the command to exit; its status as a shell gives it.
    /// Cancel-safe: it can be raced against other events.
    pub(super) async fn exited(&mut self) -> u8 {
        match self.child.wait().await {
            Ok(status) => shell_status(status),
            Err(err) => {
                tracing::error!(%err, "could not wait for the command");
                NOT_EXECUTABLE
            }
        }
    }
}

/// `status` as a shell reports it: the exit code, or 128 + the signal that
/// ended the process.
fn shell_status(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn an_exit_code_is_the_status_and_a_signal_is_128_plus_it() {
        assert_eq!(shell_status(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(shell_status(ExitStatus::from_raw(libc::SIGTERM)), 143);
        assert_eq!(shell_status(ExitStatus::from_raw(libc::SIGKILL)), 137);
    }
}
