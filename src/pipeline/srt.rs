//! SMB2 service response time per command, as tshark's `-z smb2,srt` counts it: each final
//! response matched with its request (interim STATUS_PENDING responses leave the request
//! waiting), timed between the frames that completed the two messages. CANCEL has no response
//! and OPLOCK_BREAK acknowledgments are left out, as tshark does.

use serde::Serialize;

use super::ByCommand;
use crate::smb2::Command;

/// Response times of one command: kept in nanoseconds, as the capture's times are (a sum of
/// whole nanoseconds is exact, and a response costs no division), read and written in seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Srt {
    /// The command code (also the table's key; kept in the JSON row).
    pub code: u16,
    pub calls: u64,
    min_ns: i64,
    max_ns: i64,
    sum_ns: i64,
}

impl Srt {
    #[inline]
    fn add(&mut self, ns: i64) {
        if self.calls == 0 {
            self.min_ns = ns;
            self.max_ns = ns;
        } else {
            self.min_ns = self.min_ns.min(ns);
            self.max_ns = self.max_ns.max(ns);
        }
        self.calls += 1;
        self.sum_ns = self.sum_ns.saturating_add(ns);
    }

    /// The shortest time, in seconds.
    pub fn min(&self) -> f64 {
        secs(self.min_ns)
    }

    /// The longest time, in seconds.
    pub fn max(&self) -> f64 {
        secs(self.max_ns)
    }

    /// All the times added up, in seconds.
    pub fn sum(&self) -> f64 {
        secs(self.sum_ns)
    }

    /// The mean time, in seconds (0 before the first call).
    pub fn avg(&self) -> f64 {
        if self.calls == 0 {
            return 0.0;
        }
        self.sum() / self.calls as f64
    }

    /// Minimum, maximum, mean and sum in whole microseconds, as tshark's `-z smb2,srt` table
    /// gives them: the mean taken of whole nanoseconds (the division truncated), then each
    /// rounded to the nearest microsecond, halves away from zero.
    pub fn micros(&self) -> [i64; 4] {
        let mean = i64::try_from(self.calls)
            .ok()
            .and_then(|calls| self.sum_ns.checked_div(calls))
            .unwrap_or(0);
        [self.min_ns, self.max_ns, mean, self.sum_ns].map(rounded_micros)
    }
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// `ns` to the nearest microsecond, halves away from zero.
fn rounded_micros(ns: i64) -> i64 {
    let us = (ns.unsigned_abs().saturating_add(500) / 1000) as i64;
    if ns < 0 {
        -us
    } else {
        us
    }
}

/// The JSON row: the command's code and calls, then seconds.
impl Serialize for Srt {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut row = s.serialize_struct("Srt", 6)?;
        row.serialize_field("code", &self.code)?;
        row.serialize_field("calls", &self.calls)?;
        row.serialize_field("min", &self.min())?;
        row.serialize_field("max", &self.max())?;
        row.serialize_field("avg", &self.avg())?;
        row.serialize_field("sum", &self.sum())?;
        row.end()
    }
}

/// Commands whose answered requests are timed.
pub fn is_timed(command: Command) -> bool {
    command != Command::CANCEL && command != Command::OPLOCK_BREAK
}

/// Add one answered request, `ns` nanoseconds from request to response, to the table
/// (inlined: every response is timed).
#[inline]
pub fn record(table: &mut ByCommand<Srt>, command: Command, ns: i64) {
    if !is_timed(command) {
        return;
    }
    let new = || Srt {
        code: command.0,
        ..Srt::default()
    };
    table.update(command, new, |s| s.add(ns));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_max_avg_sum_per_command_and_no_cancel_or_break() {
        let mut t = ByCommand::default();
        record(&mut t, Command::CREATE, 4_000_000);
        record(&mut t, Command::CREATE, 1_000_000);
        record(&mut t, Command::CREATE, 7_000_000);
        record(&mut t, Command::READ, 500_000_000);
        record(&mut t, Command::CANCEL, 1_000_000_000);
        record(&mut t, Command::OPLOCK_BREAK, 1_000_000_000);
        let c = t.get(Command::CREATE).expect("CREATE timed");
        assert_eq!((c.code, c.calls), (5, 3));
        assert_eq!((c.min(), c.max()), (0.001, 0.007));
        // Whole nanoseconds added: the sum is exact, not 0.012000000000000002.
        assert_eq!((c.sum(), c.avg()), (0.012, 0.004));
        assert_eq!(c.micros(), [1000, 7000, 4000, 12000]);
        let row = serde_json::to_value(c).expect("a row");
        assert_eq!(
            row,
            serde_json::json!({"code": 5, "calls": 3, "min": 0.001, "max": 0.007, "avg": 0.004, "sum": 0.012})
        );
        let rows: Vec<Command> = t.by_code().map(|(c, _)| c).collect();
        assert_eq!(rows, [Command::CREATE, Command::READ]);
    }

    #[test]
    fn a_command_without_a_name_is_keyed_by_its_code_and_counted_once_per_call() {
        let mut t = ByCommand::default();
        record(&mut t, Command(0x99), 250_000_000);
        record(&mut t, Command(0x99), 750_000_000);
        record(&mut t, Command::READ, 500_000_000);
        let u = t.get(Command(0x99)).expect("0x99 timed");
        assert_eq!((u.code, u.calls), (0x99, 2));
        assert_eq!((u.min(), u.max()), (0.25, 0.75));
        let names: Vec<String> = t.by_name().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["READ", "UNKNOWN_0x0099"]);
    }

    #[test]
    fn microseconds_are_rounded_as_tshark_rounds_them() {
        let mut t = ByCommand::default();
        // 954 us over 4 calls: a mean of 238.5 us, which tshark prints as 0.000239 (the
        // nearest double to 0.0002385 lies below it: printf would give 0.000238).
        for us in [231_000, 246_000, 238_000, 239_000] {
            record(&mut t, Command::QUERY_INFO, us);
        }
        let q = t.get(Command::QUERY_INFO).expect("timed");
        assert_eq!(q.micros(), [231, 246, 239, 954]);
        // The mean's division truncates first: 1,001 ns over 2 calls is 500 ns, then 1 us.
        let mut t = ByCommand::default();
        record(&mut t, Command::READ, 1);
        record(&mut t, Command::READ, 1_000);
        let r = t.get(Command::READ).expect("timed");
        assert_eq!(r.micros(), [0, 1, 1, 1]);
        // A response before its request (captures out of time order): halves away from zero.
        let mut t = ByCommand::default();
        record(&mut t, Command::WRITE, -1_500);
        assert_eq!(
            t.get(Command::WRITE).expect("timed").micros(),
            [-2, -2, -2, -2]
        );
    }
}
