//! SMB2 service response time per command, as tshark's `-z smb2,srt` counts it: each final
//! response matched with its request (interim STATUS_PENDING responses leave the request
//! waiting), timed between the frames that completed the two messages. CANCEL has no response
//! and OPLOCK_BREAK acknowledgments are left out, as tshark does.

use serde::Serialize;

use super::ByCommand;
use crate::smb2::Command;

/// Response times of one command, in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Srt {
    /// The command code (also the table's key; kept in the JSON row).
    pub code: u16,
    pub calls: u64,
    pub min: f64,
    pub max: f64,
    pub avg: f64,
    pub sum: f64,
}

impl Srt {
    #[inline]
    fn add(&mut self, secs: f64) {
        if self.calls == 0 {
            self.min = secs;
            self.max = secs;
        } else {
            // Compared, not `f64::min`/`max`: those handle NaN, which a time between two
            // timestamps never is, in twice the instructions.
            if secs < self.min {
                self.min = secs;
            }
            if secs > self.max {
                self.max = secs;
            }
        }
        self.calls += 1;
        self.sum += secs;
        self.avg = self.sum / self.calls as f64;
    }
}

/// Commands whose answered requests are timed.
pub fn is_timed(command: Command) -> bool {
    command != Command::CANCEL && command != Command::OPLOCK_BREAK
}

/// Add one answered request to the table (inlined: every response is timed).
#[inline]
pub fn record(table: &mut ByCommand<Srt>, command: Command, secs: f64) {
    if !is_timed(command) {
        return;
    }
    let new = || Srt {
        code: command.0,
        ..Srt::default()
    };
    table.update(command, new, |s| s.add(secs));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_max_avg_sum_per_command_and_no_cancel_or_break() {
        let mut t = ByCommand::default();
        record(&mut t, Command::CREATE, 0.004);
        record(&mut t, Command::CREATE, 0.001);
        record(&mut t, Command::CREATE, 0.007);
        record(&mut t, Command::READ, 0.5);
        record(&mut t, Command::CANCEL, 1.0);
        record(&mut t, Command::OPLOCK_BREAK, 1.0);
        let c = t.get(Command::CREATE).expect("CREATE timed");
        assert_eq!((c.code, c.calls), (5, 3));
        assert_eq!((c.min, c.max), (0.001, 0.007));
        assert!((c.sum - 0.012).abs() < 1e-12 && (c.avg - 0.004).abs() < 1e-12);
        let rows: Vec<Command> = t.by_code().map(|(c, _)| c).collect();
        assert_eq!(rows, [Command::CREATE, Command::READ]);
    }

    #[test]
    fn a_command_without_a_name_is_keyed_by_its_code_and_counted_once_per_call() {
        let mut t = ByCommand::default();
        record(&mut t, Command(0x99), 0.25);
        record(&mut t, Command(0x99), 0.75);
        record(&mut t, Command::READ, 0.5);
        let u = t.get(Command(0x99)).expect("0x99 timed");
        assert_eq!((u.code, u.calls), (0x99, 2));
        assert_eq!((u.min, u.max), (0.25, 0.75));
        let names: Vec<String> = t.by_name().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["READ", "UNKNOWN_0x0099"]);
    }
}
