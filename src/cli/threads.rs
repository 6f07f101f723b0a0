//! One budget of threads for a run. Captures read in parallel (`--separate`, `check A B`), each
//! on its own worker threads (`--threads`), share it: files in parallel times threads per file
//! stay within it, so that two files on two cores do not each start a worker per core.

/// How a run's threads are shared out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    /// Captures read at the same time.
    pub parallel: usize,
    /// Threads each of them uses (`PipelineConfig::threads`).
    pub per_capture: usize,
}

/// The machine's cores (1 if unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Threads for one capture when `--threads` is not given: the reading thread and, where the
/// machine has a second core, one that reads the file ahead of it (`--threads 2`; they share
/// the copying of the file's chunks, `CaptureReader::read_ahead`). Workers (`--threads` above
/// 2) only when asked: on every machine measured so far they made a capture slower, the
/// reading thread's walk being most of a run (docs/performance.md).
fn default_per_capture(cores: usize) -> usize {
    cores.clamp(1, 2)
}

/// `captures` to read, `given` the `--threads` of the command line (the whole run's budget;
/// without it, the machine's `cores`).
pub fn share(given: Option<u16>, captures: usize, cores: usize) -> Share {
    let total = given.map_or(cores, usize::from).max(1);
    let parallel = captures.clamp(1, total);
    let wanted = given.map_or_else(|| default_per_capture(cores), usize::from);
    Share {
        parallel,
        per_capture: (total / parallel).clamp(1, wanted.max(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share_of(given: Option<u16>, captures: usize, cores: usize) -> (usize, usize) {
        let s = share(given, captures, cores);
        (s.parallel, s.per_capture)
    }

    #[test]
    fn files_in_parallel_times_threads_per_file_stay_within_the_budget() {
        // --threads 2 on two files: both at once, one thread each (not 2 x 2).
        assert_eq!(share_of(Some(2), 2, 2), (2, 1));
        // --threads 8 on three files: three at once, two threads each.
        assert_eq!(share_of(Some(8), 3, 2), (3, 2));
        // More files than threads: as many at once as the budget, one thread each.
        assert_eq!(share_of(Some(4), 10, 16), (4, 1));
        // One file: all of the budget.
        assert_eq!(share_of(Some(6), 1, 2), (1, 6));
        for (given, captures, cores) in [(None, 5, 2), (Some(3), 2, 8), (None, 1, 16)] {
            let (p, t) = share_of(given, captures, cores);
            let budget = given.map_or(cores, usize::from);
            assert!(
                p * t <= budget && p >= 1 && t >= 1,
                "{given:?} {captures} {cores}"
            );
        }
    }

    #[test]
    fn without_threads_files_run_one_per_core() {
        assert_eq!(share_of(None, 5, 2).0, 2);
        assert_eq!(share_of(None, 3, 16).0, 3);
        assert_eq!(share_of(None, 1, 16).0, 1);
    }

    #[test]
    fn without_threads_one_file_is_read_ahead_where_there_is_a_second_core() {
        assert_eq!(share_of(None, 1, 1), (1, 1));
        assert_eq!(share_of(None, 1, 2), (1, 2));
        assert_eq!(share_of(None, 1, 16), (1, 2));
        // Files in parallel take the cores first.
        assert_eq!(share_of(None, 2, 2), (2, 1));
        assert_eq!(share_of(None, 3, 16), (3, 2));
        // Asked for, workers: the number given.
        assert_eq!(share_of(Some(4), 1, 2), (1, 4));
    }
}
